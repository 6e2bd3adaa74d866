// SPDX-License-Identifier: Apache-2.0
// Tests for core/rng.hpp: Philox4x32-10 against the Random123 known answers, and the statistics
// and stream separation of counter_rng.
#include <dafuse/core/rng.hpp>
#include "../check.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace core_rng_test {

namespace {

using dafuse::counter_rng;
using dafuse::philox4x32_10;
using dafuse::philox_counter;
using dafuse::philox_key;
using dafuse::rng_stream;

// Known-answer vectors of Random123 1.14 (kat_vectors, "philox4x32 10" lines): counter, key,
// expected output.
struct philox_kat {
  philox_counter ctr;
  philox_key key;
  philox_counter expected;
};

constexpr std::array<philox_kat, 3> philox_kats = {{
    {{0x00000000u, 0x00000000u, 0x00000000u, 0x00000000u},
     {0x00000000u, 0x00000000u},
     {0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}},
    {{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu},
     {0xffffffffu, 0xffffffffu},
     {0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}},
    {{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u},
     {0xa4093822u, 0x299f31d0u},
     {0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}},
}};

// A draw is usable in constant expressions (so tables of draws can be built at compile time).
static_assert(philox4x32_10(philox_kats[2].ctr, philox_kats[2].key) == philox_kats[2].expected,
              "philox4x32_10 must be constexpr and match Random123");
static_assert(counter_rng(0, rng_stream::init).draw(5) ==
                  philox4x32_10({1, 0, 0, std::uint32_t(rng_stream::init)}, {0, 0})[1],
              "counter_rng::draw must be constexpr");

//! The first `n` words of the serial walk of `rng` (a copy: the argument is left as it was).
std::vector<std::uint32_t> walk(counter_rng rng, int n) {
  std::vector<std::uint32_t> out;
  for (int i = 0; i < n; ++i) out.push_back(rng.next());
  return out;
}

//! How many of the first `n` words two generators have in common, position by position.
int same_words(const counter_rng& a, const counter_rng& b, int n) {
  int same = 0;
  for (int i = 0; i < n; ++i) same += a.draw(std::uint64_t(i)) == b.draw(std::uint64_t(i));
  return same;
}

}  // namespace

TEST_CASE("philox4x32_10 reproduces the Random123 known-answer vectors") {
  for (const philox_kat& k : philox_kats) {
    const philox_counter out = philox4x32_10(k.ctr, k.key);
    for (std::size_t w = 0; w < 4; ++w) {
      CAPTURE(w);
      CHECK(out[w] == k.expected[w]);
    }
  }
}

TEST_CASE("counter_rng::draw(i) is the key, the stream and the block index fed to Philox") {
  // Seed splits into the key; stream and substream sit in the upper counter words, the block
  // index (i / 4) in the lower two, and i % 4 picks the word.
  const std::uint64_t seed = 0x0123456789abcdefull;
  const counter_rng rng(seed, rng_stream::target_sampler, 7);
  const philox_key key = {0x89abcdefu, 0x01234567u};
  for (const std::uint64_t i : {0ull, 1ull, 3ull, 4ull, 11ull, (1ull << 34) + 6ull}) {
    CAPTURE(i);
    const std::uint64_t block = i / 4;
    const philox_counter ctr = {std::uint32_t(block), std::uint32_t(block >> 32), 7u,
                                std::uint32_t(rng_stream::target_sampler)};
    CHECK(rng.draw(i) == philox4x32_10(ctr, key)[i % 4]);
  }
}

TEST_CASE("counter_rng::draw(i) equals the i-th word of the serial next() walk") {
  counter_rng rng(12345, rng_stream::user, 3);
  const counter_rng fresh = rng;
  for (std::uint64_t i = 0; i < 257; ++i) {
    CAPTURE(i);
    CHECK(rng.position() == i);
    REQUIRE(rng.next() == fresh.draw(i));
  }
  CHECK(rng.position() == 257);
}

TEST_CASE("different seeds, streams and substreams give different words") {
  const counter_rng base(42, rng_stream::source_sampler, 0);
  const int n = 256;
  // Independent 32-bit words agree by chance with probability 2^-32 each.
  CHECK(same_words(base, counter_rng(43, rng_stream::source_sampler, 0), n) == 0);
  CHECK(same_words(base, counter_rng(42 + (1ull << 32), rng_stream::source_sampler, 0), n) == 0);
  CHECK(same_words(base, counter_rng(42, rng_stream::target_sampler, 0), n) == 0);
  CHECK(same_words(base, counter_rng(42, rng_stream::source_sampler, 1), n) == 0);
  CHECK(same_words(base, counter_rng(42, rng_stream::source_sampler, 0), n) == n);
  // Within one stream the words are not repeated either.
  const std::vector<std::uint32_t> w = walk(base, n);
  int repeats = 0;
  for (int i = 1; i < n; ++i) repeats += w[std::size_t(i)] == w[std::size_t(i - 1)];
  CHECK(repeats == 0);
}

TEST_CASE("uniform() lies in [0, 1) with mean 1/2 and variance 1/12") {
  counter_rng rng(7, rng_stream::synthetic_data);
  const int n = 100000;
  double sum = 0, sum_sq = 0, lo = 1, hi = 0;
  for (int i = 0; i < n; ++i) {
    const double u = rng.uniform<double>();
    REQUIRE(u >= 0.0);
    REQUIRE(u < 1.0);
    lo = std::min(lo, u);
    hi = std::max(hi, u);
    sum += u;
    sum_sq += u * u;
  }
  const double mean = sum / n, var = sum_sq / n - mean * mean;
  // Standard error of the mean: sqrt(1/12 / 1e5) ≈ 0.0009; the bound is about 5.5 of them.
  CHECK(std::abs(mean - 0.5) < 0.005);
  CHECK(std::abs(var - 1.0 / 12.0) < 0.003);
  CHECK(lo < 0.001);
  CHECK(hi > 0.999);
}

TEST_CASE("uniform(lo, hi) and the float version stay in their half-open ranges") {
  counter_rng rng(8, rng_stream::synthetic_data);
  double sum = 0;
  for (int i = 0; i < 10000; ++i) {
    const float f = rng.uniform<float>();
    REQUIRE(f >= 0.0f);
    REQUIRE(f < 1.0f);
    const double x = rng.uniform<double>(-3.0, 5.0);
    REQUIRE(x >= -3.0);
    REQUIRE(x < 5.0);
    sum += x;
  }
  CHECK(std::abs(sum / 10000 - 1.0) < 0.15);  // mean of U(-3, 5) is 1, sd of the mean ≈ 0.023
}

TEST_CASE("normal() has mean 0, variance 1 and the Gaussian mass within one sigma") {
  counter_rng rng(9, rng_stream::init);
  const int n = 100000;
  double sum = 0, sum_sq = 0;
  int within_one = 0;
  for (int i = 0; i < n; ++i) {
    const double z = rng.normal<double>();
    REQUIRE(std::isfinite(z));
    sum += z;
    sum_sq += z * z;
    within_one += std::abs(z) < 1.0;
  }
  const double mean = sum / n, var = sum_sq / n - mean * mean;
  // Standard errors: mean 0.0032, variance 0.0045, P(|z| < 1) 0.0015.
  CHECK(std::abs(mean) < 0.02);
  CHECK(std::abs(var - 1.0) < 0.03);
  CHECK(std::abs(double(within_one) / n - 0.682689) < 0.01);
}

TEST_CASE("below(n) stays in [0, n) and hits every value about equally often") {
  counter_rng rng(10, rng_stream::user);
  const std::uint32_t n = 10;
  const int draws = 100000;
  std::array<int, n> counts{};
  for (int i = 0; i < draws; ++i) {
    const std::uint32_t v = rng.below(n);
    REQUIRE(v < n);
    ++counts[v];
  }
  double chi_square = 0;
  const double expected = double(draws) / n;
  for (const int c : counts) chi_square += (c - expected) * (c - expected) / expected;
  // 9 degrees of freedom: mean 9, P(chi² > 40) ≈ 7e-6.
  CHECK(chi_square < 40);

  counter_rng one(11, rng_stream::user);
  for (int i = 0; i < 100; ++i) REQUIRE(one.below(1) == 0u);
}

}  // namespace core_rng_test
