// SPDX-License-Identifier: Apache-2.0
//! @file backend/device/resident_loader.hpp
//! @brief loader::resident on a device system: both data sets uploaded once; each step's batch
//! drawn and gathered on the device, by kernels queued (and captured) with the step.
//!
//! The draws are data::epoch_sampler's, bit for bit: draw d of a domain with R rows is row
//! π_e[d mod R] of epoch e = ⌊d / R⌋, π_e the Fisher-Yates permutation of 0..R−1 whose swap for
//! position i (from R−1 down to 1) is with j_i = ⌊u·(i+1) / 2³²⌋, u the (R−1−i)-th word of
//! counter_rng(seed, stream, e). The words are independent (a counter-based generator), so every
//! j_i is drawn in parallel (draw_swaps); only the swaps themselves are sequential (shuffle_domain,
//! or the CUDA primitive that runs them in shared memory). Each domain keeps the permutations of
//! two epochs, in slots e mod 2: a batch of B ≤ R rows spans at most two epochs.
#pragma once
#include <dafuse/config.hpp>
#include <dafuse/core/meta.hpp>
#include <dafuse/core/rng.hpp>

#include <cstdint>

namespace dafuse::backend::device {

//! One domain's sampler in device memory: R rows, the permutations of two epochs, the swaps that
//! make them, and which epoch each slot holds.
struct domain_sampler {
  index_t rows = 0;                              //!< R
  std::uint32_t stream = 0;                      //!< rng_stream of this domain's draws
  std::int32_t* order[2] = {nullptr, nullptr};   //!< π of the slot's epoch: [R] each
  std::uint32_t* swaps[2] = {nullptr, nullptr};  //!< j_i of the epoch being made: [R] each
  std::int64_t* held = nullptr;                  //!< [2]: the epoch each slot holds (-1: none)
};

//! Where the draws of every domain stand: the seed, the batch size and the device's count of
//! batches drawn, which the step's decision kernel advances.
struct sampler_position {
  std::uint64_t seed = 0;
  index_t batch = 0;                    //!< B: draws per domain per step
  const std::int64_t* drawn = nullptr;  //!< batches drawn before this step (device memory)
};

//! The epoch (or -1) that slot s of a domain with R rows must hold for batch number `t`: the
//! epochs of its first and last draws.
DAFUSE_HOST_DEVICE inline std::int64_t wanted_epoch(const sampler_position& p,
                                                    index_t rows,
                                                    std::int64_t t,
                                                    int s) {
  const std::int64_t first = t * p.batch, last = first + p.batch - 1;
  const std::int64_t e0 = first / rows, e1 = last / rows;
  if (e0 % 2 == s) return e0;
  if (e1 != e0 && e1 % 2 == s) return e1;
  return -1;
}

//! j_i of every slot a domain must refill for this step, position i of `rows`: for_each over
//! the largest domain's rows, for `domains` domains.
struct draw_swaps {
  sampler_position at;
  domain_sampler domain[2];
  int domains;
  DAFUSE_HOST_DEVICE void operator()(index_t i) const {
    const std::int64_t t = *at.drawn;
    for (int d = 0; d < domains; ++d) {
      const domain_sampler& ds = domain[d];
      if (i < 1 || i >= ds.rows) continue;
      for (int s = 0; s < 2; ++s) {
        const std::int64_t e = wanted_epoch(at, ds.rows, t, s);
        if (e < 0 || ds.held[s] == e) continue;
        const counter_rng rng(at.seed, rng_stream(ds.stream), std::uint32_t(e));
        const std::uint64_t u = rng.draw(std::uint64_t(ds.rows - 1 - i));
        ds.swaps[s][i] = std::uint32_t((u * std::uint64_t(i + 1)) >> 32);
      }
    }
  }
};

//! Fisher–Yates from drawn swaps: for i = R−1 down to 1, exchange order[i] and order[swaps[i]].
//! One thread; the host shuffle and the CUDA kernels share it.
DAFUSE_HOST_DEVICE inline void apply_swaps(std::int32_t* order,
                                           const std::uint32_t* swaps,
                                           index_t rows) {
  for (index_t i = rows - 1; i > 0; --i) {
    const std::uint32_t j = swaps[i];
    const std::int32_t v = order[i];
    order[i] = order[j];
    order[j] = v;
  }
}

//! The sequential part for one domain d (one thread): each slot whose epoch is wanted and not
//! held gets π = the swaps applied to 0..R−1, and records its epoch.
struct shuffle_domain {
  sampler_position at;
  domain_sampler domain[2];
  DAFUSE_HOST_DEVICE void operator()(index_t d) const {
    const domain_sampler& ds = domain[d];
    const std::int64_t t = *at.drawn;
    for (int s = 0; s < 2; ++s) {
      const std::int64_t e = wanted_epoch(at, ds.rows, t, s);
      if (e < 0 || ds.held[s] == e) continue;
      std::int32_t* order = ds.order[s];
      for (index_t i = 0; i < ds.rows; ++i) order[i] = std::int32_t(i);
      apply_swaps(order, ds.swaps[s], ds.rows);
      ds.held[s] = e;
    }
  }
};

//! The batch from the permutations: column c < B is source draw t·B + c, column c ≥ B target draw
//! t·B + c − B; element k of column c (for_each over rows · width) is that row's value k,
//! converted to T, and column c < B also takes the row's label.
template <class T>
struct gather_batch {
  sampler_position at;
  domain_sampler domain[2];
  const float* data[2];        //!< each domain's rows, row-major [R, width]
  const std::int32_t* labels;  //!< the source's labels [R_s]
  index_t width;               //!< values per row
  T* input;                    //!< [width, rows] column-major
  std::int32_t* batch_labels;  //!< [B]
  DAFUSE_HOST_DEVICE void operator()(index_t i) const {
    const index_t c = i / width, k = i % width;
    const int d = c < at.batch ? 0 : 1;
    const domain_sampler& ds = domain[d];
    const std::int64_t draw = *at.drawn * at.batch + (c - d * at.batch);
    const std::int64_t e = draw / ds.rows;
    const std::int32_t row = ds.order[e % 2][draw % ds.rows];
    input[i] = T(data[d][index_t(row) * width + k]);
    if (d == 0 && k == 0) batch_labels[c] = labels[row];
  }
};

}  // namespace dafuse::backend::device
