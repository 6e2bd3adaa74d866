// SPDX-License-Identifier: Apache-2.0
//! @file core/half.hpp
//! @brief Rounding fp32 values to the 16-bit formats bf16 and fp16, kept in fp32 slots.
//!
//! Mixed precision in dafuse stores values in fp32 slots that hold exactly what a 16-bit store
//! would hold: rounding is the only place where the narrow format shows. The product of two bf16
//! values (8-bit significands) or two fp16 values (11-bit significands) fits a 24-bit fp32
//! significand exactly, so an fp32 product of rounded operands, accumulated in fp32, is what a
//! bf16/fp16 tensor-core or AVX512-BF16 product computes, up to the order of the sums.
//!
//! Both roundings are round-to-nearest-even, as the hardware conversions (`vcvtneps2bf16`,
//! `vcvtps2ph` with the default mode, CUDA's `__float2bfloat16_rn`/`__float2half_rn`) are.
//! fp16 keeps its range: magnitudes from 65520 up become ±Inf, which is how a loss-scaled
//! gradient overflows; those below 2^-25 become ±0 and those in between keep fp16's subnormal
//! spacing of 2^-24, which is how an unscaled gradient underflows.
#pragma once
#include <dafuse/config.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

namespace dafuse {

//! The 16 bits of `x` rounded to bf16 (sign, 8-bit exponent, 7-bit fraction), NaN kept quiet.
constexpr std::uint16_t bf16_bits(float x) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return std::uint16_t((u >> 16) | 0x40u);  // quiet NaN
  // Round to nearest even on the 16 dropped bits: add 0x7fff plus the kept part's lowest bit.
  const std::uint32_t rounded = u + 0x7fffu + ((u >> 16) & 1u);
  return std::uint16_t(rounded >> 16);
}

//! The fp32 value of bf16 bits.
constexpr float bf16_value(std::uint16_t bits) {
  return std::bit_cast<float>(std::uint32_t(bits) << 16);
}

//! `x` rounded to the nearest bf16 value (ties to even), returned as fp32. Overflow rounds to
//! ±Inf only beyond bf16's largest finite value, 3.39e38, as fp32's own range nearly is.
constexpr float round_to_bf16(float x) {
  return bf16_value(bf16_bits(x));
}

//! `x` rounded to the nearest fp16 value (ties to even), returned as fp32: ±Inf from 65520 up,
//! subnormals with spacing 2^-24 below 2^-14, ±0 below 2^-25.
inline float round_to_fp16(float x) {
  if (!std::isfinite(x)) return x;
  const float a = std::fabs(x);
  // 65520 is halfway between fp16's largest finite value 65504 and the next step, 65536.
  if (a >= 65520.0f) return std::copysign(std::numeric_limits<float>::infinity(), x);
  if (a < 0x1p-14f) {
    // Subnormal range: a fixed spacing of 2^-24. Scaling by 2^24 is exact, nearbyint rounds to
    // nearest even in the default rounding mode, and scaling back is exact.
    return std::copysign(std::nearbyint(a * 0x1p24f) * 0x1p-24f, x);
  }
  // Normal range: keep 10 fraction bits of fp32's 23, rounding the 13 dropped bits to even.
  const std::uint32_t u = std::bit_cast<std::uint32_t>(x);
  const std::uint32_t rounded = (u + 0xfffu + ((u >> 13) & 1u)) & ~std::uint32_t(0x1fff);
  return std::bit_cast<float>(rounded);
}

//! Largest finite fp16 value.
inline constexpr float fp16_max = 65504.0f;

//! The formats a step can store its values in.
enum class number_format { fp64, fp32, bf16, fp16 };

//! `x` rounded to format F (values already of F's precision or wider formats pass unchanged).
template <number_format F, class T>
inline T round_to(T x) {
  if constexpr (F == number_format::bf16)
    return T(round_to_bf16(float(x)));
  else if constexpr (F == number_format::fp16)
    return T(round_to_fp16(float(x)));
  else
    return x;
}

//! Whether values stored in format F need rounding from fp32 (a 16-bit format).
template <number_format F>
inline constexpr bool is_narrow = F == number_format::bf16 || F == number_format::fp16;

}  // namespace dafuse
