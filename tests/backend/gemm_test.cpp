// SPDX-License-Identifier: Apache-2.0
// Tests for backend/host/gemm.hpp (with the partition.hpp and thin_products.hpp it includes, and
// the fp32 kernel of gemm_fp32.hpp behind it: AVX-512 natively, AVX2 + FMA in an x86-64-v3 build)
// against a naive product in double: fp32 and fp64, all four op combinations, sizes that are no
// multiple of any register tile or block, leading dimensions larger than the rows, α ≠ 1,
// β ∈ {0, 1, 0.5}, NaN in C with β = 0, k = 0, products with a side of 1 (thin_product), the
// two-thread split of C and the split along k with its partial sums, the finisher that sees each
// thread's block of C, and layer_split, which divides a dense layer's products by W's columns.
#include <dafuse/backend/host/gemm.hpp>
#include "../check.hpp"

#include <dafuse/core/error.hpp>
#include <dafuse/core/rng.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <limits>
#include <new>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace backend_gemm_test {

namespace {

namespace host = dafuse::backend::host;
using dafuse::index_t;
using host::op;
using host::split_along;
using host::detail::product_split;

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
//! With `split`, the product runs as it says, the workspace holding room for its partial sums.
template <class T, op OpA, op OpB>
std::vector<T> check_product(index_t m,
                             index_t n,
                             index_t k,
                             T alpha,
                             T beta,
                             bool nan_in_c,
                             int threads = 1,
                             std::optional<product_split> split = std::nullopt) {
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

  host::gemm_workspace<T> ws(m, n, k, threads);
  if (split) {
    // Leave another product's partial sums behind: a partial is written, never added to.
    ws.reserve_partial_sums(m * n);
    std::vector<T> other(c.v.size());
    host::gemm<OpA, OpB>(ws, m, n, k, T(3), a.v.data(), a.ld, b.v.data(), b.ld, T(0), other.data(),
                         c.ld, host::no_finish{}, split);
  }
  host::gemm<OpA, OpB>(ws, m, n, k, alpha, a.v.data(), a.ld, b.v.data(), b.ld, beta, c.v.data(),
                       c.ld, host::no_finish{}, split);

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
  // Around the register tiles (fp32 kernel: 32 × 12 on AVX-512, 16 × 6 on AVX2; Eigen's:
  // 16-ish), each edge tile of an AVX2 vector of rows (1-7) and of its columns (1-5), and a size
  // of none.
  const index_t sizes[] = {1, 2, 5, 7, 8, 9, 12, 13, 16, 17, 32, 33, 100};
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
  // (n = 1) likewise, outer products (k = 1) of many columns (from thin_parallel_values values
  // split by columns among threads: the same bits on 1, 2 and 3).
  for (const auto& [m, n, k] : {std::array<index_t, 3>{1, 600, 37},
                                {1, 257, 20},
                                {600, 1, 37},
                                {257, 1, 20},
                                {600, 300, 1},
                                {1, 1, 5000}}) {
    REQUIRE(host::detail::is_thin(m, n, k));
    const std::vector<T> one = check_product<T, OpA, OpB>(m, n, k, T(1), T(0), true);
    check_product<T, OpA, OpB>(m, n, k, T(-0.75), T(1), false);
    check_product<T, OpA, OpB>(m, n, k, T(1.5), T(0.5), false);
    for (int threads : {2, 3}) {
      CHECK(check_product<T, OpA, OpB>(m, n, k, T(1), T(0), true, threads) == one);
      check_product<T, OpA, OpB>(m, n, k, T(-0.75), T(1), false, threads);
    }
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
    if (host::gemm_workspace<T>::native) CHECK(one == two);
  }
}

//! Split along k (a layer's forward product, layer_split): thread t sums its block of the terms
//! into C or into a partial sum, and the partials are added to C by columns. α, β (applied once,
//! with thread 0's block) and NaN in C at β = 0; blocks of k that are no multiple of the kernel's
//! (kc = 256), three threads, and 100 terms in three blocks (the fp32 kernel's 32-term units give
//! 64, 36 and an empty third; Eigen's 16 give 48, 48, 4).
template <class T, op OpA, op OpB>
void check_depth_split() {
  constexpr index_t unit = host::gemm_workspace<T>::row_tile;
  for (const auto& [m, n, k, threads] : {std::array<index_t, 4>{301, 70, 451, 2},
                                         {301, 70, 451, 3},
                                         {100, 50, 100, 3},
                                         {33, 17, 600, 2}}) {
    const product_split split = product_split::even(split_along::depth, k, int(threads), unit);
    REQUIRE(split.threads == int(threads));
    check_product<T, OpA, OpB>(m, n, k, T(1), T(0), true, int(threads), split);
    check_product<T, OpA, OpB>(m, n, k, T(-0.75), T(1), false, int(threads), split);
    check_product<T, OpA, OpB>(m, n, k, T(1.5), T(0.5), false, int(threads), split);
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
  check_depth_split<T, op::none, op::none>();
  check_depth_split<T, op::none, op::transpose>();
  check_depth_split<T, op::transpose, op::none>();
  check_depth_split<T, op::transpose, op::transpose>();
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
//! Split along k, the finisher gets the blocks of columns in which the partial sums were added.
template <op OpA, op OpB>
void check_finisher(index_t m,
                    index_t n,
                    index_t k,
                    int threads,
                    std::optional<product_split> split = std::nullopt) {
  CAPTURE(m);
  CAPTURE(n);
  CAPTURE(k);
  CAPTURE(threads);
  const bool ta = OpA == op::transpose, tb = OpB == op::transpose;
  const matrix<float> a(ta ? k : m, ta ? m : k, 1, 3), b(tb ? n : k, tb ? k : n, 2, 4);
  host::gemm_workspace<float> ws(m, n, k, threads);
  ws.reserve_partial_sums(m * n);
  std::vector<float> plain(std::size_t(m * n)), c(std::size_t(m * n));
  host::gemm<OpA, OpB>(ws, m, n, k, 1.0f, a.v.data(), a.ld, b.v.data(), b.ld, 0.0f, plain.data(), m,
                       host::no_finish{}, split);
  struct block {
    index_t first, rows, cols;
    double sum;
  };
  std::vector<block> seen(std::size_t(threads) + 1);
  std::vector<int> visits(std::size_t(m * n), 0);
  std::atomic<int> count{0};
  const double returned = host::gemm<OpA, OpB>(
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
      },
      split);
  const int blocks = count.load();
  const bool along_terms = split && split->along == split_along::depth && split->threads > 1;
  // Along k and in a large outer product (k = 1) the finished blocks are blocks of columns.
  const bool split_outer = k == 1 && m * n >= host::detail::thin_parallel_values;
  const product_split finished =
      along_terms || split_outer
          ? product_split::even(split_along::columns, n, ws.threads(), ws.col_tile)
          : split.value_or(ws.split(m, n, k));
  int nonempty = 0;  // a split may leave the last block(s) empty: they get no finisher
  for (int t = 0; t < finished.threads; ++t)
    nonempty += finished.range(t).second > finished.range(t).first;
  CHECK(blocks == nonempty);
  for (int v : visits) CHECK(v == 1);
  // Each block is whole columns of C or whole rows: the finisher sees what one thread wrote.
  double in_order = 0;
  std::sort(seen.begin(), seen.begin() + blocks,
            [](const block& x, const block& y) { return x.first < y.first; });
  for (int t = 0; t < blocks; ++t) {
    const block& s = seen[std::size_t(t)];
    CHECK((s.rows == m || s.cols == n));
    if (along_terms) CHECK(s.rows == m);
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
    check_finisher<op::none, op::transpose>(600, 300, 1, threads);      // an outer product
    check_finisher<op::none, op::none>(100, 50, 2000, threads);         // an empty third block
    // Along k: blocks of columns finished after the partial sums are added.
    check_finisher<op::none, op::none>(301, 70, 451, threads,
                                       product_split::even(split_along::depth, 451, threads, 32));
    check_finisher<op::transpose, op::none>(
        301, 70, 451, threads, product_split::even(split_along::depth, 451, threads, 32));
  }
}

//! A finisher that returns the sum of the squares of its block and says so (partition.hpp's
//! squares_finisher), counting its calls: gemm may take the sum from the kernel's registers
//! instead of calling it.
struct squares_probe {
  static constexpr bool sums_squares = true;
  std::atomic<int>* calls;
  template <class T>
  double operator()(T* blk, index_t rows, index_t cols, index_t ld) const {
    ++*calls;
    double sum = 0;
    for (index_t j = 0; j < cols; ++j)
      for (index_t i = 0; i < rows; ++i) sum += double(blk[i + j * ld]) * double(blk[i + j * ld]);
    return sum;
  }
};

//! Runs C = 0.75·op(A)·op(B) + β·C (C's leading dimension m + 3; NaN in C when β = 0) with
//! squares_probe and checks that gemm returns Σ c² over the C it wrote, to float rounding, and
//! that the blocked AVX-512 kernel summed the squares itself (`kernel_sums`, when compiled in)
//! or the finisher was called (every other path).
template <class T, op OpA, op OpB>
void check_squares(index_t m,
                   index_t n,
                   index_t k,
                   int threads,
                   T beta,
                   bool kernel_sums,
                   std::optional<product_split> split = std::nullopt) {
  CAPTURE(m);
  CAPTURE(n);
  CAPTURE(k);
  CAPTURE(threads);
  CAPTURE(beta);
  const bool ta = OpA == op::transpose, tb = OpB == op::transpose;
  const matrix<T> a(ta ? k : m, ta ? m : k, 1, 5), b(tb ? n : k, tb ? k : n, 2, 6);
  matrix<T> c(m, n, 3, 7);
  if (beta == T(0))
    for (index_t j = 0; j < n; ++j)
      for (index_t i = 0; i < m; ++i) c.v[std::size_t(i + j * c.ld)] = std::nan("");
  // Sized as a step's workspace is, for its largest product: room for the in-place path.
  const index_t side = std::max({m, n, k});
  host::gemm_workspace<T> ws(side, side, side, threads);
  ws.reserve_partial_sums(m * n);
  std::atomic<int> calls{0};
  const double returned =
      host::gemm<OpA, OpB>(ws, m, n, k, T(0.75), a.v.data(), a.ld, b.v.data(), b.ld, beta,
                           c.v.data(), c.ld, squares_probe{&calls}, split);
  double expected = 0;
  for (index_t j = 0; j < n; ++j)
    for (index_t i = 0; i < m; ++i) expected += double(c.at(i, j)) * double(c.at(i, j));
  REQUIRE(std::isfinite(returned));
  CHECK(returned == doctest::Approx(expected).epsilon(1e-5));
  if (kernel_sums && host::gemm_workspace<T>::native)
    CHECK(calls.load() == 0);
  else
    CHECK(calls.load() > 0);
}

TEST_CASE("a finisher that sums squares gets its sum from the kernel as it stores C") {
  for (int threads : {1, 2}) {
    // The blocked kernel: by rows over two blocks of terms (only the final values count), by
    // columns (a weight gradient's shape), and one thread; β = 0 over NaN, and β ≠ 0.
    check_squares<float, op::none, op::none>(301, 250, 451, threads, 0.0f, true);
    check_squares<float, op::none, op::none>(301, 250, 451, threads, 0.5f, true);
    check_squares<float, op::none, op::transpose>(250, 301, 64, threads, 0.0f, true);
    check_squares<float, op::transpose, op::transpose>(20, 10, 5, threads, 1.0f, true);
    // The finisher: along k (partial sums; on one thread a split is the whole product),
    // thin_product, the in-place input gradient, fp64 (Eigen's kernel).
    check_squares<float, op::none, op::none>(
        301, 70, 451, threads, 0.0f, threads == 1,
        product_split::even(split_along::depth, 451, threads, 32));
    check_squares<float, op::transpose, op::transpose>(1, 300, 40, threads, 0.0f, false);
    check_squares<float, op::transpose, op::none>(640, 64, 1024, threads, 0.0f, false);
    check_squares<double, op::none, op::transpose>(250, 301, 64, threads, 0.0, false);
  }
}

TEST_CASE("a split along k gives the same C with a team smaller than the split") {
  // Called from inside a parallel region, gemm's own region gets a team of one thread, which then
  // runs every block of the split itself: the partial sums are added in the same order.
  constexpr index_t m = 300, n = 64, k = 700;
  const matrix<float> a(m, k, 0, 5), b(k, n, 0, 6);
  host::gemm_workspace<float> ws(m, n, k, 3);
  ws.reserve_partial_sums(m * n);
  const product_split split = product_split::even(split_along::depth, k, 3, ws.row_tile);
  REQUIRE(split.threads == 3);
  const auto run = [&] {
    std::vector<float> c(std::size_t(m * n));
    const double sum = host::gemm<op::none, op::none>(
        ws, m, n, k, 1.0f, a.v.data(), m, b.v.data(), k, 0.0f, c.data(), m,
        [](float* blk, index_t rows, index_t cols, index_t ld) {
          double s = 0;
          for (index_t j = 0; j < cols; ++j)
            for (index_t i = 0; i < rows; ++i) s += blk[i + j * ld];
          return s;
        },
        split);
    return std::pair{c, sum};
  };
  const auto whole_team = run();
  std::pair<std::vector<float>, double> small_team;
#if defined(_OPENMP)
  const int levels = omp_get_max_active_levels();
  omp_set_max_active_levels(1);
#pragma omp parallel num_threads(2)
  {
#pragma omp single
    small_team = run();
  }
  omp_set_max_active_levels(levels);
#else
  small_team = run();
#endif
  CHECK(small_team.first == whole_team.first);
  CHECK(small_team.second == whole_team.second);
}

TEST_CASE("a split product gives the same C and finisher sum on a held team") {
  // A step holds one team for all its products (team.hpp): each product's blocks then run on the
  // held threads, a split along k meeting at the team's own barrier. Splits of 2 and 3 blocks (a
  // team of 2 takes the third block on thread 0), along k, C's rows and C's columns.
  constexpr index_t m = 300, n = 64, k = 700;
  const matrix<float> a(m, k, 0, 7), b(k, n, 0, 8);
  host::gemm_workspace<float> ws(m, n, k, 3);
  ws.reserve_partial_sums(m * n);
  const auto sum_of = [](float* blk, index_t rows, index_t cols, index_t ld) {
    double s = 0;
    for (index_t j = 0; j < cols; ++j)
      for (index_t i = 0; i < rows; ++i) s += blk[i + j * ld];
    return s;
  };
  for (const product_split& split :
       {product_split::even(split_along::depth, k, 2, ws.row_tile),
        product_split::even(split_along::depth, k, 3, ws.row_tile),
        product_split::even(split_along::rows, m, 3, ws.row_tile),
        product_split::even(split_along::columns, n, 2, ws.col_tile)}) {
    CAPTURE(int(split.along));
    CAPTURE(split.threads);
    const auto run = [&] {
      std::vector<float> c(std::size_t(m * n));
      const double sum = host::gemm<op::none, op::none>(
          ws, m, n, k, 1.0f, a.v.data(), m, b.v.data(), k, 0.0f, c.data(), m, sum_of, split);
      return std::pair{c, sum};
    };
    const auto own_region = run();
    std::pair<std::vector<float>, double> held_team;
    host::with_thread_team(true, [&] { held_team = run(); });
    CHECK(held_team.first == own_region.first);
    CHECK(held_team.second == own_region.second);
  }
}

TEST_CASE_TEMPLATE("product_on runs whole products side by side, each on one thread's buffers",
                   T,
                   float,
                   double) {
  // Two threads each run their own products at once (conv.hpp's parts), every product on the
  // calling thread with the buffers of the thread it names: the bits of the same product on a
  // one-thread workspace, β and the finisher included; a thread the workspace lacks is refused.
  constexpr index_t m = 48, n = 500, k = 300;
  const matrix<T> a(m, k, 0, 3), b(k, n, 0, 4), b2(k, n, 0, 5);
  host::gemm_workspace<T> one(m, n, k, 1), two(m, n, k, 2);
  const auto sum_of = [](T* blk, index_t rows, index_t cols, index_t ld) {
    double s = 0;
    for (index_t j = 0; j < cols; ++j)
      for (index_t i = 0; i < rows; ++i) s += double(blk[i + j * ld]);
    return s;
  };
  const std::vector<T> start(std::size_t(m * n), T(0.5));
  std::vector<T> ref0 = start, ref1 = start;
  const double sum0 = host::gemm<op::none, op::none>(one, m, n, k, T(1), a.v.data(), m, b.v.data(),
                                                     k, T(0.25), ref0.data(), m, sum_of);
  const double sum1 = host::gemm<op::none, op::transpose>(
      one, m, n, k, T(-1), a.v.data(), m, b2.v.data(), n, T(0), ref1.data(), m, sum_of);
  std::vector<T> c0 = start, c1 = start;
  double got[2] = {0, 0};
  const auto run_part = [&](int p) {
    if (p == 0)
      got[0] = two.template product_on<op::none, op::none>(
          0, m, n, k, T(1), a.v.data(), m, b.v.data(), k, T(0.25), c0.data(), m, sum_of);
    else
      got[1] = two.template product_on<op::none, op::transpose>(
          1, m, n, k, T(-1), a.v.data(), m, b2.v.data(), n, T(0), c1.data(), m, sum_of);
  };
#if defined(_OPENMP)
  // Each product on the thread that runs it; a one-thread region runs both, in turn.
#pragma omp parallel num_threads(2)
  for (int p = omp_get_thread_num(); p < 2; p += omp_get_num_threads()) run_part(p);
#else
  for (int p = 0; p < 2; ++p) run_part(p);
#endif
  CHECK(c0 == ref0);
  CHECK(c1 == ref1);
  CHECK(got[0] == sum0);
  CHECK(got[1] == sum1);
  const std::string refused = dafuse::test::error_message([&] {
    two.template product_on<op::none, op::none>(2, m, n, k, T(1), a.v.data(), m, b.v.data(), k,
                                                T(0), c0.data(), m);
  });
  CHECK(refused.find("one of the workspace's 2") != std::string::npos);
}

TEST_CASE("gemm refuses a split it has no room or threads for") {
  constexpr index_t m = 64, n = 32, k = 256;
  const matrix<float> a(m, k, 0, 1), b(k, n, 0, 2);
  std::vector<float> c(std::size_t(m * n));
  host::gemm_workspace<float> ws(m, n, k, 2);
  const auto run = [&](product_split split) {
    host::gemm<op::none, op::none>(ws, m, n, k, 1.0f, a.v.data(), m, b.v.data(), k, 0.0f, c.data(),
                                   m, host::no_finish{}, split);
  };
  const auto message = [&](product_split split) {
    return dafuse::test::error_message([&] { run(split); });
  };
  const product_split terms = product_split::even(split_along::depth, k, 2, 32);
  CHECK(message(terms).find("split along the terms") != std::string::npos);
  ws.reserve_partial_sums(m * n - 1);
  CHECK(message(terms).find("reserve_partial_sums") != std::string::npos);
  ws.reserve_partial_sums(m * n);
  CHECK(message(terms).empty());
  CHECK(message(product_split::even(split_along::depth, k, 3, 32))
            .find("at most the workspace's 2 thread block(s)") != std::string::npos);
  CHECK(message(product_split::even(split_along::rows, k, 2, 32))
            .find("blocks that cover the side they divide (m = 64)") != std::string::npos);
  CHECK(message(product_split{split_along::depth, 2, k, 16}).find("2 blocks of 16") !=
        std::string::npos);
}

TEST_CASE("layer_split gives a layer's three products the same blocks of W's columns") {
  host::gemm_workspace<float> ws(1024, 1024, 1024, 2);
  // office-head's G_d: 256 → 1024 → 1024 on 64 samples. Without room for partial sums every
  // product keeps its own split.
  for (const auto& [out, in] : {std::pair<index_t, index_t>{1024, 256}, {1024, 1024}}) {
    const host::layer_split own = ws.split_layer(out, in, 64);
    CHECK(own.forward.along == ws.split(out, 64, in).along);
    CHECK(own.forward.per == ws.split(out, 64, in).per);
    CHECK(own.weight_gradient.along == ws.split(out, in, 64).along);
    CHECK(own.input_gradient.along == ws.split(in, 64, out).along);
  }
  ws.reserve_partial_sums(1024 * 64);
  // Plain variables, not structured bindings: clang before 16 cannot capture those (CAPTURE).
  for (const auto& shape : {std::pair<index_t, index_t>{1024, 256}, {1024, 1024}}) {
    const index_t out = shape.first, in = shape.second;
    CAPTURE(in);
    const host::layer_split s = ws.split_layer(out, in, 64);
    CHECK(s.forward.along == split_along::depth);
    CHECK(s.weight_gradient.along == split_along::columns);
    CHECK(s.input_gradient.along == split_along::rows);
    for (const product_split& p : {s.forward, s.weight_gradient, s.input_gradient}) {
      CHECK(p.threads == 2);
      CHECK(p.side == in);
      CHECK(p.range(0) == s.forward.range(0));
      CHECK(p.range(1) == s.forward.range(1));
    }
    CHECK(s.forward.per % host::line_values<float> == 0);
  }
  // Where a split along the terms does not pay, each product keeps its own: too small (one
  // thread), partial sums as large as W (n ≥ in), partial sums beyond the room reserved.
  for (const auto& shape :
       {std::array<index_t, 3>{64, 64, 64}, {1024, 64, 512}, {1024, 1024, 65}, {1, 4096, 64}}) {
    const index_t out = shape[0], in = shape[1], n = shape[2];
    CAPTURE(out);
    CAPTURE(in);
    CAPTURE(n);
    const host::layer_split s = ws.split_layer(out, in, n);
    CHECK(s.forward.along != split_along::depth);
    CHECK(s.forward.threads == ws.split(out, n, in).threads);
    CHECK(s.weight_gradient.threads == ws.split(out, in, n).threads);
    CHECK(s.input_gradient.threads == ws.split(in, n, out).threads);
  }
}

TEST_CASE("gemm with k = 0 scales C by beta, and beta = 0 overwrites NaN") {
  host::gemm_workspace<float> ws(2, 2, 1);
  std::vector<float> c = {1, 2, 3, 4};
  host::gemm<op::none, op::none>(ws, 2, 2, 0, 1.0f, static_cast<const float*>(nullptr), 2,
                                 static_cast<const float*>(nullptr), 1, 0.5f, c.data(), 2);
  CHECK(c == std::vector<float>{0.5f, 1, 1.5f, 2});
  c.assign(4, std::numeric_limits<float>::quiet_NaN());
  host::gemm<op::none, op::none>(ws, 2, 2, 0, 1.0f, static_cast<const float*>(nullptr), 2,
                                 static_cast<const float*>(nullptr), 1, 0.0f, c.data(), 2);
  CHECK(c == std::vector<float>{0, 0, 0, 0});
}

TEST_CASE("gemm runs a product larger than its workspace was sized for") {
  // The workspace's buffers hold one block of each loop; a larger product takes more blocks.
  host::gemm_workspace<float> small(8, 8, 8, 1);
  const matrix<float> a(70, 300, 0, 1), b(300, 50, 0, 2);
  std::vector<float> c(70 * 50, 0.0f);
  host::gemm<op::none, op::none>(small, 70, 50, 300, 1.0f, a.v.data(), 70, b.v.data(), 300, 0.0f,
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
  host::gemm_workspace<float> unsized;
  std::vector<float> a(4, 1.0f), b(4, 1.0f), c(4, 0.0f);
  CHECK_THROWS_AS((host::gemm<op::none, op::none>(
                      unsized, 2, 2, 2, 1.0f, static_cast<const float*>(a.data()), 2,
                      static_cast<const float*>(b.data()), 2, 0.0f, c.data(), 2)),
                  dafuse::error);
}

TEST_CASE("gemm refuses a moved-from workspace, with a split of its own or the default") {
  host::gemm_workspace<float> ws(8, 8, 8, 2);
  host::gemm_workspace<float> taken = std::move(ws);
  std::vector<float> a(64, 1.0f), b(64, 1.0f), c(64, 0.0f);
  const auto run = [&](std::optional<product_split> split) {
    return dafuse::test::error_message([&] {
      host::gemm<op::none, op::none>(ws, 8, 8, 8, 1.0f, static_cast<const float*>(a.data()), 8,
                                     static_cast<const float*>(b.data()), 8, 0.0f, c.data(), 8,
                                     host::no_finish{}, split);
    });
  };
  CHECK(run(std::nullopt).find("workspace") != std::string::npos);
  CHECK(run(product_split::even(split_along::rows, 8, 2, 4)).find("workspace") !=
        std::string::npos);
}

#if !DAFUSE_TEST_SANITIZED  // the sanitizers abort on an impossible allocation
TEST_CASE("a failed reserve_partial_sums leaves the room it had") {
  host::gemm_workspace<float> ws(1024, 1024, 1024, 2);
  ws.reserve_partial_sums(1024 * 64);
  CHECK(ws.split_layer(1024, 1024, 64).forward.along == split_along::depth);
  CHECK_THROWS_AS(ws.reserve_partial_sums(index_t(1) << 50), std::bad_alloc);
  // Still room for [1024, 64] partial sums, not for [1024, 128]: the wider layer must not be
  // split along its terms into room the workspace does not have.
  CHECK(ws.split_layer(1024, 1024, 64).forward.along == split_along::depth);
  CHECK(ws.split_layer(1024, 1024, 128).forward.along != split_along::depth);
}
#endif

TEST_CASE("fp32_products_native says which path is compiled in") {
#if defined(__AVX512F__) && !defined(__CUDACC__)
  CHECK(host::fp32_products_native);
  CHECK(host::gemm_workspace<float>::native);
  CHECK(std::string(host::fp32_kernel_name) == "AVX-512");
  CHECK(host::gemm_workspace<float>::row_tile == 32);
  CHECK(host::gemm_workspace<float>::col_tile == 12);
#elif defined(__AVX2__) && defined(__FMA__) && !defined(__CUDACC__)
  CHECK(host::fp32_products_native);
  CHECK(host::gemm_workspace<float>::native);
  CHECK(std::string(host::fp32_kernel_name) == "AVX2+FMA");
  CHECK(host::gemm_workspace<float>::row_tile == 16);
  CHECK(host::gemm_workspace<float>::col_tile == 6);
#else
  CHECK_FALSE(host::fp32_products_native);
  CHECK(std::string(host::fp32_kernel_name) == "Eigen");
#endif
  CHECK_FALSE(host::gemm_workspace<double>::native);
}

#if DAFUSE_GEMM_FP32_NATIVE
//! Runs C = α·A·op(B) + β·C (A [m, k] not transposed, leading dimensions past the rows, NaN in
//! C when asked) two ways, `way` and `reference`, each called as
//! `f.template operator()<TransB>(panels, a, b, c, &squares)` on its own copy of C, and checks
//! that C, padding included, and the sums of squares agree bit for bit.
template <bool TransB, class Way, class Reference>
void check_same_bits(index_t m,
                     index_t n,
                     index_t k,
                     float alpha,
                     float beta,
                     bool nan_in_c,
                     Way&& way,
                     Reference&& reference) {
  CAPTURE(m);
  CAPTURE(n);
  CAPTURE(k);
  CAPTURE(TransB);
  CAPTURE(alpha);
  CAPTURE(beta);
  const matrix<float> a(m, k, 3, 5), b(TransB ? n : k, TransB ? k : n, 1, 7);
  matrix<float> c(m, n, 2, 9);
  if (nan_in_c)
    for (float& v : c.v) v = std::numeric_limits<float>::quiet_NaN();
  matrix<float> expected = c;
  host::detail::fp32_panels p = host::detail::make_fp32_panels(m, n, k);
  double squares = 0.0, expected_squares = 0.0;
  way.template operator()<TransB>(p, a, b, c, &squares);
  reference.template operator()<TransB>(p, a, b, expected, &expected_squares);
  // Every value, padding included (NaN compares unequal, so compare the bits).
  REQUIRE(std::memcmp(c.v.data(), expected.v.data(), c.v.size() * sizeof(float)) == 0);
  CHECK(squares == expected_squares);
  CHECK(squares > 0.0);
}

//! blocked_product with `Kernel`, as check_same_bits calls a way.
template <class Kernel>
struct blocked_with {
  float alpha, beta;
  template <bool TransB>
  void operator()(host::detail::fp32_panels& p,
                  const matrix<float>& a,
                  const matrix<float>& b,
                  matrix<float>& c,
                  double* squares) const {
    host::detail::blocked_product<Kernel, false, TransB>(p, a.rows, c.cols, a.cols, alpha,
                                                         a.v.data(), a.ld, b.v.data(), b.ld, beta,
                                                         c.v.data(), c.ld, squares);
  }
};

//! fp32_kernel without packs_a_in_first_tiles: blocked_product then packs every block of A ahead
//! of its tiles, the reference for the panels packed by their first tiles.
struct fp32_kernel_packing_ahead : host::detail::fp32_kernel {
  static bool packs_a_in_first_tiles(index_t) = delete;
};

TEST_CASE("A packed by its panels' first tiles gives the bits of A packed ahead") {
  // blocked_product does not pack a block of an untransposed A of 128 terms or more ahead: each
  // panel's first tile reads it where it lies and packs it as it multiplies (packing_a). C and
  // the sum of squares must be what packing ahead gives, bit for bit: m with a last panel of
  // at most one vector and of more (AVX-512: ≤ 16, 17-31; AVX2: ≤ 8, 9-15 rows) and past one
  // block (mc = 192), n from 1 to past one tile column (AVX-512's 12, AVX2's 6),
  // k of 127 (packed ahead either way), 128, and 300 (a block packed in tiles, then one of 44
  // packed ahead), A's and C's leading dimensions past their rows, α ≠ 1, β ∈ {0, 1, 0.5} and
  // NaN in C at β = 0.
  namespace detail = host::detail;
  static_assert(detail::packs_a_in_tiles<detail::fp32_kernel>);
  static_assert(!detail::packs_a_in_tiles<fp32_kernel_packing_ahead>);
  const auto both_ways = [](index_t m, index_t n, index_t k, float alpha, float beta, bool nan_in_c,
                            auto trans_b) {
    check_same_bits<decltype(trans_b)::value>(m, n, k, alpha, beta, nan_in_c,
                                              blocked_with<detail::fp32_kernel>{alpha, beta},
                                              blocked_with<fp32_kernel_packing_ahead>{alpha, beta});
  };
  for (const index_t m : {5, 17, 32, 45, 131, 200})
    for (const index_t n : {1, 3, 5, 7, 12, 13, 64})
      for (const index_t k : {127, 128, 300}) {
        both_ways(m, n, k, 1.0f, 0.0f, true, std::false_type{});
        both_ways(m, n, k, -0.75f, 1.0f, false, std::true_type{});
        both_ways(m, n, k, 1.5f, 0.5f, false, std::false_type{});
      }
  // Through gemm, on 1 and 2 threads and split along k as a layer's forward product is
  // (layer_split), against the double product: office-head's [1024, 1024]·[1024, 64], smaller.
  const std::vector<float> one =
      check_product<float, op::none, op::none>(520, 64, 600, 1.0f, 0.0f, true, 1);
  CHECK(check_product<float, op::none, op::none>(520, 64, 600, 1.0f, 0.0f, true, 2) == one);
  check_product<float, op::none, op::none>(
      520, 64, 600, 1.0f, 0.0f, true, 2,
      product_split::even(split_along::depth, 600, 2, host::gemm_workspace<float>::row_tile));
  // A ending against a page that faults when touched: the masked loads and the requests for
  // lines ahead read nothing past A's last value (AddressSanitizer does not check AVX-512's
  // masked loads). m = 131 leaves a last panel of 3 rows.
  {
    const index_t m = 131, n = 20, k = 300;
    dafuse::test::guarded_array<float> a(std::size_t(m * k));
    std::vector<float> b(std::size_t(k * n)), c(std::size_t(m * n)), expected(c.size());
    for (index_t i = 0; i < m * k; ++i) a[std::size_t(i)] = float(i % 7) - 3.0f;
    for (index_t i = 0; i < k * n; ++i) b[std::size_t(i)] = float(i % 5) - 2.0f;
    detail::fp32_panels p = detail::make_fp32_panels(m, n, k);
    detail::blocked_product<detail::fp32_kernel, false, false>(p, m, n, k, 1.0f, a.data(), m,
                                                               b.data(), k, 0.0f, c.data(), m);
    detail::blocked_product<fp32_kernel_packing_ahead, false, false>(
        p, m, n, k, 1.0f, a.data(), m, b.data(), k, 0.0f, expected.data(), m);
    CHECK(c == expected);
  }
}

//! The operands of a product C[m, n] = A·B + β·C (A [m, k] or [k, m], B [k, n] or [n, k]) each
//! ending against a page that faults when touched: A and B hold small integers (exact sums in any
//! order), C and the copy the reference writes, `expected`, hold 0.5.
struct guarded_operands {
  dafuse::test::guarded_array<float> a, b, c;
  std::vector<float> expected;
  guarded_operands(index_t m, index_t n, index_t k)
      : a(std::size_t(m * k)),
        b(std::size_t(k * n)),
        c(std::size_t(m * n)),
        expected(std::size_t(m * n)) {
    for (index_t i = 0; i < m * k; ++i) a[std::size_t(i)] = float(i % 7) - 3.0f;
    for (index_t i = 0; i < k * n; ++i) b[std::size_t(i)] = float(i % 5) - 2.0f;
    for (index_t i = 0; i < m * n; ++i) c[std::size_t(i)] = expected[std::size_t(i)] = 0.5f;
  }
};

TEST_CASE("a product of one panel and one block of terms reads both operands in place") {
  // C = α·A·op(B) + β·C with m ≤ mr rows (32 on AVX-512, 16 on AVX2) and k ≤ kc terms runs
  // with neither operand packed (fp32_product_in_place). It must give what blocked_product gives,
  // C and Σ c² bit for bit, padding included: m around one and two vectors of rows, n around the
  // tile's columns (12 or 6) and each narrower tile, k up to a whole block, B transposed or not,
  // leading dimensions past the rows, α ≠ 1, β ∈ {0, 1, 0.5} and NaN in C at β = 0. In the step
  // these are moons' products and the classifiers'.
  namespace detail = host::detail;
  const auto in_place = [](float alpha, float beta) {
    return [=]<bool TransB>(detail::fp32_panels&, const matrix<float>& a, const matrix<float>& b,
                            matrix<float>& c, double* squares) {
      REQUIRE(detail::fp32_product_in_place<TransB>(a.rows, c.cols, a.cols, alpha, a.v.data(), a.ld,
                                                    b.v.data(), b.ld, beta, c.v.data(), c.ld,
                                                    squares));
    };
  };
  const auto both_ways = [&](index_t m, index_t n, index_t k, float alpha, float beta,
                             bool nan_in_c, auto trans_b) {
    check_same_bits<decltype(trans_b)::value>(m, n, k, alpha, beta, nan_in_c, in_place(alpha, beta),
                                              blocked_with<detail::fp32_kernel>{alpha, beta});
  };
  constexpr index_t lanes = detail::fp32_simd::lanes, mr = detail::fp32_mr, nr = detail::fp32_nr;
  for (const index_t m : {index_t(1), index_t(2), lanes - 1, lanes, lanes + 1, mr - 1, mr})
    for (const index_t n : {index_t(1), index_t(2), index_t(3), index_t(4), index_t(5), nr - 1, nr,
                            nr + 1, index_t(64)})
      for (const index_t k : {index_t(1), index_t(15), index_t(64), detail::fp32_kc}) {
        both_ways(m, n, k, 1.0f, 0.0f, true, std::false_type{});
        both_ways(m, n, k, -0.75f, 1.0f, false, std::true_type{});
        both_ways(m, n, k, 1.5f, 0.5f, false, std::false_type{});
        both_ways(m, n, k, 1.0f, 0.0f, true, std::true_type{});
      }
  // A, B and C each ending against a page that faults when touched: no lane past A's last row
  // or column, no value past B's last, no value of C past its last is read or written.
  for (const bool trans_b : {false, true}) {
    const index_t m = 15, n = 13, k = 64;
    guarded_operands operands(m, n, k);
    auto& [a, b, c, expected] = operands;
    detail::fp32_panels p = detail::make_fp32_panels(m, n, k);
    if (trans_b) {
      REQUIRE(detail::fp32_product_in_place<true>(m, n, k, 1.0f, a.data(), m, b.data(), n, 0.5f,
                                                  c.data(), m, nullptr));
      detail::blocked_product<detail::fp32_kernel, false, true>(
          p, m, n, k, 1.0f, a.data(), m, b.data(), n, 0.5f, expected.data(), m);
    } else {
      REQUIRE(detail::fp32_product_in_place<false>(m, n, k, 1.0f, a.data(), m, b.data(), k, 0.5f,
                                                   c.data(), m, nullptr));
      detail::blocked_product<detail::fp32_kernel, false, false>(
          p, m, n, k, 1.0f, a.data(), m, b.data(), k, 0.5f, expected.data(), m);
    }
    CHECK(std::equal(c.begin(), c.end(), expected.begin()));
  }
  // Other shapes decline and leave C alone: a second panel of rows, a second block of terms, an
  // empty side.
  constexpr index_t kc = detail::fp32_kc;
  std::vector<float> a(std::size_t((mr + 1) * (kc + 1)), 1.0f), b(std::size_t((kc + 1) * 4), 1.0f),
      c(std::size_t((mr + 1) * 4), 7.0f);
  CHECK_FALSE(detail::fp32_product_in_place<false>(mr + 1, 4, 8, 1.0f, a.data(), mr + 1, b.data(),
                                                   8, 0.0f, c.data(), mr + 1, nullptr));
  CHECK_FALSE(detail::fp32_product_in_place<false>(8, 4, kc + 1, 1.0f, a.data(), 8, b.data(),
                                                   kc + 1, 0.0f, c.data(), 8, nullptr));
  CHECK_FALSE(detail::fp32_product_in_place<false>(8, 4, 0, 1.0f, a.data(), 8, b.data(), 1, 0.0f,
                                                   c.data(), 8, nullptr));
  CHECK(std::all_of(c.begin(), c.end(), [](float v) { return v == 7.0f; }));
}

TEST_CASE("an input-gradient product with a large A reads it in place and gives the packed bits") {
  // C = α·Aᵀ·B + β·C with A of fp32_in_place_min_bytes or more runs as Cᵀ = Bᵀ·A with A's columns
  // broadcast in place. It must give what blocked_product (which packs A) gives, bit for bit, and
  // match the double product: n around the 32- and 16-row panels of Bᵀ (AVX2: 16 and 8) and up
  // to one block (mc = 192), m no multiple of the 12- or 6-column tiles, k across several kc = 256
  // blocks, leading dimensions past the rows, α ≠ 1, β ∈ {0, 1, 0.5} and NaN in C at β = 0. In the
  // step this is δx = Wᵀ·δz of office-head's 1024-wide layers.
  namespace detail = host::detail;
  const auto transposed_in_place = [](index_t m, index_t n, index_t k, float alpha, float beta,
                                      bool nan_in_c) {
    CAPTURE(m);
    CAPTURE(n);
    CAPTURE(k);
    CAPTURE(alpha);
    CAPTURE(beta);
    REQUIRE(double(m) * double(k) * sizeof(float) >= detail::fp32_in_place_min_bytes);
    const matrix<float> a(k, m, 3, 5), b(k, n, 1, 7);
    matrix<float> c(m, n, 2, 9);
    if (nan_in_c)
      for (float& v : c.v) v = std::numeric_limits<float>::quiet_NaN();
    matrix<float> packed = c;
    // Buffers as a step's workspace sizes them, for its largest product (here [m, k]·[k, k]):
    // room for all of Bᵀ.
    detail::fp32_panels p = detail::make_fp32_panels(m, k, k);
    REQUIRE(detail::fp32_product_transposed_a_in_place(p, m, n, k, alpha, a.v.data(), a.ld,
                                                       b.v.data(), b.ld, beta, c.v.data(), c.ld));
    detail::blocked_product<detail::fp32_kernel, true, false>(
        p, m, n, k, alpha, a.v.data(), a.ld, b.v.data(), b.ld, beta, packed.v.data(), packed.ld);
    // Every value, padding included (NaN compares unequal, so compare the bits).
    REQUIRE(std::memcmp(c.v.data(), packed.v.data(), c.v.size() * sizeof(float)) == 0);
  };
  for (const index_t n : {2, 7, 9, 16, 17, 32, 48, 64, 70, 192})
    for (const auto& [m, k] : {std::pair<index_t, index_t>{640, 1024}, {131, 1001}}) {
      transposed_in_place(m, n, k, 1.0f, 0.0f, true);
      transposed_in_place(m, n, k, -0.75f, 1.0f, false);
      transposed_in_place(m, n, k, 1.5f, 0.5f, false);
    }
  // Through gemm on 1 and 2 threads (C's rows split), against the double product.
  const std::vector<float> one =
      check_product<float, op::transpose, op::none>(1000, 64, 1024, 1.0f, 0.0f, true, 1);
  CHECK(check_product<float, op::transpose, op::none>(1000, 64, 1024, 1.0f, 0.0f, true, 2) == one);
  check_product<float, op::transpose, op::none>(600, 70, 300, -0.75f, 0.5f, false, 2);
  // A, B and C each ending against a page that faults when touched (AddressSanitizer does not
  // check AVX-512's masked loads and stores): no lane past the last column of any of them is
  // read or written. n = 17 and 70 leave partial 16-wide blocks in both transposes, m = 131 a
  // partial column tile.
  for (const index_t n : {17, 70}) {
    const index_t m = 131, k = 1001;
    guarded_operands operands(m, n, k);
    auto& [a, b, c, expected] = operands;
    detail::fp32_panels p = detail::make_fp32_panels(m, k, k);
    REQUIRE(detail::fp32_product_transposed_a_in_place(p, m, n, k, 1.0f, a.data(), k, b.data(), k,
                                                       0.5f, c.data(), m));
    detail::blocked_product<detail::fp32_kernel, true, false>(
        p, m, n, k, 1.0f, a.data(), k, b.data(), k, 0.5f, expected.data(), m);
    CHECK(std::equal(c.begin(), c.end(), expected.begin()));
  }
  // Where it does not pay or fit, it declines and leaves C alone: an A under the threshold, and
  // more samples than one block of blocked_product's A holds.
  detail::fp32_panels p = detail::make_fp32_panels(1024, 256, 1024);
  std::vector<float> a(1024 * 1024, 1.0f), b(1024 * 256, 1.0f), c(1024 * 256, 7.0f);
  CHECK_FALSE(detail::fp32_product_transposed_a_in_place(p, 100, 64, 1024, 1.0f, a.data(), 1024,
                                                         b.data(), 1024, 0.0f, c.data(), 100));
  static_assert(detail::fp32_mc < 256);
  CHECK_FALSE(detail::fp32_product_transposed_a_in_place(p, 1024, detail::fp32_mc + 1, 1024, 1.0f,
                                                         a.data(), 1024, b.data(), 1024, 0.0f,
                                                         c.data(), 1024));
  // An empty side: nothing to do here (gemm returns before), so it declines too.
  CHECK_FALSE(detail::fp32_product_transposed_a_in_place(p, 1024, 0, 1024, 1.0f, a.data(), 1024,
                                                         b.data(), 1024, 0.0f, c.data(), 1024));
  CHECK(std::all_of(c.begin(), c.end(), [](float v) { return v == 7.0f; }));
}
#endif

}  // namespace backend_gemm_test
