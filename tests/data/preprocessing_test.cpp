// SPDX-License-Identifier: Apache-2.0
// Tests for data/preprocessing.hpp: each recorded step transforms raw rows bit for bit as the
// data set transform it records, dense and sparse, in order; steps that do not fit the rows are
// refused.
#include <dafuse/data/preprocessing.hpp>

#include "../check.hpp"

#include <dafuse/core/rng.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

namespace data_preprocessing_test {

namespace {

namespace dd = dafuse::data;
using dafuse::index_t;
using dd::preprocess_kind;

//! A [rows, width] source set of values in [0, 4) with a constant column and a zero row.
dd::dataset raw_rows(index_t rows, index_t width, std::uint64_t seed, dd::domain side) {
  dafuse::counter_rng rng(seed, dafuse::rng_stream::synthetic_data);
  dd::host_array<float> a{{std::size_t(rows), std::size_t(width)},
                          std::vector<float>(std::size_t(rows * width))};
  for (float& v : a.values) v = 4.0f * rng.uniform<float>();
  for (index_t i = 0; i < rows; ++i) a.values[std::size_t(i * width)] = 1.5f;  // constant
  for (index_t k = 0; k < width; ++k) a.values[std::size_t(2 * width + k)] = 0.0f;
  a.values[std::size_t(2 * width)] = 1.5f;
  return dd::make_dataset("raw", side, std::move(a));
}

//! Whether two float arrays hold the same bits.
bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), 4 * a.size()) == 0;
}

}  // namespace

TEST_CASE("preprocessing applies the dense steps to raw rows bit for bit as the transforms") {
  dd::dataset source = raw_rows(40, 6, 1, dd::domain::source);
  dd::dataset target = raw_rows(30, 6, 2, dd::domain::target);
  const dd::dataset raw_target = target;
  // The CLI's order of work: fit each step on the rows as the steps before left them.
  dd::preprocessing p;
  dd::log1p{}.apply(source);
  dd::log1p{}.apply(target);
  p.add(preprocess_kind::log1p);
  dd::standardize s;
  s.fit(source, target);
  s.apply(source);
  s.apply(target);
  p.add_standardize(s.statistics(dd::domain::target));
  dd::l2_normalize_rows(source);
  dd::l2_normalize_rows(target);
  p.add(preprocess_kind::l2);
  dd::binarize b{0.1f};
  b.apply(target);
  p.add(preprocess_kind::binarize, 0.1f);
  REQUIRE(p.steps().size() == 4);
  CHECK(p.steps()[1].mean == s.statistics().mean);
  CHECK(p.steps()[1].stddev[0] == 0.0);  // the constant column is only centred

  std::vector<float> rows = raw_target.features;
  p.check(6, false, "test");
  p.apply(rows.data(), raw_target.rows, raw_target.width);
  CHECK(same_bits(rows, target.features));
}

TEST_CASE("preprocessing applies the sparse steps to stored values as the CSR transforms do") {
  const dd::dataset dense = raw_rows(12, 7, 3, dd::domain::source);
  dd::sparse_dataset d =
      dd::make_sparse_dataset("raw", dd::domain::source, dd::to_csr(dense.features.data(), 12, 7));
  const std::vector<float> raw = d.features.values;
  dd::preprocessing p;
  dd::log1p_values(d);
  p.add(preprocess_kind::log1p);
  dd::l2_normalize_rows(d);
  p.add(preprocess_kind::l2);
  SUBCASE("log1p then l2") {}
  SUBCASE("and binarize_nonzero") {
    dd::binarize_values(d);
    p.add(preprocess_kind::binarize_nonzero);
  }
  std::vector<float> values = raw;
  p.check(7, true, "test");
  p.apply_sparse(d.features.indptr.data(), values.data(), d.rows());
  CHECK(same_bits(values, d.features.values));
  // A view that starts inside the matrix: offsets are read relative to the first.
  std::vector<float> tail(raw.begin() + d.features.indptr[5], raw.end());
  p.apply_sparse(d.features.indptr.data() + 5, tail.data(), d.rows() - 5);
  CHECK(same_bits(tail, std::vector<float>(d.features.values.begin() + d.features.indptr[5],
                                           d.features.values.end())));
}

TEST_CASE("preprocessing refuses steps that do not fit the rows, naming the step") {
  dd::preprocessing p;
  dd::feature_stats s{"fitted", {0.0, 1.0}, {1.0, 2.0}};
  p.add_standardize(s);
  CHECK_THROWS_WITH_AS(p.check(3, false, "m.npz"),
                       "dafuse: m.npz: preprocess[0] statistics: expected 3 features (the "
                       "network's input width), found 2",
                       dafuse::error);
  CHECK_THROWS_WITH_AS(p.check(2, true, "m.npz"),
                       "dafuse: m.npz: preprocess[0]: expected l2, log1p or binarize_nonzero "
                       "(sparse rows keep their zeros), found standardize",
                       dafuse::error);
  CHECK_NOTHROW(p.check(2, false, "m.npz"));
  dd::preprocessing q;
  q.add(preprocess_kind::binarize_nonzero);
  CHECK_THROWS_WITH_AS(q.check(2, false, "m.npz"),
                       doctest::Contains("preprocess[0]: expected standardize, l2, log1p or "
                                         "binarize (dense rows), found binarize_nonzero"),
                       dafuse::error);
  s.stddev[1] = -1.0;
  CHECK_THROWS_WITH_AS(p.add_standardize(s), doctest::Contains("statistics[1]"), dafuse::error);
  CHECK_THROWS_AS(p.add(preprocess_kind::standardize), dafuse::error);
  CHECK_THROWS_AS(p.add(preprocess_kind::binarize, std::numeric_limits<float>::infinity()),
                  dafuse::error);
}

}  // namespace data_preprocessing_test
