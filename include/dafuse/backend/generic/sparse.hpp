// SPDX-License-Identifier: Apache-2.0
//! @file backend/generic/sparse.hpp
//! @brief The products of a first layer whose input is sparse, without densifying it.
//!
//! A layer In → Out with a sparse input x: [In, n] (one sample per column, nnz non-zeros in all)
//! and a column-major weight W: [Out, In], whose column j is the Out weights of input feature j.
//! Forward: y[:, c] = Σ_{(j, v) in column c} v · W[:, j] — one scaled column of W per non-zero,
//! 2·Out·nnz FLOP instead of 2·Out·In·n. Weight gradient: ∂L/∂W = δz·xᵀ has non-zero columns
//! only at the features some sample uses: ∂L/∂W[:, j] = Σ_{(c, v) with x[j, c] = v} v · δz[:, c],
//! again 2·Out·nnz FLOP. On the Amazon reviews (In = 5000, ~92 non-zeros per row) that is about
//! 1/50 of the dense products. There is no input gradient: the input is data.
#pragma once
#include <dafuse/config.hpp>

#include <dafuse/backend/generic/simd.hpp>

#include <dafuse/core/buffer.hpp>
#include <dafuse/core/meta.hpp>

#include <Eigen/Core>

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <utility>

namespace dafuse::backend::generic {

namespace detail {
//! Non-zeros ahead whose column of W (or ∂L/∂W) is prefetched: the columns are at random
//! feature indices, so the hardware prefetcher cannot find them.
inline constexpr index_t sparse_prefetch_distance = 8;

#if DAFUSE_SIMD_AVX512
// ---- fp32 on AVX-512: a block of rows in registers ----------------------------------------------
// Eigen's `yc += v · W[:, j]` (the path for fp64, and without AVX-512) loads and stores y's column
// again for every non-zero beside loading W's. Holding up to 128 rows of the sums (or of δz's
// column) in zmm registers across a column's non-zeros halves the forward: on a batch of the
// Amazon reviews' shape (out = 100, 128 samples, 11.7 k non-zeros, one thread; a throwaway
// program timing these functions) it took 88-91 µs through Eigen and takes 44-48 µs, and the
// weight gradient 85-100 µs against 63-66 µs. Each sum still adds its non-zeros in their order,
// one fused multiply-add each.

//! Rows per register block: 8 zmm of sums, with room left for the loads.
inline constexpr index_t sparse_block_rows = 128;
static_assert(sparse_block_rows % 16 == 0, "a register block is whole zmm of 16 floats");

//! Calls f(std::integral_constant<int, Vectors>, r0, rows) for each block of `out` rows: rows ≤
//! 16·Vectors, the fewest zmm that hold them.
template <class F>
void for_row_blocks(index_t out, F&& f) {
  for (index_t r0 = 0; r0 < out; r0 += sparse_block_rows) {
    const index_t rows = std::min(sparse_block_rows, out - r0);
    [&]<int... V>(std::integer_sequence<int, V...>) {
      // The one Vectors in 1..sparse_block_rows/16 with 16·(Vectors − 1) < rows ≤ 16·Vectors.
      ((rows > 16 * V && rows <= 16 * (V + 1) ? f(std::integral_constant<int, V + 1>{}, r0, rows)
                                              : void()),
       ...);
    }
    (std::make_integer_sequence<int, int(sparse_block_rows / 16)>{});
  }
}

//! Asks for the lines of x[0, rows), 16·(Vectors − 1) < rows ≤ 16·Vectors: a fixed count of
//! requests (prefetch_lines' loop, whose count is known only at run time, cost the forward a
//! third of its time), the last one for the line of x[rows − 1], which an unaligned x reaches.
template <int Vectors, bool ForWrite>
inline void prefetch_rows(const float* x, index_t rows) {
#pragma GCC unroll 8
  for (int i = 0; i < Vectors; ++i) __builtin_prefetch(x + 16 * i, ForWrite ? 1 : 0);
  __builtin_prefetch(x + rows - 1, ForWrite ? 1 : 0);
}

//! One sample's non-zeros: entries [begin, end) of a batch's `indices` and `values`, of `nnz`
//! in the batch (the prefetch looks that far ahead at most).
struct sample_nonzeros {
  const std::int32_t* indices;
  const float* values;
  index_t begin, end, nnz;
};

//! Rows [r0, r0 + rows) of a sample's column of y, 16·(Vectors − 1) < rows ≤ 16·Vectors:
//! y[r0 + i] = Σ round(value) · W[r0 + i, index] over the sample's non-zeros. The sums stay in
//! registers (plain local arrays: held in a struct, GCC kept a copy of them on the stack and stored
//! it on every non-zero); every vector but the last is full, and only the last is loaded and
//! stored with a mask.
template <int Vectors, class Round>
void sparse_forward_block(
    const float* w, index_t out, const sample_nonzeros& x, index_t r0, index_t rows, float* y) {
  constexpr int last = Vectors - 1;
  const __mmask16 tail = first_lanes(rows - 16 * last);
  __m512 sum[Vectors];
#pragma GCC unroll 8
  for (int i = 0; i < Vectors; ++i) sum[i] = _mm512_setzero_ps();
  const auto [indices, values, begin, end, nnz] = x;
  for (index_t k = begin; k < end; ++k) {
    if (k + sparse_prefetch_distance < nnz)
      prefetch_rows<Vectors, false>(w + index_t(indices[k + sparse_prefetch_distance]) * out + r0,
                                    rows);
    const float* wj = w + index_t(indices[k]) * out + r0;
    const __m512 v = _mm512_set1_ps(Round::round(values[k]));
#pragma GCC unroll 8
    for (int i = 0; i < last; ++i)
      sum[i] = _mm512_fmadd_ps(v, _mm512_loadu_ps(wj + 16 * i), sum[i]);
    sum[last] = _mm512_fmadd_ps(v, _mm512_maskz_loadu_ps(tail, wj + 16 * last), sum[last]);
  }
#pragma GCC unroll 8
  for (int i = 0; i < last; ++i) _mm512_storeu_ps(y + r0 + 16 * i, sum[i]);
  _mm512_mask_storeu_ps(y + r0 + 16 * last, tail, sum[last]);
}

//! dW[r0 + i, index] += round(value) · δz[r0 + i] over one sample's non-zeros, whose δz is
//! `dz`: its rows [r0, r0 + rows) held in registers, as above.
template <int Vectors, class Round>
void sparse_gradient_block(
    const float* dz, index_t out, const sample_nonzeros& x, index_t r0, index_t rows, float* dw) {
  constexpr int last = Vectors - 1;
  const __mmask16 tail = first_lanes(rows - 16 * last);
  __m512 d[Vectors];
#pragma GCC unroll 8
  for (int i = 0; i < last; ++i) d[i] = _mm512_loadu_ps(dz + r0 + 16 * i);
  d[last] = _mm512_maskz_loadu_ps(tail, dz + r0 + 16 * last);
  const auto [indices, values, begin, end, nnz] = x;
  for (index_t k = begin; k < end; ++k) {
    if (k + sparse_prefetch_distance < nnz)
      prefetch_rows<Vectors, true>(dw + index_t(indices[k + sparse_prefetch_distance]) * out + r0,
                                   rows);
    float* dwj = dw + index_t(indices[k]) * out + r0;
    const __m512 v = _mm512_set1_ps(Round::round(values[k]));
#pragma GCC unroll 8
    for (int i = 0; i < last; ++i)
      _mm512_storeu_ps(dwj + 16 * i, _mm512_fmadd_ps(v, d[i], _mm512_loadu_ps(dwj + 16 * i)));
    _mm512_mask_storeu_ps(
        dwj + 16 * last, tail,
        _mm512_fmadd_ps(v, d[last], _mm512_maskz_loadu_ps(tail, dwj + 16 * last)));
  }
}
#endif
}  // namespace detail

//! y[:, c] = Σ round(v) · W[:, j] over column c's non-zeros (j, v); y is [out, x.cols] and is
//! overwritten. `Round` turns a stored value into the step's format (identity in fp32).
template <class Round, class T>
void sparse_input_product(const T* w, index_t out, sparse_matrix_view<const T> x, T* y) {
  const index_t nnz = x.nnz();
#if DAFUSE_SIMD_AVX512
  if constexpr (std::is_same_v<T, float>) {
    for (index_t c = 0; c < x.cols; ++c)
      detail::for_row_blocks(out, [&](auto vectors, index_t r0, index_t rows) {
        detail::sparse_forward_block<decltype(vectors)::value, Round>(
            w, out, {x.indices, x.values, x.col_begin(c), x.col_begin(c + 1), nnz}, r0, rows,
            y + c * out);
      });
  } else
#endif
  {
    using vector = Eigen::Matrix<T, Eigen::Dynamic, 1>;
    for (index_t c = 0; c < x.cols; ++c) {
      Eigen::Map<vector> yc(y + c * out, out);
      yc.setZero();
      for (index_t k = x.col_begin(c), end = x.col_begin(c + 1); k < end; ++k) {
        if (k + detail::sparse_prefetch_distance < nnz)
          detail::prefetch_lines<false>(
              w + index_t(x.indices[k + detail::sparse_prefetch_distance]) * out, out);
        yc += Round::round(x.values[k]) *
              Eigen::Map<const vector>(w + index_t(x.indices[k]) * out, out);
      }
    }
  }
}

//! dW[:, j] += Σ round(v) · δz[:, c] over every non-zero (j, v) of every column c. dW must hold
//! zeros in the columns x uses (the step clears the previous batch's columns): only those are
//! written, the others stay zero. dz and dw do not overlap (the AVX-512 path reads a block of δz
//! once, before the non-zeros that write dW).
template <class Round, class T>
void sparse_weight_gradient(const T* dz, index_t out, sparse_matrix_view<const T> x, T* dw) {
  const index_t nnz = x.nnz();
#if DAFUSE_SIMD_AVX512
  if constexpr (std::is_same_v<T, float>) {
    for (index_t c = 0; c < x.cols; ++c)
      detail::for_row_blocks(out, [&](auto vectors, index_t r0, index_t rows) {
        detail::sparse_gradient_block<decltype(vectors)::value, Round>(
            dz + c * out, out, {x.indices, x.values, x.col_begin(c), x.col_begin(c + 1), nnz}, r0,
            rows, dw);
      });
  } else
#endif
  {
    using vector = Eigen::Matrix<T, Eigen::Dynamic, 1>;
    for (index_t c = 0; c < x.cols; ++c) {
      const Eigen::Map<const vector> dzc(dz + c * out, out);
      for (index_t k = x.col_begin(c), end = x.col_begin(c + 1); k < end; ++k) {
        if (k + detail::sparse_prefetch_distance < nnz)
          detail::prefetch_lines<true>(
              dw + index_t(x.indices[k + detail::sparse_prefetch_distance]) * out, out);
        Eigen::Map<vector>(dw + index_t(x.indices[k]) * out, out) +=
            Round::round(x.values[k]) * dzc;
      }
    }
  }
}

}  // namespace dafuse::backend::generic
