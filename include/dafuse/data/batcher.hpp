// SPDX-License-Identifier: Apache-2.0
//! @file data/batcher.hpp
//! @brief What each loader policy does: put B source and B target rows into a step's input.
//!
//! Every loader draws row indices from the same two samplers (source and target streams of the
//! seed), so for one seed they produce bitwise the same batches; they differ in where and when the
//! rows are gathered: on the host in the caller's thread each step (loader::sync), in the step's
//! own memory from a copy of the data made once (loader::resident), or on the host by worker
//! threads ahead of time (loader::prefetch, data/prefetch.hpp). Including this header gives
//! data::batcher<Loader, System> for every shipped loader.
//!
//! Each batcher reports how long its caller waited for data: wait_seconds() over all fills and
//! last_wait_seconds() for the last one. For sync and resident that is the whole fill.
#pragma once
#include <dafuse/config.hpp>
#include <dafuse/core/buffer.hpp>
#include <dafuse/core/error.hpp>
#include <dafuse/core/meta.hpp>
#include <dafuse/data/batch_draws.hpp>
#include <dafuse/data/dataset.hpp>
#include <dafuse/data/prefetch.hpp>
#include <dafuse/policy/loader.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace dafuse::data {

//! loader::sync: rows are copied on the host into a staging block, then into the step's input.
template <class System>
class batcher<loader::sync, System> {
  static_assert(System::host_accessible,
                "dafuse: loader::sync copies each batch from host memory into the step's input; "
                "a step on a device system (system::cuda) takes loader::resident, which keeps "
                "the data in device memory");

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
    std::copy_n(staging_.begin(), values, x.data);
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
    copy_in(source.features, source_rows_);
    if (with_target) copy_in(target.features, target_rows_);
    copy_in(source.labels, source_labels_);
  }

  template <class T>
  void fill(matrix_view<T> x, std::span<std::int32_t> labels) {
    const auto start = detail::wait_meter::clock::now();
    const std::span<const index_t> idx = draws_.draw(x, labels);
    const index_t b = draws_.batch(), rows = index_t(idx.size()), w = width_;
    if constexpr (System::host_accessible)
      std::copy(idx.begin(), idx.end(), indices_.data());
    else
      System::upload(indices_.data(), idx.data(), idx.size_bytes());
    const index_t* index = indices_.data();
    const float* src = source_rows_.data();
    const float* tgt = target_rows_.data();
    const std::int32_t* y = source_labels_.data();
    T* out = x.data;
    std::int32_t* out_labels = labels.data();
    const auto gather = [=] DAFUSE_HOST_DEVICE(index_t c) {
      const float* r = (c < b ? src : tgt) + index[c] * w;
      for (index_t k = 0; k < w; ++k) out[c * w + k] = T(r[k]);
      if (c < b) out_labels[c] = y[index[c]];
    };
    if constexpr (System::host_accessible) {
      // A batch is a few hundred KiB: one thread copies it in tens of µs, where a parallel
      // region costs its fork and join and, on a busy machine, a time slice of a descheduled
      // thread.
      for (index_t c = 0; c < rows; ++c) gather(c);
    } else {
      System::for_each_index(rows, gather);
    }
    wait_.stop(start);
  }

  //! Seconds the caller spent in fill(), over all fills: all of it is waiting for data.
  double wait_seconds() const { return wait_.total(); }
  //! Seconds of the last fill.
  double last_wait_seconds() const { return wait_.last(); }

 private:
  // Host values into the system's memory (a device system's own copy: its memory may not be the
  // host's).
  template <class V>
  static void copy_in(const std::vector<V>& from, buffer<V, System>& to) {
    if constexpr (System::host_accessible)
      std::copy(from.begin(), from.end(), to.data());
    else
      System::upload(to.data(), from.data(), from.size() * sizeof(V));
  }

  index_t width_;
  detail::batch_indices draws_;
  buffer<float, System> source_rows_, target_rows_;
  buffer<std::int32_t, System> source_labels_;
  buffer<index_t, System> indices_;
  detail::wait_meter wait_;
};

}  // namespace dafuse::data
