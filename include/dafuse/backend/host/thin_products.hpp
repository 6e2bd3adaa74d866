// SPDX-License-Identifier: Apache-2.0
//! @file backend/host/thin_products.hpp
//! @brief Products with a side of 1 (m, n or k = 1) as plain loops, not padded to a kernel's tiles.
#pragma once
#include <dafuse/config.hpp>

#include <dafuse/backend/host/partition.hpp>
#include <dafuse/backend/host/simd.hpp>
#include <dafuse/backend/host/tuning.hpp>
#include <dafuse/core/meta.hpp>

#include <algorithm>

namespace dafuse::backend::host {

namespace detail {
// ---- Products with a side of 1 ----------------------------------------------------------------
// A layer with one output (every discriminator's last) makes products with m = 1 (its forward
// and its weight gradient) and k = 1 (its input gradient, an outer product). The blocked kernel
// would pad such a product to whole [32, 12] tiles and pack both operands for it. `load` is what a
// product does to each operand value as it reads it: nothing, or gemm_bf16's rounding.

//! C(0, j) = α·x·y(:, j) + β·C(0, j) for j < n: a row x[k] (x(l) at x[l·xs]) times a matrix
//! y[k, n] (y(l, j) at y[l·yl + j·yj]); C(0, j) at c[j·cs]. β = 0 does not read C.
template <class T, class Load>
void row_times_matrix(index_t k,
                      index_t n,
                      T alpha,
                      const T* x,
                      index_t xs,
                      const T* y,
                      index_t yl,
                      index_t yj,
                      T beta,
                      T* c,
                      index_t cs,
                      Load load) {
  const auto store = [&](index_t j, T sum) {
    c[j * cs] = beta == T(0) ? alpha * sum : alpha * sum + beta * c[j * cs];
  };
  constexpr index_t lanes = index_t(64 / sizeof(T));  // one 512-bit register of sums
  if (yl == 1 && xs == 1) {
    // Columns of y are contiguous: one dot product per j, in `lanes` partial sums added in a fixed
    // order (the result does not depend on the thread or the call).
    for (index_t j = 0; j < n; ++j) {
      const T* yc = y + j * yj;
      T part[lanes] = {};
      const index_t whole = k - k % lanes;
      for (index_t l = 0; l < whole; l += lanes)
        for (index_t u = 0; u < lanes; ++u) part[u] += load(x[l + u]) * load(yc[l + u]);
      T sum = T(0);
      for (index_t l = whole; l < k; ++l) sum += load(x[l]) * load(yc[l]);
      for (index_t u = 0; u < lanes; ++u) sum += part[u];
      store(j, sum);
    }
    return;
  }
  // Otherwise a chunk of C's sums at a time, adding x(l)·y(l, :) for each l in order (rows of y
  // are contiguous when yj = 1, the case this serves: a weight gradient δz·xᵀ of one output).
  constexpr index_t chunk = 256;
  for (index_t j0 = 0; j0 < n; j0 += chunk) {
    const index_t count = std::min(chunk, n - j0);
    T sums[chunk] = {};
    for (index_t l = 0; l < k; ++l) {
      const T xl = load(x[l * xs]);
      const T* yr = y + l * yl + j0 * yj;
      if (yj == 1)
        for (index_t j = 0; j < count; ++j) sums[j] += xl * load(yr[j]);
      else
        for (index_t j = 0; j < count; ++j) sums[j] += xl * load(yr[j * yj]);
    }
    for (index_t j = 0; j < count; ++j) store(j0 + j, sums[j]);
  }
}

//! C[m, n] = α·op(A)·op(B) + β·C when is_thin(m, n, k), on the calling thread. β = 0 does not
//! read C.
template <op OpA, op OpB, class T, class Load>
void thin_product(index_t m,
                  index_t n,
                  index_t k,
                  T alpha,
                  const T* a,
                  index_t lda,
                  const T* b,
                  index_t ldb,
                  T beta,
                  T* c,
                  index_t ldc,
                  Load load) {
  constexpr bool ta = OpA == op::transpose, tb = OpB == op::transpose;
  // op(A)(i, l) = a[i·ai + l·al]; op(B)(l, j) = b[l·bl + j·bj].
  const index_t ai = ta ? lda : 1, al = ta ? 1 : lda;
  const index_t bl = tb ? ldb : 1, bj = tb ? 1 : ldb;
  if (k == 1) {
    // The outer product C(i, j) = α·(A(i)·B(j)) + β·C(i, j), a column of C at a time. β and
    // A's stride are tested outside the loops, which are then plain vector loops. C is usually
    // a gradient both cores read in the last step, and each line's write waits for the other
    // core to drop its copy: its columns are asked for two ahead (prefetch_lines).
    constexpr index_t ahead = outer_product_prefetch_columns;
    for (index_t j = 0; j < std::min(ahead, n); ++j) prefetch_lines<true>(c + j * ldc, m);
    const auto columns = [&](auto a_at) {
      for (index_t j = 0; j < n; ++j) {
        if (j + ahead < n) prefetch_lines<true>(c + (j + ahead) * ldc, m);
        const T bv = load(b[j * bj]);
        T* cj = c + j * ldc;
        if (beta == T(0))
          for (index_t i = 0; i < m; ++i) cj[i] = alpha * (load(a_at(i)) * bv);
        else
          for (index_t i = 0; i < m; ++i) cj[i] = alpha * (load(a_at(i)) * bv) + beta * cj[i];
      }
    };
    if (ai == 1)
      columns([a](index_t i) { return a[i]; });
    else
      columns([a, stride = ai](index_t i) { return a[i * stride]; });
  } else if (m == 1) {
    row_times_matrix(k, n, alpha, a, al, b, bl, bj, beta, c, ldc, load);
  } else {
    // n = 1: Cᵀ = op(B)ᵀ·op(A)ᵀ, a row times a matrix whose (l, i) is op(A)(i, l).
    row_times_matrix(k, m, alpha, b, bl, a, al, ai, beta, c, index_t(1), load);
  }
}

//! thin_product's `load` for a product of the values as stored.
struct as_stored {
  template <class T>
  T operator()(T v) const {
    return v;
  }
};

//! thin_product as gemm() runs it: on the calling thread, or an outer product of at least
//! thin_parallel_values values split by C's columns among up to scratch.threads threads (blocks
//! of whole column tiles), `finish` run on each block by the thread that wrote it. Returns the
//! finishers' shares added in block order. Every value of C comes out the same either way.
//!
//! An outer product does one multiply per value it writes, and C is usually a gradient both cores
//! read in the last step, so its time goes to taking the lines back from the other core: two
//! cores take back their halves at once. (Row blocks would interleave the two cores' writes within
//! every column: see split_product.)
template <op OpA, op OpB, class T, class Load, class Finish>
double split_thin_product(index_t m,
                          index_t n,
                          index_t k,
                          T alpha,
                          const T* a,
                          index_t lda,
                          const T* b,
                          index_t ldb,
                          T beta,
                          T* c,
                          index_t ldc,
                          Load load,
                          const split_scratch<T>& scratch,
                          Finish&& finish) {
  const product_split split =
      k == 1 && m * n >= thin_parallel_values
          ? product_split::even(split_along::columns, n, scratch.threads, scratch.col_tile)
          : product_split::one_thread(m, n);
  return split_product<OpA, OpB>(
      split, m, n, k, a, lda, b, ldb, c, ldc, scratch,
      [&](int, index_t rows, index_t cols, index_t depth, const T* ab, const T* bb, T* cb,
          index_t ldcb, bool, double*) {
        thin_product<OpA, OpB>(rows, cols, depth, alpha, ab, lda, bb, ldb, beta, cb, ldcb, load);
        return false;
      },
      finish);
}
}  // namespace detail

}  // namespace dafuse::backend::host
