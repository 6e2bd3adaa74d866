// SPDX-License-Identifier: Apache-2.0
//! @file backend/host/sparse_batch.hpp
//! @brief How the host executor readies each sparse (CSR) batch for its first layer: checked,
//! then listed by feature on one thread or dealt among the threads by feature
//! (sparse_feature_parts, sparse.hpp), with the first layer's weight gradient cleared where the
//! previous batch wrote it.
//!
//! Why the clearing: the sparse weight gradient writes only the columns of the features a batch
//! uses and needs zeros there; every other column stays zero, so only the last batch's columns
//! need clearing, not all of ∂L/∂W.
#pragma once
#include <dafuse/config.hpp>

#include <dafuse/backend/host/sparse.hpp>
#include <dafuse/backend/host/sparse_checks.hpp>
#include <dafuse/core/buffer.hpp>
#include <dafuse/core/meta.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>

namespace dafuse::backend::host {

//! The sparse batch of one step, prepared for the first layer's products: `width` features, a
//! first layer of `out` outputs, buffers of System (a host system).
template <class T, class System>
class sparse_batch_preparer {
 public:
  sparse_batch_preparer() = default;
  //! For batches of `rows` samples and up to `capacity` non-zeros; with `threads` > 1 each batch
  //! is dealt among that many threads by feature (sparse_feature_parts), else listed on one.
  sparse_batch_preparer(index_t width, index_t out, index_t rows, index_t capacity, int threads)
      : width_(width),
        out_(out),
        rows_(rows),
        capacity_(capacity),
        used_features_(width),
        previous_used_features_(width),
        feature_marks_(width, 0) {
    if (threads > 1)
      parts_ = sparse_feature_parts<T>(width, out, rows, capacity, threads,
                                       sparse_deal_block<T>(width, out, threads));
  }

  //! Checks the batch `x` (offsets within the capacity, indices within the features), lists or
  //! deals it, and clears the columns of the first layer's weight gradient `dw` ([out, width],
  //! column-major) that the previous batch wrote. Throws (dafuse::error) on a bad batch, leaving
  //! no feature marked.
  void prepare(const sparse_matrix_view<const T>& x, T* dw) {
    if (dealt())
      dealt_batch_ = deal(x, dw);
    else
      listed_batch_ = list(x, dw);
  }

  //! Calls f with the prepared batch: the listed view, or the dealt one.
  template <class F>
  void with_batch(F&& f) {
    if (dealt())
      f(dealt_batch_);
    else
      f(listed_batch_);
  }

  //! Whether batches are dealt among threads by feature.
  bool dealt() const { return parts_.parts() > 1; }
  //! The threads batches are dealt among (1 when listed).
  int parts() const { return parts_.parts(); }
  //! Features per block of the deal (0 when listed).
  index_t block() const { return dealt() ? parts_.block() : 0; }

  //! Bytes of every buffer held.
  std::size_t memory_bytes() const {
    const auto bytes = [](const auto& b) { return b.size() * sizeof(*b.data()); };
    return bytes(used_features_) + bytes(previous_used_features_) + bytes(feature_marks_) +
           parts_.memory_bytes();
  }

 private:
  // The batch listed on one thread: x with the features it uses, each once.
  sparse_matrix_view<const T> list(sparse_matrix_view<const T> x, T* dw) {
    const std::int32_t* offsets = x.offsets;
    const std::int32_t* indices = x.indices;
    check_sparse_offsets("train_step", offsets, rows_, std::size_t(capacity_));
    std::swap(used_features_, previous_used_features_);
    for (index_t k = 0; k < used_count_; ++k)
      std::fill_n(dw + index_t(previous_used_features_.data()[k]) * out_, out_, T(0));
    std::uint8_t* marks = feature_marks_.data();
    std::int32_t* used = used_features_.data();
    used_count_ = 0;
    for (index_t k = 0, nnz = offsets[rows_]; k < nnz; ++k) {
      const std::int32_t j = indices[k];
      if (j < 0 || j >= width_) {
        for (index_t u = 0; u < used_count_; ++u) marks[used[u]] = 0;
        used_count_ = 0;
        fail_sparse_index("train_step", k, j, width_);
      }
      if (!marks[j]) {
        marks[j] = 1;
        used[used_count_++] = j;
      }
    }
    for (index_t u = 0; u < used_count_; ++u) marks[used[u]] = 0;
    x.used_rows = used;
    x.used_count = used_count_;
    return x;
  }

  // The same checks, then the batch dealt among the threads by feature; each thread first clears
  // its columns of the weight gradient that the previous batch wrote.
  dealt_sparse_batch<T> deal(const sparse_matrix_view<const T>& x, T* dw) {
    check_sparse_offsets("train_step", x.offsets, rows_, std::size_t(capacity_));
    check_sparse_indices("train_step", x.indices, x.offsets[rows_], width_);
    const index_t out = out_;
    return parts_.deal(x, [dw, out](index_t j) { std::fill_n(dw + j * out, out, T(0)); });
  }

  index_t width_ = 0, out_ = 0, rows_ = 0, capacity_ = 0;
  // Features the current and the previous listed batch use, and a mark per feature (all 0
  // between calls) to list them without duplicates.
  buffer<std::int32_t, System> used_features_, previous_used_features_;
  buffer<std::uint8_t, System> feature_marks_;
  index_t used_count_ = 0;
  sparse_feature_parts<T> parts_;  // the deal among threads (none: listed)
  sparse_matrix_view<const T> listed_batch_{};
  dealt_sparse_batch<T> dealt_batch_{};
};

}  // namespace dafuse::backend::host
