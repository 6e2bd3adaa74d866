// SPDX-License-Identifier: Apache-2.0
//! @file backend/host/update.hpp
//! @brief The one pass over all parameters that applies clipping and the optimizer update.
#pragma once
#include <dafuse/config.hpp>

#include <dafuse/backend/host/partition.hpp>
#include <dafuse/backend/host/team.hpp>
#include <dafuse/backend/host/tuning.hpp>
#include <dafuse/core/error.hpp>
#include <dafuse/core/meta.hpp>
#include <dafuse/core/system.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <span>
#include <type_traits>
#include <utility>

namespace dafuse::backend::host {

//! Prefetches parameters [first, last) and their optimizer state for writing.
template <class Optim, class T>
void prefetch_for_update(T* params, T* state, index_t state_stride, index_t first, index_t last) {
  detail::prefetch_lines<true>(params + first, last - first);
  for (index_t s = 0; s < Optim::state_per_param; ++s)
    detail::prefetch_lines<true>(state + s * state_stride + first, last - first);
}

//! Slice t of [first, last) among `threads`: equal slices in whole 64-byte lines of T, so no two
//! threads write one line.
template <class T>
std::pair<index_t, index_t> thread_slice(index_t first, index_t last, index_t t, index_t threads) {
  const index_t line = index_t(64 / sizeof(T));
  const index_t per = ((last - first + threads - 1) / threads + line - 1) / line * line;
  const index_t b = std::min(last, first + t * per);
  return {b, std::min(last, b + per)};
}

//! A contiguous range of parameters updated alike: one module of the network.
template <class Optim, class T>
struct update_region {
  index_t begin = 0, end = 0;  //!< parameter indices [begin, end)
  T scale = T(1);              //!< the clip policy's scale for the module
  typename Optim::template coefficients<T> coefficients;  //!< with the module's learning rate
};

//! A weight matrix among the parameters: [rows, cols] column-major from parameter `begin`, and
//! how the product that wrote its gradient split it among threads (partition.hpp's split_for), or,
//! for a sparse first layer whose features are dealt among threads (sparse.hpp), the deal.
struct weight_block {
  index_t begin = 0, rows = 0, cols = 0;
  detail::product_split split;
  //! When > 0: the columns are dealt in blocks of this many among split.threads parts
  //! (dealt_owner in team.hpp; split.along is columns), and `split.range` is not used.
  index_t dealt_columns = 0;

  //! Calls f(first, last) for each run of parameters [first, last) whose gradient part `part`
  //! wrote.
  template <class F>
  void for_each_run(int part, F&& f) const {
    if (dealt_columns > 0) {
      for (index_t c = 0, b = 0; c < cols; c += dealt_columns, ++b)
        if (dealt_owner(b, split.threads) == part)
          f(begin + c * rows, begin + std::min(cols, c + dealt_columns) * rows);
      return;
    }
    const auto [from, to] = split.range(part);
    if (split.along == split_along::columns)
      f(begin + from * rows, begin + to * rows);
    else  // rows (a split along the terms says nothing about who wrote which part)
      for (index_t c = 0; c < cols; ++c) f(begin + c * rows + from, begin + c * rows + to);
  }
};

//! Calls f(first, last) for each run of parameters in [first, last) that thread t of a team of
//! `team` owns: of each weight matrix in `weights` (ascending, not overlapping, none split along
//! the terms) the parts whose gradient it wrote (every team-th part, when the team is smaller
//! than the split: the thread count lowered since the step was built), and on thread 0 everything
//! outside them (the biases).
template <class F>
void for_each_owned_run(
    std::span<const weight_block> weights, index_t first, index_t last, int t, int team, F&& f) {
  index_t covered = first;
  for (const weight_block& w : weights) {
    if (t == 0 && covered < w.begin) f(covered, w.begin);
    for (int part = t; part < w.split.threads; part += team) w.for_each_run(part, f);
    covered = w.begin + w.rows * w.cols;
  }
  if (t == 0 && covered < last) f(covered, last);
}

//! Runs f(b, e) over [first, last) as the update splits it (update_parameters): with `split` and
//! at least update_parallel_min values of T on the OpenMP system, every thread takes the runs of
//! `weights` it owns (for_each_owned_run; equal slices without `weights`), else one slice on the
//! calling thread. A pass over the parameters split so touches each line on the core that wrote
//! its gradient and whose products read it.
template <class System, class T, class F>
void for_each_owned_slice(
    std::span<const weight_block> weights, index_t first, index_t last, F&& f, bool split = true) {
  if constexpr (std::is_same_v<System, system::omp>) {
    if (split && last - first >= update_parallel_min) {
      run_on_team(available_threads(), [&](int t, int team, auto&&) {
        if (weights.empty()) {
          const auto [b, e] = thread_slice<T>(first, last, t, team);
          f(b, e);
        } else {
          for_each_owned_run(weights, first, last, t, team, f);
        }
      });
      return;
    }
  }
  f(first, last);
}

//! For every parameter i of every region: g = clamp(grads[i] · scale, −limit, limit), then
//! Optim's update of params[i] with its state (state_stride apart for each state value).
//! One read of each gradient, one read-modify-write of each parameter and its state, in chunks of
//! update_chunk, the lines update_prefetch_bytes further on asked for writing (PREFETCHW) before
//! each: a line both cores have read waits at its first write for the other core's copy to be
//! invalidated, and asked for early those invalidations overlap. With `split` and at least
//! update_parallel_min parameters (the pass is memory-bound, and one core cannot draw the
//! bandwidth two can), every OpenMP thread takes a part: of each weight matrix in `weights`
//! (ascending, not overlapping) the rows or columns whose gradient it wrote, and the first thread
//! everything else (the biases); without `weights`, equal slices.
//!
//! Each parameter's update reads only its own values, so the result is the same however the
//! range is split. The loops are plain loops that the compiler vectorises (thrust::for_each on
//! the OpenMP system over a counting iterator was slower than one thread's plain loop).
template <class Optim, class System, class T, std::size_t Regions>
void update_parameters(T* params,
                       const T* grads,
                       T* state,
                       index_t state_stride,
                       const std::array<update_region<Optim, T>, Regions>& regions,
                       double limit,
                       bool split = true,
                       std::span<const weight_block> weights = {}) {
  constexpr index_t ahead = update_prefetch_bytes / index_t(sizeof(T));
  // A weight block follows its gradient's product, which divides ∂L/∂W by rows or by columns; a
  // split along the terms (a forward product's) says nothing about who wrote which part.
  for (const weight_block& w : weights)
    if (w.split.threads > 1 && w.dealt_columns == 0 && w.split.along == split_along::depth)
      fail("update_parameters", "weight block split",
           "one along the rows or columns of ∂L/∂W (the weight-gradient product's)",
           "one along the terms");
  const bool clamp = std::isfinite(limit);
  const T bound = clamp ? T(limit) : T(0);
  // Parameters [first, last) of every region.
  const auto update_range = [&](index_t first, index_t last) {
    for (const update_region<Optim, T>& r : regions) {
      const index_t b = std::max(first, r.begin), e = std::min(last, r.end);
      const T scale = r.scale;
      const auto c = r.coefficients;
      for (index_t chunk = b; chunk < e; chunk += update_chunk) {
        const index_t end = std::min(e, chunk + update_chunk);
        prefetch_for_update<Optim>(params, state, state_stride, chunk + ahead,
                                   std::min(e, end + ahead));
        if (clamp) {
          for (index_t i = chunk; i < end; ++i) {
            T g = grads[i] * scale;
            g = g < -bound ? -bound : (g > bound ? bound : g);
            Optim::update(i, g, params, state, state_stride, c);
          }
        } else {
          for (index_t i = chunk; i < end; ++i)
            Optim::update(i, grads[i] * scale, params, state, state_stride, c);
        }
      }
    }
  };
  index_t first = Regions ? regions[0].begin : 0, last = first;
  for (const update_region<Optim, T>& r : regions) {
    first = std::min(first, r.begin);
    last = std::max(last, r.end);
  }
  // The gradient's writer updates it: its lines are in that core's cache, and the weights and
  // their state stay with the core that reads and writes them each step.
  for_each_owned_slice<System, T>(weights, first, last, update_range, split);
}

}  // namespace dafuse::backend::host
