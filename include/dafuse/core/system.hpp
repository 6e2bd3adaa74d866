// SPDX-License-Identifier: Apache-2.0
//! @file core/system.hpp
//! @brief Where memory lives and algorithms run: the host systems (OpenMP threads, or serial).
//!
//! A system names a vector type and whether the host can read its memory. The host backend is
//! written once against it; backend/default_system.hpp is the one place that picks which system a
//! step uses. The host systems need nothing of Thrust: their memory is std::vector and every host
//! algorithm is the standard library's or dafuse's own, so a host-only translation unit parses
//! no Thrust at all (docs/benchmarks.md, "Compile time"). A device system (one whose memory the
//! host cannot read: backend/omp_device/system.hpp, backend/cuda/system.cuh) brings Thrust with
//! it, and the copies, fills and loops that buffers and loaders run in its memory
//! (backend/device/thrust_memory.hpp; the concept backend::device_system).
#pragma once
#include <dafuse/config.hpp>

#include <concepts>
#include <vector>

namespace dafuse::system {

//! Host memory, algorithms on OpenMP threads. Host pointers, so Eigen maps can read them directly.
struct omp {
  template <class T>
  using vector = std::vector<T>;                 //!< owning storage in this system
  static constexpr bool host_accessible = true;  //!< raw pointers usable on the host
};

//! Host memory, serial algorithms: for debugging and single-thread runs.
struct cpp {
  template <class T>
  using vector = std::vector<T>;                 //!< owning storage in this system
  static constexpr bool host_accessible = true;  //!< raw pointers usable on the host
};

//! What a system provides: a vector type and whether the host can read its memory (a device
//! system more: backend::device_system).
template <class S>
concept system_policy = requires {
  typename S::template vector<float>;
  { S::host_accessible } -> std::convertible_to<bool>;
};

static_assert(system_policy<omp> && system_policy<cpp>);

}  // namespace dafuse::system
