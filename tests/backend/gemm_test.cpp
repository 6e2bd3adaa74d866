// SPDX-License-Identifier: Apache-2.0
// Tests for backend/generic/gemm.hpp (and the AVX-512 fp32 kernel of gemm_fp32.hpp behind it)
// against a naive product in double: fp32 and fp64, all four op combinations, sizes that are no
// multiple of any register tile or block, leading dimensions larger than the rows, α ≠ 1,
// β ∈ {0, 1, 0.5}, NaN in C with β = 0, k = 0, products with a side of 1 (thin_product), the
// two-thread split of C, and the finisher that sees each thread's block of C.
#include <dafuse/backend/generic/gemm.hpp>
#include "../check.hpp"

#include <dafuse/core/error.hpp>
#include <dafuse/core/rng.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

namespace {

namespace generic = dafuse::backend::generic;
using dafuse::index_t;
using generic::op;

//! A column-major [rows, cols] matrix with leading dimension rows + pad, filled with values in
//! (-2, 2); the padding holds a value that would spoil any result that read it.
template <class T>
struct matrix {
  index_t rows, cols, ld;
  std::vector<T> v;
  matrix(index_t r, index_t c, index_t pad, std::uint64_t seed)
      : rows(r), cols(c), ld(r + pad), v(std::size_t(ld * c), T(1e30)) {
    dafuse::counter_rng rng(seed, dafuse::rng_stream::user);
    for (index_t j = 0; j < c; ++j)
      for (index_t i = 0; i < r; ++i) v[std::size_t(i + j * ld)] = T(rng.uniform(-2.0f, 2.0f));
  }
  T at(index_t i, index_t j) const { return v[std::size_t(i + j * ld)]; }
};

//! Runs C = α·op(A)·op(B) + β·C on `threads` threads and checks it against the product in double,
//! to a few units of T's rounding per term of Σ|a||b|; returns C.
template <class T, op OpA, op OpB>
std::vector<T> check_product(
    index_t m, index_t n, index_t k, T alpha, T beta, bool nan_in_c, int threads = 1) {
  CAPTURE(m);
  CAPTURE(n);
  CAPTURE(k);
  CAPTURE(alpha);
  CAPTURE(beta);
  CAPTURE(threads);
  const bool ta = OpA == op::transpose, tb = OpB == op::transpose;
  const matrix<T> a(ta ? k : m, ta ? m : k, 3, 11 + std::uint64_t(m));
  const matrix<T> b(tb ? n : k, tb ? k : n, 5, 23 + std::uint64_t(n));
  matrix<T> c(m, n, 2, 37 + std::uint64_t(k));
  if (nan_in_c)
    for (index_t j = 0; j < n; ++j)
      for (index_t i = 0; i < m; ++i)
        c.v[std::size_t(i + j * c.ld)] = std::numeric_limits<T>::quiet_NaN();
  const matrix<T> c0 = c;

  generic::gemm_workspace<T> ws(m, n, k, threads);
  generic::gemm<OpA, OpB>(ws, m, n, k, alpha, a.v.data(), a.ld, b.v.data(), b.ld, beta, c.v.data(),
                          c.ld);

  const double unit = std::numeric_limits<T>::epsilon();
  double worst = 0;
  for (index_t j = 0; j < n; ++j)
    for (index_t i = 0; i < m; ++i) {
      double sum = 0, mag = 0;
      for (index_t l = 0; l < k; ++l) {
        const double x = ta ? a.at(l, i) : a.at(i, l);
        const double y = tb ? b.at(j, l) : b.at(l, j);
        sum += x * y;
        mag += std::abs(x * y);
      }
      const double old = beta == T(0) ? 0.0 : double(beta) * c0.at(i, j);
      const double want = double(alpha) * sum + old;
      const double scale = std::abs(double(alpha)) * mag + std::abs(old) + 1e-300;
      const double got = c.at(i, j);
      REQUIRE(std::isfinite(got));
      worst = std::max(worst, std::abs(got - want) / scale);
    }
  CHECK(worst < 8 * unit);
  // The padding below each column of C is untouched.
  for (index_t j = 0; j < n; ++j)
    for (index_t i = m; i < c.ld; ++i)
      CHECK(c.v[std::size_t(i + j * c.ld)] == c0.v[std::size_t(i + j * c.ld)]);
  return c.v;
}

template <class T, op OpA, op OpB>
void check_all_sizes() {
  // Around the register tiles (fp32 kernel: 32 × 12; Eigen's: 16-ish) and a size of none.
  const index_t sizes[] = {1, 2, 12, 13, 16, 17, 32, 33, 100};
  for (index_t m : sizes)
    for (index_t n : sizes)
      for (index_t k : {index_t(1), index_t(3), index_t(17), index_t(100)}) {
        check_product<T, OpA, OpB>(m, n, k, T(1), T(0), false);
        check_product<T, OpA, OpB>(m, n, k, T(-0.75), T(1), false);
        check_product<T, OpA, OpB>(m, n, k, T(1.5), T(0.5), false);
        check_product<T, OpA, OpB>(m, n, k, T(0.5), T(0), true);
      }
  // Larger than one block of every loop of the fp32 kernel (mc = 192, kc = 256), with an odd k,
  // and β applied once although k spans several blocks.
  check_product<T, OpA, OpB>(300, 41, 601, T(0.25), T(0.5), false);
  // Products with a side of 1 and at least thin_product_min_terms terms run as thin_product:
  // row times matrix past its 256-sum chunks and its 16-lane dot products with a tail, a column
  // (n = 1) likewise, outer products (k = 1) of many columns.
  for (const auto& [m, n, k] : {std::array<index_t, 3>{1, 600, 37},
                                {1, 257, 20},
                                {600, 1, 37},
                                {257, 1, 20},
                                {600, 300, 1},
                                {1, 1, 5000}}) {
    REQUIRE(generic::detail::is_thin(m, n, k));
    check_product<T, OpA, OpB>(m, n, k, T(1), T(0), true);
    check_product<T, OpA, OpB>(m, n, k, T(-0.75), T(1), false);
    check_product<T, OpA, OpB>(m, n, k, T(1.5), T(0.5), false);
  }
}

//! Above gemm_parallel_flops C is split over two threads, by rows when it is taller than wide
//! and by columns otherwise; each thread has its own packing buffers. The split never cuts k, so
//! with dafuse's fp32 kernel the result is the same to the bit as on one thread.
template <class T, op OpA, op OpB>
void check_split() {
  for (const auto& [m, n] : {std::pair<index_t, index_t>{301, 250}, {250, 301}, {1000, 70}}) {
    const std::vector<T> one = check_product<T, OpA, OpB>(m, n, 451, T(1), T(0), true, 1);
    const std::vector<T> two = check_product<T, OpA, OpB>(m, n, 451, T(1), T(0), true, 2);
    if (generic::gemm_workspace<T>::native) CHECK(one == two);
  }
}

template <class T>
void check_every_op() {
  check_all_sizes<T, op::none, op::none>();
  check_all_sizes<T, op::none, op::transpose>();
  check_all_sizes<T, op::transpose, op::none>();
  check_all_sizes<T, op::transpose, op::transpose>();
  check_split<T, op::none, op::none>();
  check_split<T, op::none, op::transpose>();
  check_split<T, op::transpose, op::none>();
  check_split<T, op::transpose, op::transpose>();
}

}  // namespace

TEST_CASE("gemm in fp32 matches a double product for every op, size, alpha and beta") {
  check_every_op<float>();
}

TEST_CASE("gemm in fp64 matches a double product for every op, size, alpha and beta") {
  check_every_op<double>();
}

//! Runs C = op(A)·op(B) with a finisher that records each block it is given and doubles it, and
//! checks that the blocks tile C once each, in whole rows or whole columns, and that gemm returns
//! their shares (here each block's sum) added in block order.
template <op OpA, op OpB>
void check_finisher(index_t m, index_t n, index_t k, int threads) {
  CAPTURE(m);
  CAPTURE(n);
  CAPTURE(k);
  CAPTURE(threads);
  const bool ta = OpA == op::transpose, tb = OpB == op::transpose;
  const matrix<float> a(ta ? k : m, ta ? m : k, 1, 3), b(tb ? n : k, tb ? k : n, 2, 4);
  generic::gemm_workspace<float> ws(m, n, k, threads);
  std::vector<float> plain(std::size_t(m * n)), c(std::size_t(m * n));
  generic::gemm<OpA, OpB>(ws, m, n, k, 1.0f, a.v.data(), a.ld, b.v.data(), b.ld, 0.0f, plain.data(),
                          m);
  struct block {
    index_t first, rows, cols;
    double sum;
  };
  std::vector<block> seen(std::size_t(threads) + 1);
  std::vector<int> visits(std::size_t(m * n), 0);
  std::atomic<int> count{0};
  const double returned = generic::gemm<OpA, OpB>(
      ws, m, n, k, 1.0f, a.v.data(), a.ld, b.v.data(), b.ld, 0.0f, c.data(), m,
      [&](float* blk, index_t rows, index_t cols, index_t ld) {
        REQUIRE(ld == m);
        double sum = 0;
        for (index_t j = 0; j < cols; ++j)
          for (index_t i = 0; i < rows; ++i) {
            sum += blk[i + j * ld];
            blk[i + j * ld] *= 2.0f;
            ++visits[std::size_t(blk - c.data() + i + j * ld)];
          }
        seen[std::size_t(count++)] = {index_t(blk - c.data()), rows, cols, sum};
        return sum;
      });
  const int blocks = count.load();
  const generic::detail::product_split split = ws.split(m, n, k);
  int nonempty = 0;  // split_for may leave the last block(s) empty: they get no finisher
  for (int t = 0; t < split.threads; ++t) nonempty += split.range(t).second > split.range(t).first;
  CHECK(blocks == nonempty);
  for (int v : visits) CHECK(v == 1);
  // Each block is whole columns of C or whole rows: the finisher sees what one thread wrote.
  double in_order = 0;
  std::sort(seen.begin(), seen.begin() + blocks,
            [](const block& x, const block& y) { return x.first < y.first; });
  for (int t = 0; t < blocks; ++t) {
    const block& s = seen[std::size_t(t)];
    CHECK((s.rows == m || s.cols == n));
    in_order += s.sum;
  }
  CHECK(returned == in_order);
  for (std::size_t i = 0; i < c.size(); ++i) CHECK(c[i] == 2.0f * plain[i]);
}

TEST_CASE("gemm hands each finished block of C to the finisher once and returns their sum") {
  for (int threads : {1, 2, 3}) {
    check_finisher<op::none, op::none>(301, 250, 451, threads);         // by rows
    check_finisher<op::none, op::transpose>(250, 301, 451, threads);    // by columns
    check_finisher<op::transpose, op::none>(20, 10, 5, threads);        // one thread: too small
    check_finisher<op::transpose, op::transpose>(1, 300, 40, threads);  // thin_product
    check_finisher<op::none, op::none>(100, 50, 2000, threads);         // an empty third block
  }
}

TEST_CASE("gemm with k = 0 scales C by beta, and beta = 0 overwrites NaN") {
  generic::gemm_workspace<float> ws(2, 2, 1);
  std::vector<float> c = {1, 2, 3, 4};
  generic::gemm<op::none, op::none>(ws, 2, 2, 0, 1.0f, static_cast<const float*>(nullptr), 2,
                                    static_cast<const float*>(nullptr), 1, 0.5f, c.data(), 2);
  CHECK(c == std::vector<float>{0.5f, 1, 1.5f, 2});
  c.assign(4, std::numeric_limits<float>::quiet_NaN());
  generic::gemm<op::none, op::none>(ws, 2, 2, 0, 1.0f, static_cast<const float*>(nullptr), 2,
                                    static_cast<const float*>(nullptr), 1, 0.0f, c.data(), 2);
  CHECK(c == std::vector<float>{0, 0, 0, 0});
}

TEST_CASE("gemm runs a product larger than its workspace was sized for") {
  // The workspace's buffers hold one block of each loop; a larger product takes more blocks.
  generic::gemm_workspace<float> small(8, 8, 8, 1);
  const matrix<float> a(70, 300, 0, 1), b(300, 50, 0, 2);
  std::vector<float> c(70 * 50, 0.0f);
  generic::gemm<op::none, op::none>(small, 70, 50, 300, 1.0f, a.v.data(), 70, b.v.data(), 300, 0.0f,
                                    c.data(), 70);
  double worst = 0;
  for (index_t j = 0; j < 50; ++j)
    for (index_t i = 0; i < 70; ++i) {
      double sum = 0, mag = 0;
      for (index_t l = 0; l < 300; ++l) {
        sum += double(a.at(i, l)) * b.at(l, j);
        mag += std::abs(double(a.at(i, l)) * b.at(l, j));
      }
      worst = std::max(worst, std::abs(c[std::size_t(i + j * 70)] - sum) / mag);
    }
  CHECK(worst < 8 * 0x1p-23);
}

TEST_CASE("gemm with an unsized workspace throws") {
  generic::gemm_workspace<float> unsized;
  std::vector<float> a(4, 1.0f), b(4, 1.0f), c(4, 0.0f);
  CHECK_THROWS_AS((generic::gemm<op::none, op::none>(
                      unsized, 2, 2, 2, 1.0f, static_cast<const float*>(a.data()), 2,
                      static_cast<const float*>(b.data()), 2, 0.0f, c.data(), 2)),
                  dafuse::error);
}

TEST_CASE("fp32_products_native says which path is compiled in") {
#if defined(__AVX512F__) && !defined(__CUDACC__)
  CHECK(generic::fp32_products_native);
  CHECK(generic::gemm_workspace<float>::native);
#else
  CHECK_FALSE(generic::fp32_products_native);
#endif
  CHECK_FALSE(generic::gemm_workspace<double>::native);
}
