// SPDX-License-Identifier: Apache-2.0
// Tests for backend/host/sparse.hpp: the sparse first layer's forward product and weight
// gradient against plain loops in double, for heights that fill one register block exactly, leave
// a partial last vector, and take several blocks (1 to 300 rows), in fp32 (registers on AVX-512)
// and fp64 (Eigen); the stored values rounded by `Round`; and the weight gradient writing only the
// columns of the features the batch uses.
#include <dafuse/backend/host/sparse.hpp>
#include "../check.hpp"

#include <dafuse/core/rng.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace backend_sparse_test {

namespace {

namespace host = dafuse::backend::host;
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
  host::sparse_input_product<doubled>(w.data(), out, b.view(), y.data());
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
  host::sparse_weight_gradient<doubled>(dz.data(), out, b.view(), dw.data());

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

// Blocks are 128 rows in zmm (16 a vector) and 104 in ymm (8 a vector). 8, 16, 104 and 128 fill
// whole vectors and a whole block; 17, 100, 105 and 129 leave a partial last vector (105, 129 and
// 300: a second block); 0 rows is nothing to do.
constexpr index_t heights[] = {0, 1, 5, 8, 16, 17, 100, 104, 105, 128, 129, 300};

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
  host::sparse_input_product<doubled>(w.data(), 100, x, y.data());
  host::sparse_weight_gradient<doubled>(dz.data(), 100, x, dw.data());
  for (float v : y) CHECK(v == 0.0f);
  for (float v : dw) CHECK(v == 9.0f);
}

// ---- A batch dealt among threads by feature (sparse_feature_parts) -------------------------

//! Runs f() with OpenMP set to `threads` threads.
template <class F>
void with_threads(int threads, F&& f) {
  const dafuse::test::thread_count scope(threads);
  f();
}

TEST_CASE("blocks are dealt back and forth, in whole lines of W and at least two per part") {
  // parts 3: 0 1 2, then 2 1 0, then 0 1 2.
  const int expected[] = {0, 1, 2, 2, 1, 0, 0, 1, 2};
  for (index_t b = 0; b < 9; ++b) CHECK(host::dealt_owner(b, 3) == expected[b]);
  for (index_t b = 0; b < 6; ++b) CHECK(host::dealt_owner(b, 1) == 0);
  // The Amazon network's first layer (5000 → 100, fp32) on two threads: 176 columns, 68.75 KiB.
  CHECK(host::sparse_deal_block<float>(5000, 100, 2) == 176);
  CHECK(host::sparse_deal_block<double>(5000, 100, 2) == 96);
  // Few features: 16-column blocks, the fewest whole lines.
  CHECK(host::sparse_deal_block<float>(30, 16, 2) == 16);
  CHECK(host::sparse_deal_block<float>(53, 8, 4) == 16);
  for (index_t out : {1, 3, 100, 1000})
    for (int parts : {2, 3, 8}) {
      const index_t block = host::sparse_deal_block<float>(5000, out, parts);
      CHECK(block % 16 == 0);
      CHECK((5000 + block - 1) / block >= std::min<index_t>(2 * parts, 5000 / 16));
    }
}

TEST_CASE("a sparse batch cannot be dealt among 0 parts or in blocks that are no whole lines") {
  CHECK(dafuse::test::error_message([] {
          host::sparse_feature_parts<float>(53, 4, 9, 100, 0, 16);
        }).find("parts: expected 1 to 255") != std::string::npos);
  CHECK(dafuse::test::error_message([] {
          host::sparse_feature_parts<float>(53, 4, 9, 100, 2, 24);
        }).find("block: expected a positive multiple of 16 features, found 24") !=
        std::string::npos);
}

TEST_CASE("each part holds its features' non-zeros in the batch's order and lists its features") {
  const batch<float> b;
  for (int parts : {1, 2, 3, 5}) {
    for (int threads : {1, 2, 3}) {
      CAPTURE(parts);
      CAPTURE(threads);
      host::sparse_feature_parts<float> dealt(features, 4, batch<float>::cols,
                                              index_t(b.values.size()), parts, 16);
      std::vector<std::vector<index_t>> cleared(static_cast<std::size_t>(parts));
      const auto record_clear = [&](index_t j) {
        cleared[std::size_t(dealt.owner(j))].push_back(j);
      };
      with_threads(threads, [&] { dealt.deal(b.view(), record_clear); });
      // A first batch clears nothing.
      for (const auto& c : cleared) CHECK(c.empty());
      std::vector<int> seen(b.values.size(), 0);
      for (int p = 0; p < parts; ++p) {
        CAPTURE(p);
        const dafuse::sparse_matrix_view<const float> x = dealt.part(p);
        CHECK(x.cols == batch<float>::cols);
        CHECK(x.rows == features);
        std::vector<index_t> expected_used;
        for (index_t c = 0; c < x.cols; ++c) {
          // The part's non-zeros of sample c: the sample's own features, in order.
          std::vector<std::pair<std::int32_t, float>> expected, got;
          for (index_t k = b.offsets[c]; k < b.offsets[c + 1]; ++k)
            if (host::dealt_owner(b.indices[k] / 16, parts) == p) {
              expected.emplace_back(b.indices[k], b.values[k]);
              ++seen[std::size_t(k)];
              expected_used.push_back(b.indices[k]);
            }
          for (index_t k = x.col_begin(c); k < x.col_begin(c + 1); ++k)
            got.emplace_back(x.indices[k], x.values[k]);
          CHECK(got == expected);
        }
        std::sort(expected_used.begin(), expected_used.end());
        expected_used.erase(std::unique(expected_used.begin(), expected_used.end()),
                            expected_used.end());
        CHECK(std::vector<index_t>(x.used_rows, x.used_rows + x.used_count) == expected_used);
      }
      CHECK(std::all_of(seen.begin(), seen.end(), [](int n) { return n == 1; }));
      // A second batch: each part first clears the features its previous batch used.
      std::vector<std::vector<index_t>> used_before(static_cast<std::size_t>(parts));
      for (int p = 0; p < parts; ++p)
        used_before[std::size_t(p)].assign(dealt.part(p).used_rows,
                                           dealt.part(p).used_rows + dealt.part(p).used_count);
      const std::vector<std::int32_t> offsets{0, 2, 2};
      const std::vector<std::int32_t> indices{52, 0};
      const std::vector<float> values{1.5f, -2.0f};
      with_threads(threads, [&] {
        dealt.deal({offsets.data(), indices.data(), values.data(), features, 2}, record_clear);
      });
      CHECK(cleared == used_before);
      for (int p = 0; p < parts; ++p) {
        const auto x = dealt.part(p);
        const index_t owns_0 = dealt.owner(0) == p, owns_52 = dealt.owner(52) == p;
        CHECK(x.nnz() == owns_0 + owns_52);
        CHECK(x.used_count == owns_0 + owns_52);
        CHECK(x.col_begin(1) == x.nnz());
      }
    }
  }
}

template <class T>
void check_dealt_products(index_t out, int parts, int threads) {
  CAPTURE(out);
  CAPTURE(parts);
  CAPTURE(threads);
  const batch<T> b;
  std::vector<T> w(static_cast<std::size_t>(out * features)), dz(std::size_t(out * b.cols));
  fill_random(std::span<T>(w), 5);
  fill_random(std::span<T>(dz), 6);
  host::sparse_feature_parts<T> dealt(features, out, b.cols, index_t(b.values.size()), parts, 16);
  std::vector<T> one_y(std::size_t(out * b.cols)), y(one_y.size(), T(7));
  std::vector<T> one_dw(std::size_t(out * features), T(0)), dw(one_dw.size(), T(0));
  host::sparse_input_product<doubled>(w.data(), out, b.view(), one_y.data());
  host::sparse_weight_gradient<doubled>(dz.data(), out, b.view(), one_dw.data());
  // The finishers see every column of y once, and every used column of ∂L/∂W once, each with
  // its block's values already final.
  // (Counted with atomics: the finishers run on the team's threads, where doctest cannot check.)
  std::vector<int> y_columns(std::size_t(b.cols), 0), dw_columns(std::size_t(features), 0);
  int bad_shapes = 0;
  double y_sum = 0, expected_dw_sq = 0;
  with_threads(threads, [&] {
    const host::dealt_sparse_batch<T> x = dealt.deal(b.view(), [](index_t) {});
    host::sparse_input_product<doubled>(w.data(), out, x, y.data(),
                                        [&](T* block, index_t rows, index_t cols, index_t ld) {
                                          if (rows != out || ld != out) {
#pragma omp atomic
                                            ++bad_shapes;
                                          }
                                          double sum = 0;
                                          for (index_t c = 0; c < cols; ++c) {
#pragma omp atomic
                                            ++y_columns[std::size_t((block - y.data()) / out + c)];
                                            for (index_t r = 0; r < rows; ++r)
                                              sum += double(block[c * ld + r]);
                                          }
#pragma omp atomic
                                          y_sum += sum;
                                          return 0.0;
                                        });
    const double dw_sq = host::sparse_weight_gradient<doubled>(
        dz.data(), out, x, dw.data(), [&](T* column, index_t rows, index_t cols, index_t) {
          if (cols != 1) {
#pragma omp atomic
            ++bad_shapes;
          }
#pragma omp atomic
          ++dw_columns[std::size_t((column - dw.data()) / out)];
          double sq = 0;
          for (index_t r = 0; r < rows; ++r) sq += double(column[r]) * double(column[r]);
          return sq;
        });
    for (T v : one_dw) expected_dw_sq += double(v) * double(v);
    CHECK(dw_sq == doctest::Approx(expected_dw_sq).epsilon(1e-12));
  });
  // y: the parts' partial sums added, so to rounding; ∂L/∂W: every feature's non-zeros in one
  // part, in the batch's order, so the same bits.
  CHECK(dafuse::test::max_relative_error(std::span<const T>(y), std::span<const T>(one_y)) <
        tolerance<T>);
  CHECK(dw == one_dw);
  double one_y_sum = 0;
  for (T v : one_y) one_y_sum += double(v);
  CHECK(y_sum == doctest::Approx(one_y_sum).epsilon(1e-5));
  CHECK(bad_shapes == 0);
  for (int n : y_columns) CHECK(n == 1);
  for (index_t j = 0; j < features; ++j) {
    const bool used = std::find(b.indices.begin(), b.indices.end(), j) != b.indices.end();
    CHECK(dw_columns[std::size_t(j)] == (used ? 1 : 0));
  }
}

TEST_CASE_TEMPLATE(
    "dealt among threads, the forward matches one thread's and the weight gradient "
    "is bitwise one thread's",
    T,
    float,
    double) {
  for (index_t out : {1, 17, 100})
    for (int parts : {1, 2, 3})
      for (int threads : {1, 2, 3}) check_dealt_products<T>(out, parts, threads);
}

}  // namespace

}  // namespace backend_sparse_test
