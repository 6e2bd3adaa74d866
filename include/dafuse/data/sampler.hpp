// SPDX-License-Identifier: Apache-2.0
//! @file data/sampler.hpp
//! @brief A seeded infinite sampler: shuffled epochs of row indices, the same on every backend.
#pragma once
#include <dafuse/config.hpp>
#include <dafuse/core/error.hpp>
#include <dafuse/core/meta.hpp>
#include <dafuse/core/rng.hpp>

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace dafuse::data {

//! Draws row indices in [0, rows) forever: each epoch is a fresh permutation (Fisher-Yates with
//! the counter-based RNG keyed by seed, stream and epoch number), so every row is seen once per
//! epoch and the order depends on nothing but (seed, stream). Allocates only when constructed.
class epoch_sampler {
 public:
  epoch_sampler(index_t rows, std::uint64_t seed, rng_stream stream)
      : seed_(seed), stream_(stream), order_(check_rows(rows)) {
    shuffle();
  }

  //! The next row index.
  index_t next() {
    if (position_ == order_.size()) {
      ++epoch_;
      shuffle();
    }
    return order_[position_++];
  }

  //! Fills `out` with the next out.size() indices.
  void fill(std::span<index_t> out) {
    for (index_t& i : out) i = next();
  }

  //! Moves to where the sampler is after `draws` draws from the start (seed and stream are
  //! unchanged), reshuffling only the epoch it lands in: a resumed run draws the same indices as
  //! an uninterrupted one without replaying the draws before.
  void seek(std::uint64_t draws) {
    const std::uint64_t rows = order_.size();
    // After exactly k·rows draws the sampler is still at the end of epoch k − 1 (next() moves on
    // lazily), so the position is in (0, rows] unless nothing was drawn.
    const std::uint64_t epoch = draws == 0 ? 0 : (draws - 1) / rows;
    if (epoch != epoch_ || draws == 0) {
      epoch_ = epoch;
      shuffle();
    }
    position_ = std::size_t(draws - epoch * rows);
  }
  //! Draws since the start: epoch() · rows() plus those drawn in the current epoch.
  std::uint64_t draws() const { return epoch_ * order_.size() + position_; }

  index_t rows() const { return index_t(order_.size()); }
  //! The epoch the next draws come from, counting from 0; it advances on the first draw after
  //! a pass over all rows, so after exactly `rows()` draws it still reads 0.
  std::uint64_t epoch() const { return epoch_; }

 private:
  static std::size_t check_rows(index_t rows) {
    if (rows < 1) fail("epoch_sampler", "rows", "at least 1", std::to_string(rows));
    return std::size_t(rows);
  }

  void shuffle() {
    for (std::size_t i = 0; i < order_.size(); ++i) order_[i] = index_t(i);
    counter_rng rng(seed_, stream_, static_cast<std::uint32_t>(epoch_));
    for (std::size_t i = order_.size() - 1; i > 0; --i)
      std::swap(order_[i], order_[rng.below(static_cast<std::uint32_t>(i + 1))]);
    position_ = 0;
  }

  std::uint64_t seed_;
  rng_stream stream_;
  std::vector<index_t> order_;
  std::size_t position_ = 0;
  std::uint64_t epoch_ = 0;
};

}  // namespace dafuse::data
