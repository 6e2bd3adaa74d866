// SPDX-License-Identifier: Apache-2.0
// Tests for backend/host/gemm_bf16.hpp against a naive product in double on bf16-rounded
// operands: all four op combinations, sizes that are no multiple of any tile, leading dimensions
// larger than the rows, α ≠ 1, β ∈ {0, 1, 0.5}, and NaN in C with β = 0.
#include <dafuse/backend/host/gemm_bf16.hpp>
#include "../check.hpp"

#include <dafuse/core/error.hpp>
#include <dafuse/core/half.hpp>
#include <dafuse/core/rng.hpp>

#include <array>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

namespace backend_gemm_bf16_test {

namespace {

namespace host = dafuse::backend::host;
using dafuse::index_t;
using host::op;

//! A column-major [rows, cols] matrix with leading dimension rows + pad, filled with values in
//! (-2, 2) that mostly need more than bf16's 8 significant bits (so rounding shows); the padding
//! holds a value that would spoil any result that read it.
struct matrix {
  index_t rows, cols, ld;
  std::vector<float> v;
  matrix(index_t r, index_t c, index_t pad, std::uint64_t seed)
      : rows(r), cols(c), ld(r + pad), v(std::size_t(ld * c), 1e30f) {
    dafuse::counter_rng rng(seed, dafuse::rng_stream::user);
    for (index_t j = 0; j < c; ++j)
      for (index_t i = 0; i < r; ++i) v[std::size_t(i + j * ld)] = rng.uniform(-2.0f, 2.0f);
  }
  float at(index_t i, index_t j) const { return v[std::size_t(i + j * ld)]; }
};

//! With `split`, the product runs as it says, the workspace holding room for its partial sums.
template <op OpA, op OpB>
void check_product(index_t m,
                   index_t n,
                   index_t k,
                   float alpha,
                   float beta,
                   bool nan_in_c,
                   int threads = 0,
                   std::optional<host::detail::product_split> split = std::nullopt) {
  CAPTURE(m);
  CAPTURE(n);
  CAPTURE(k);
  CAPTURE(alpha);
  CAPTURE(beta);
  const bool ta = OpA == op::transpose, tb = OpB == op::transpose;
  const matrix a(ta ? k : m, ta ? m : k, 3, 11 + std::uint64_t(m));
  const matrix b(tb ? n : k, tb ? k : n, 5, 23 + std::uint64_t(n));
  matrix c(m, n, 2, 37 + std::uint64_t(k));
  if (nan_in_c)
    for (index_t j = 0; j < n; ++j)
      for (index_t i = 0; i < m; ++i)
        c.v[std::size_t(i + j * c.ld)] = std::numeric_limits<float>::quiet_NaN();
  const matrix c0 = c;

  host::bf16_gemm_workspace ws(m, n, k, threads);
  if (split) {
    // Leave another product's partial sums behind: a partial is written, never added to.
    ws.reserve_partial_sums(m * n);
    std::vector<float> other(c.v.size());
    host::gemm_bf16<OpA, OpB>(ws, m, n, k, 3.0f, a.v.data(), a.ld, b.v.data(), b.ld, 0.0f,
                              other.data(), c.ld, host::no_finish{}, split);
  }
  host::gemm_bf16<OpA, OpB>(ws, m, n, k, alpha, a.v.data(), a.ld, b.v.data(), b.ld, beta,
                            c.v.data(), c.ld, host::no_finish{}, split);

  // Reference: exact products of the bf16 values, summed in double. The error bound is fp32
  // accumulation's: a few units of 2^-24 per term of Σ|a||b|, with k terms at most.
  double worst = 0;
  for (index_t j = 0; j < n; ++j)
    for (index_t i = 0; i < m; ++i) {
      double sum = 0, mag = 0;
      for (index_t l = 0; l < k; ++l) {
        const double x = dafuse::round_to_bf16(ta ? a.at(l, i) : a.at(i, l));
        const double y = dafuse::round_to_bf16(tb ? b.at(j, l) : b.at(l, j));
        sum += x * y;
        mag += std::abs(x * y);
      }
      const double old = beta == 0.0f ? 0.0 : double(beta) * c0.at(i, j);
      const double want = double(alpha) * sum + old;
      const double scale = std::abs(double(alpha)) * mag + std::abs(old) + 1e-30;
      const double got = c.at(i, j);
      REQUIRE(std::isfinite(got));
      worst = std::max(worst, std::abs(got - want) / scale);
    }
  CHECK(worst < 1e-5);
  // The padding below each column of C is untouched.
  for (index_t j = 0; j < n; ++j)
    for (index_t i = m; i < c.ld; ++i)
      CHECK(c.v[std::size_t(i + j * c.ld)] == c0.v[std::size_t(i + j * c.ld)]);
}

template <op OpA, op OpB>
void check_all_sizes() {
  const index_t sizes[] = {1, 3, 17, 33, 100};
  for (index_t m : sizes)
    for (index_t n : sizes)
      for (index_t k : sizes) {
        check_product<OpA, OpB>(m, n, k, 1.0f, 0.0f, false);
        check_product<OpA, OpB>(m, n, k, -0.75f, 1.0f, false);
        check_product<OpA, OpB>(m, n, k, 1.5f, 0.5f, false);
        check_product<OpA, OpB>(m, n, k, 0.5f, 0.0f, true);
      }
  // Sides of 1 run as thin_product, which rounds each operand as it reads it.
  for (const auto& [m, n, k] : {std::array<index_t, 3>{1, 600, 37}, {600, 1, 37}, {600, 300, 1}}) {
    check_product<OpA, OpB>(m, n, k, 0.5f, 0.0f, true);
    check_product<OpA, OpB>(m, n, k, 1.5f, 0.5f, false);
    // The outer product is split by columns on more threads (thin_parallel_values).
    check_product<OpA, OpB>(m, n, k, 1.5f, 0.5f, false, 3);
  }
  // Larger than one block of every loop (mc = 256, kc = 512, nc = 3072 on the native path),
  // with an odd k.
  check_product<OpA, OpB>(300, 41, 1031, 0.25f, 0.5f, false);
  // Above gemm_parallel_flops: C split over two threads along its longer side (rows, then
  // columns), each thread with its buffers.
  check_product<OpA, OpB>(301, 250, 451, 1.0f, 0.0f, true, 2);
  check_product<OpA, OpB>(250, 301, 451, 1.0f, 0.0f, true, 2);
  // Split along k (a layer's forward product): partial sums added by columns, β applied once.
  for (int threads : {2, 3}) {
    const auto split =
        host::detail::product_split::even(host::split_along::depth, 451, threads, 32);
    check_product<OpA, OpB>(301, 70, 451, 1.0f, 0.0f, true, threads, split);
    check_product<OpA, OpB>(301, 70, 451, -0.75f, 0.5f, false, threads, split);
  }
}

}  // namespace

TEST_CASE("gemm_bf16 matches a double product of bf16-rounded operands for A·B") {
  check_all_sizes<op::none, op::none>();
}
TEST_CASE("gemm_bf16 matches a double product of bf16-rounded operands for A·Bᵀ") {
  check_all_sizes<op::none, op::transpose>();
}
TEST_CASE("gemm_bf16 matches a double product of bf16-rounded operands for Aᵀ·B") {
  check_all_sizes<op::transpose, op::none>();
}
TEST_CASE("gemm_bf16 matches a double product of bf16-rounded operands for Aᵀ·Bᵀ") {
  check_all_sizes<op::transpose, op::transpose>();
}

TEST_CASE("gemm_bf16 rounds its operands to bf16 and accumulates in fp32") {
  // 1 + 2^-9 rounds to 1 in bf16 (7 fraction bits); 2^-9 alone is exact. Summed over k = 64
  // terms in fp32, the result is exact, so a product that skipped the rounding would show.
  const index_t k = 64;
  std::vector<float> a(k, 1.0f + 0x1p-9f), b(k, 1.0f);
  a[0] = 0x1p-9f;
  float c = 0;
  host::bf16_gemm_workspace ws(1, 1, k);
  host::gemm_bf16<op::none, op::none>(ws, 1, 1, k, 1.0f, a.data(), 1, b.data(), k, 0.0f, &c, 1);
  CHECK(c == float(k - 1) + 0x1p-9f);
}

//! A finisher that sums the squares of its block and says so, counting its calls.
struct squares_probe {
  static constexpr bool sums_squares = true;
  std::atomic<int>* calls;
  double operator()(float* blk, index_t rows, index_t cols, index_t ld) const {
    ++*calls;
    double sum = 0;
    for (index_t j = 0; j < cols; ++j)
      for (index_t i = 0; i < rows; ++i) sum += double(blk[i + j * ld]) * blk[i + j * ld];
    return sum;
  }
};

TEST_CASE("gemm_bf16 adds the squares for a finisher that sums them as the kernel stores C") {
  // partition.hpp's squares_finisher: the bf16 kernel sums the squares of C's final values (two
  // blocks of terms here) from its registers, and the finisher is not called; so does the
  // portable path where its fp32 product runs on dafuse's fp32 kernel (AVX2 + FMA), and
  // elsewhere it calls the finisher.
  for (int threads : {1, 2}) {
    CAPTURE(threads);
    const index_t m = 301, n = 250, k = 700;
    const matrix a(m, k, 3, 41), b(k, n, 5, 43);
    matrix c(m, n, 2, 47);
    host::bf16_gemm_workspace ws(m, n, k, threads);
    std::atomic<int> calls{0};
    const double returned =
        host::gemm_bf16<op::none, op::none>(ws, m, n, k, 0.5f, a.v.data(), a.ld, b.v.data(), b.ld,
                                            0.25f, c.v.data(), c.ld, squares_probe{&calls});
    double expected = 0;
    for (index_t j = 0; j < n; ++j)
      for (index_t i = 0; i < m; ++i) expected += double(c.at(i, j)) * c.at(i, j);
    CHECK(returned == doctest::Approx(expected).epsilon(1e-5));
    if (host::bf16_products_native || host::fp32_products_native)
      CHECK(calls.load() == 0);
    else
      CHECK(calls.load() > 0);
  }
}

TEST_CASE("gemm_bf16 with k = 0 scales C by beta") {
  host::bf16_gemm_workspace ws(2, 2, 1);
  std::vector<float> c = {1, 2, 3, 4};
  host::gemm_bf16<op::none, op::none>(ws, 2, 2, 0, 1.0f, nullptr, 2, nullptr, 1, 0.5f, c.data(), 2);
  CHECK(c == std::vector<float>{0.5f, 1, 1.5f, 2});
}

TEST_CASE("gemm_bf16 with an unsized workspace or a product too large for it throws") {
  host::bf16_gemm_workspace unsized;
  std::vector<float> a(16, 1.0f), b(16, 1.0f), c(16, 0.0f);
  CHECK_THROWS_AS((host::gemm_bf16<op::none, op::none>(unsized, 2, 2, 2, 1.0f, a.data(), 2,
                                                       b.data(), 2, 0.0f, c.data(), 2)),
                  dafuse::error);
  // A moved-from workspace has no buffers left: refused too, with a split given or not.
  host::bf16_gemm_workspace moved(4, 4, 4, 2);
  host::bf16_gemm_workspace taken = std::move(moved);
  CHECK_FALSE(moved.sized());
  CHECK(taken.sized());
  CHECK_THROWS_AS((host::gemm_bf16<op::none, op::none>(moved, 2, 2, 2, 1.0f, a.data(), 2, b.data(),
                                                       2, 0.0f, c.data(), 2)),
                  dafuse::error);
  CHECK_THROWS_AS(
      (host::gemm_bf16<op::none, op::none>(
          moved, 2, 2, 2, 1.0f, a.data(), 2, b.data(), 2, 0.0f, c.data(), 2, host::no_finish{},
          host::detail::product_split::even(host::split_along::rows, 2, 2, 1))),
      dafuse::error);
  host::bf16_gemm_workspace small(2, 2, 2);
  CHECK_THROWS_AS((host::gemm_bf16<op::none, op::none>(small, 3, 2, 2, 1.0f, a.data(), 3, b.data(),
                                                       2, 0.0f, c.data(), 3)),
                  dafuse::error);
}

TEST_CASE("bf16_products_native says which path is compiled in") {
#if defined(__AVX512BF16__) && !defined(__CUDACC__)
  CHECK(host::bf16_products_native);
#else
  CHECK_FALSE(host::bf16_products_native);
#endif
}

}  // namespace backend_gemm_bf16_test
