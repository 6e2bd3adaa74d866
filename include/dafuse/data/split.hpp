// SPDX-License-Identifier: Apache-2.0
//! @file data/split.hpp
//! @brief Row subsets of a data set: a seeded train/validation split and a deterministic sample.
#pragma once
#include <dafuse/config.hpp>
#include <dafuse/core/error.hpp>
#include <dafuse/core/rng.hpp>
#include <dafuse/data/csr.hpp>
#include <dafuse/data/dataset.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <span>
#include <string>
#include <vector>

namespace dafuse::data {

//! The rows `rows` of `d` (in that order) as a data set of its own, named `origin`.
inline dataset select_rows(const dataset& d, std::span<const index_t> rows, std::string origin) {
  dataset s;
  s.origin = std::move(origin);
  s.side = d.side;
  s.rows = index_t(rows.size());
  s.width = d.width;
  s.features.reserve(rows.size() * std::size_t(d.width));
  for (const index_t r : rows) {
    if (r < 0 || r >= d.rows)
      fail(d.origin, "row", "a row in [0, " + std::to_string(d.rows) + ")", std::to_string(r));
    s.features.insert(s.features.end(), d.row(r), d.row(r) + d.width);
    if (d.has_labels()) s.labels.push_back(d.labels[std::size_t(r)]);
  }
  return s;
}

//! The same for a sparse data set: the selected rows' non-zeros, in canonical CSR.
inline sparse_dataset select_rows(const sparse_dataset& d,
                                  std::span<const index_t> rows,
                                  std::string origin) {
  sparse_dataset s;
  s.origin = std::move(origin);
  s.side = d.side;
  s.features.rows = index_t(rows.size());
  s.features.cols = d.width();
  s.features.indptr.reserve(rows.size() + 1);
  s.features.indptr.push_back(0);
  for (const index_t r : rows) {
    if (r < 0 || r >= d.rows())
      fail(d.origin, "row", "a row in [0, " + std::to_string(d.rows()) + ")", std::to_string(r));
    const auto begin = std::size_t(d.features.indptr[std::size_t(r)]);
    const auto end = std::size_t(d.features.indptr[std::size_t(r) + 1]);
    s.features.indices.insert(s.features.indices.end(), d.features.indices.begin() + begin,
                              d.features.indices.begin() + end);
    s.features.values.insert(s.features.values.end(), d.features.values.begin() + begin,
                             d.features.values.begin() + end);
    s.features.indptr.push_back(std::int32_t(s.features.values.size()));
    if (d.has_labels()) s.labels.push_back(d.labels[std::size_t(r)]);
  }
  return s;
}

//! A data set split in two: rows for training and held-out rows for validation.
template <class Data>
struct split_sets {
  Data train;       //!< the rows a run trains on
  Data validation;  //!< the held-out rows (never trained on)
};

//! Rows split_validation holds out of `rows` for `fraction`: round(fraction · rows).
inline index_t validation_row_count(index_t rows, double fraction) {
  return index_t(std::llround(fraction * double(rows)));
}

//! Holds out round(fraction · rows) rows of `d` for validation, chosen by a permutation seeded
//! with `seed` (its own RNG stream: the split does not move the batches); each part keeps the
//! original row order. fraction must be in (0, 1) and leave at least one row on each side.
template <class Data>
split_sets<Data> split_validation(const Data& d, double fraction, std::uint64_t seed) {
  index_t rows = 0;
  if constexpr (requires { d.rows(); })
    rows = d.rows();
  else
    rows = d.rows;
  const index_t held = validation_row_count(rows, fraction);
  if (!(fraction > 0 && fraction < 1) || held < 1 || held >= rows)
    fail(d.origin, "validation fraction",
         "a fraction in (0, 1) that leaves at least one row on each side of " +
             std::to_string(rows) + " rows",
         std::to_string(fraction));
  std::vector<index_t> order(static_cast<std::size_t>(rows));
  std::iota(order.begin(), order.end(), index_t(0));
  counter_rng rng(seed, rng_stream::validation_split);
  for (std::size_t i = order.size() - 1; i > 0; --i)
    std::swap(order[i], order[rng.below(static_cast<std::uint32_t>(i + 1))]);
  std::vector<index_t> validation(order.begin(), order.begin() + held);
  std::vector<index_t> train(order.begin() + held, order.end());
  std::sort(validation.begin(), validation.end());
  std::sort(train.begin(), train.end());
  return {select_rows(d, train, d.origin + " (training rows)"),
          select_rows(d, validation, d.origin + " (validation rows)")};
}

//! At most `count` rows of `d`, evenly spaced (all of them when it has fewer): a deterministic
//! sample for validators whose cost grows faster than the row count.
template <class Data>
Data sample_rows(const Data& d, index_t count) {
  index_t rows = 0;
  if constexpr (requires { d.rows(); })
    rows = d.rows();
  else
    rows = d.rows;
  if (count <= 0 || count >= rows) return d;
  std::vector<index_t> picked(static_cast<std::size_t>(count));
  for (index_t i = 0; i < count; ++i) picked[std::size_t(i)] = i * rows / count;
  return select_rows(d, picked, d.origin);
}

}  // namespace dafuse::data
