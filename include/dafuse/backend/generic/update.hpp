// SPDX-License-Identifier: Apache-2.0
//! @file backend/generic/update.hpp
//! @brief The one pass over all parameters that applies clipping and the optimizer update.
#pragma once
#include <dafuse/config.hpp>
#include <dafuse/core/meta.hpp>
#include <dafuse/policy/clip.hpp>

#include <dafuse/core/system.hpp>

#if defined(_OPENMP)
#include <omp.h>
#endif

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <type_traits>

namespace dafuse::backend::generic {

//! From this many parameters the update runs on every OpenMP thread, each on one contiguous
//! slice. The pass is memory-bound (one read of each gradient, one read-modify-write of each
//! parameter and its state: 20 bytes per parameter with SGD momentum), and one core cannot draw
//! the memory bandwidth that two can. Measured in a step (2 cores, OMP_NUM_THREADS=2, the
//! profiler's update phase, SGD momentum): office-head, 1.84 M parameters, 1.48-1.69 ms on one
//! thread against 0.79-0.83 ms on two; digits-mlp, 270 k, 0.25 ms against 0.14 ms.
//!
//! That holds when the step's products have just run on the same threads. A step with no parallel
//! region before its update (a sparse first layer and small dense layers: the amazon
//! configuration, 500 k parameters) pays for waking the OpenMP team and for the parameters then
//! sitting in the other core's cache at the next forward: 79-87 µs on one thread against
//! 192-225 µs split. Such a step passes split = false.
inline constexpr index_t update_parallel_min = index_t(1) << 17;

//! A contiguous range of parameters updated alike: one module of the network.
template <class Optim, class T>
struct update_region {
  index_t begin = 0, end = 0;  //!< parameter indices [begin, end)
  T scale = T(1);              //!< the clip policy's scale for the module
  typename Optim::template coefficients<T> coefficients;  //!< with the module's learning rate
};

//! For every parameter i of every region: g = clamp(grads[i] · scale, −limit, limit), then
//! Optim's update of params[i] with its state (state_stride apart for each state value).
//! One read of each gradient, one read-modify-write of each parameter and its state. With
//! `split` and at least update_parallel_min parameters, every OpenMP thread takes a slice.
//!
//! Each parameter's update reads only its own values, so the result is the same however the
//! range is split. The loops are plain loops that the compiler vectorises: thrust::for_each on
//! the OpenMP system over a counting iterator was 4-5× slower than one thread's plain loop here
//! (1.84 M parameters: 1.7 ms against 0.33-0.49 ms).
template <class Optim, class System, class T, std::size_t Regions>
void update_parameters(T* params,
                       const T* grads,
                       T* state,
                       index_t state_stride,
                       const std::array<update_region<Optim, T>, Regions>& regions,
                       double limit,
                       bool split = true) {
  const bool clamp = std::isfinite(limit);
  const T bound = clamp ? T(limit) : T(0);
  // Parameters [first, last) of every region.
  const auto update_range = [&](index_t first, index_t last) {
    for (const update_region<Optim, T>& r : regions) {
      const index_t b = std::max(first, r.begin), e = std::min(last, r.end);
      const T scale = r.scale;
      const auto c = r.coefficients;
      if (clamp) {
        for (index_t i = b; i < e; ++i) {
          T g = grads[i] * scale;
          g = g < -bound ? -bound : (g > bound ? bound : g);
          Optim::update(i, g, params, state, state_stride, c);
        }
      } else {
        for (index_t i = b; i < e; ++i)
          Optim::update(i, grads[i] * scale, params, state, state_stride, c);
      }
    }
  };
  index_t first = Regions ? regions[0].begin : 0, last = first;
  for (const update_region<Optim, T>& r : regions) {
    first = std::min(first, r.begin);
    last = std::max(last, r.end);
  }
#if defined(_OPENMP)
  if constexpr (std::is_same_v<System, system::omp>) {
    if (split && last - first >= update_parallel_min && omp_get_max_threads() > 1) {
#pragma omp parallel
      {
        // Slices in whole cache lines of T, so no two threads write one line.
        const index_t threads = omp_get_num_threads(), t = omp_get_thread_num();
        const index_t line = index_t(64 / sizeof(T));
        const index_t per = ((last - first + threads - 1) / threads + line - 1) / line * line;
        const index_t b = std::min(last, first + t * per), e = std::min(last, b + per);
        update_range(b, e);
      }
      return;
    }
  }
#endif
  update_range(first, last);
}

}  // namespace dafuse::backend::generic
