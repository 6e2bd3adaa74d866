// SPDX-License-Identifier: Apache-2.0
//! @file backend/host/simd.hpp
//! @brief What dafuse's own AVX-512 product kernels share: 64-byte aligned packing buffers,
//! lane masks and a 16×16 transpose of 32-bit words.
//!
//! The fp32 kernel (gemm_fp32.hpp) and the bf16 kernel (gemm_bf16.hpp) both pack their operands
//! into micro-panels (Goto & van de Geijn's blocking); a panel read along its contiguous index is
//! a copy, one read across it is a transpose of 16×16 blocks. Nothing here runs on a GPU.
#pragma once
#include <dafuse/config.hpp>

#include <dafuse/backend/host/tuning.hpp>
#include <dafuse/core/meta.hpp>

#if defined(__AVX512F__) && !defined(__CUDACC__)
#define DAFUSE_SIMD_AVX512 1
#include <immintrin.h>
#else
#define DAFUSE_SIMD_AVX512 0
#endif

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <memory>
#include <new>

namespace dafuse::backend::host::detail {

//! A 64-byte aligned array of T, allocated once: the alignment of a cache line and of a zmm
//! register, so the micro-kernels' loads never split a line.
template <class T>
class aligned_array {
 public:
  aligned_array() = default;
  explicit aligned_array(std::size_t n)
      : data_(n == 0 ? nullptr : new (std::align_val_t(64)) T[n]()), size_(n) {}
  T* data() const { return data_.get(); }
  std::size_t size() const { return size_; }

 private:
  struct deleter {
    void operator()(T* p) const { ::operator delete[](p, std::align_val_t(64)); }
  };
  std::unique_ptr<T[], deleter> data_;
  std::size_t size_ = 0;
};

//! One thread's packing buffers for a blocked product: a [mc, kc] block of A and a [kc, nc] block
//! of B, each element a `Packed` value (an fp32, or a pair of bf16 in one 32-bit word).
template <class Packed>
struct packed_panels {
  aligned_array<Packed> a, b;
  index_t mc = 0, kc = 0, nc = 0;
};

//! Asks for the cache lines of x[0, count), one request per 64-byte line, to be written (ForWrite:
//! PREFETCHW on x86) or only read. On 2 cores a line that both have read since it was last
//! written is in both caches, and the first write to it waits for the other core's copy to be
//! invalidated; asked for ahead of the writes, those invalidations overlap (docs/benchmarks.md,
//! "Cache lines both cores hold").
template <bool ForWrite, class T>
inline void prefetch_lines(const T* x, index_t count) {
  constexpr index_t line = index_t(64 / sizeof(T));
  for (index_t i = 0; i < count; i += line) __builtin_prefetch(x + i, ForWrite ? 1 : 0);
}

#if DAFUSE_SIMD_AVX512

//! Asks for the lines of a [16·Vectors, nv ≤ Cols] tile of C (column-major, ldc) for writing.
//! A micro-kernel does this before its sums: a line the other core has read (the last product's
//! output, packed there as an operand) is then invalidated there while the sums run, not when the
//! tile is stored.
template <int Vectors, int Cols>
inline void prefetch_tile_for_write(float* c, index_t ldc, index_t nv) {
#pragma GCC unroll 16
  for (int j = 0; j < Cols; ++j)
    if (j < nv)
#pragma GCC unroll 2
      for (int v = 0; v < Vectors; ++v) __builtin_prefetch(c + j * ldc + 16 * v, 1);
}

//! The mask of the first min(count, 16) lanes (none for count ≤ 0).
inline __mmask16 first_lanes(index_t count) {
  return count >= 16 ? __mmask16(0xffff) : __mmask16((1u << std::max<index_t>(count, 0)) - 1u);
}

//! Stores C[0:mv, 0:nv] = α·acc + β·C for a micro-kernel's [16·Vectors, Cols] tile of fp32 sums
//! (acc[v][j]: rows 16v..16v+15 of column j), nv ≤ Cols; β = 0 does not read C, so NaN there does
//! not propagate. The store both kernels end with. With `Squares`, also returns, lane by lane, the
//! sums of the squares of the values it stored (0 from the lanes it did not store).
template <int Vectors, int Cols, bool Squares = false>
inline __m512 store_tile(const __m512 (&acc)[Vectors][Cols],
                         float alpha,
                         float beta,
                         float* c,
                         index_t ldc,
                         index_t mv,
                         index_t nv) {
  __mmask16 rows[Vectors];
#pragma GCC unroll 2
  for (int v = 0; v < Vectors; ++v) rows[v] = first_lanes(mv - 16 * v);
  const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
  // Four sums of squares in turn: one chain of 24 dependent multiply-adds (4 cycles each) costs
  // more than the sums save.
  constexpr int chains = 4;
  __m512 squares[chains];
#pragma GCC unroll 4
  for (int q = 0; q < chains; ++q) squares[q] = _mm512_setzero_ps();
#pragma GCC unroll 16
  for (int j = 0; j < Cols; ++j) {
    if (j >= nv) break;
#pragma GCC unroll 2
    for (int v = 0; v < Vectors; ++v) {
      float* col = c + j * ldc + 16 * v;
      __m512 r = _mm512_mul_ps(va, acc[v][j]);
      if (beta != 0.0f) r = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(rows[v], col), r);
      _mm512_mask_storeu_ps(col, rows[v], r);
      if constexpr (Squares) {
        const __m512 stored = _mm512_maskz_mov_ps(rows[v], r);
        __m512& sum = squares[(j * Vectors + v) % chains];
        sum = _mm512_fmadd_ps(stored, stored, sum);
      }
    }
  }
  return _mm512_add_ps(_mm512_add_ps(squares[0], squares[1]),
                       _mm512_add_ps(squares[2], squares[3]));
}

//! store_tile, adding the sum of the squares of the stored values to *squares when it is given
//! (in double: one tile's float sum at a time).
template <int Vectors, int Cols>
inline void store_tile_and_square(const __m512 (&acc)[Vectors][Cols],
                                  float alpha,
                                  float beta,
                                  float* c,
                                  index_t ldc,
                                  index_t mv,
                                  index_t nv,
                                  double* squares) {
  if (squares == nullptr)
    store_tile<Vectors, Cols>(acc, alpha, beta, c, ldc, mv, nv);
  else
    *squares += double(
        _mm512_reduce_add_ps(store_tile<Vectors, Cols, true>(acc, alpha, beta, c, ldc, mv, nv)));
}

//! Transposes a 16×16 block of 32-bit words in registers: on return word j of r[i] is word i of
//! the r[j] passed in. Interleaves of 32-bit, then 64-bit words within 128-bit lanes, then a 4×4
//! transpose of the lanes themselves: 64 shuffles for 256 words.
inline void transpose_16x16(__m512i r[16]) {
  __m512i t[16], u[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {
    u[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
    u[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
    u[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
    u[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
  }
  // u[4g + j], lane l: the words of input rows 4g..4g+3 at column 4l + j.
  for (int j = 0; j < 4; ++j) {
    const __m512i v0 = _mm512_shuffle_i32x4(u[j], u[4 + j], 0x44);
    const __m512i v1 = _mm512_shuffle_i32x4(u[j], u[4 + j], 0xee);
    const __m512i v2 = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0x44);
    const __m512i v3 = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0xee);
    r[j] = _mm512_shuffle_i32x4(v0, v2, 0x88);
    r[4 + j] = _mm512_shuffle_i32x4(v0, v2, 0xdd);
    r[8 + j] = _mm512_shuffle_i32x4(v1, v3, 0x88);
    r[12 + j] = _mm512_shuffle_i32x4(v1, v3, 0xdd);
  }
}

//! Loads the [rows, cols] block (each at most 16; either may be 0 or less) of a column-major
//! matrix at `block` (leading dimension ld) transposed into r: word j of r[i] is block(i, j),
//! zeros outside the block. What pack_fp32 and transpose_matrix share.
inline void load_transposed_16x16(
    const float* block, index_t ld, index_t rows, index_t cols, __m512i r[16]) {
  const __mmask16 load = first_lanes(rows);
  for (index_t j = 0; j < 16; ++j)
    r[j] = j < cols ? _mm512_castps_si512(_mm512_maskz_loadu_ps(load, block + j * ld))
                    : _mm512_setzero_si512();
  transpose_16x16(r);
}

//! dst(j, i) = src(i, j) for a column-major src [rows, cols] (leading dimension lds) and dst
//! [cols, rows] (ldd), in 16×16 blocks through registers (masked at the edges), a block row of
//! src at a time so that each of dst's 16 columns is written along its length (a block column at
//! a time puts sixteen stores into one L1 set when dst's columns are 4 KiB apart, as δx's are).
inline void transpose_matrix(
    const float* src, index_t lds, index_t rows, index_t cols, float* dst, index_t ldd) {
  for (index_t i0 = 0; i0 < rows; i0 += 16)
    for (index_t j0 = 0; j0 < cols; j0 += 16) {
      __m512i r[16];
      load_transposed_16x16(src + i0 + j0 * lds, lds, rows - i0, cols - j0, r);
      const __mmask16 store = first_lanes(cols - j0);
      for (index_t i = 0; i < std::min<index_t>(16, rows - i0); ++i)
        _mm512_mask_storeu_epi32(dst + j0 + (i0 + i) * ldd, store, r[i]);
    }
}

//! Whether a blocked_product kernel can pack A's panels in their first tiles (see there).
template <class Kernel>
concept packs_a_in_tiles = requires(index_t kc) {
  { Kernel::packs_a_in_first_tiles(kc) } -> std::same_as<bool>;
};

//! C = α·op(A)·op(B) + β·C on one thread with Goto & van de Geijn's blocking, for a `Kernel`
//! that packs and multiplies its own way (gemm_fp32.hpp, gemm_bf16.hpp). m, n, k > 0. Kernel has
//! `packed` (the buffers' element), `mr` and `nr` (the register tile), `steps(kc)` (packed steps
//! for kc values of k: kc, or ⌈kc/2⌉ bf16 pairs), `pack<KContiguous>(out, width, x, ld, count,
//! kc)` (`count` ≤ width rows of op(X) for one micro-panel, element (i, l) at x[i·ld + l] when
//! KContiguous, else x[i + l·ld]; also called on the terms [l0, l0 + kc) of a panel, writing at
//! out + steps(l0)·width, for l0 a multiple of the kernel's group of terms) and
//! `tile<Vectors>(steps, a, b, α, β, c, ldc, rows, cols, squares)` (one [16·Vectors, nr] tile of
//! C from packed panels; β = 0 does not read C; adds the squares of the values it stores to
//! *squares when `squares` is not null: store_tile_and_square). A kernel may also have
//! `packs_a_in_first_tiles(kc)` (packs_a_in_tiles): where that is true of a block of kc terms of
//! an untransposed A and a block of at least nr columns, the block is not packed ahead; each
//! panel's first tile (jr = 0, a whole [mr, nr] tile) runs `tile_packing_a(steps, source, lda, a,
//! b, α, β, c, ldc, rows, cols, squares)`, which reads the panel's rows where they lie and packs
//! them at `a` as it multiplies, for the later tiles to read packed: the same values in the same
//! order, so the same bits. A last panel of at most 16 rows is packed ahead (one kernel fewer to
//! compile for a copy of at most 16 rows).
//!
//! With `squares`, adds Σ c² over C's final values to *squares, from the registers as each tile
//! of the last block of terms is stored: the sum of squares a weight gradient's finisher would
//! otherwise read back from memory (see split_product). The tiles' sums are added in the order of
//! the loops, so the sum depends only on the shape.
template <class Kernel, bool TransA, bool TransB>
void blocked_product(packed_panels<typename Kernel::packed>& p,
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
                     double* squares = nullptr) {
  constexpr index_t mr = Kernel::mr, nr = Kernel::nr;
  // Whether some blocks of A may be packed by their first tiles (an untransposed A, a kernel
  // that can).
  constexpr bool may_pack_in_tiles = !TransA && packs_a_in_tiles<Kernel>;
  // op(A)(i, l) = a[i + l·lda], or a[i·lda + l] transposed; op(B)(l, j) = b[l + j·ldb], or
  // b[l·ldb + j] transposed. A micro-panel of B holds columns j of op(B): k runs along B's
  // contiguous index unless B is transposed.
  const auto a_at = [&](index_t i, index_t l) {
    return TransA ? a + i * lda + l : a + i + l * lda;
  };
  const auto b_at = [&](index_t l, index_t j) {
    return TransB ? b + l * ldb + j : b + l + j * ldb;
  };
  for (index_t jc = 0; jc < n; jc += p.nc) {
    const index_t nc = std::min(p.nc, n - jc);
    for (index_t pc = 0; pc < k; pc += p.kc) {
      const index_t kc = std::min(p.kc, k - pc), steps = Kernel::steps(kc);
      // β applies once, with the first k block; later blocks add to C.
      const float beta_block = pc == 0 ? beta : 1.0f;
      for (index_t jr = 0; jr < nc; jr += nr)
        Kernel::template pack<!TransB>(p.b.data() + jr * steps, nr, b_at(pc, jc + jr), ldb,
                                       std::min(nr, nc - jr), kc);
      for (index_t ic = 0; ic < m; ic += p.mc) {
        const index_t mc = std::min(p.mc, m - ic);
        // Panels of mr rows, the last one 16 wide when it holds no more than 16.
        const auto pack_a = [&](index_t ir, index_t l0, index_t terms) {
          const index_t rows = std::min(mr, mc - ir), width = rows <= 16 ? 16 : mr;
          Kernel::template pack<TransA>(p.a.data() + ir * steps + Kernel::steps(l0) * width, width,
                                        a_at(ic + ir, pc + l0), lda, rows, terms);
        };
        // A block the kernel packs in its panels' first tiles (jr = 0 below) is not packed here.
        bool pack_in_tiles = false;
        if constexpr (may_pack_in_tiles)
          pack_in_tiles = nc >= nr && Kernel::packs_a_in_first_tiles(kc);
        if constexpr (TransA) {
          // Each panel's rows are contiguous runs along k: one pass per panel.
          for (index_t ir = 0; ir < mc; ir += mr) pack_a(ir, 0, kc);
        } else if (!pack_in_tiles) {
          // A column of the block is one contiguous run of mc values across all its panels, and
          // consecutive columns are lda apart (4 KiB for a 1024-row W). Packing pack_a_columns
          // columns of every panel at a time reads each run whole, where a panel at a time read 2
          // lines per column and came back for the next 2.
          constexpr index_t chunk = pack_a_columns;
          static_assert(Kernel::steps(2 * chunk) == 2 * Kernel::steps(chunk),
                        "a chunk of A's columns must start on whole packed steps");
          for (index_t l0 = 0; l0 < kc; l0 += chunk)
            for (index_t ir = 0; ir < mc; ir += mr) pack_a(ir, l0, std::min(chunk, kc - l0));
        } else if (mc % mr != 0 && mc % mr <= 16) {
          pack_a(mc - mc % mr, 0, kc);  // the first tiles pack whole panels only
        }
        double* const tile_squares = pc + kc >= k ? squares : nullptr;  // C's final values
        // The B micro-panel stays in L1 while the A block streams from L2 past it.
        for (index_t jr = 0; jr < nc; jr += nr)
          for (index_t ir = 0; ir < mc; ir += mr) {
            const index_t rows = std::min(mr, mc - ir), cols = std::min(nr, nc - jr);
            auto* ap = p.a.data() + ir * steps;
            const auto* bp = p.b.data() + jr * steps;
            float* cp = c + (ic + ir) + (jc + jr) * ldc;
            const auto tile = [&]<int Vectors>() {
              if constexpr (may_pack_in_tiles) {  // (nested: clang checks Kernel's member)
                if constexpr (Vectors == 2) {
                  if (pack_in_tiles && jr == 0) {
                    Kernel::tile_packing_a(steps, a_at(ic + ir, pc), lda, ap, bp, alpha, beta_block,
                                           cp, ldc, rows, cols, tile_squares);
                    return;
                  }
                }
              }
              Kernel::template tile<Vectors>(steps, ap, bp, alpha, beta_block, cp, ldc, rows, cols,
                                             tile_squares);
            };
            if (rows <= 16)
              tile.template operator()<1>();
            else
              tile.template operator()<2>();
          }
      }
    }
  }
}

#endif  // DAFUSE_SIMD_AVX512

}  // namespace dafuse::backend::host::detail
