// SPDX-License-Identifier: Apache-2.0
//! @file data/batch_draws.hpp
//! @brief What every loader shares: the seeded index draws, the host gather, the wait meter, and
//! the primary `batcher` template that each loader policy specialises.
#pragma once
#include <dafuse/config.hpp>
#include <dafuse/core/buffer.hpp>
#include <dafuse/core/error.hpp>
#include <dafuse/core/meta.hpp>
#include <dafuse/data/dataset.hpp>
#include <dafuse/data/sampler.hpp>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace dafuse::data {

namespace detail {
//! The index draws shared by every loader: B source rows, then B target rows when adapting.
class batch_indices {
 public:
  batch_indices(const dataset& source,
                const dataset& target,
                index_t batch,
                std::uint64_t seed,
                bool with_target,
                std::uint64_t first_batch = 0)
      : batch_indices(checked_rows(source, target, with_target),
                      source.width,
                      batch,
                      seed,
                      with_target,
                      first_batch) {}
  //! The same draws for any kind of data set (dense or sparse), from its row counts; the caller
  //! checks labels and widths. `rows` = {source rows, target rows}. The first draw is batch number
  //! `first_batch` of the seeded sequence (0: the start; k: where a run resumed after k batches).
  batch_indices(std::pair<index_t, index_t> rows,
                index_t width,
                index_t batch,
                std::uint64_t seed,
                bool with_target,
                std::uint64_t first_batch = 0)
      : source_(rows.first, seed, rng_stream::source_sampler),
        // Without a head that reads target rows the target may be empty; its sampler is unused.
        target_(with_target ? rows.second : 1, seed, rng_stream::target_sampler),
        indices_(std::size_t(with_target ? 2 * check_batch(batch) : check_batch(batch))),
        batch_(batch),
        width_(width) {
    if (first_batch > 0) {
      source_.seek(first_batch * std::uint64_t(batch));
      if (with_target) target_.seek(first_batch * std::uint64_t(batch));
    }
  }
  //! Draws the next batch for a step input x: [width, rows()] with B labels: [0, B) index source
  //! rows, [B, 2B) target rows. The shape is checked first, so a rejected call consumes nothing
  //! of the seeded sequence.
  template <class T>
  std::span<const index_t> draw(matrix_view<T> x, std::span<std::int32_t> labels) {
    check(x, labels);
    draw(indices_);
    return indices_;
  }
  //! Throws unless x is [width, rows()] with B labels.
  template <class T>
  void check(matrix_view<T> x, std::span<std::int32_t> labels) const {
    if (x.rows != width_ || x.cols != rows() || index_t(labels.size()) != batch_)
      fail("batcher", "step input",
           "[" + std::to_string(width_) + ", " + std::to_string(rows()) + "] with " +
               std::to_string(batch_) + " labels",
           "[" + std::to_string(x.rows) + ", " + std::to_string(x.cols) + "] with " +
               std::to_string(labels.size()) + " labels");
  }
  //! Draws the next batch's rows() indices into `out` (out.size() == rows()), without a step
  //! input to check: for loaders that draw ahead of the fill.
  void draw(std::span<index_t> out) {
    source_.fill(out.first(std::size_t(batch_)));
    if (out.size() > std::size_t(batch_)) target_.fill(out.subspan(std::size_t(batch_)));
  }
  index_t batch() const { return batch_; }
  //! Rows per draw: 2B, or B without target rows.
  index_t rows() const { return index_t(indices_.size()); }
  //! What every loader checks of its data, dense or sparse: a labelled source and, when target
  //! rows are drawn, a target of the same width. Returns {source rows, target rows}.
  static std::pair<index_t, index_t> checked_data_rows(const std::string& source_origin,
                                                       bool source_labelled,
                                                       index_t source_rows,
                                                       index_t source_width,
                                                       const std::string& target_origin,
                                                       index_t target_rows,
                                                       index_t target_width,
                                                       bool with_target) {
    if (!source_labelled)
      fail(source_origin, "labels", "labels for every source row", "an unlabelled data set");
    if (with_target && source_width != target_width)
      fail(target_origin, "feature width",
           std::to_string(source_width) + " (the source's, " + source_origin + ")",
           std::to_string(target_width));
    return {source_rows, target_rows};
  }

 private:
  // The row counts of a dense source and target, after checking what every loader needs.
  static std::pair<index_t, index_t> checked_rows(const dataset& source,
                                                  const dataset& target,
                                                  bool with_target) {
    return checked_data_rows(source.origin, source.has_labels(), source.rows, source.width,
                             target.origin, target.rows, target.width, with_target);
  }
  static index_t check_batch(index_t batch) {
    if (batch < 1) fail("batcher", "batch", "at least 1 row per domain", std::to_string(batch));
    return batch;
  }

  epoch_sampler source_, target_;
  std::vector<index_t> indices_;
  index_t batch_;
  index_t width_;
};

//! Copies the rows `idx` names ([0, B) source rows, then target rows) into `features`, row after
//! row (a step input's column-major [width, rows] layout), and the source rows' labels into
//! `labels`. The host gather of loader::sync and of loader::prefetch's workers.
inline void gather_on_host(const dataset& source,
                           const dataset& target,
                           std::span<const index_t> idx,
                           std::span<float> features,
                           std::span<std::int32_t> labels) {
  const index_t b = index_t(labels.size()), rows = index_t(idx.size()), w = source.width;
  for (index_t c = 0; c < rows; ++c) {
    const float* r = (c < b ? source : target).row(idx[std::size_t(c)]);
    std::copy(r, r + w, features.begin() + c * w);
  }
  for (index_t c = 0; c < b; ++c)
    labels[std::size_t(c)] = source.labels[std::size_t(idx[std::size_t(c)])];
}

//! The caller's waiting time for data: the sum over fills and the last fill's.
class wait_meter {
 public:
  using clock = std::chrono::steady_clock;
  //! Records one wait that began at `start` and ends now.
  void stop(clock::time_point start) {
    last_ = std::chrono::duration<double>(clock::now() - start).count();
    total_ += last_;
  }
  double total() const { return total_; }
  double last() const { return last_; }

 private:
  double total_ = 0, last_ = 0;
};

}  // namespace detail

//! Fills a step's input for loader policy `Loader` on `System`.
template <class Loader, class System>
class batcher {
  static_assert(dependent_false<Loader>,
                "dafuse: no batcher for this loader policy; use loader::sync, loader::resident or "
                "loader::prefetch<Workers, Depth>, or specialise data::batcher for your loader");
};

}  // namespace dafuse::data
