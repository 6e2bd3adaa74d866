// SPDX-License-Identifier: Apache-2.0
//! @file core/system.hpp
//! @brief Where memory lives and algorithms run: Thrust's OpenMP and serial (CPP) systems.
//!
//! A system names a vector type and a Thrust execution policy. The host backend is written once
//! against this pair; backend/select.hpp is the one place that picks which system a step uses.
//! The host systems keep their memory in std::vector (host memory is host memory) and include
//! only Thrust's execution policy objects, not its vectors and algorithms: a translation unit
//! pays for the Thrust algorithms it calls (docs/benchmarks.md, "Compile time").
#pragma once
#include <dafuse/config.hpp>

// The policies alone; <thrust/system/omp/execution_policy.h> would bring every algorithm of the
// system with them.
#include <thrust/system/cpp/detail/par.h>
#include <thrust/system/omp/detail/par.h>

#include <concepts>
#include <vector>

namespace dafuse::system {

//! Host memory, algorithms on OpenMP threads (Thrust's OMP system). Host pointers, so Eigen
//! maps can read them directly.
struct omp {
  template <class T>
  using vector = std::vector<T>;                     //!< owning storage in this system
  static auto policy() { return thrust::omp::par; }  //!< Thrust execution policy
  static constexpr bool host_accessible = true;      //!< raw pointers usable on the host
};

//! Host memory, serial algorithms (Thrust's CPP system): for debugging and single-thread runs.
struct cpp {
  template <class T>
  using vector = std::vector<T>;                     //!< owning storage in this system
  static auto policy() { return thrust::cpp::par; }  //!< Thrust execution policy
  static constexpr bool host_accessible = true;      //!< raw pointers usable on the host
};

//! What a system provides: a vector type, an execution policy and whether the host can read its
//! memory.
template <class S>
concept system_policy = requires {
  typename S::template vector<float>;
  S::policy();
  { S::host_accessible } -> std::convertible_to<bool>;
};

static_assert(system_policy<omp> && system_policy<cpp>);

}  // namespace dafuse::system
