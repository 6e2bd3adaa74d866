// SPDX-License-Identifier: Apache-2.0
//! @file backend/omp_device/system.hpp
//! @brief `system::omp_device`: Thrust's OpenMP system, driven as if its memory were a GPU's.
//!
//! This is how the CUDA executor's orchestration is tested without a GPU: the device executor,
//! its Thrust algorithms and its functors are the same code on system::cuda and here; only the
//! products, the sums and the copies (primitives.hpp) differ. A step on omp_device exposes no
//! span of its memory, as a CUDA step does: state moves through read_*/write_* copies. Steps
//! name the system and include backend/omp_device/executor.hpp; dafuse.hpp does not include it,
//! so a program that does not use it parses no Thrust.
#pragma once
#include <dafuse/config.hpp>

#include <dafuse/backend/device/thrust_memory.hpp>
#include <dafuse/core/system.hpp>

#include <thrust/system/omp/execution_policy.h>
#include <thrust/system/omp/vector.h>

#include <cstddef>
#include <cstring>

namespace dafuse::system {

//! Host memory and OpenMP threads, driven like a device: the device executor runs on it, and the
//! host treats its memory as unreadable (host_accessible = false). For tests and debugging of
//! the device path; system::omp is the host system to train with.
struct omp_device : backend::device::thrust_memory<omp_device> {
  template <class T>
  using vector = thrust::omp::vector<T>;             //!< owning storage in this system
  static auto policy() { return thrust::omp::par; }  //!< Thrust execution policy
  static constexpr bool host_accessible = false;     //!< reached through copies only
  //! Copies `bytes` from host memory into this system's memory, complete on return.
  static void upload(void* to, const void* from, std::size_t bytes) {
    if (bytes) std::memcpy(to, from, bytes);
  }
  //! Copies `bytes` from this system's memory into host memory, complete on return.
  static void download(void* to, const void* from, std::size_t bytes) {
    if (bytes) std::memcpy(to, from, bytes);
  }
};

static_assert(system_policy<omp_device>);

}  // namespace dafuse::system
