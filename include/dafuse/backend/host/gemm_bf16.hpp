// SPDX-License-Identifier: Apache-2.0
//! @file backend/host/gemm_bf16.hpp
//! @brief Matrix products with bf16 operands and fp32 accumulation, with packing buffers
//! allocated once.
//!
//! `gemm_bf16` computes what `gemm` (gemm.hpp) does, C = α·op(A)·op(B) + β·C on fp32 matrices,
//! except that every element of A and B is rounded to bf16 (round to nearest even, as
//! `round_to_bf16` in core/half.hpp) on its way into the packing buffers, or as thin_product
//! (thin_products.hpp) reads it. A product of two bf16 values has at most 16 significant bits, so
//! it is exact in fp32; only the fp32 sums round. This is what precision::bf16 means for a product,
//! and what a bf16 tensor core computes.
//!
//! With AVX512-BF16 (`__AVX512BF16__`, e.g. g++ -march=native on Zen 4/5 or Sapphire Rapids) the
//! product runs on `vdpbf16ps`, which multiplies 16 pairs of bf16 values and adds both products to
//! 16 fp32 sums in one instruction: twice the multiply-adds of an fp32 FMA per instruction, and
//! half the bytes per operand. The blocking is Goto & van de Geijn's ("Anatomy of
//! High-Performance Matrix Multiplication", ACM TOMS 2008), as in BLIS: B is packed in [kc, nc]
//! blocks, A in [mc, kc] blocks, and a register-blocked micro-kernel computes [mr, nr] tiles of C.
//! Without AVX512-BF16 the operands are rounded into fp32 buffers and the product runs on Eigen's
//! fp32 kernel through `gemm`: the same values up to the order of the fp32 sums.
//!
//! One difference between the two paths: `vcvtne2ps2bf16` and `vdpbf16ps` treat subnormal inputs
//! as zero and flush subnormal results (DAZ/FTZ are implied by the instructions, whatever MXCSR
//! says), so magnitudes below 2^-126 (1.2e-38) count as zero on the native path's kernel only;
//! thin products (a side of 1, thin_products.hpp) keep them, and may give −0 where the kernel
//! gives +0.
#pragma once
#include <dafuse/config.hpp>

#include <dafuse/backend/host/gemm.hpp>
#include <dafuse/backend/host/simd.hpp>
#include <dafuse/backend/host/tuning.hpp>
#include <dafuse/core/error.hpp>
#include <dafuse/core/half.hpp>
#include <dafuse/core/meta.hpp>

#if defined(__AVX512BF16__) && defined(__AVX512BW__) && !defined(__CUDACC__)
#define DAFUSE_GEMM_BF16_NATIVE 1
#include <immintrin.h>
#else
#define DAFUSE_GEMM_BF16_NATIVE 0
#endif

#if defined(_OPENMP)
#include <omp.h>
#endif

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace dafuse::backend::host {

//! Whether `gemm_bf16` runs on AVX512-BF16 instructions (`vdpbf16ps`) in this translation unit;
//! false: operands rounded to bf16 in fp32 buffers, products on Eigen's fp32 kernel.
inline constexpr bool bf16_products_native = DAFUSE_GEMM_BF16_NATIVE != 0;
//! How bf16 products run: "AVX512-BF16", or "fp32 kernel" (bf16-rounded operands,
//! fp32_kernel_name).
inline constexpr const char* bf16_kernel_name =
    DAFUSE_GEMM_BF16_NATIVE ? "AVX512-BF16" : "fp32 kernel";

namespace detail {

#if DAFUSE_GEMM_BF16_NATIVE

// ---- Blocking --------------------------------------------------------------------------------
// The micro-kernel keeps a [32, 12] tile of C in 24 zmm registers (two per column), loads one
// k-pair of A as two zmm and broadcasts 12 k-pairs of B: 24 vdpbf16ps per 14 loads, and 24
// independent sums hide the instruction's latency. 32 zmm registers leave no room for 14 columns
// plus prefetched A. The blocks kc, mc and nc are tuned (tuning.hpp).
inline constexpr index_t bf16_mr = 32;
inline constexpr index_t bf16_nr = 12;

inline __m512bh as_bh(__m512i v) {
  return (__m512bh)v;
}

//! Packs `count` (≤ width) rows of op(X) for one micro-panel: element (i, p), i < count, p < k,
//! is at x[i·si + p·sp]. Output: ⌈k/2⌉ k-pairs, each `width` 32-bit words; word i of k-pair q
//! holds bf16(x(i, 2q)) in its low half and bf16(x(i, 2q+1)) in its high half, the layout
//! vdpbf16ps multiplies pairwise. Rows from `count` to `width` and the missing partner of an odd
//! k are zeros, so they add nothing.
//!
//! When i is the contiguous index (si = 1) two rows p = 2q, 2q+1 are converted together and
//! interleaved by one vpermw. When p is the contiguous index (sp = 1) each row i converts to 16
//! k-pairs in one zmm and 16 such rows are transposed as a 16×16 block of 32-bit words.
template <bool KContiguous>
void pack_panel(
    std::uint32_t* out, index_t width, const float* x, index_t ld, index_t count, index_t k) {
  const index_t pairs = (k + 1) / 2;
  if constexpr (!KContiguous) {
    // x(i, p) = x[i + p·ld]. Word 2i of the result is word i of the fp32 → bf16 conversion of
    // row 2q, word 2i+1 the same of row 2q+1.
    const __m512i interleave =
        _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22, 6,
                         21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    for (index_t q = 0; q < pairs; ++q) {
      const float* r0 = x + 2 * q * ld;
      const float* r1 = r0 + ld;
      const bool odd_tail = 2 * q + 1 >= k;
      for (index_t s = 0; s < width; s += 16) {
        const __mmask16 load = first_lanes(count - s);
        const __m512 v0 = _mm512_maskz_loadu_ps(load, r0 + s);
        const __m512 v1 = odd_tail ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(load, r1 + s);
        const __m512i both = (__m512i)_mm512_cvtne2ps_pbh(v1, v0);
        _mm512_mask_storeu_epi32(out + q * width + s, first_lanes(width - s),
                                 _mm512_permutexvar_epi16(interleave, both));
      }
    }
  } else {
    // x(i, p) = x[i·ld + p]: row i's k-pairs are consecutive after conversion.
    for (index_t s = 0; s < width; s += 16) {
      const __mmask16 store = first_lanes(width - s);
      for (index_t q0 = 0; q0 < pairs; q0 += 16) {
        const index_t p0 = 2 * q0;
        const __mmask16 lo = first_lanes(k - p0), hi = first_lanes(k - p0 - 16);
        __m512i r[16];
        for (int i = 0; i < 16; ++i) {
          if (s + i < count) {
            const float* row = x + (s + i) * ld + p0;
            r[i] = (__m512i)_mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps(hi, row + 16),
                                                _mm512_maskz_loadu_ps(lo, row));
          } else {
            r[i] = _mm512_setzero_si512();
          }
        }
        // Word j of r[i] becomes word i of r[j]: r[q] holds k-pair q0 + q of the 16 rows.
        transpose_16x16(r);
        const index_t valid = std::min<index_t>(16, pairs - q0);
        for (index_t q = 0; q < valid; ++q)
          _mm512_mask_storeu_epi32(out + (q0 + q) * width + s, store, r[q]);
      }
    }
  }
}

//! C[0:mv, 0:nv] = α·Ã·B̃ + β·C for one [16·Vectors, nr] tile (β = 0: C is not read). `a`:
//! `pairs` k-pairs of 16·Vectors rows; `b`: `pairs` k-pairs of nr columns, as pack_panel writes
//! them. Vectors = 2 is the main tile; Vectors = 1 serves a last panel of at most 16 rows, which
//! would waste more than half of a 32-row tile. Not inlined, as fp32_micro_kernel
//! (gemm_fp32.hpp): GCC inlined it into blocked_product once store_tile could also sum squares.
template <int Vectors>
[[gnu::noinline]] void micro_kernel(index_t pairs,
                                    const std::uint32_t* a,
                                    const std::uint32_t* b,
                                    float alpha,
                                    float beta,
                                    float* c,
                                    index_t ldc,
                                    index_t mv,
                                    index_t nv,
                                    double* squares) {
  constexpr int nr = int(bf16_nr);
  __m512 acc[Vectors][nr];
#pragma GCC unroll 16
  for (int j = 0; j < nr; ++j)
#pragma GCC unroll 2
    for (int v = 0; v < Vectors; ++v) acc[v][j] = _mm512_setzero_ps();
  prefetch_tile_for_write<avx512, Vectors, nr>(c, ldc, nv);
  for (index_t q = 0; q < pairs; ++q) {
    __m512bh av[Vectors];
#pragma GCC unroll 2
    for (int v = 0; v < Vectors; ++v) av[v] = as_bh(_mm512_load_si512(a + (q * Vectors + v) * 16));
    const std::uint32_t* bq = b + q * bf16_nr;
#pragma GCC unroll 16
    for (int j = 0; j < nr; ++j) {
      const __m512bh bj = as_bh(_mm512_set1_epi32(int(bq[j])));
#pragma GCC unroll 2
      for (int v = 0; v < Vectors; ++v) acc[v][j] = _mm512_dpbf16_ps(acc[v][j], av[v], bj);
    }
  }
  store_tile_and_square<avx512, Vectors, nr>(acc, alpha, beta, c, ldc, mv, nv, squares);
}

//! One thread's packing buffers: a [mc, kc] block of A and a [kc, nc] block of B, as k-pairs.
using bf16_panels = packed_panels<std::uint32_t>;

//! The bf16 kernel for blocked_product (simd.hpp): k-pairs of bf16 in 32-bit words.
struct bf16_kernel {
  using simd = avx512;
  using packed = std::uint32_t;
  static constexpr index_t mr = bf16_mr, nr = bf16_nr;
  static constexpr index_t steps(index_t kc) { return (kc + 1) / 2; }
  template <bool KContiguous>
  static void pack(
      std::uint32_t* out, index_t width, const float* x, index_t ld, index_t count, index_t k) {
    pack_panel<KContiguous>(out, width, x, ld, count, k);
  }
  template <int Vectors>
  static void tile(index_t pairs,
                   const std::uint32_t* a,
                   const std::uint32_t* b,
                   float alpha,
                   float beta,
                   float* c,
                   index_t ldc,
                   index_t rows,
                   index_t cols,
                   double* squares) {
    micro_kernel<Vectors>(pairs, a, b, alpha, beta, c, ldc, rows, cols, squares);
  }
};

#endif  // DAFUSE_GEMM_BF16_NATIVE

}  // namespace detail

//! Packing buffers for every bf16 product of a step, sized once for the largest one, per thread.
//! Native path: per thread a [mc, kc] block of A and a [kc, nc] block of B as bf16 pairs (at most
//! 256×512 and 512×3072, fewer for smaller products). Portable path: fp32 copies of A and B with
//! rounded elements, and Eigen's packing buffers.
class bf16_gemm_workspace {
 public:
  //! Unsized: `gemm_bf16` with it throws dafuse::error.
  bf16_gemm_workspace() = default;
  //! Buffers for products up to [max_m, max_k]·[max_k, max_n] on up to `threads` threads
  //! (0: OpenMP's maximum).
  bf16_gemm_workspace(index_t max_m, index_t max_n, index_t max_k, int threads = 0)
      : max_m_(std::max<index_t>(max_m, 1)),
        max_n_(std::max<index_t>(max_n, 1)),
        max_k_(std::max<index_t>(max_k, 1)) {
#if defined(_OPENMP)
    if (threads <= 0) threads = omp_get_max_threads();
#else
    threads = 1;
#endif
    threads = std::max(threads, 1);
#if DAFUSE_GEMM_BF16_NATIVE
    using namespace detail;
    for (int t = 0; t < threads; ++t) {
      bf16_panels& p = panels_.emplace_back();
      p.mc = std::min(bf16_mc, round_up(max_m_, bf16_mr));
      p.kc = std::min(bf16_kc, round_up(max_k_, 2));
      p.nc = std::min(bf16_nc, round_up(max_n_, bf16_nr));
      p.a = aligned_array<std::uint32_t>(std::size_t(p.mc * p.kc / 2));
      p.b = aligned_array<std::uint32_t>(std::size_t(p.kc / 2 * p.nc));
    }
    room_ = detail::split_room<float>(threads);
#else
    a_ = detail::aligned_array<float>(std::size_t(max_m_ * max_k_));
    b_ = detail::aligned_array<float>(std::size_t(max_k_ * max_n_));
    fp32_ = gemm_workspace<float>(max_m_, max_n_, max_k_, threads);
#endif
  }

  //! Whether the constructor sized it.
  bool sized() const {
#if DAFUSE_GEMM_BF16_NATIVE
    return max_m_ > 0 && !panels_.empty();  // a moved-from workspace has no buffers
#else
    return max_m_ > 0 && fp32_.threads() > 0;
#endif
  }
  //! The largest product it holds buffers for: [max_m, max_k]·[max_k, max_n].
  index_t max_m() const {
    return max_m_;
  }
  index_t max_n() const {
    return max_n_;
  }
  index_t max_k() const {
    return max_k_;
  }
#if DAFUSE_GEMM_BF16_NATIVE
  //! Threads split C in whole register tiles of the bf16 kernel.
  static constexpr index_t row_tile = detail::bf16_mr;
  static constexpr index_t col_tile = detail::bf16_nr;
#endif
  //! How gemm_bf16 splits C[m, n] = op(A)[m, k]·op(B)[k, n] among this workspace's threads.
  detail::product_split split(index_t m, index_t n, index_t k) const {
#if DAFUSE_GEMM_BF16_NATIVE
    return detail::split_for(m, n, k, int(panels_.size()), row_tile, col_tile);
#else
    return fp32_.split(m, n, k);
#endif
  }
  //! How a dense layer's products split W[out, in] over n samples among this workspace's threads.
  layer_split split_layer(index_t out, index_t in, index_t n) const {
#if DAFUSE_GEMM_BF16_NATIVE
    return layer_split::make(out, in, n, int(panels_.size()), row_tile, col_tile,
                             line_values<float>, room_.room());
#else
    return fp32_.split_layer(out, in, n);
#endif
  }
  //! What split_product (and split_thin_product) need: a finisher share per thread, the partial
  //! sums' room; the fp32 product's where the bf16 kernel is not compiled.
  detail::split_scratch<float> scratch() {
#if DAFUSE_GEMM_BF16_NATIVE
    return room_.scratch(col_tile);
#else
    return fp32_.scratch();
#endif
  }
  //! Room for the partial sums of products split along their terms (gemm_workspace's).
  void reserve_partial_sums(index_t values) {
#if DAFUSE_GEMM_BF16_NATIVE
    room_.reserve(values);
#else
    fp32_.reserve_partial_sums(values);
#endif
  }

#if DAFUSE_GEMM_BF16_NATIVE
  //! Thread t's packing buffers, and one finisher share per thread (split_product).
  detail::bf16_panels& panels(int t) {
    return panels_[std::size_t(t)];
  }
  int threads() const {
    return int(panels_.size());
  }
#else
  //! One set of rounded copies (below): products that run side by side (product_on) would share
  //! them, so this workspace offers one thread's buffers.
  int threads() const {
    return 1;
  }
  //! Room for op(A) and op(B) rounded to bf16 as stored, and the fp32 product's buffers.
  float* rounded_a() {
    return a_.data();
  }
  float* rounded_b() {
    return b_.data();
  }
  gemm_workspace<float>& fp32() {
    return fp32_;
  }
#endif

 private:
  index_t max_m_ = 0, max_n_ = 0, max_k_ = 0;
#if DAFUSE_GEMM_BF16_NATIVE
  std::vector<detail::bf16_panels> panels_;
  detail::split_room<float> room_;  // split_product's shares and partial sums
#else
  detail::aligned_array<float> a_, b_;
  gemm_workspace<float> fp32_;
#endif
};

namespace detail {
//! gemm_bf16() on its finisher's finisher_ref (partition.hpp): the product's code, compiled once
//! per layout rather than once per finisher type. With `own` ≥ 0 the whole product runs on the
//! calling thread with thread `own`'s buffers (as gemm_workspace::product_on).
template <op OpA, op OpB, bool SumsSquares>
double erased_gemm_bf16(bf16_gemm_workspace& ws,
                        index_t m,
                        index_t n,
                        index_t k,
                        float alpha,
                        const float* a,
                        index_t lda,
                        const float* b,
                        index_t ldb,
                        float beta,
                        float* c,
                        index_t ldc,
                        finisher_ref<float, SumsSquares> finish,
                        std::optional<product_split> split,
                        int own = -1) {
  if (!ws.sized())
    fail("gemm_bf16", "workspace", "one sized at construction (bf16_gemm_workspace(m, n, k))",
         "a default-constructed one");
  if (m > ws.max_m() || n > ws.max_n() || k > ws.max_k())
    fail("gemm_bf16", "product size",
         "one within the workspace's [max_m, max_k]·[max_k, max_n]: construct the workspace for "
         "the largest product",
         "a larger one");
  if (own >= ws.threads())
    fail("gemm_bf16", "thread", "one of the workspace's " + std::to_string(ws.threads()),
         std::to_string(own));
  if (m <= 0 || n <= 0) return 0.0;
  if (k <= 0) {
    // No products: C = β·C, with β = 0 overwriting.
    for (index_t j = 0; j < n; ++j)
      for (index_t i = 0; i < m; ++i) c[i + j * ldc] = beta == 0.0f ? 0.0f : beta * c[i + j * ldc];
    return finish(c, m, n, ldc);
  }
  detail::split_scratch<float> scratch = ws.scratch();
  if (own >= 0) scratch.threads = 1;  // a thin product then stays on this thread too
  if (detail::is_thin(m, n, k))
    return detail::split_thin_product<OpA, OpB>(
        m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, [](float v) { return round_to_bf16(v); },
        scratch, finish);
#if DAFUSE_GEMM_BF16_NATIVE
  // Whole micro-tiles per thread; each packs its own copy of the other operand (the price of no
  // shared state).
  const detail::product_split chosen =
      own >= 0 ? detail::product_split::one_thread(m, n)
               : detail::chosen_split("gemm_bf16", split, ws, m, n, k, scratch);
  return detail::split_product<OpA, OpB>(
      chosen, m, n, k, a, lda, b, ldb, c, ldc, scratch,
      [&](int block_thread, index_t rows, index_t cols, index_t depth, const float* ab,
          const float* bb, float* cb, index_t ldcb, bool fresh, double* squares) {
        detail::blocked_product<detail::bf16_kernel, OpA == op::transpose, OpB == op::transpose>(
            ws.panels(own >= 0 ? own : block_thread), rows, cols, depth, alpha, ab, lda, bb, ldb,
            fresh ? 0.0f : beta, cb, ldcb, squares);
        return squares != nullptr;
      },
      finish);
#else
  // Round A and B as stored (op(X) is the same transpose of the copy), then Eigen's fp32 kernel:
  // products of bf16 values are exact in fp32, so only the order of the sums differs from the
  // native path.
  const index_t a_rows = OpA == op::none ? m : k, a_cols = OpA == op::none ? k : m;
  const index_t b_rows = OpB == op::none ? k : n, b_cols = OpB == op::none ? n : k;
  float* ra = ws.rounded_a();
  float* rb = ws.rounded_b();
  for (index_t j = 0; j < a_cols; ++j)
    for (index_t i = 0; i < a_rows; ++i) ra[i + j * a_rows] = round_to_bf16(a[i + j * lda]);
  for (index_t j = 0; j < b_cols; ++j)
    for (index_t i = 0; i < b_rows; ++i) rb[i + j * b_rows] = round_to_bf16(b[i + j * ldb]);
  return erased_gemm<OpA, OpB>(ws.fp32(), m, n, k, alpha, static_cast<const float*>(ra), a_rows,
                               static_cast<const float*>(rb), b_rows, beta, c, ldc, finish, split,
                               own);
#endif
}
}  // namespace detail

//! C[m, n] = α·bf16(op(A))·bf16(op(B)) + β·C, every matrix column-major with its leading
//! dimension: `gemm` (gemm.hpp) with each element of A and B rounded to bf16 (nearest even) and
//! the products summed in fp32. op(A) is [m, k], op(B) is [k, n]; β = 0 overwrites C (NaN in C
//! does not propagate). The product must fit the workspace (m ≤ max_m, n ≤ max_n, k ≤ max_k).
//! Each finished block of C goes to `finish` as in gemm(); returns the sum of its shares.
//! Allocates nothing.
template <op OpA, op OpB, class Finish = no_finish>
double gemm_bf16(bf16_gemm_workspace& ws,
                 index_t m,
                 index_t n,
                 index_t k,
                 float alpha,
                 const float* a,
                 index_t lda,
                 const float* b,
                 index_t ldb,
                 float beta,
                 float* c,
                 index_t ldc,
                 Finish&& finish = {},
                 std::optional<detail::product_split> split = std::nullopt) {
  return detail::erased_gemm_bf16<OpA, OpB>(ws, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc,
                                            detail::erase_finisher<float>(finish), split);
}

}  // namespace dafuse::backend::host
