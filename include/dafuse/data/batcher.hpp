// SPDX-License-Identifier: Apache-2.0
//! @file data/batcher.hpp
//! @brief What each loader policy does: put B source and B target rows into a step's input.
//!
//! Every loader draws row indices from the same two samplers (source and target streams of the
//! seed), so for one seed they produce bitwise the same batches; they differ in where and when the
//! rows are gathered: on the host in the caller's thread each step (loader::sync), in the step's
//! own memory from a copy of the data made once (loader::resident), or on the host by worker
//! threads ahead of time (loader::prefetch, data/prefetch.hpp, included at the end).
//!
//! Each batcher reports how long its caller waited for data: wait_seconds() over all fills and
//! last_wait_seconds() for the last one. For sync and resident that is the whole fill.
#pragma once
#include <dafuse/config.hpp>
#include <dafuse/core/buffer.hpp>
#include <dafuse/core/error.hpp>
#include <dafuse/core/meta.hpp>
#include <dafuse/data/dataset.hpp>
#include <dafuse/data/sampler.hpp>
#include <dafuse/policy/loader.hpp>

#include <thrust/copy.h>
#include <thrust/for_each.h>
#include <thrust/iterator/counting_iterator.h>

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

//! loader::sync: rows are copied on the host into a staging block, then into the step's input.
template <class System>
class batcher<loader::sync, System> {
 public:
  batcher(const dataset& source,
          const dataset& target,
          index_t batch,
          std::uint64_t seed,
          bool with_target,
          std::uint64_t first_batch = 0)
      : source_(source),
        target_(target),
        draws_(source, target, batch, seed, with_target, first_batch),
        staging_(std::size_t(source.width) * (with_target ? 2 : 1) * std::size_t(batch)) {}

  template <class T>
  void fill(matrix_view<T> x, std::span<std::int32_t> labels) {
    const auto start = detail::wait_meter::clock::now();
    const std::span<const index_t> idx = draws_.draw(x, labels);
    const std::size_t values = idx.size() * std::size_t(source_.width);
    detail::gather_on_host(source_, target_, idx, std::span(staging_).first(values), labels);
    thrust::copy(staging_.begin(), staging_.begin() + std::ptrdiff_t(values), x.data);
    wait_.stop(start);
  }

  //! Seconds the caller spent in fill(), over all fills: all of it is waiting for data.
  double wait_seconds() const { return wait_.total(); }
  //! Seconds of the last fill.
  double last_wait_seconds() const { return wait_.last(); }

 private:
  const dataset& source_;
  const dataset& target_;
  detail::batch_indices draws_;
  std::vector<float> staging_;
  detail::wait_meter wait_;
};

//! loader::resident: both data sets are copied once into the step's memory; each step copies
//! only the 2B indices and gathers the rows there.
template <class System>
class batcher<loader::resident, System> {
 public:
  batcher(const dataset& source,
          const dataset& target,
          index_t batch,
          std::uint64_t seed,
          bool with_target,
          std::uint64_t first_batch = 0)
      : width_(source.width),
        draws_(source, target, batch, seed, with_target, first_batch),
        source_rows_(source.features.size()),
        target_rows_(with_target ? target.features.size() : 0),
        source_labels_(source.labels.size()),
        indices_(std::size_t((with_target ? 2 : 1) * batch)) {
    thrust::copy(source.features.begin(), source.features.end(), source_rows_.data());
    if (with_target)
      thrust::copy(target.features.begin(), target.features.end(), target_rows_.data());
    thrust::copy(source.labels.begin(), source.labels.end(), source_labels_.data());
  }

  template <class T>
  void fill(matrix_view<T> x, std::span<std::int32_t> labels) {
    const auto start = detail::wait_meter::clock::now();
    const std::span<const index_t> idx = draws_.draw(x, labels);
    const index_t b = draws_.batch(), rows = index_t(idx.size()), w = width_;
    thrust::copy(idx.begin(), idx.end(), indices_.data());
    const index_t* index = indices_.data();
    const float* src = source_rows_.data();
    const float* tgt = target_rows_.data();
    const std::int32_t* y = source_labels_.data();
    T* out = x.data;
    std::int32_t* out_labels = labels.data();
    thrust::for_each(System::policy(), thrust::counting_iterator<index_t>(0),
                     thrust::counting_iterator<index_t>(rows), [=](index_t c) {
                       const float* r = (c < b ? src : tgt) + index[c] * w;
                       for (index_t k = 0; k < w; ++k) out[c * w + k] = T(r[k]);
                       if (c < b) out_labels[c] = y[index[c]];
                     });
    wait_.stop(start);
  }

  //! Seconds the caller spent in fill(), over all fills: all of it is waiting for data.
  double wait_seconds() const { return wait_.total(); }
  //! Seconds of the last fill.
  double last_wait_seconds() const { return wait_.last(); }

 private:
  index_t width_;
  detail::batch_indices draws_;
  buffer<float, System> source_rows_, target_rows_;
  buffer<std::int32_t, System> source_labels_;
  buffer<index_t, System> indices_;
  detail::wait_meter wait_;
};

}  // namespace dafuse::data

// loader::prefetch's batcher, so that data::batcher<Loader, System> works for every shipped loader.
#include <dafuse/data/prefetch.hpp>
