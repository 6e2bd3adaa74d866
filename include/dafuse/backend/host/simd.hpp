// SPDX-License-Identifier: Apache-2.0
//! @file backend/host/simd.hpp
//! @brief What dafuse's own product kernels share, on AVX-512 or on AVX2 + FMA: vector traits
//! (`avx512`, 16 lanes; `avx2`, 8 lanes), 64-byte aligned packing buffers, the store of a tile of
//! C and Goto & van de Geijn's blocked product.
//!
//! The fp32 kernel (gemm_fp32.hpp) and the bf16 kernel (gemm_bf16.hpp, AVX-512 only) both pack
//! their operands into micro-panels (Goto & van de Geijn's blocking); a panel read along its
//! contiguous index is a copy, one read across it is a transpose of lanes×lanes blocks (16×16 on
//! AVX-512, 8×8 on AVX2). The code is written once over a traits type V; nothing here runs on a
//! GPU.
#pragma once
#include <dafuse/config.hpp>

#include <dafuse/backend/host/tuning.hpp>
#include <dafuse/core/meta.hpp>

#if defined(__AVX512F__) && !defined(__CUDACC__)
#define DAFUSE_SIMD_AVX512 1
#else
#define DAFUSE_SIMD_AVX512 0
#endif
// AVX2 with FMA (x86-64-v3: Haswell, Zen 1-3); every AVX-512 target has both too.
#if defined(__AVX2__) && defined(__FMA__) && !defined(__CUDACC__)
#define DAFUSE_SIMD_AVX2 1
#else
#define DAFUSE_SIMD_AVX2 0
#endif
#if DAFUSE_SIMD_AVX512 || DAFUSE_SIMD_AVX2
#include <immintrin.h>
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

//! The mask of the first min(count, 16) lanes (none for count ≤ 0).
inline __mmask16 first_lanes(index_t count) {
  return count >= 16 ? __mmask16(0xffff) : __mmask16((1u << std::max<index_t>(count, 0)) - 1u);
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
//! zeros outside the block.
inline void load_transposed_16x16(
    const float* block, index_t ld, index_t rows, index_t cols, __m512i r[16]) {
  const __mmask16 load = first_lanes(rows);
  for (index_t j = 0; j < 16; ++j)
    r[j] = j < cols ? _mm512_castps_si512(_mm512_maskz_loadu_ps(load, block + j * ld))
                    : _mm512_setzero_si512();
  transpose_16x16(r);
}

//! 16 fp32 lanes in a zmm register, lanes chosen by a mask register: what the kernels written
//! over a traits type V (below) call.
struct avx512 {
  using reg = __m512;
  using mask = __mmask16;
  static constexpr int lanes = 16;
  //! Whether a masked load is worth avoiding where all lanes are wanted (not with mask registers).
  static constexpr bool masked_loads_cost = false;
  static mask first_lanes(index_t count) { return detail::first_lanes(count); }
  static reg setzero() { return _mm512_setzero_ps(); }
  static reg set1(float x) { return _mm512_set1_ps(x); }
  static reg load(const float* p) { return _mm512_load_ps(p); }  // 64-byte aligned
  static reg loadu(const float* p) { return _mm512_loadu_ps(p); }
  //! The mask's lanes of p (no fault past them), zeros in the others.
  static reg maskz_loadu(mask m, const float* p) { return _mm512_maskz_loadu_ps(m, p); }
  static void store(float* p, reg x) { _mm512_store_ps(p, x); }
  static void storeu(float* p, reg x) { _mm512_storeu_ps(p, x); }
  static void mask_storeu(float* p, mask m, reg x) { _mm512_mask_storeu_ps(p, m, x); }
  //! x in the mask's lanes, zeros in the others.
  static reg maskz_mov(mask m, reg x) { return _mm512_maskz_mov_ps(m, x); }
  static reg add(reg x, reg y) { return _mm512_add_ps(x, y); }
  static reg mul(reg x, reg y) { return _mm512_mul_ps(x, y); }
  static reg fmadd(reg x, reg y, reg z) { return _mm512_fmadd_ps(x, y, z); }  // x·y + z
  static float reduce_add(reg x) { return _mm512_reduce_add_ps(x); }
  //! load_transposed_16x16, as floats.
  static void load_transposed(
      const float* block, index_t ld, index_t rows, index_t cols, reg r[16]) {
    __m512i w[16];
    load_transposed_16x16(block, ld, rows, cols, w);
    for (int i = 0; i < 16; ++i) r[i] = _mm512_castsi512_ps(w[i]);
  }
};

#endif  // DAFUSE_SIMD_AVX512

#if DAFUSE_SIMD_AVX2

//! Transposes an 8×8 block of floats in registers: on return word j of r[i] is word i of the
//! r[j] passed in. Interleaves of 32-bit, then 64-bit words within 128-bit lanes, then a swap of
//! the lanes: 24 shuffles for 64 words.
inline void transpose_8x8(__m256 r[8]) {
  __m256 t[8], u[8];
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  // u[4g + j], lane l: the words of input rows 4g..4g+3 at column 4l + j.
  for (int i = 0; i < 8; i += 4) {
    u[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
    u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xee);
    u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xee);
  }
  for (int j = 0; j < 4; ++j) {
    r[j] = _mm256_permute2f128_ps(u[j], u[4 + j], 0x20);
    r[4 + j] = _mm256_permute2f128_ps(u[j], u[4 + j], 0x31);
  }
}

//! 8 fp32 lanes in a ymm register. AVX2 has no mask registers: a mask is an integer vector whose
//! lanes are all ones (chosen) or zeros, as vmaskmovps reads it (masked-off lanes never fault).
struct avx2 {
  using reg = __m256;
  using mask = __m256i;
  static constexpr int lanes = 8;
  //! vmaskmovps loads cost more than plain loads in a micro-kernel's loop (Zen 4: 1.1× on a
  //! [16, 256]·[256, 128] product read in place; docs/benchmarks.md "fp32 products on AVX2").
  static constexpr bool masked_loads_cost = true;
  //! The mask of the first min(count, 8) lanes (none for count ≤ 0).
  static mask first_lanes(index_t count) {
    const int n = int(std::clamp<index_t>(count, 0, 8));
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  static reg setzero() { return _mm256_setzero_ps(); }
  static reg set1(float x) { return _mm256_set1_ps(x); }
  static reg load(const float* p) { return _mm256_load_ps(p); }  // 32-byte aligned
  static reg loadu(const float* p) { return _mm256_loadu_ps(p); }
  static reg maskz_loadu(mask m, const float* p) { return _mm256_maskload_ps(p, m); }
  static void store(float* p, reg x) { _mm256_store_ps(p, x); }
  static void storeu(float* p, reg x) { _mm256_storeu_ps(p, x); }
  static void mask_storeu(float* p, mask m, reg x) { _mm256_maskstore_ps(p, m, x); }
  static reg maskz_mov(mask m, reg x) { return _mm256_and_ps(_mm256_castsi256_ps(m), x); }
  static reg add(reg x, reg y) { return _mm256_add_ps(x, y); }
  static reg mul(reg x, reg y) { return _mm256_mul_ps(x, y); }
  static reg fmadd(reg x, reg y, reg z) { return _mm256_fmadd_ps(x, y, z); }  // x·y + z
  static float reduce_add(reg x) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
  }
  //! The [rows, cols] block (each at most 8; either may be 0 or less) of a column-major matrix
  //! at `block` (leading dimension ld) transposed into r: word j of r[i] is block(i, j), zeros
  //! outside the block.
  static void load_transposed(
      const float* block, index_t ld, index_t rows, index_t cols, reg r[8]) {
    const mask load = first_lanes(rows);
    for (index_t j = 0; j < 8; ++j)
      r[j] = j < cols ? (rows >= 8 ? loadu(block + j * ld) : maskz_loadu(load, block + j * ld))
                      : setzero();
    transpose_8x8(r);
  }
};

#endif  // DAFUSE_SIMD_AVX2

#if DAFUSE_SIMD_AVX512 || DAFUSE_SIMD_AVX2

//! The first `count` lanes of p (all of them from count ≥ V::lanes on), zeros in the others. A
//! whole vector is a plain load: AVX2's masked loads and stores (vmaskmovps) cost more.
template <class V>
inline typename V::reg load_first(const float* p, index_t count) {
  return count >= V::lanes ? V::loadu(p) : V::maskz_loadu(V::first_lanes(count), p);
}
//! Stores the first `count` lanes of x at p, the same way.
template <class V>
inline void store_first(float* p, index_t count, typename V::reg x) {
  if (count >= V::lanes)
    V::storeu(p, x);
  else
    V::mask_storeu(p, V::first_lanes(count), x);
}

//! Asks for the lines of a [lanes·Vectors, nv ≤ Cols] tile of C (column-major, ldc) for writing.
//! A micro-kernel does this before its sums: a line the other core has read (the last product's
//! output, packed there as an operand) is then invalidated there while the sums run, not when the
//! tile is stored.
template <class V, int Vectors, int Cols>
inline void prefetch_tile_for_write(float* c, index_t ldc, index_t nv) {
#pragma GCC unroll 16
  for (int j = 0; j < Cols; ++j)
    if (j < nv)
#pragma GCC unroll 2
      for (int v = 0; v < Vectors; ++v) __builtin_prefetch(c + j * ldc + V::lanes * v, 1);
}

//! Stores C[0:mv, 0:nv] = α·acc + β·C for a micro-kernel's [lanes·Vectors, Cols] tile of fp32
//! sums (acc[v][j]: rows lanes·v.. lanes·v + lanes − 1 of column j), nv ≤ Cols; β = 0 does not
//! read C, so NaN there does not propagate. The store both kernels end with. With `Squares`, also
//! returns, lane by lane, the sums of the squares of the values it stored (0 from the lanes it did
//! not store).
template <class V, int Vectors, int Cols, bool Squares = false>
[[gnu::always_inline]] inline typename V::reg store_tile(
    const typename V::reg (&acc)[Vectors][Cols],
    float alpha,
    float beta,
    float* c,
    index_t ldc,
    index_t mv,
    index_t nv) {
  using reg = typename V::reg;
  constexpr int lanes = V::lanes;
  typename V::mask rows[Vectors];
  bool whole[Vectors];
#pragma GCC unroll 2
  for (int v = 0; v < Vectors; ++v) {
    rows[v] = V::first_lanes(mv - lanes * v);
    whole[v] = mv - lanes * v >= lanes;
  }
  const reg va = V::set1(alpha), vb = V::set1(beta);
  // Four sums of squares in turn: one chain of 24 dependent multiply-adds (4 cycles each) costs
  // more than the sums save.
  constexpr int chains = 4;
  reg squares[chains];
#pragma GCC unroll 4
  for (int q = 0; q < chains; ++q) squares[q] = V::setzero();
#pragma GCC unroll 16
  for (int j = 0; j < Cols; ++j) {
    if (j >= nv) break;
#pragma GCC unroll 2
    for (int v = 0; v < Vectors; ++v) {
      float* col = c + j * ldc + lanes * v;
      reg r = V::mul(va, acc[v][j]);
      if (beta != 0.0f)
        r = V::fmadd(vb, whole[v] ? V::loadu(col) : V::maskz_loadu(rows[v], col), r);
      if (whole[v])
        V::storeu(col, r);
      else
        V::mask_storeu(col, rows[v], r);
      if constexpr (Squares) {
        const reg stored = whole[v] ? r : V::maskz_mov(rows[v], r);
        reg& sum = squares[(j * Vectors + v) % chains];
        sum = V::fmadd(stored, stored, sum);
      }
    }
  }
  return V::add(V::add(squares[0], squares[1]), V::add(squares[2], squares[3]));
}

//! store_tile, adding the sum of the squares of the stored values to *squares when it is given
//! (in double: one tile's float sum at a time). Both are always inlined into the micro-kernels:
//! called out of line they take the sums' address, and GCC 12 then stored all 12 ymm sums to the
//! stack on every step of the AVX2 kernel's loop over k (a 10-row product 2.5× slower).
template <class V, int Vectors, int Cols>
[[gnu::always_inline]] inline void store_tile_and_square(
    const typename V::reg (&acc)[Vectors][Cols],
    float alpha,
    float beta,
    float* c,
    index_t ldc,
    index_t mv,
    index_t nv,
    double* squares) {
  if (squares == nullptr)
    store_tile<V, Vectors, Cols>(acc, alpha, beta, c, ldc, mv, nv);
  else
    *squares +=
        double(V::reduce_add(store_tile<V, Vectors, Cols, true>(acc, alpha, beta, c, ldc, mv, nv)));
}

//! dst(j, i) = src(i, j) for a column-major src [rows, cols] (leading dimension lds) and dst
//! [cols, rows] (ldd), in lanes×lanes blocks through registers (masked at the edges), a block row
//! of src at a time so that each of dst's columns is written along its length (a block column at
//! a time puts sixteen stores into one L1 set when dst's columns are 4 KiB apart, as δx's are).
template <class V>
inline void transpose_matrix(
    const float* src, index_t lds, index_t rows, index_t cols, float* dst, index_t ldd) {
  constexpr index_t lanes = V::lanes;
  for (index_t i0 = 0; i0 < rows; i0 += lanes)
    for (index_t j0 = 0; j0 < cols; j0 += lanes) {
      typename V::reg r[lanes];
      V::load_transposed(src + i0 + j0 * lds, lds, rows - i0, cols - j0, r);
      for (index_t i = 0; i < std::min<index_t>(lanes, rows - i0); ++i)
        store_first<V>(dst + j0 + (i0 + i) * ldd, cols - j0, r[i]);
    }
}

//! Whether a blocked_product kernel can pack A's panels in their first tiles (see there).
template <class Kernel>
concept packs_a_in_tiles = requires(index_t kc) {
  { Kernel::packs_a_in_first_tiles(kc) } -> std::same_as<bool>;
};

//! C = α·op(A)·op(B) + β·C on one thread with Goto & van de Geijn's blocking, for a `Kernel`
//! that packs and multiplies its own way (gemm_fp32.hpp, gemm_bf16.hpp). m, n, k > 0. Kernel has
//! `simd` (its vector traits: avx512 or avx2, `lanes` = 16 or 8 of them), `packed` (the buffers'
//! element), `mr` and `nr` (the register tile), `steps(kc)` (packed steps
//! for kc values of k: kc, or ⌈kc/2⌉ bf16 pairs), `pack<KContiguous>(out, width, x, ld, count,
//! kc)` (`count` ≤ width rows of op(X) for one micro-panel, element (i, l) at x[i·ld + l] when
//! KContiguous, else x[i + l·ld]; also called on the terms [l0, l0 + kc) of a panel, writing at
//! out + steps(l0)·width, for l0 a multiple of the kernel's group of terms) and
//! `tile<Vectors>(steps, a, b, α, β, c, ldc, rows, cols, squares)` (one [lanes·Vectors, nr] tile of
//! C from packed panels; β = 0 does not read C; adds the squares of the values it stores to
//! *squares when `squares` is not null: store_tile_and_square). A kernel may also have
//! `packs_a_in_first_tiles(kc)` (packs_a_in_tiles): where that is true of a block of kc terms of
//! an untransposed A and a block of at least nr columns, the block is not packed ahead; each
//! panel's first tile (jr = 0, a whole [mr, nr] tile) runs `tile_packing_a(steps, source, lda, a,
//! b, α, β, c, ldc, rows, cols, squares)`, which reads the panel's rows where they lie and packs
//! them at `a` as it multiplies, for the later tiles to read packed: the same values in the same
//! order, so the same bits. A last panel of at most `lanes` rows is packed ahead (one kernel fewer
//! to compile for a copy of so few rows).
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
  constexpr index_t mr = Kernel::mr, nr = Kernel::nr, lanes = Kernel::simd::lanes;
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
        // Panels of mr rows, the last one one vector wide when it holds no more than `lanes`.
        const auto pack_a = [&](index_t ir, index_t l0, index_t terms) {
          const index_t rows = std::min(mr, mc - ir), width = rows <= lanes ? lanes : mr;
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
        } else if (mc % mr != 0 && mc % mr <= lanes) {
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
            if (rows <= lanes)
              tile.template operator()<1>();
            else
              tile.template operator()<2>();
          }
      }
    }
  }
}

#endif  // DAFUSE_SIMD_AVX512 || DAFUSE_SIMD_AVX2

}  // namespace dafuse::backend::host::detail
