// Small source and target datasets whose entries say which row they came from, for the loader
// tests (batcher, prefetch): a batch's columns can be traced back to their rows.
#pragma once
#include <dafuse/config.hpp>
#include <dafuse/data/dataset.hpp>

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace dafuse::test {

//! Labelled source rows, row r holding r + k/10 at feature k; labels r mod 3 (or none).
inline data::dataset tagged_source(index_t rows, index_t width, bool labelled = true) {
  data::host_array<float> x{{std::size_t(rows), std::size_t(width)}, {}};
  std::vector<std::int32_t> y;
  for (index_t r = 0; r < rows; ++r) {
    for (index_t k = 0; k < width; ++k) x.values.push_back(float(r) + 0.1f * float(k));
    y.push_back(std::int32_t(r % 3));
  }
  return data::make_dataset("source.npy", data::domain::source, std::move(x),
                            labelled ? std::move(y) : std::vector<std::int32_t>{});
}

//! Unlabelled target rows, −1 − r − k/10: negative, so never mistaken for source rows.
inline data::dataset tagged_target(index_t rows, index_t width) {
  data::host_array<float> x{{std::size_t(rows), std::size_t(width)}, {}};
  for (index_t r = 0; r < rows; ++r)
    for (index_t k = 0; k < width; ++k) x.values.push_back(-1.0f - float(r) - 0.1f * float(k));
  return data::make_dataset("target.npy", data::domain::target, std::move(x));
}

//! A count of elements for a buffer (named, so `buffer<T> x(elements(n))` is not a declaration).
inline std::size_t elements(index_t n) {
  return static_cast<std::size_t>(n);
}

}  // namespace dafuse::test
