// SPDX-License-Identifier: Apache-2.0
//! @file backend/host/gemm_fp32.hpp
//! @brief dafuse's own fp32 product kernel, for AVX-512 or for AVX2 + FMA, with packing buffers
//! allocated once.
//!
//! `gemm` (gemm.hpp) runs fp32 products here when the compiler targets AVX-512F or AVX2 with FMA,
//! and on Eigen's kernel otherwise (and always for fp64); docs/benchmarks.md, "fp32 products:
//! dafuse's AVX-512 kernel" and "fp32 products on AVX2 + FMA", compares the two.
//!
//! The blocking is Goto & van de Geijn's ("Anatomy of High-Performance Matrix Multiplication",
//! ACM TOMS 2008), as in BLIS and as gemm_bf16.hpp: B is packed in [kc, nc] blocks, A in [mc, kc]
//! blocks, and a register-blocked micro-kernel computes [mr, nr] tiles of C. One source serves
//! both instruction sets through the vector traits of simd.hpp (`fp32_simd`: V::lanes = 16 or 8).
//! On AVX-512 the micro-kernel keeps a [32, 12] tile of C in 24 zmm registers (two per column),
//! loads two zmm of A and broadcasts 12 values of B per k: 24 FMAs per 14 loads, and 24
//! independent sums cover the FMA's latency (4 cycles × 2 pipes needs at least 8). On AVX2 it
//! keeps a [16, 6] tile in 12 ymm registers (two per column), with two of A and one broadcast:
//! 15 of the 16 ymm registers, 12 FMAs per 8 loads, 12 independent sums.
//!
//! Sums run over k in order within a kc block, so a product's result depends only on its shape
//! and operands: the same on 1 or 2 threads (threads split C, never k). The two kernels' results
//! differ (their blocks differ), each the same from run to run.
//!
//! One product shape skips packing its large operand: C = Aᵀ·B with A of 512 KiB or more and few
//! columns of B (a dense layer's input gradient Wᵀ·δz) runs as Cᵀ = Bᵀ·A with A's columns
//! broadcast in place (fp32_product_transposed_a_in_place), the same sums in the same order. And
//! a block of A whose columns are contiguous (W in a forward product y = W·x) is packed by each
//! panel's first tile as it multiplies (packing_a), not ahead of the tiles. A product of at most
//! one panel of rows and one block of terms packs nothing (fp32_product_in_place).
#pragma once
#include <dafuse/config.hpp>

#include <dafuse/backend/host/simd.hpp>
#include <dafuse/backend/host/tuning.hpp>
#include <dafuse/core/meta.hpp>

#include <algorithm>
#include <vector>

namespace dafuse::backend::host {

//! Whether fp32 products run on dafuse's own kernel (AVX-512 or AVX2 + FMA) in this translation
//! unit (false: on Eigen's kernel), and on which: DAFUSE_GEMM_FP32_AVX512 or DAFUSE_GEMM_FP32_AVX2.
//! The one place that chooses. Defining DAFUSE_FP32_GEMM_EIGEN keeps them on Eigen's kernel, to
//! compare.
#if DAFUSE_SIMD_AVX512 && !defined(DAFUSE_FP32_GEMM_EIGEN)
#define DAFUSE_GEMM_FP32_AVX512 1
#define DAFUSE_GEMM_FP32_AVX2 0
#elif DAFUSE_SIMD_AVX2 && !defined(DAFUSE_FP32_GEMM_EIGEN)
#define DAFUSE_GEMM_FP32_AVX512 0
#define DAFUSE_GEMM_FP32_AVX2 1
#else
#define DAFUSE_GEMM_FP32_AVX512 0
#define DAFUSE_GEMM_FP32_AVX2 0
#endif
#define DAFUSE_GEMM_FP32_NATIVE (DAFUSE_GEMM_FP32_AVX512 || DAFUSE_GEMM_FP32_AVX2)
inline constexpr bool fp32_products_native = DAFUSE_GEMM_FP32_NATIVE != 0;
//! The instruction set fp32 products run on: "AVX-512", "AVX2+FMA" or "Eigen" (Eigen's kernel).
inline constexpr const char* fp32_kernel_name = DAFUSE_GEMM_FP32_AVX512 ? "AVX-512"
                                                : DAFUSE_GEMM_FP32_AVX2 ? "AVX2+FMA"
                                                                        : "Eigen";

namespace detail {

// ---- Blocking ---------------------------------------------------------------------------------
// The register tile [mr, nr] (see fp32_micro_kernel): two vectors of rows by as many broadcast
// columns as the registers left hold. The blocks kc, mc and nc are tuned (tuning.hpp).
#if DAFUSE_GEMM_FP32_AVX2
using fp32_simd = avx2;
using fp32_blocking = fp32_blocking_avx2;
inline constexpr index_t fp32_mr = 16;  // 2 ymm of rows × 6 columns: 12 sums + 2 A + 1 broadcast
inline constexpr index_t fp32_nr = 6;
#else
#if DAFUSE_GEMM_FP32_AVX512
using fp32_simd = avx512;
#endif
using fp32_blocking = fp32_blocking_avx512;
inline constexpr index_t fp32_mr = 32;  // 2 zmm of rows × 12 columns: 24 sums + 2 A + broadcasts
inline constexpr index_t fp32_nr = 12;
#endif
inline constexpr index_t fp32_kc = fp32_blocking::kc;
inline constexpr index_t fp32_mc = fp32_blocking::mc;
inline constexpr index_t fp32_nc = fp32_blocking::nc;
inline constexpr double fp32_in_place_min_bytes = fp32_blocking::in_place_min_bytes;
inline constexpr index_t fp32_pack_a_distance = fp32_blocking::pack_a_distance;
inline constexpr index_t fp32_pack_a_in_tiles_min_terms = fp32_blocking::pack_a_in_tiles_min_terms;

//! One thread's packing buffers for fp32 products: a [mc, kc] block of A and a [kc, nc] of B.
using fp32_panels = packed_panels<float>;

//! Packing buffers for products up to [max_m, max_k]·[max_k, max_n].
inline fp32_panels make_fp32_panels(index_t max_m, index_t max_n, index_t max_k) {
  fp32_panels p;
  p.mc = std::min(fp32_mc, round_up(std::max<index_t>(max_m, 1), fp32_mr));
  p.kc = std::min(fp32_kc, std::max<index_t>(max_k, 1));
  p.nc = std::min(fp32_nc, round_up(std::max<index_t>(max_n, 1), fp32_nr));
  p.a = aligned_array<float>(std::size_t(p.mc * p.kc));
  p.b = aligned_array<float>(std::size_t(p.kc * p.nc));
  return p;
}

#if DAFUSE_GEMM_FP32_NATIVE

//! Packs `count` (≤ width) rows of op(X) for one micro-panel: element (i, p), i < count, p < k,
//! is at x[i·si + p·sp]; the panel holds, for each p, `width` consecutive floats (rows i ≥ count
//! are zeros). `IContiguous`: si = 1, sp = ld (a copy per p); otherwise si = ld, sp = 1
//! (lanes×lanes transposes). `width`: a multiple of the lanes for A's panels, nr for B's.
template <bool IContiguous>
void pack_fp32(float* out, index_t width, const float* x, index_t ld, index_t count, index_t k) {
  using V = fp32_simd;
  constexpr index_t lanes = V::lanes;
  // Step p's `width - s` values at out + p·width + s. A panel narrower than a vector (B's: 6 of
  // AVX2's 8 lanes, 12 of AVX-512's 16) is stored a whole vector a step, each spilling into the
  // next step, which is stored after it; only the last step is masked (AVX2's masked stores cost
  // several times a store).
  const auto store = [&](index_t p, index_t s, typename V::reg values) {
    if (width - s >= lanes || (width < lanes && p + 1 < k))
      V::storeu(out + p * width + s, values);
    else
      V::mask_storeu(out + p * width + s, V::first_lanes(width - s), values);
  };
  if constexpr (IContiguous) {
    for (index_t p = 0; p < k; ++p)
      for (index_t s = 0; s < width; s += lanes)
        store(p, s, load_first<V>(x + p * ld + s, count - s));
  } else {
    for (index_t s = 0; s < width; s += lanes) {
      for (index_t p0 = 0; p0 < k; p0 += lanes) {
        typename V::reg r[lanes];
        V::load_transposed(x + s * ld + p0, ld, k - p0, count - s, r);
        const index_t valid = std::min<index_t>(lanes, k - p0);
        for (index_t p = 0; p < valid; ++p) store(p0 + p, s, r[p]);
      }
    }
  }
}

//! Ã as pack_fp32 writes it: k steps of lanes·Vectors rows.
template <int Vectors>
struct packed_a {
  const float* a;
  void ask_ahead(index_t) const {}
  fp32_simd::reg load(index_t p, int v) const {
    return fp32_simd::load(a + (p * Vectors + v) * fp32_simd::lanes);
  }
};

//! A read where it lies, not packed: row i of step p is source[i + p·ld] for i < rows (zeros past
//! them). For a product small enough to sit in L1 (fp32_product_in_place), and what packing_a
//! reads.
template <int Vectors>
struct a_in_place {
  using V = fp32_simd;
  const float* source;
  index_t ld;
  typename V::mask rows[Vectors];
  bool last_whole;  // the last vector's lanes are all rows
  a_in_place(const float* source_, index_t ld_, index_t count) : source(source_), ld(ld_) {
    for (int v = 0; v < Vectors; ++v) rows[v] = V::first_lanes(count - V::lanes * v);
    last_whole = count >= V::lanes * Vectors;
  }
  void ask_ahead(index_t) const {}
  V::reg load(index_t p, int v) const {
    const float* x = source + p * ld + V::lanes * v;
    if constexpr (V::masked_loads_cost) {
      // Every vector but the last is whole (count > lanes·(Vectors − 1)): plain loads, and one
      // mask live, so that 12 sums, 2 of A, a broadcast and the mask fit AVX2's 16 registers.
      if (v < Vectors - 1 || last_whole) return V::loadu(x);
      return V::maskz_loadu(rows[Vectors - 1], x);
    }
    return V::maskz_loadu(rows[v], x);
  }
};

//! A read where it lies, and packed on the way: row i of step p is source[i + p·ld] for i < rows
//! (zeros past them), and each step's vectors are also stored at `out` as pack_fp32<true> stores
//! them, for the panel's later tiles to read as packed_a. The lines of step p + `distance` are
//! asked for at step p: consecutive steps are ld apart (4 KiB for a 1024-row W), each on its own
//! page, where the hardware's prefetchers do not follow.
//!
//! Why: a forward product y = W·x over few samples uses each value of W only n times, and packing
//! W ahead of the tiles was a copy at memcpy's rate that no multiply-add overlapped. Packed by the
//! first tile of each panel, the copy runs under that tile's multiply-adds (for which blocks:
//! fp32_kernel::packs_a_in_first_tiles).
template <int Vectors>
struct packing_a : a_in_place<Vectors> {
  using V = fp32_simd;
  static constexpr index_t distance = fp32_pack_a_distance;
  index_t k;
  float* out;
  packing_a(const float* source_, index_t ld_, index_t k_, index_t count, float* out_)
      : a_in_place<Vectors>(source_, ld_, count), k(k_), out(out_) {}
  void ask_ahead(index_t p) const {
    if (p + distance >= k) return;
#pragma GCC unroll 2
    for (int v = 0; v < Vectors; ++v)
      _mm_prefetch(
          reinterpret_cast<const char*>(this->source + (p + distance) * this->ld + V::lanes * v),
          _MM_HINT_T0);
  }
  V::reg load(index_t p, int v) const {
    const typename V::reg x = a_in_place<Vectors>::load(p, v);
    V::store(out + (p * Vectors + v) * V::lanes, x);
    return x;
  }
};

//! B read where it lies along its rows: element (p, j) is b[p·ld + j] (op(B) = Bᵀ of a stored
//! [n, k]); columns past nv read column 0, into sums that are not stored.
struct b_rows_in_place {
  const float* b;
  index_t ld, nv;
  float at(index_t p, int j) const { return b[p * ld + (j < nv ? j : 0)]; }
};

//! B̃ as pack_fp32 writes it: k steps of nr columns, of which a tile uses the first Cols.
struct packed_b {
  const float* b;
  float at(index_t p, int j) const { return b[p * fp32_nr + j]; }
};

//! B read in place: column j of the tile is b[j·ldb, j·ldb + k), one contiguous run per column
//! (nv ≤ Cols of them; the columns past nv repeat column 0 into sums that are not stored).
template <int Cols>
struct b_in_place {
  const float* column[Cols];
  b_in_place(const float* b, index_t ldb, index_t nv) {
    for (int j = 0; j < Cols; ++j) column[j] = b + (j < nv ? j : 0) * ldb;
  }
  float at(index_t p, int j) const { return column[j][p]; }
};

//! C[0:mv, 0:nv] = α·Ã·B̃ + β·C for one [lanes·Vectors, Cols] tile (β = 0: C is not read), nv ≤
//! Cols ≤ nr. `a.load(p, v)`: rows lanes·v.. lanes·v + lanes − 1 of Ã's step p (packed_a, packing_a
//! or a_in_place), each step announced first by `a.ask_ahead(p)` (packing_a asks for lines ahead
//! there); `b.at(p, j)`: B̃'s value at step p of column j (packed_b, b_in_place or
//! b_rows_in_place). Vectors = 2 is the main tile; Vectors = 1 serves a last panel of at most
//! `lanes` rows. Cols < nr serves a last panel of fewer columns: a product with 1, 2 or 15 columns
//! (moons' heads) would otherwise spend most of its multiply-adds on zeros. The tile of C is asked
//! for ahead of the sums (prefetch_tile_for_write), which pays even where C is a thread's own
//! scratch in L2 (fp32_product_transposed_a_in_place). Not inlined: GCC inlined it into
//! blocked_product once store_tile could also sum squares, and the sums then spilled from registers
//! in the loop over k.
template <int Vectors, int Cols, class A, class B>
[[gnu::noinline]] void fp32_micro_kernel(index_t k,
                                         const A& a,
                                         const B& b,
                                         float alpha,
                                         float beta,
                                         float* c,
                                         index_t ldc,
                                         index_t mv,
                                         index_t nv,
                                         double* squares = nullptr) {
  static_assert(Cols >= 1 && Cols <= int(fp32_nr));
  using V = fp32_simd;
  using reg = V::reg;
  constexpr int nr = Cols;
  reg acc[Vectors][nr];
#pragma GCC unroll 16
  for (int j = 0; j < nr; ++j)
#pragma GCC unroll 2
    for (int v = 0; v < Vectors; ++v) acc[v][j] = V::setzero();
  prefetch_tile_for_write<V, Vectors, nr>(c, ldc, nv);
  // α and β wait in memory during the loop over k: left in registers, GCC 12 kept them there and
  // spilled one of AVX2's sums instead (12 sums, 2 of A and a broadcast fill 15 of 16 ymm).
  asm("" : "+m"(alpha), "+m"(beta));
  for (index_t p = 0; p < k; ++p) {
    a.ask_ahead(p);
    reg av[Vectors];
#pragma GCC unroll 2
    for (int v = 0; v < Vectors; ++v) av[v] = a.load(p, v);
#pragma GCC unroll 16
    for (int j = 0; j < nr; ++j) {
      const reg bj = V::set1(b.at(p, j));
#pragma GCC unroll 2
      for (int v = 0; v < Vectors; ++v) acc[v][j] = V::fmadd(av[v], bj, acc[v][j]);
    }
  }
  store_tile_and_square<V, Vectors, nr>(acc, alpha, beta, c, ldc, mv, nv, squares);
}

//! Runs `tile.template operator()<Vectors, Cols>()` with the fewest of the column counts
//! `Widths` (descending, the first nr) that hold `cols` ≤ nr.
//!
//! Each count is one fp32_micro_kernel per operand kind and vector count, compiled in every
//! translation unit that runs a product (about 30 ms of -O2 each), so each path keeps only the
//! counts whose waste shows, as fractions of nr (AVX-512's 12; AVX2's 6): blocked products nr,
//! 2nr/3, nr/3 and 1 (12, 8, 4, 1: a 128-sample product ends in 8 columns; 2 columns run as 4, a
//! few multiply-adds); products read in place nr, nr/3 and 1 (they hold at most one panel of
//! rows, so a tail of 8 as 12 costs little, and moons' 1- and 15-column products keep theirs);
//! the transposed product nr and nr/3 (its tail is one tile of W's rows).
template <int Vectors, int Width, int... Narrower, class Tile>
void with_tile_columns(index_t cols, Tile&& tile) {
  if constexpr (sizeof...(Narrower) == 0) {
    tile.template operator()<Vectors, Width>();
  } else {
    constexpr int next = std::max({Narrower...});
    if (cols > next)
      tile.template operator()<Vectors, Width>();
    else
      with_tile_columns<Vectors, Narrower...>(cols, tile);
  }
}

//! The same for a tile of `rows` ≤ mr rows: one vector of rows up to the lanes, else two.
template <int... Widths, class Tile>
void with_tile_shape(index_t rows, index_t cols, Tile&& tile) {
  if (rows <= fp32_simd::lanes)
    with_tile_columns<1, Widths...>(cols, tile);
  else
    with_tile_columns<2, Widths...>(cols, tile);
}

//! C[m, n] = α·Aᵀ·B + β·C (A is [k, m], B is [k, n], all column-major) on one thread, reading A in
//! place: computed as its transpose Cᵀ = Bᵀ·A with B packed whole as the kernel's A operand and
//! A's columns, each a contiguous run along k, broadcast straight from memory as the kernel's B.
//! Blocks of Cᵀ's columns are summed in `p.a` and transposed into C's rows. Returns false, doing
//! nothing, unless A has fp32_in_place_min_bytes or more (a smaller A is packed from L2 for about
//! what the transposes of B and of C's blocks cost here), n fits in one [mc, kc] block of
//! blocked_product's A (Bᵀ's [n, kc] blocks then stream from L2 past each micro-panel of A's
//! columns, as A's blocks do there), all of Bᵀ fits in `p.b` and a block of nr columns of Cᵀ in
//! `p.a`; blocked_product then runs it.
//!
//! Why: this is the input gradient of a dense layer, δx = Wᵀ·δz, where A is the weights and n the
//! samples. blocked_product packs A there, transposing all of W at every call for only n samples
//! per packed value; W's columns as broadcast streams need no packing, and the transposes move to
//! the small operands (δz, and Cᵀ's blocks).
//!
//! The same multiply-adds as blocked_product in the same order (k in blocks of p.kc, each block's
//! sums added to C as blocked_product stores them, β with the first), so the same bits.
inline bool fp32_product_transposed_a_in_place(fp32_panels& p,
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
                                               index_t ldc) {
  using V = fp32_simd;
  constexpr index_t mr = fp32_mr, nr = fp32_nr, lanes = V::lanes;
  if (m <= 0 || n <= 0 || k <= 0) return false;
  // Bᵀ's rows (the samples) in panels of mr, the last one one vector wide when it holds no more
  // than the lanes, as blocked_product lays out A's.
  const index_t last_panel = n % mr == 0 ? mr : (n % mr <= lanes ? lanes : mr);
  const index_t width = n - n % mr + (n % mr == 0 ? 0 : last_panel);  // padded rows of Cᵀ
  const index_t block_cols = std::min(round_up(m, nr), index_t(p.a.size()) / width / nr * nr);
  if (double(m) * double(k) * sizeof(float) < fp32_in_place_min_bytes || width > fp32_mc ||
      index_t(p.b.size()) < width * k || block_cols < nr)
    return false;
  // Packed Bᵀ: per block of p.kc terms, its panels one after the other (panel ir at ir·kc).
  const auto panel = [&](index_t pc, index_t ir) {
    return p.b.data() + width * pc + ir * std::min(p.kc, k - pc);
  };
  for (index_t pc = 0; pc < k; pc += p.kc) {
    const index_t kc = std::min(p.kc, k - pc);
    for (index_t ir = 0; ir < n; ir += mr) {
      const index_t rows = std::min(mr, n - ir);
      pack_fp32<false>(panel(pc, ir), rows <= lanes ? lanes : mr, b + ir * ldb + pc, ldb, rows, kc);
    }
  }
  float* const ct = p.a.data();  // a block of Cᵀ: [width, block_cols], leading dimension width
  for (index_t i0 = 0; i0 < m; i0 += block_cols) {
    const index_t cols = std::min(block_cols, m - i0);
    // β ≠ 0 starts from C's block, transposed, so that β applies as blocked_product applies it.
    if (beta != 0.0f) transpose_matrix<V>(c + i0, ldc, cols, n, ct, width);
    for (index_t pc = 0; pc < k; pc += p.kc) {
      const index_t kc = std::min(p.kc, k - pc);
      const float beta_block = pc == 0 ? beta : 1.0f;
      for (index_t jr = 0; jr < cols; jr += nr)
        for (index_t ir = 0; ir < n; ir += mr) {
          const index_t rows = std::min(mr, n - ir), tile_cols = std::min(nr, cols - jr);
          const float* column = a + (i0 + jr) * lda + pc;
          float* cp = ct + ir + jr * width;
          with_tile_shape<int(nr), int(nr) / 3>(rows, tile_cols, [&]<int Vectors, int Cols>() {
            fp32_micro_kernel<Vectors, Cols>(kc, packed_a<Vectors>{panel(pc, ir)},
                                             b_in_place<Cols>(column, lda, tile_cols), alpha,
                                             beta_block, cp, width, rows, tile_cols);
          });
        }
    }
    // C's rows [i0, i0 + cols) = the block's columns.
    transpose_matrix<V>(ct, width, n, cols, c + i0, ldc);
  }
  return true;
}

//! C[m, n] = α·A·op(B) + β·C on one thread with neither operand packed, for a product whose rows
//! fit one panel (m ≤ fp32_mr) and whose terms fit one block (k ≤ fp32_kc): its tiles read A's
//! columns and B's values where they lie. The same multiply-adds in the same order as
//! blocked_product, its tiles in its order, so the same C and the same squares (`squares` as
//! there). Returns false, doing nothing, for any other shape.
//!
//! Why: blocked_product packs both operands first, and for moons' products ([15, 64]
//! activations, [15, 15] weights, 64 samples) that packing, with its lanes×lanes transposes of a
//! transposed B, cost about what the multiply-adds do. Read in place, A's columns are one or two
//! vectors each and B's values broadcasts; such small operands are in L1 either way.
template <bool TransB>
bool fp32_product_in_place(index_t m,
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
                           double* squares) {
  if (m <= 0 || n <= 0 || k <= 0 || m > fp32_mr || k > fp32_kc) return false;
  for (index_t jr = 0; jr < n; jr += fp32_nr) {
    const index_t cols = std::min(fp32_nr, n - jr);
    with_tile_shape<int(fp32_nr), int(fp32_nr) / 3, 1>(m, cols, [&]<int Vectors, int Cols>() {
      const a_in_place<Vectors> ap(a, lda, m);
      if constexpr (TransB)
        fp32_micro_kernel<Vectors, Cols>(k, ap, b_rows_in_place{b + jr, ldb, cols}, alpha, beta,
                                         c + jr * ldc, ldc, m, cols, squares);
      else
        fp32_micro_kernel<Vectors, Cols>(k, ap, b_in_place<Cols>(b + jr * ldb, ldb, cols), alpha,
                                         beta, c + jr * ldc, ldc, m, cols, squares);
    });
  }
  return true;
}

//! The fp32 kernel for blocked_product (simd.hpp). (Reading A in place when its rows are
//! contiguous would skip packing it, but reads A with a 4 KiB stride, which was slower.)
struct fp32_kernel {
  using simd = fp32_simd;
  using packed = float;
  static constexpr index_t mr = fp32_mr, nr = fp32_nr;
  static constexpr index_t steps(index_t kc) { return kc; }
  //! Whether a block of A of `kc` terms, its columns contiguous, is packed by its panels' first
  //! tiles (tile_packing_a) rather than ahead of them (blocked_product). Not below
  //! fp32_pack_a_in_tiles_min_terms: a first tile's first packing_a::distance steps read lines not
  //! asked for ahead, which over 64 terms (office-head's weight gradients, k = the 64 samples)
  //! costs more than the copy it hides.
  static constexpr bool packs_a_in_first_tiles(index_t kc) {
    return kc >= fp32_pack_a_in_tiles_min_terms;
  }
  template <bool KContiguous>
  static void pack(
      float* out, index_t width, const float* x, index_t ld, index_t count, index_t k) {
    pack_fp32<!KContiguous>(out, width, x, ld, count, k);
  }
  //! fp32_micro_kernel on packed B with the fewest columns (nr, 2nr/3, nr/3 or 1) that hold
  //! `cols`.
  template <int Vectors>
  static void tile(index_t k,
                   const float* a,
                   const float* b,
                   float alpha,
                   float beta,
                   float* c,
                   index_t ldc,
                   index_t rows,
                   index_t cols,
                   double* squares) {
    with_tile_columns<Vectors, int(nr), 2 * int(nr) / 3, int(nr) / 3, 1>(
        cols, [&]<int V, int Cols>() {
          fp32_micro_kernel<V, Cols>(k, packed_a<V>{a}, packed_b{b}, alpha, beta, c, ldc, rows,
                                     cols, squares);
        });
  }
  //! A whole [mr, nr] tile, reading its rows of A from `source` (step p at source + p·lda) and
  //! packing them at `a` on the way (packing_a). (Only whole tiles: blocked_product packs a last
  //! panel of at most `lanes` rows ahead, so this is one kernel, not ten.)
  static void tile_packing_a(index_t k,
                             const float* source,
                             index_t lda,
                             float* a,
                             const float* b,
                             float alpha,
                             float beta,
                             float* c,
                             index_t ldc,
                             index_t rows,
                             index_t cols,
                             double* squares) {
    fp32_micro_kernel<2, int(nr)>(k, packing_a<2>(source, lda, k, rows, a), packed_b{b}, alpha,
                                  beta, c, ldc, rows, cols, squares);
  }
};

#endif  // DAFUSE_GEMM_FP32_NATIVE

}  // namespace detail
}  // namespace dafuse::backend::host
