// SPDX-License-Identifier: Apache-2.0
// Tests for data/sampler.hpp: every epoch is a permutation, epochs and streams differ, the order
// depends only on (seed, stream), and the shuffle is uniform.
#include <dafuse/data/sampler.hpp>
#include "../check.hpp"

#include <algorithm>
#include <cstdint>
#include <map>
#include <numeric>
#include <span>
#include <vector>

namespace data_sampler_test {

namespace {

using dafuse::index_t;
using dafuse::rng_stream;
using dafuse::data::epoch_sampler;

//! The next `n` indices of `s`.
std::vector<index_t> take(epoch_sampler& s, index_t n) {
  std::vector<index_t> out(static_cast<std::size_t>(n));
  for (index_t& i : out) i = s.next();
  return out;
}

bool is_permutation_of_rows(std::vector<index_t> v, index_t rows) {
  std::sort(v.begin(), v.end());
  std::vector<index_t> expected(static_cast<std::size_t>(rows));
  std::iota(expected.begin(), expected.end(), index_t(0));
  return v == expected;
}

}  // namespace

TEST_CASE("each epoch of an epoch_sampler is a permutation of [0, rows)") {
  const index_t rows = 37;
  epoch_sampler s(rows, 5, rng_stream::source_sampler);
  CHECK(s.rows() == rows);
  for (int epoch = 0; epoch < 6; ++epoch) {
    CAPTURE(epoch);
    CHECK(is_permutation_of_rows(take(s, rows), rows));
  }
}

TEST_CASE("an epoch_sampler counts the passes it has made over the rows") {
  epoch_sampler s(4, 1, rng_stream::target_sampler);
  CHECK(s.epoch() == 0);
  take(s, 5);  // the whole first epoch and the first index of the second
  CHECK(s.epoch() == 1);
  take(s, 4);
  CHECK(s.epoch() == 2);
}

TEST_CASE("consecutive epochs of an epoch_sampler are shuffled differently") {
  const index_t rows = 37;
  epoch_sampler s(rows, 5, rng_stream::source_sampler);
  std::vector<index_t> previous = take(s, rows);
  // The first epoch is shuffled too, not left in order.
  std::vector<index_t> identity(static_cast<std::size_t>(rows));
  std::iota(identity.begin(), identity.end(), index_t(0));
  CHECK(previous != identity);
  for (int epoch = 1; epoch < 5; ++epoch) {
    CAPTURE(epoch);
    const std::vector<index_t> current = take(s, rows);
    CHECK(current != previous);
    previous = current;
  }
}

TEST_CASE("the same seed and stream give the same sequence of indices") {
  epoch_sampler a(23, 99, rng_stream::source_sampler), b(23, 99, rng_stream::source_sampler);
  CHECK(take(a, 200) == take(b, 200));
}

TEST_CASE("a different stream or seed gives a different sequence") {
  const std::vector<index_t> base = [] {
    epoch_sampler s(23, 99, rng_stream::source_sampler);
    return take(s, 46);
  }();
  epoch_sampler other_stream(23, 99, rng_stream::target_sampler);
  CHECK(take(other_stream, 46) != base);
  epoch_sampler other_seed(23, 100, rng_stream::source_sampler);
  CHECK(take(other_seed, 46) != base);
}

TEST_CASE("fill draws the same indices as repeated next()") {
  epoch_sampler a(11, 3, rng_stream::user), b(11, 3, rng_stream::user);
  std::vector<index_t> filled(30);
  a.fill(std::span<index_t>(filled).first(13));
  a.fill(std::span<index_t>(filled).subspan(13));
  CHECK(filled == take(b, 30));
}

TEST_CASE("an epoch_sampler over one row always gives row 0") {
  epoch_sampler s(1, 8, rng_stream::source_sampler);
  for (int i = 0; i < 10; ++i) CHECK(s.next() == 0);
}

TEST_CASE("an epoch_sampler over no rows throws dafuse::error naming rows") {
  CHECK_THROWS_WITH_AS(epoch_sampler(0, 1, rng_stream::source_sampler),
                       doctest::Contains("epoch_sampler: rows: expected at least 1, found 0"),
                       dafuse::error);
  CHECK_THROWS_WITH_AS(epoch_sampler(-3, 1, rng_stream::source_sampler),
                       doctest::Contains("found -3"), dafuse::error);
}

TEST_CASE("the shuffle draws every permutation of three rows about equally often") {
  // Fisher-Yates with a uniform swap partner gives each of the 3! orders probability 1/6; a
  // classic off-by-one (partner in [0, i) instead of [0, i]) reaches only the 2 cyclic ones.
  const int epochs = 6000;
  epoch_sampler s(3, 2024, rng_stream::synthetic_data);
  std::map<std::vector<index_t>, int> counts;
  for (int e = 0; e < epochs; ++e) ++counts[take(s, 3)];
  CHECK(counts.size() == 6);
  double chi_square = 0;
  const double expected = epochs / 6.0;
  for (const auto& [order, c] : counts) chi_square += (c - expected) * (c - expected) / expected;
  // 5 degrees of freedom: mean 5, P(chi² > 30) ≈ 1.5e-5.
  CHECK(chi_square < 30);
}

TEST_CASE("seek(k) continues exactly where k draws from the start left off") {
  // Every k from 0 to past three epochs, including the epoch boundaries where next() moves on
  // lazily: a resumed sampler must draw what the uninterrupted one draws.
  const index_t rows = 5;
  for (std::uint64_t k = 0; k <= 17; ++k) {
    CAPTURE(k);
    epoch_sampler straight(rows, 77, rng_stream::target_sampler);
    (void)take(straight, int(k));
    epoch_sampler resumed(rows, 77, rng_stream::target_sampler);
    (void)take(resumed, 3);  // somewhere else first: seek does not depend on the current place
    resumed.seek(k);
    CHECK(resumed.draws() == k);
    CHECK(resumed.epoch() == straight.epoch());
    CHECK(take(resumed, 12) == take(straight, 12));
  }
}

}  // namespace data_sampler_test
