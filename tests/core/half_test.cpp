// SPDX-License-Identifier: Apache-2.0
// Tests for core/half.hpp: rounding to bf16 and fp16 against a naive "nearest representable
// value, ties to even" search over every value of the format.
#include <dafuse/core/half.hpp>
#include "../check.hpp"

#include <dafuse/core/rng.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace core_half_test {

namespace {

// A 16-bit format as its list of non-negative finite values (ascending) with their bit
// patterns' parity: the reference rounds by searching this list.
struct format_table {
  std::vector<double> values;
  std::vector<bool> even;  // the last fraction bit is 0
};

// bf16: fp32's top 16 bits. fp16: 1 sign, 5 exponent, 10 fraction bits (bias 15), built from
// its definition with ldexp, independently of the code under test.
format_table bf16_table() {
  format_table t;
  for (std::uint32_t bits = 0; bits < 0x7f80u; ++bits) {
    t.values.push_back(double(std::bit_cast<float>(bits << 16)));
    t.even.push_back((bits & 1u) == 0);
  }
  return t;
}

format_table fp16_table() {
  format_table t;
  for (std::uint32_t bits = 0; bits < 0x7c00u; ++bits) {
    const std::uint32_t exponent = bits >> 10, fraction = bits & 0x3ffu;
    const double v = exponent == 0
                         ? std::ldexp(double(fraction), -24)
                         : std::ldexp(1.0 + double(fraction) / 1024.0, int(exponent) - 15);
    t.values.push_back(v);
    t.even.push_back((bits & 1u) == 0);
  }
  return t;
}

// Round-to-nearest-even by search; beyond the largest value, IEEE's rule: overflow to ∞ when |x|
// is at least the largest value plus half a step (the step past the largest finite one).
double reference_round(const format_table& t, double x) {
  const double a = std::fabs(x);
  const double largest = t.values.back();
  const double next_step = largest - t.values[t.values.size() - 2];
  if (a >= largest + next_step / 2)
    return std::copysign(std::numeric_limits<double>::infinity(), x);
  const auto hi = std::lower_bound(t.values.begin(), t.values.end(), a);
  if (hi == t.values.end()) return std::copysign(largest, x);
  if (*hi == a || hi == t.values.begin()) return std::copysign(*hi, x);
  const auto lo = hi - 1;
  const double down = a - *lo, up = *hi - a;
  const bool take_hi = up < down || (up == down && t.even[std::size_t(hi - t.values.begin())]);
  return std::copysign(take_hi ? *hi : *lo, x);
}

// Values that stress rounding: random magnitudes over the whole range, exact halfway points
// and their neighbours, the format's boundaries.
std::vector<float> probes(const format_table& t) {
  std::vector<float> v;
  dafuse::counter_rng rng(5, dafuse::rng_stream::synthetic_data);
  for (int i = 0; i < 20000; ++i) {
    const float m = std::ldexp(1.0f + rng.uniform<float>(), int(rng.below(80)) - 40);
    v.push_back(rng.below(2) ? m : -m);
  }
  for (std::size_t i = 1; i < t.values.size(); i += 97) {
    const float mid = float((t.values[i - 1] + t.values[i]) / 2);
    v.insert(v.end(), {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e30f), -mid,
                       float(t.values[i])});
  }
  v.insert(v.end(), {0.0f, -0.0f, 65504.0f, 65519.99f, 65520.0f, 1e5f, 0x1p-24f, 0x1p-25f,
                     0x1.0001p-25f, 3e-8f, 0x1p-14f, 0x1.ffp-15f, 3.0e38f, 3.4e38f});
  return v;
}

}  // namespace

TEST_CASE("round_to_bf16 is round-to-nearest-even onto bf16's values") {
  const format_table t = bf16_table();
  for (const float x : probes(t)) {
    CAPTURE(x);
    const float r = dafuse::round_to_bf16(x);
    CHECK((std::bit_cast<std::uint32_t>(r) & 0xffffu) == 0);  // a bf16 value
    const double expected = reference_round(t, double(x));
    // bf16 values are fp32 values, so the reference's result is exact in float.
    CHECK(double(r) == expected);
  }
}

TEST_CASE("round_to_bf16 keeps infinities and NaN") {
  const float inf = std::numeric_limits<float>::infinity();
  CHECK(dafuse::round_to_bf16(inf) == inf);
  CHECK(dafuse::round_to_bf16(-inf) == -inf);
  CHECK(std::isnan(dafuse::round_to_bf16(std::numeric_limits<float>::quiet_NaN())));
  // A signalling-looking NaN whose payload sits in the dropped bits must not become ∞.
  CHECK(std::isnan(dafuse::round_to_bf16(std::bit_cast<float>(0x7f800001u))));
}

TEST_CASE("round_to_fp16 is round-to-nearest-even onto fp16's values, with its range") {
  const format_table t = fp16_table();
  for (const float x : probes(t)) {
    CAPTURE(x);
    const float r = dafuse::round_to_fp16(x);
    CHECK(double(r) == reference_round(t, double(x)));
  }
  CHECK(dafuse::round_to_fp16(65519.0f) == dafuse::fp16_max);
  CHECK(std::isinf(dafuse::round_to_fp16(65520.0f)));
  CHECK(dafuse::round_to_fp16(0x1p-26f) == 0.0f);  // underflow: what a loss scale prevents
}

TEST_CASE("round_to<F> dispatches by format and leaves wide formats alone") {
  CHECK(dafuse::round_to<dafuse::number_format::fp32>(1.0000001f) == 1.0000001f);
  CHECK(dafuse::round_to<dafuse::number_format::fp64>(1.0 + 1e-12) == 1.0 + 1e-12);
  CHECK(dafuse::round_to<dafuse::number_format::bf16>(1.005f) == 1.0078125f);
  CHECK(dafuse::round_to<dafuse::number_format::fp16>(1.005f) == 1.0048828125f);
  static_assert(dafuse::is_narrow<dafuse::number_format::bf16>);
  static_assert(!dafuse::is_narrow<dafuse::number_format::fp32>);
}

}  // namespace core_half_test
