// SPDX-License-Identifier: Apache-2.0
// Tests for backend/generic/sparse.hpp: the sparse first layer's forward product and weight
// gradient against plain loops in double, for heights that fill one register block exactly, leave
// a partial last vector, and take several blocks (1 to 300 rows), in fp32 (registers on AVX-512)
// and fp64 (Eigen); the stored values rounded by `Round`; and the weight gradient writing only the
// columns of the features the batch uses.
#include <dafuse/backend/generic/sparse.hpp>
#include "../check.hpp"

#include <dafuse/core/rng.hpp>

#include <cmath>
#include <cstdint>
#include <span>
#include <vector>

namespace {

namespace generic = dafuse::backend::generic;
using dafuse::index_t;

constexpr index_t features = 53;

//! A CSR batch of 9 samples over `features` features: sample c uses features
//! (c·7 + 3·i) mod features for i < 1 + 5c mod 17 (distinct, so features repeat across samples,
//! the first and last feature among them), sample 2 none.
template <class T>
struct batch {
  static constexpr index_t cols = 9;
  std::vector<std::int32_t> offsets{0}, indices;
  std::vector<T> values;
  batch() {
    dafuse::counter_rng rng(11, dafuse::rng_stream::user);
    for (index_t c = 0; c < cols; ++c) {
      const index_t count = c == 2 ? 0 : 1 + (5 * c) % 17;
      for (index_t i = 0; i < count; ++i) {
        indices.push_back(std::int32_t((c * 7 + 3 * i) % features));
        values.push_back(rng.uniform(T(-2), T(2)));
      }
      offsets.push_back(std::int32_t(indices.size()));
    }
  }
  dafuse::sparse_matrix_view<const T> view() const {
    return {offsets.data(), indices.data(), values.data(), features, cols};
  }
};

//! Doubles each stored value: shows that the kernels read values through Round::round.
struct doubled {
  template <class T>
  static T round(T v) {
    return T(2) * v;
  }
};

//! Values in (−1, 1) from `seed`.
template <class T>
void fill_random(std::span<T> v, std::uint64_t seed) {
  dafuse::counter_rng rng(seed, dafuse::rng_stream::user);
  for (T& x : v) x = rng.uniform(T(-1), T(1));
}

template <class T>
constexpr double tolerance = std::is_same_v<T, float> ? 2e-6 : 1e-14;

template <class T>
void check_forward(index_t out) {
  CAPTURE(out);
  const batch<T> b;
  const std::vector<T>& values = b.values;
  // W, y and (below) δz and ∂L/∂W end against a page that faults: the batch's last sample and
  // W's last column (feature 52, sample 7's) reach their ends, so a tail lane past a column's
  // last row would fault there.
  dafuse::test::guarded_array<T> w(static_cast<std::size_t>(out * features));
  fill_random(std::span<T>(w.data(), w.size()), 5);
  dafuse::test::guarded_array<T> y(static_cast<std::size_t>(out * b.cols));
  std::fill(y.begin(), y.end(), T(7));  // overwritten, not added to
  generic::sparse_input_product<doubled>(w.data(), out, b.view(), y.data());
  std::vector<double> expected(y.size(), 0.0);
  for (index_t c = 0; c < b.cols; ++c)
    for (index_t k = b.offsets[c]; k < b.offsets[c + 1]; ++k)
      for (index_t r = 0; r < out; ++r)
        expected[c * out + r] += 2.0 * double(values[k]) * double(w[b.indices[k] * out + r]);
  CHECK(dafuse::test::max_relative_error(y.span(), std::span<const double>(expected)) <
        tolerance<T>);
  // The empty column is zeros.
  for (index_t r = 0; r < out; ++r) CHECK(y[2 * out + r] == T(0));
}

template <class T>
void check_weight_gradient(index_t out) {
  CAPTURE(out);
  const batch<T> b;
  const std::vector<T>& values = b.values;
  dafuse::test::guarded_array<T> dz(static_cast<std::size_t>(out * b.cols));
  fill_random(std::span<T>(dz.data(), dz.size()), 6);
  std::vector<bool> used(features, false);
  for (std::int32_t j : b.indices) used[std::size_t(j)] = true;
  // Used columns hold zeros, as the step leaves them; the others a sentinel that must survive.
  const T sentinel = T(-3.5);
  dafuse::test::guarded_array<T> dw(static_cast<std::size_t>(out * features));
  for (index_t j = 0; j < features; ++j)
    for (index_t r = 0; r < out; ++r) dw[j * out + r] = used[j] ? T(0) : sentinel;
  generic::sparse_weight_gradient<doubled>(dz.data(), out, b.view(), dw.data());

  std::vector<double> expected(dw.size(), 0.0);
  for (index_t c = 0; c < b.cols; ++c)
    for (index_t k = b.offsets[c]; k < b.offsets[c + 1]; ++k)
      for (index_t r = 0; r < out; ++r)
        expected[b.indices[k] * out + r] += 2.0 * double(values[k]) * double(dz[c * out + r]);
  index_t untouched = 0;
  for (index_t j = 0; j < features; ++j) {
    if (used[j]) continue;
    ++untouched;
    for (index_t r = 0; r < out; ++r) {
      CHECK(dw[j * out + r] == sentinel);
      expected[j * out + r] = double(sentinel);
    }
  }
  CHECK(untouched > 0);
  CHECK(dafuse::test::max_relative_error(dw.span(), std::span<const double>(expected)) <
        tolerance<T>);
}

// 16 and 128 fill whole vectors and a whole block; 17, 100 and 129 leave a partial last vector
// (129 and 300: a second block of 1 and 44 rows); 0 rows is nothing to do.
constexpr index_t heights[] = {0, 1, 5, 16, 17, 100, 128, 129, 300};

TEST_CASE_TEMPLATE("the sparse forward product matches a plain loop", T, float, double) {
  for (index_t out : heights) check_forward<T>(out);
}

TEST_CASE_TEMPLATE("the sparse weight gradient matches a plain loop and writes only used columns",
                   T,
                   float,
                   double) {
  for (index_t out : heights) check_weight_gradient<T>(out);
}

TEST_CASE("the sparse products of an empty batch write nothing but zeros") {
  const std::vector<std::int32_t> offsets{0, 0, 0};
  const dafuse::sparse_matrix_view<const float> x{offsets.data(), nullptr, nullptr, features, 2};
  std::vector<float> w(static_cast<std::size_t>(100 * features)), dz(200, 1.0f);
  fill_random(std::span<float>(w), 1);
  std::vector<float> y(200, 7.0f), dw(static_cast<std::size_t>(100 * features), 9.0f);
  generic::sparse_input_product<doubled>(w.data(), 100, x, y.data());
  generic::sparse_weight_gradient<doubled>(dz.data(), 100, x, dw.data());
  for (float v : y) CHECK(v == 0.0f);
  for (float v : dw) CHECK(v == 9.0f);
}

}  // namespace
