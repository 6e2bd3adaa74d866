// SPDX-License-Identifier: Apache-2.0
//! @file backend/host/sparse.hpp
//! @brief The products of a first layer whose input is sparse, without densifying it.
//!
//! A layer In → Out with a sparse input x: [In, n] (one sample per column, nnz non-zeros in all)
//! and a column-major weight W: [Out, In], whose column j is the Out weights of input feature j.
//! Forward: y[:, c] = Σ_{(j, v) in column c} v · W[:, j] — one scaled column of W per non-zero,
//! 2·Out·nnz FLOP instead of 2·Out·In·n. Weight gradient: ∂L/∂W = δz·xᵀ has non-zero columns
//! only at the features some sample uses: ∂L/∂W[:, j] = Σ_{(c, v) with x[j, c] = v} v · δz[:, c],
//! again 2·Out·nnz FLOP. On the Amazon reviews (In = 5000, ~92 non-zeros per row) that is about
//! 1/50 of the dense products. There is no input gradient: the input is data.
//!
//! On several threads the batch is dealt by feature (sparse_feature_parts): W's columns are dealt
//! to the parts in blocks of about 64 KiB, and each thread runs both products on its part's
//! non-zeros only. So each core reads and writes only its own columns of W, of ∂L/∂W and of the
//! optimizer state, every step: on these 2-core machines a line written by one core after the
//! other has read it costs a slow invalidation (docs/benchmarks.md, "Cache lines both cores
//! hold"), which is why splitting the samples, or W's rows, made the step slower. The forward then
//! adds the parts' partial sums of y; the weight gradient needs no sum, since all of a feature's
//! non-zeros are in its part, in the batch's order, so it is bitwise the one-thread gradient.
#pragma once
#include <dafuse/config.hpp>

#include <dafuse/backend/host/simd.hpp>
#include <dafuse/backend/host/team.hpp>
#include <dafuse/backend/host/tuning.hpp>

#include <dafuse/core/buffer.hpp>
#include <dafuse/core/error.hpp>
#include <dafuse/core/meta.hpp>

#include <Eigen/Core>

#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace dafuse::backend::host {

namespace detail {
#if DAFUSE_SIMD_AVX512 || DAFUSE_SIMD_AVX2
// ---- fp32: a block of rows in registers -------------------------------------------------------
// Eigen's `yc += v · W[:, j]` (the path for fp64, and without AVX2) loads and stores y's column
// again for every non-zero beside loading W's. Holding up to sparse_block_vectors registers of
// the sums (or of δz's column) across a column's non-zeros saves those loads and stores. Each sum
// still adds its non-zeros in their order, one fused multiply-add each. The columns of W are at
// random feature indices, where the hardware prefetcher cannot find them: the code asks for each
// sparse_prefetch_distance non-zeros ahead.
#if DAFUSE_SIMD_AVX512
using sparse_simd = avx512;
inline constexpr int sparse_block_vectors = sparse_block_vectors_avx512;
#else
using sparse_simd = avx2;
inline constexpr int sparse_block_vectors = sparse_block_vectors_avx2;
#endif
inline constexpr index_t sparse_block_rows = sparse_simd::lanes * sparse_block_vectors;

//! Calls f(std::integral_constant<int, Vectors>, std::bool_constant<Partial>, r0, rows) for each
//! block of `out` rows: rows ≤ lanes·Vectors, the fewest registers that hold them, Partial when
//! the last of them is not full (only then is it loaded and stored through a mask).
template <class F>
void for_row_blocks(index_t out, F&& f) {
  constexpr index_t lanes = sparse_simd::lanes;
  for (index_t r0 = 0; r0 < out; r0 += sparse_block_rows) {
    const index_t rows = std::min(sparse_block_rows, out - r0);
    const auto call = [&](auto vectors) {
      if (rows % lanes == 0)
        f(vectors, std::false_type{}, r0, rows);
      else
        f(vectors, std::true_type{}, r0, rows);
    };
    [&]<int... V>(std::integer_sequence<int, V...>) {
      // The one Vectors in 1..sparse_block_vectors with lanes·(Vectors − 1) < rows ≤ lanes·Vectors.
      ((rows > lanes * V && rows <= lanes * (V + 1) ? call(std::integral_constant<int, V + 1>{})
                                                    : void()),
       ...);
    }
    (std::make_integer_sequence<int, sparse_block_vectors>{});
  }
}

//! Asks for the lines of x[0, rows), lanes·(Vectors − 1) < rows ≤ lanes·Vectors: a fixed count
//! of requests (a loop whose count is known only at run time, as prefetch_lines', slowed the
//! forward), one per 64-byte line, the last one for the line of x[rows − 1], which an unaligned x
//! reaches.
template <int Vectors, bool ForWrite>
inline void prefetch_rows(const float* x, index_t rows) {
  constexpr int per_line = 64 / (4 * sparse_simd::lanes);  // registers per cache line
#pragma GCC unroll 8
  for (int i = 0; i < Vectors; i += per_line)
    __builtin_prefetch(x + sparse_simd::lanes * i, ForWrite ? 1 : 0);
  __builtin_prefetch(x + rows - 1, ForWrite ? 1 : 0);
}

//! One sample's non-zeros: entries [begin, end) of a batch's `indices` and `values`, of `nnz`
//! in the batch (the prefetch looks that far ahead at most).
struct sample_nonzeros {
  const std::int32_t* indices;
  const float* values;
  index_t begin, end, nnz;
};

//! Rows [r0, r0 + rows) of a sample's column of y, lanes·(Vectors − 1) < rows ≤ lanes·Vectors:
//! y[r0 + i] = Σ round(value) · W[r0 + i, index] over the sample's non-zeros. The sums stay in
//! registers (plain local arrays: held in a struct, GCC kept a copy of them on the stack and stored
//! it on every non-zero); every vector but the last is full, and the last is loaded and stored
//! through a mask only when Partial.
template <int Vectors, bool Partial, class Round>
void sparse_forward_block(
    const float* w, index_t out, const sample_nonzeros& x, index_t r0, index_t rows, float* y) {
  using V = sparse_simd;
  constexpr int last = Vectors - 1;
  const typename V::mask tail = V::first_lanes(rows - V::lanes * last);
  typename V::reg sum[Vectors];
#pragma GCC unroll 16
  for (int i = 0; i < Vectors; ++i) sum[i] = V::setzero();
  const auto [indices, values, begin, end, nnz] = x;
  for (index_t k = begin; k < end; ++k) {
    if (k + sparse_prefetch_distance < nnz)
      prefetch_rows<Vectors, false>(w + index_t(indices[k + sparse_prefetch_distance]) * out + r0,
                                    rows);
    const float* wj = w + index_t(indices[k]) * out + r0;
    const typename V::reg v = V::set1(Round::round(values[k]));
#pragma GCC unroll 16
    for (int i = 0; i < last; ++i) sum[i] = V::fmadd(v, V::loadu(wj + V::lanes * i), sum[i]);
    sum[last] = V::fmadd(
        v, Partial ? V::maskz_loadu(tail, wj + V::lanes * last) : V::loadu(wj + V::lanes * last),
        sum[last]);
  }
#pragma GCC unroll 16
  for (int i = 0; i < last; ++i) V::storeu(y + r0 + V::lanes * i, sum[i]);
  if constexpr (Partial)
    V::mask_storeu(y + r0 + V::lanes * last, tail, sum[last]);
  else
    V::storeu(y + r0 + V::lanes * last, sum[last]);
}

//! dW[r0 + i, index] += round(value) · δz[r0 + i] over one sample's non-zeros, whose δz is
//! `dz`: its rows [r0, r0 + rows) held in registers, as above.
template <int Vectors, bool Partial, class Round>
void sparse_gradient_block(
    const float* dz, index_t out, const sample_nonzeros& x, index_t r0, index_t rows, float* dw) {
  using V = sparse_simd;
  constexpr int last = Vectors - 1;
  const typename V::mask tail = V::first_lanes(rows - V::lanes * last);
  typename V::reg d[Vectors];
#pragma GCC unroll 16
  for (int i = 0; i < last; ++i) d[i] = V::loadu(dz + r0 + V::lanes * i);
  d[last] = Partial ? V::maskz_loadu(tail, dz + r0 + V::lanes * last)
                    : V::loadu(dz + r0 + V::lanes * last);
  const auto [indices, values, begin, end, nnz] = x;
  for (index_t k = begin; k < end; ++k) {
    if (k + sparse_prefetch_distance < nnz)
      prefetch_rows<Vectors, true>(dw + index_t(indices[k + sparse_prefetch_distance]) * out + r0,
                                   rows);
    float* dwj = dw + index_t(indices[k]) * out + r0;
    const typename V::reg v = V::set1(Round::round(values[k]));
#pragma GCC unroll 16
    for (int i = 0; i < last; ++i)
      V::storeu(dwj + V::lanes * i, V::fmadd(v, d[i], V::loadu(dwj + V::lanes * i)));
    if constexpr (Partial)
      V::mask_storeu(dwj + V::lanes * last, tail,
                     V::fmadd(v, d[last], V::maskz_loadu(tail, dwj + V::lanes * last)));
    else
      V::storeu(dwj + V::lanes * last, V::fmadd(v, d[last], V::loadu(dwj + V::lanes * last)));
  }
}
#endif
}  // namespace detail

//! y[:, c] = Σ round(v) · W[:, j] over column c's non-zeros (j, v); y is [out, x.cols] and is
//! overwritten. `Round` turns a stored value into the step's format (identity in fp32).
template <class Round, class T>
void sparse_input_product(const T* w, index_t out, sparse_matrix_view<const T> x, T* y) {
  const index_t nnz = x.nnz();
#if DAFUSE_SIMD_AVX512 || DAFUSE_SIMD_AVX2
  if constexpr (std::is_same_v<T, float>) {
    for (index_t c = 0; c < x.cols; ++c)
      detail::for_row_blocks(out, [&](auto vectors, auto partial, index_t r0, index_t rows) {
        detail::sparse_forward_block<decltype(vectors)::value, decltype(partial)::value, Round>(
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
//! written, the others stay zero. dz and dw do not overlap (the vector path reads a block of δz
//! once, before the non-zeros that write dW).
template <class Round, class T>
void sparse_weight_gradient(const T* dz, index_t out, sparse_matrix_view<const T> x, T* dw) {
  const index_t nnz = x.nnz();
#if DAFUSE_SIMD_AVX512 || DAFUSE_SIMD_AVX2
  if constexpr (std::is_same_v<T, float>) {
    for (index_t c = 0; c < x.cols; ++c)
      detail::for_row_blocks(out, [&](auto vectors, auto partial, index_t r0, index_t rows) {
        detail::sparse_gradient_block<decltype(vectors)::value, decltype(partial)::value, Round>(
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

//! `sum` plus finish(column, out, 1, out) over the columns of ∂L/∂W at the features x lists as used
//! (x.used_rows), added in that order: how a sparse weight gradient is rounded and its squared norm
//! summed, column by column, by the thread that wrote it.
template <class T, class Finish>
double finish_used_columns(
    T* dw, index_t out, const sparse_matrix_view<const T>& x, Finish&& finish, double sum = 0) {
  for (index_t k = 0; k < x.used_count; ++k)
    sum += finish(dw + index_t(x.used_rows[k]) * out, out, 1, out);
  return sum;
}

//! Columns of W per block when a sparse layer of `features` inputs and `out` outputs is dealt
//! among `parts` (see sparse_feature_parts): about sparse_deal_block_bytes of W, in whole sets of
//! 16 columns (16·out values: whole 64-byte lines for fp32 and fp64 whatever `out` is, so no two
//! threads write one line of W, of ∂L/∂W or of the optimizer state), and at least two blocks per
//! part. Much smaller blocks cost the update: near a block's edge the caches' prefetchers read
//! lines of the neighbouring block, which the other core then has to take back before it writes
//! them.
template <class T>
index_t sparse_deal_block(index_t features, index_t out, int parts) {
  constexpr index_t unit = 16, target_bytes = detail::sparse_deal_block_bytes;
  const index_t by_bytes = (target_bytes / (out * index_t(sizeof(T))) + unit - 1) / unit * unit;
  const index_t by_parts = features / (2 * index_t(parts)) / unit * unit;
  return std::max(unit, std::min(by_bytes, by_parts));
}

template <class T>
class sparse_feature_parts;

//! A batch dealt by sparse_feature_parts::deal: what the first layer's products take instead of a
//! sparse_matrix_view to run on several threads. `rows` and `cols` as the batch's view.
template <class T>
struct dealt_sparse_batch {
  sparse_feature_parts<T>* parts = nullptr;
  index_t rows = 0, cols = 0;
};

//! A sparse batch dealt among `parts` threads by feature (see the file comment), with the room for
//! it allocated once. The features are dealt in blocks of `block` columns of W, back and forth
//! (dealt_owner in team.hpp): a vocabulary is usually sorted by frequency, and halves would give
//! one thread most of the non-zeros. Each part holds its non-zeros in the batch's order, the
//! features it uses (the weight gradient writes, rounds and sums only those columns, and the next
//! batch clears them), and, from the second part on, the forward's partial sums.
template <class T>
class sparse_feature_parts {
 public:
  sparse_feature_parts() = default;
  //! Room for batches of up to `max_cols` samples and `max_nnz` non-zeros over `features`
  //! features, for a layer of `out` outputs, dealt among `parts` (1 to 255) in blocks of `block`
  //! features (a multiple of 16: sparse_deal_block).
  sparse_feature_parts(
      index_t features, index_t out, index_t max_cols, index_t max_nnz, int parts, index_t block)
      : features_(features), out_(out), max_cols_(max_cols), block_(block), parts_(parts) {
    if (parts < 1 || parts > 255)
      fail("sparse_feature_parts", "parts", "1 to 255", std::to_string(parts));
    if (block < 16 || block % 16 != 0)
      fail("sparse_feature_parts", "block", "a positive multiple of 16 features",
           std::to_string(block));
    owner_.resize(std::size_t(features));
    for (index_t j = 0; j < features; ++j) owner_[std::size_t(j)] = dealt_owner(j / block, parts);
    // Each part's rows of the arrays below start on a 64-byte line of their own (the buffers are
    // so aligned): they are written by the part's thread.
    offsets_stride_ = std::size_t(max_cols + 1 + 15) / 16 * 16;
    feature_stride_ = std::size_t(features + 63) / 64 * 64;
    offsets_ = storage<std::int32_t>(std::size_t(parts) * offsets_stride_, 0);
    // Each part's run starts on a line boundary of either array (16 entries: 64 or 128 bytes),
    // with 16 spare entries: filling writes up to 16 entries past the part's last non-zero.
    indices_ = storage<std::int32_t>(std::size_t(max_nnz + parts * (2 * segment_align)));
    values_ = storage<T>(indices_.size());
    used_ = storage<std::int32_t>(std::size_t(parts) * feature_stride_);
    marks_ = storage<std::uint8_t>(std::size_t(parts) * feature_stride_, 0);
    partials_ = storage<T>(std::size_t(parts - 1) * std::size_t(out * max_cols));
    state_.resize(std::size_t(parts));
  }

  int parts() const { return parts_; }
  //! Features per block.
  index_t block() const { return block_; }
  //! The part that owns feature j.
  int owner(index_t j) const { return owner_[std::size_t(j)]; }

  //! Deals x (a checked batch: [features, ≤ max_cols], ≤ max_nnz non-zeros, every index in
  //! range) among the parts as one job on up to parts() threads (run_on_team). Before it fills
  //! part p, p's thread calls clear(j) for each feature j that p's previous batch used.
  template <class Clear>
  dealt_sparse_batch<T> deal(const sparse_matrix_view<const T>& x, Clear&& clear) {
    cols_ = x.cols;
    run_on_team(parts_, [&](int me, int team, auto&& sync) {
      for (int p = me; p < parts_; p += team) state_[std::size_t(p)].count = count(x, p);
      sync();  // every part's count is known: each part's run starts after the ones before it
      for (int p = me; p < parts_; p += team) fill(x, p, clear);
    });
    return {this, x.rows, x.cols};
  }

  //! Part p of the batch dealt last: a CSR view over all features that holds p's non-zeros and
  //! lists the features p uses.
  sparse_matrix_view<const T> part(int p) const {
    const part_state& s = state_[std::size_t(p)];
    return {offsets_.data() + std::size_t(p) * offsets_stride_,
            indices_.data() + s.begin,
            values_.data() + s.begin,
            features_,
            cols_,
            used_.data() + std::size_t(p) * feature_stride_,
            s.used};
  }

  //! Part p's partial sums of y (p ≥ 1; part 0 writes y itself): [out, cols].
  T* partial(int p) {
    return partials_.data() + std::size_t(p - 1) * std::size_t(out_ * max_cols_);
  }
  //! Where part p's share of a sum over the parts goes (each in a line of its own).
  double& part_sum(int p) { return state_[std::size_t(p)].sum; }

  //! Bytes of the room allocated for batches.
  std::size_t memory_bytes() const {
    return (owner_.size() + offsets_.size() + indices_.size() + used_.size()) * 4 +
           values_.size() * sizeof(T) + marks_.size() + partials_.size() * sizeof(T) +
           state_.size() * sizeof(part_state);
  }

 private:
  static constexpr index_t segment_align = 16, spare = 16;
  static_assert(spare + segment_align - 1 <= 2 * segment_align, "the room reserved per part");
  struct alignas(64) part_state {
    index_t count = 0;  //!< non-zeros
    index_t begin = 0;  //!< where its run starts in indices_/values_
    index_t used = 0;   //!< features used
    double sum = 0;     //!< part_sum
  };

  // Part p's non-zeros in x.
  index_t count(const sparse_matrix_view<const T>& x, int p) const {
    const std::int32_t* owner = owner_.data();
    const std::int32_t* idx = x.indices;
    const index_t nnz = x.nnz();
    index_t n = 0, k = 0;
#if DAFUSE_SIMD_AVX512
    // 16 non-zeros at a time: their owners gathered from the table, compared with p, counted.
    const __m512i part = _mm512_set1_epi32(p);
    for (; k < nnz; k += 16) {
      const __mmask16 lanes = detail::first_lanes(nnz - k);
      const __m512i j = _mm512_maskz_loadu_epi32(lanes, idx + k);
      const __m512i owners = _mm512_mask_i32gather_epi32(part, lanes, j, owner, 4);
      n += __builtin_popcount(_mm512_mask_cmpeq_epi32_mask(lanes, owners, part));
    }
#endif
    for (; k < nnz; ++k) n += owner[idx[k]] == p;
    return n;
  }

  // Copies p's non-zeros and lists the features it uses. No branch on whose a non-zero is (the
  // owner of a vocabulary's features is a coin toss to the branch predictor): every entry is
  // written, and the cursor moves on only for p's. Then p's features are marked, and p's blocks
  // of marks scanned for the used features, in ascending order, and cleared.
  template <class Clear>
  void fill(const sparse_matrix_view<const T>& x, int p, Clear& clear) {
    part_state& s = state_[std::size_t(p)];
    std::int32_t* used = used_.data() + std::size_t(p) * feature_stride_;
    for (index_t u = 0; u < s.used; ++u) clear(index_t(used[u]));
    index_t begin = 0;
    for (int q = 0; q < p; ++q)
      begin += (state_[std::size_t(q)].count + spare + segment_align - 1) / segment_align *
               segment_align;
    s.begin = begin;
    std::int32_t* const idx = indices_.data() + begin;
    T* const val = values_.data() + begin;
    std::int32_t* const offsets = offsets_.data() + std::size_t(p) * offsets_stride_;
    std::uint8_t* const marks = marks_.data() + std::size_t(p) * feature_stride_;
    const std::int32_t* const owner = owner_.data();
    const std::int32_t* const x_indices = x.indices;
    const T* const x_values = x.values;
    index_t n = 0;
    offsets[0] = 0;
    for (index_t c = 0; c < x.cols; ++c) {
      index_t k = x.col_begin(c);
      const index_t end = x.col_begin(c + 1);
#if DAFUSE_SIMD_AVX512
      if constexpr (std::is_same_v<T, float>) {
        // 16 non-zeros at a time: p's packed to the front of a register and stored whole (the
        // entries past them are overwritten by the next store or left in the run's slack). A
        // compressing store to memory would write only p's, but it is microcoded on Zen 4 and
        // reported slow there (not measured here).
        const __m512i part = _mm512_set1_epi32(p);
        for (; k < end; k += 16) {
          const __mmask16 lanes = detail::first_lanes(end - k);
          const __m512i j = _mm512_maskz_loadu_epi32(lanes, x_indices + k);
          const __m512i owners = _mm512_mask_i32gather_epi32(part, lanes, j, owner, 4);
          const __mmask16 mine = _mm512_mask_cmpeq_epi32_mask(lanes, owners, part);
          _mm512_storeu_si512(idx + n, _mm512_maskz_compress_epi32(mine, j));
          _mm512_storeu_ps(
              val + n, _mm512_maskz_compress_ps(mine, _mm512_maskz_loadu_ps(lanes, x_values + k)));
          n += __builtin_popcount(mine);
        }
      }
#endif
      for (; k < end; ++k) {
        const std::int32_t j = x_indices[k];
        const bool mine = owner[j] == p;
        idx[n] = j;
        val[n] = x_values[k];
        n += mine;
      }
      offsets[c + 1] = std::int32_t(n);
    }
    for (index_t i = 0; i < n; ++i) marks[idx[i]] = 1;
    index_t u = 0;
    for (index_t first = 0, b = 0; first < features_; first += block_, ++b) {
      if (dealt_owner(b, parts_) != p) continue;
      for (index_t j = first, last = std::min(features_, first + block_); j < last; ++j) {
        used[u] = std::int32_t(j);
        u += marks[j];
        marks[j] = 0;
      }
    }
    s.used = u;
  }

  index_t features_ = 0, out_ = 0, max_cols_ = 0, block_ = 16, cols_ = 0;
  int parts_ = 1;
  std::size_t offsets_stride_ = 0, feature_stride_ = 0;
  template <class V>
  using storage = buffer<V, system::omp>;  // on 64-byte boundaries
  std::vector<std::int32_t> owner_;        // [features]: the part of each feature
  storage<std::int32_t> offsets_;          // [parts][offsets_stride_ ≥ max_cols + 1], in its run
  storage<std::int32_t> indices_;          // the parts' runs, one after another
  storage<T> values_;
  storage<std::int32_t> used_;     // [parts][feature_stride_ ≥ features]
  storage<std::uint8_t> marks_;    // [parts][feature_stride_], 0 between deals
  storage<T> partials_;            // [parts − 1][out · max_cols]
  std::vector<part_state> state_;  // [parts]
};

//! y = W·x for a dealt batch: each part's thread sums its non-zeros' columns of W (part 0 into y,
//! the others into their partials), then each thread adds the partials into its share of y's
//! columns and calls finish(block, out, columns, out) on them (the bias and activation), while
//! they are in its cache. y = Σ_p y_p in part order: the same bits for the same number of parts.
template <class Round, class T, class Finish>
void sparse_input_product(
    const T* w, index_t out, const dealt_sparse_batch<T>& x, T* y, Finish&& finish) {
  sparse_feature_parts<T>& parts = *x.parts;
  const int n_parts = parts.parts();
  run_on_team(n_parts, [&](int me, int team, auto&& sync) {
    for (int p = me; p < n_parts; p += team)
      sparse_input_product<Round>(w, out, parts.part(p), p == 0 ? y : parts.partial(p));
    sync();
    const index_t per = (x.cols + team - 1) / team;
    const index_t c0 = std::min(x.cols, index_t(me) * per), c1 = std::min(x.cols, c0 + per);
    if (c0 >= c1) return;
    for (int p = 1; p < n_parts; ++p) {
      const T* partial = parts.partial(p);
      for (index_t i = c0 * out; i < c1 * out; ++i) y[i] += partial[i];
    }
    finish(y + c0 * out, out, c1 - c0, out);
  });
}

//! ∂L/∂W for a dealt batch: each part's thread writes the columns of its features (zeros on
//! entry, as for one thread), then calls finish(column, out, 1, out) on each of them and sums what
//! it returns (the rounding and the squared norm). Returns the parts' sums added in part order.
template <class Round, class T, class Finish>
double sparse_weight_gradient(
    const T* dz, index_t out, const dealt_sparse_batch<T>& x, T* dw, Finish&& finish) {
  sparse_feature_parts<T>& parts = *x.parts;
  const int n_parts = parts.parts();
  run_on_team(n_parts, [&](int me, int team, auto&&) {
    for (int p = me; p < n_parts; p += team) {
      const sparse_matrix_view<const T> part = parts.part(p);
      sparse_weight_gradient<Round>(dz, out, part, dw);
      parts.part_sum(p) = finish_used_columns(dw, out, part, finish);
    }
  });
  double sum = 0;
  for (int p = 0; p < n_parts; ++p) sum += parts.part_sum(p);
  return sum;
}

}  // namespace dafuse::backend::host
