// Helpers shared by the tests: tolerant comparisons and paths to test data.
#pragma once
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <span>
#include <string>

namespace dafuse::test {

//! Largest |a_i − b_i| divided by the scale of b (its largest magnitude, at least `floor`):
//! relative error in the max norm, meaningful for vectors with entries near zero.
template <class A, class B>
double max_relative_error(std::span<A> a, std::span<B> b, double floor = 1e-12) {
  REQUIRE(a.size() == b.size());
  double scale = floor, worst = 0;
  for (std::size_t i = 0; i < b.size(); ++i) scale = std::max(scale, std::abs(double(b[i])));
  for (std::size_t i = 0; i < a.size(); ++i)
    worst = std::max(worst, std::abs(double(a[i]) - double(b[i])));
  return worst / scale;
}

//! tests/ in the source tree.
inline std::filesystem::path source_dir() {
  return std::filesystem::path(DAFUSE_SOURCE_DIR);
}
//! ../shared/data next to the checkout (may not exist: tests that need it skip).
inline std::filesystem::path shared_data_dir() {
  return std::filesystem::path(DAFUSE_SHARED_DATA_DIR);
}

}  // namespace dafuse::test
