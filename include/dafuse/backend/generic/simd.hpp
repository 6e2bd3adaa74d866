// SPDX-License-Identifier: Apache-2.0
//! @file backend/generic/simd.hpp
//! @brief What dafuse's own AVX-512 product kernels share: 64-byte aligned packing buffers,
//! lane masks and a 16×16 transpose of 32-bit words.
//!
//! The fp32 kernel (gemm_fp32.hpp) and the bf16 kernel (gemm_bf16.hpp) both pack their operands
//! into micro-panels (Goto & van de Geijn's blocking); a panel read along its contiguous index is
//! a copy, one read across it is a transpose of 16×16 blocks. Nothing here runs on a GPU.
#pragma once
#include <dafuse/config.hpp>
#include <dafuse/core/meta.hpp>

#if defined(__AVX512F__) && !defined(__CUDACC__)
#define DAFUSE_SIMD_AVX512 1
#include <immintrin.h>
#else
#define DAFUSE_SIMD_AVX512 0
#endif

#include <algorithm>
#include <cstddef>
#include <memory>
#include <new>

namespace dafuse::backend::generic::detail {

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

//! x rounded up to a multiple of `to`.
inline index_t round_up(index_t x, index_t to) {
  return (x + to - 1) / to * to;
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

#endif  // DAFUSE_SIMD_AVX512

}  // namespace dafuse::backend::generic::detail
