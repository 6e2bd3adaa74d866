// SPDX-License-Identifier: Apache-2.0
//! @file data/sparse_batcher.hpp
//! @brief Batches of CSR rows for a step with a sparse first layer (nn::sparse_input).
//!
//! The row indices come from the same two seeded samplers as every dense loader's
//! (detail::batch_indices), so a sparse run draws the same rows as a dense run of the same seed
//! over the densified data. Each step, the drawn rows' non-zeros are copied on the host into the
//! step's CSR batch (train_step::sparse_batch()): about 92 non-zeros per Amazon review, so a
//! batch of 128 rows moves ~94 KB instead of the 2.5 MB a dense batch would.
#pragma once
#include <dafuse/config.hpp>
#include <dafuse/core/buffer.hpp>
#include <dafuse/core/error.hpp>
#include <dafuse/core/meta.hpp>
#include <dafuse/data/batcher.hpp>
#include <dafuse/data/csr.hpp>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace dafuse::data {

//! A CSR matrix's rows seen as the columns of a sparse step input ([cols, rows], one sample per
//! column), without a copy: what train_step::predict reads.
inline sparse_matrix_view<const float> sparse_columns(const csr_matrix& m) {
  return {m.indptr.data(), m.indices.data(), m.values.data(), m.cols, m.rows};
}

//! A bound on the non-zeros of a batch of `batch` source rows (and as many target rows, with
//! `with_target`): what fit_args::sparse_nonzeros needs to be for a step to hold every batch the
//! samplers can draw from these data. A batch is `batch` consecutive draws of a set's epoch
//! sampler, so it touches at most e = ⌈(batch − 1) / rows⌉ + 1 epochs and holds a row at most
//! e times (a batch that straddles two epochs can draw a row twice): the bound is the sum of the
//! `batch` longest rows of the set with each row counted e times.
inline index_t densest_batch_nonzeros(const sparse_dataset& source,
                                      const sparse_dataset& target,
                                      index_t batch,
                                      bool with_target = true) {
  const auto longest = [batch](const csr_matrix& m) {
    if (batch < 1 || m.rows < 1) return index_t(0);
    const index_t epochs = batch == 1 ? 1 : (batch - 1 + m.rows - 1) / m.rows + 1;
    std::vector<index_t> lengths(std::size_t(m.rows));
    for (index_t i = 0; i < m.rows; ++i) lengths[std::size_t(i)] = m.row_nnz(i);
    std::sort(lengths.begin(), lengths.end(), std::greater<>());
    index_t sum = 0, left = batch;
    for (std::size_t k = 0; k < lengths.size() && left > 0; ++k) {
      const index_t times = std::min(epochs, left);
      sum += times * lengths[k];
      left -= times;
    }
    return sum;
  };
  return longest(source.features) + (with_target ? longest(target.features) : 0);
}

//! Fills a sparse step's batch from a labelled sparse source and a sparse target.
class sparse_batcher {
 public:
  sparse_batcher(const sparse_dataset& source,
                 const sparse_dataset& target,
                 index_t batch,
                 std::uint64_t seed,
                 bool with_target,
                 std::uint64_t first_batch = 0)
      : source_(source),
        target_(target),
        draws_(checked_rows(source, target, with_target),
               source.width(),
               batch,
               seed,
               with_target,
               first_batch),
        drawn_(std::size_t(draws_.rows())) {}

  //! Draws the next batch into `slots` (a train_step::sparse_batch_slots: offsets, indices,
  //! values) and the source rows' labels into `labels`.
  template <class Slots>
  void fill(const Slots& slots, std::span<std::int32_t> labels) {
    const auto start = detail::wait_meter::clock::now();
    const index_t rows = draws_.rows(), b = draws_.batch();
    if (index_t(slots.offsets.size()) != rows + 1 || index_t(labels.size()) != b)
      fail("sparse_batcher", "step batch",
           std::to_string(rows + 1) + " offsets and " + std::to_string(b) + " labels",
           std::to_string(slots.offsets.size()) + " offsets and " + std::to_string(labels.size()) +
               " labels");
    draws_.draw(drawn_);
    std::size_t at = 0;
    slots.offsets[0] = 0;
    for (index_t c = 0; c < rows; ++c) {
      const bool from_source = c < b;
      const csr_matrix& m = (from_source ? source_ : target_).features;
      const index_t i = drawn_[std::size_t(c)];
      const std::size_t first = std::size_t(m.indptr[std::size_t(i)]);
      const std::size_t count = std::size_t(m.row_nnz(i));
      if (at + count > slots.values.size())
        fail("sparse_batcher", "step batch",
             "room for " + std::to_string(at + count) + " non-zeros",
             std::to_string(slots.values.size()) +
                 " (fit_args::sparse_nonzeros: data::densest_batch_nonzeros gives the room "
                 "these data need, 0 the densest possible)");
      std::copy_n(m.indices.begin() + std::ptrdiff_t(first), count,
                  slots.indices.begin() + std::ptrdiff_t(at));
      std::copy_n(m.values.begin() + std::ptrdiff_t(first), count,
                  slots.values.begin() + std::ptrdiff_t(at));
      at += count;
      slots.offsets[std::size_t(c) + 1] = std::int32_t(at);
      if (from_source) labels[std::size_t(c)] = source_.labels[std::size_t(i)];
    }
    wait_.stop(start);
  }

  //! Seconds the caller spent in fill(), over all fills: all of it is waiting for data.
  double wait_seconds() const { return wait_.total(); }
  //! Seconds of the last fill.
  double last_wait_seconds() const { return wait_.last(); }

 private:
  static std::pair<index_t, index_t> checked_rows(const sparse_dataset& source,
                                                  const sparse_dataset& target,
                                                  bool with_target) {
    return detail::batch_indices::checked_data_rows(source.origin, source.has_labels(),
                                                    source.rows(), source.width(), target.origin,
                                                    target.rows(), target.width(), with_target);
  }

  const sparse_dataset& source_;
  const sparse_dataset& target_;
  detail::batch_indices draws_;
  std::vector<index_t> drawn_;  // this batch's row indices: source, then target
  detail::wait_meter wait_;
};

}  // namespace dafuse::data
