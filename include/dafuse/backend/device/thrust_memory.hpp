// SPDX-License-Identifier: Apache-2.0
//! @file backend/device/thrust_memory.hpp
//! @brief What buffers and loaders do in a device system's memory, on Thrust with the system's
//! policy: copies, fills and a loop over indices.
//!
//! A device system derives from thrust_memory<itself> (system::omp_device, system::cuda), so
//! that core/buffer.hpp and data/batcher.hpp reach a device's memory through the system type and
//! include no Thrust themselves: a host-only translation unit parses none of it.
#pragma once
#include <dafuse/config.hpp>
#include <dafuse/core/meta.hpp>

#include <thrust/copy.h>
#include <thrust/fill.h>
#include <thrust/for_each.h>
#include <thrust/iterator/counting_iterator.h>

#include <cstddef>

namespace dafuse::backend::device {

//! Copies, fills and loops in the memory of `System`, which provides `policy()`, Thrust's
//! execution policy for it. Each returns when the work is done (the system's default policy).
template <class System>
struct thrust_memory {
  //! out[0, n) = from[0, n), both in the system's memory.
  template <class T>
  static void copy(const T* from, std::size_t n, T* out) {
    thrust::copy_n(System::policy(), from, n, out);
  }
  //! to[0, n) = value, in the system's memory.
  template <class T>
  static void fill(T* to, std::size_t n, T value) {
    thrust::fill_n(System::policy(), to, n, value);
  }
  //! f(i) for every i in [0, n), on the system (f must be callable there: DAFUSE_HOST_DEVICE).
  template <class F>
  static void for_each_index(index_t n, F f) {
    if (n > 0) thrust::for_each_n(System::policy(), thrust::counting_iterator<index_t>(0), n, f);
  }
};

}  // namespace dafuse::backend::device
