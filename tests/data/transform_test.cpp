// SPDX-License-Identifier: Apache-2.0
// Tests for data/transform.hpp: each transform against a plain double-precision computation,
// fitting on the source only (or on each domain), composition order, and every error message.
#include <dafuse/data/transform.hpp>
#include "../check.hpp"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace data_transform_test {

namespace {

using dafuse::index_t;
using dafuse::data::dataset;
using dafuse::data::domain;
using dafuse::data::fit_on;
using dafuse::data::host_array;

//! A set of `rows` x `width` values offset + spread·u, u uniform in [0, 1) from `seed`; feature
//! k gets its own offset (k·offset) so every column has a different mean.
dataset random_set(std::string origin,
                   domain side,
                   std::size_t rows,
                   std::size_t width,
                   float offset,
                   float spread,
                   std::uint32_t seed) {
  std::mt19937 g(seed);
  host_array<float> a{{rows, width}, std::vector<float>(rows * width)};
  for (std::size_t i = 0; i < a.values.size(); ++i) {
    const double u = double(g() >> 8) * 0x1p-24;  // 24 random bits, the same on every library
    a.values[i] = float(double(i % width) * offset + spread * u);
  }
  return dafuse::data::make_dataset(std::move(origin), side, std::move(a));
}

//! A set built from a row-major list of rows.
dataset rows_of(std::string origin, domain side, const std::vector<std::vector<float>>& rows) {
  host_array<float> a{{rows.size(), rows.front().size()}, {}};
  for (const auto& r : rows) a.values.insert(a.values.end(), r.begin(), r.end());
  return dafuse::data::make_dataset(std::move(origin), side, std::move(a));
}

//! Naive population mean and standard deviation of column k, in double.
struct column_stats {
  double mean = 0, stddev = 0;
};
column_stats naive_stats(const dataset& d, index_t k) {
  column_stats s;
  for (index_t i = 0; i < d.rows; ++i) s.mean += d.row(i)[k];
  s.mean /= double(d.rows);
  for (index_t i = 0; i < d.rows; ++i) s.stddev += std::pow(d.row(i)[k] - s.mean, 2);
  s.stddev = std::sqrt(s.stddev / double(d.rows));
  return s;
}

//! Checks `got` equals `before` standardised column by column with `stats_of` (a set whose
//! naive statistics are used), to float rounding.
void check_standardized(const dataset& got, const dataset& before, const dataset& stats_of) {
  REQUIRE(got.rows == before.rows);
  REQUIRE(got.width == before.width);
  for (index_t k = 0; k < got.width; ++k) {
    const column_stats s = naive_stats(stats_of, k);
    for (index_t i = 0; i < got.rows; ++i) {
      const double want = (before.row(i)[k] - s.mean) / s.stddev;
      CAPTURE(i);
      CAPTURE(k);
      CHECK(double(got.row(i)[k]) == doctest::Approx(want).epsilon(1e-6).scale(1.0));
    }
  }
}

}  // namespace

static_assert(dafuse::data::dataset_transform<dafuse::data::standardize>);
static_assert(dafuse::data::dataset_transform<dafuse::data::l2_rows>);
static_assert(dafuse::data::dataset_transform<dafuse::data::log1p>);
static_assert(dafuse::data::dataset_transform<dafuse::data::binarize>);
static_assert(dafuse::data::dataset_transform<dafuse::data::scale>);
static_assert(dafuse::data::dataset_transform<
              dafuse::data::transforms<dafuse::data::scale, dafuse::data::l2_rows>>);
static_assert(!dafuse::data::dataset_transform<int>);

TEST_CASE("standardize fitted on the source moves source and target by the source's statistics") {
  const dataset source = random_set("src", domain::source, 50, 4, 3.0f, 2.0f, 1);
  const dataset target = random_set("tgt", domain::target, 30, 4, -1.0f, 5.0f, 2);
  dafuse::data::standardize t;
  CHECK(t.mode() == fit_on::source);
  CHECK_FALSE(t.fitted());
  t.fit(source, target);
  CHECK(t.fitted());
  dataset s = source, g = target;
  t.apply(s);
  t.apply(g);
  check_standardized(s, source, source);
  check_standardized(g, target, source);  // the target is not centred on its own mean

  // The kept statistics are the naive ones, and rows of either side read the same.
  const dafuse::data::feature_stats& st = t.statistics();
  CHECK(st.origin == "src");
  REQUIRE(st.width() == 4);
  for (index_t k = 0; k < 4; ++k) {
    CHECK(st.mean[std::size_t(k)] == doctest::Approx(naive_stats(source, k).mean).epsilon(1e-12));
    CHECK(st.stddev[std::size_t(k)] ==
          doctest::Approx(naive_stats(source, k).stddev).epsilon(1e-12));
  }
  CHECK(&t.statistics(domain::target) == &st);
}

TEST_CASE("standardize fitted on the source does not see the target's values") {
  const dataset source = random_set("src", domain::source, 40, 3, 1.0f, 1.0f, 3);
  const dataset target_a = random_set("a", domain::target, 20, 3, 10.0f, 1.0f, 4);
  const dataset target_b = random_set("b", domain::target, 70, 3, -50.0f, 9.0f, 5);
  dafuse::data::standardize ta, tb;
  ta.fit(source, target_a);
  tb.fit(source, target_b);
  CHECK(ta.statistics().mean == tb.statistics().mean);
  CHECK(ta.statistics().stddev == tb.statistics().stddev);
  dataset sa = source, sb = source;
  ta.apply(sa);
  tb.apply(sb);
  CHECK(sa.features == sb.features);
}

TEST_CASE("standardize fitted on each domain gives each set its own statistics") {
  const dataset source = random_set("src", domain::source, 50, 3, 3.0f, 2.0f, 6);
  const dataset target = random_set("tgt", domain::target, 35, 3, -1.0f, 5.0f, 7);
  dafuse::data::standardize t(fit_on::each_domain);
  t.fit(source, target);
  dataset s = source, g = target;
  t.apply(s);
  t.apply(g);
  check_standardized(s, source, source);
  check_standardized(g, target, target);
  CHECK(t.statistics(domain::source).origin == "src");
  CHECK(t.statistics(domain::target).origin == "tgt");

  // A target test set drawn later gets the target training set's statistics, not its own.
  const dataset test = random_set("test", domain::target, 10, 3, 4.0f, 1.0f, 8);
  dataset tt = test;
  t.apply(tt);
  check_standardized(tt, test, target);
}

TEST_CASE("standardize only centres a feature that is constant on the fitted set") {
  // 0.1f seven times: the double mean of the float values need not equal them exactly, so a
  // naive std would be a rounding residue instead of 0. Column 1 varies.
  std::vector<std::vector<float>> rows;
  for (int i = 0; i < 7; ++i) rows.push_back({0.1f, float(i)});
  const dataset source = rows_of("src", domain::source, rows);
  const dataset target = rows_of("tgt", domain::target, {{1.1f, 3.0f}, {0.1f, 0.0f}});
  dafuse::data::standardize t;
  t.fit(source, target);
  CHECK(t.statistics().stddev[0] == 0.0);
  CHECK(t.statistics().stddev[1] > 0.0);
  dataset s = source, g = target;
  t.apply(s);
  t.apply(g);
  for (index_t i = 0; i < s.rows; ++i) CHECK(std::abs(s.row(i)[0]) < 1e-7f);
  CHECK(g.row(0)[0] == doctest::Approx(1.0).epsilon(1e-6));  // offset from the constant, not /0
  CHECK(std::abs(g.row(1)[0]) < 1e-7f);
  for (const float v : g.features) CHECK(std::isfinite(v));
}

TEST_CASE("standardize refuses to apply before it is fitted, naming the data set") {
  dataset d = random_set("data/x.npy", domain::source, 5, 2, 1.0f, 1.0f, 9);
  const dafuse::data::standardize t;
  CHECK_THROWS_WITH_AS(t.apply(d),
                       "dafuse: data/x.npy: standardize: expected statistics fitted on the source "
                       "set first (call fit, fit_apply or set_statistics), found an unfitted "
                       "transform",
                       dafuse::error);
  CHECK_THROWS_WITH_AS((void)t.statistics(), doctest::Contains("standardize: standardize:"),
                       dafuse::error);

  // Fitted on each domain with only source statistics installed: target rows are refused.
  dafuse::data::standardize each(fit_on::each_domain);
  each.set_statistics(domain::source, {"saved", {0.0, 1.0}, {1.0, 2.0}});
  CHECK_FALSE(each.fitted());
  dataset g = random_set("data/t.npy", domain::target, 5, 2, 1.0f, 1.0f, 10);
  CHECK_THROWS_WITH_AS(each.apply(g),
                       doctest::Contains("data/t.npy: standardize: expected statistics fitted on "
                                         "the target set first"),
                       dafuse::error);
}

TEST_CASE("standardize refuses data of another width than it was fitted on") {
  const dataset source = random_set("src.npy", domain::source, 8, 3, 1.0f, 1.0f, 11);
  const dataset target = random_set("tgt.npy", domain::target, 8, 3, 1.0f, 1.0f, 12);
  dafuse::data::standardize t;
  t.fit(source, target);
  dataset wide = random_set("wide.npy", domain::target, 4, 5, 1.0f, 1.0f, 13);
  CHECK_THROWS_WITH_AS(t.apply(wide),
                       "dafuse: wide.npy: feature width: expected 3 (the width standardize was "
                       "fitted on, from src.npy), found 5",
                       dafuse::error);
}

TEST_CASE("fit rejects sets given in the wrong order or of different widths") {
  const dataset source = random_set("src.npy", domain::source, 8, 3, 1.0f, 1.0f, 14);
  const dataset target = random_set("tgt.npy", domain::target, 8, 3, 1.0f, 1.0f, 15);
  const dataset narrow = random_set("narrow.npy", domain::target, 8, 2, 1.0f, 1.0f, 16);
  dafuse::data::standardize t;
  CHECK_THROWS_WITH_AS(t.fit(target, source),
                       "dafuse: tgt.npy: side: expected domain::source (fit takes the source set "
                       "first), found domain::target",
                       dafuse::error);
  CHECK_THROWS_WITH_AS(t.fit(source, source),
                       doctest::Contains("src.npy: side: expected "
                                         "domain::target"),
                       dafuse::error);
  CHECK_THROWS_WITH_AS(t.fit(source, narrow),
                       "dafuse: narrow.npy: feature width: expected 3 (the width of the source "
                       "set src.npy), found 2",
                       dafuse::error);
  CHECK_FALSE(t.fitted());
  auto chain = dafuse::data::transforms(dafuse::data::l2_rows{});
  CHECK_THROWS_WITH_AS(chain.fit(source, narrow), doctest::Contains("narrow.npy: feature width"),
                       dafuse::error);
}

TEST_CASE("standardize refuses to fit on a set with no rows") {
  dataset empty;
  empty.origin = "hand-made";
  empty.width = 3;
  const dataset target = random_set("tgt", domain::target, 4, 3, 1.0f, 1.0f, 26);
  dafuse::data::standardize t;
  CHECK_THROWS_WITH_AS(t.fit(empty, target),
                       "dafuse: hand-made: features: expected at least one row and one feature to "
                       "fit statistics on, found 0 rows of width 3 in 0 values",
                       dafuse::error);
}

TEST_CASE("standardize statistics saved and set again transform exactly like the fitted ones") {
  const dataset source = random_set("src", domain::source, 30, 4, 2.0f, 3.0f, 17);
  const dataset target = random_set("tgt", domain::target, 30, 4, 2.0f, 3.0f, 18);
  dafuse::data::standardize fitted(fit_on::each_domain);
  fitted.fit(source, target);
  dafuse::data::standardize restored(fit_on::each_domain);
  restored.set_statistics(domain::source, fitted.statistics(domain::source));
  restored.set_statistics(domain::target, fitted.statistics(domain::target));
  CHECK(restored.fitted());
  dataset a = target, b = target;
  fitted.apply(a);
  restored.apply(b);
  CHECK(a.features == b.features);
}

TEST_CASE("standardize set_statistics rejects statistics it could not apply") {
  const char* where = "dafuse: standardize::set_statistics: ";
  dafuse::data::standardize t;
  CHECK_THROWS_WITH_AS(t.set_statistics(domain::target, {"x", {0.0}, {1.0}}),
                       (std::string(where) + "side: expected domain::source (fit_on::source "
                                             "applies the source's statistics), found "
                                             "domain::target")
                           .c_str(),
                       dafuse::error);
  CHECK_THROWS_WITH_AS(
      t.set_statistics(domain::source, {"x", {0.0, 1.0}, {1.0}}),
      (std::string(where) + "stddev: expected 2 values, one per mean, and at least one, found 1")
          .c_str(),
      dafuse::error);
  CHECK_THROWS_WITH_AS(t.set_statistics(domain::source, {"x", {}, {}}),
                       doctest::Contains("stddev: expected 0 values"), dafuse::error);
  CHECK_THROWS_WITH_AS(
      t.set_statistics(domain::source, {"x", {0.0, 1.0}, {1.0, -1.0}}),
      (std::string(where) + "stddev[1]: expected a finite value >= 0, found -1.000000").c_str(),
      dafuse::error);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  CHECK_THROWS_WITH_AS(t.set_statistics(domain::source, {"x", {nan}, {1.0}}),
                       doctest::Contains("mean[0]: expected a finite value"), dafuse::error);
  CHECK_FALSE(t.fitted());
}

TEST_CASE("standardize reports a result that overflows float instead of storing inf") {
  const dataset source = rows_of("src", domain::source, {{0.0f}, {1e-30f}});
  const dataset target = rows_of("tgt", domain::target, {{3e38f}});
  dafuse::data::standardize t;
  t.fit(source, target);
  dataset g = target;
  CHECK_THROWS_WITH_AS(t.apply(g),
                       doctest::Contains("tgt: features[0][0]: expected a finite result of "
                                         "standardize"),
                       dafuse::error);
}

TEST_CASE("l2_rows gives each row unit norm like l2_normalize_rows and fits nothing") {
  const dataset source = random_set("src", domain::source, 20, 6, -0.5f, 2.0f, 19);
  dataset d = source;
  dafuse::data::l2_rows t;
  t.fit(source, source);  // nothing to fit; sides are not even checked
  t.apply(d);
  for (index_t i = 0; i < d.rows; ++i) {
    double sq = 0;
    for (index_t k = 0; k < d.width; ++k) sq += double(source.row(i)[k]) * source.row(i)[k];
    for (index_t k = 0; k < d.width; ++k)
      CHECK(d.row(i)[k] == doctest::Approx(source.row(i)[k] / std::sqrt(sq)).epsilon(1e-6));
  }
  dataset e = source;
  dafuse::data::l2_normalize_rows(e);
  CHECK(d.features == e.features);
}

TEST_CASE("log1p is log(1 + x) of each value rounded from double") {
  const dataset source =
      rows_of("counts", domain::source, {{0.0f, 1.0f, 84.0f}, {-0.5f, 1e-8f, 3e38f}});
  dataset d = source;
  dafuse::data::log1p{}.apply(d);
  for (std::size_t i = 0; i < d.features.size(); ++i)
    CHECK(d.features[i] == float(std::log1p(double(source.features[i]))));
  CHECK(d.features[4] == 1e-8f);  // log1p keeps small values where log(1 + x) would round to 0
}

TEST_CASE("log1p rejects values of -1 and below, naming the entry") {
  dataset d = rows_of("x.npy", domain::source, {{0.0f, 2.0f}, {-1.0f, 0.0f}});
  CHECK_THROWS_WITH_AS(dafuse::data::log1p{}.apply(d),
                       "dafuse: x.npy: features[1][0]: expected a value > -1 for log1p, found "
                       "-1.000000",
                       dafuse::error);
  dataset e = rows_of("y.npy", domain::source, {{-3.0f}});
  CHECK_THROWS_WITH_AS(dafuse::data::log1p{}.apply(e), doctest::Contains("y.npy: features[0][0]"),
                       dafuse::error);
}

TEST_CASE("binarize maps values above the threshold to 1 and the rest to 0") {
  const dataset source = rows_of("x", domain::source, {{-1.0f, 0.0f, 1e-30f}, {0.5f, 0.75f, 3.0f}});
  dataset d = source;
  dafuse::data::binarize{}.apply(d);
  CHECK(d.features == std::vector<float>{0, 0, 1, 1, 1, 1});
  d = source;
  dafuse::data::binarize{0.5f}.apply(d);  // strictly above: 0.5 itself is 0
  CHECK(d.features == std::vector<float>{0, 0, 0, 0, 1, 1});
}

TEST_CASE("scale multiplies every value and rounds from double") {
  const dataset source = random_set("x", domain::source, 10, 4, 50.0f, 255.0f, 20);
  dataset d = source;
  dafuse::data::scale{1.0f / 255.0f}.apply(d);
  for (std::size_t i = 0; i < d.features.size(); ++i)
    CHECK(d.features[i] == float(double(1.0f / 255.0f) * double(source.features[i])));
}

TEST_CASE("scale rejects a factor that is not finite and results that overflow float") {
  dataset d = rows_of("x.npy", domain::source, {{1.0f, 2e38f}});
  CHECK_THROWS_WITH_AS(dafuse::data::scale{std::numeric_limits<float>::infinity()}.apply(d),
                       "dafuse: x.npy: scale factor: expected a finite value, found inf",
                       dafuse::error);
  CHECK_THROWS_WITH_AS(dafuse::data::scale{2.0f}.apply(d),
                       doctest::Contains("x.npy: features[0][1]: expected a finite result of "
                                         "scale of 199999993"),
                       dafuse::error);
}

TEST_CASE("transforms apply in the order given and fit each on what the ones before left") {
  namespace dd = dafuse::data;
  const dataset source = random_set("src", domain::source, 25, 5, 1.0f, 3.0f, 21);
  const dataset target = random_set("tgt", domain::target, 15, 5, 2.0f, 1.0f, 22);

  // standardize, then l2_rows: by hand, the same steps one after the other.
  auto std_then_l2 = dd::transforms(dd::standardize{}, dd::l2_rows{});
  std_then_l2.fit(source, target);
  dataset s1 = source, g1 = target;
  std_then_l2.apply(s1);
  std_then_l2.apply(g1);
  dd::standardize by_hand;
  by_hand.fit(source, target);
  dataset s2 = source, g2 = target;
  by_hand.apply(s2);
  by_hand.apply(g2);
  dd::l2_normalize_rows(s2);
  dd::l2_normalize_rows(g2);
  CHECK(s1.features == s2.features);
  CHECK(g1.features == g2.features);

  // l2_rows, then standardize: standardize is fitted on the normalised source rows.
  auto l2_then_std = dd::transforms(dd::l2_rows{}, dd::standardize{});
  dataset s3 = source, g3 = target;
  l2_then_std.fit_apply(s3, g3);
  dataset s_l2 = source;
  dd::l2_normalize_rows(s_l2);
  for (index_t k = 0; k < 5; ++k)
    CHECK(l2_then_std.get<1>().statistics().mean[std::size_t(k)] ==
          doctest::Approx(naive_stats(s_l2, k).mean).epsilon(1e-12));
  check_standardized(s3, s_l2, s_l2);
  CHECK(s3.features != s1.features);  // the order matters

  // fit leaves its arguments alone; fit then apply is fit_apply.
  dataset s4 = source, g4 = target;
  auto again = dd::transforms(dd::l2_rows{}, dd::standardize{});
  again.fit(s4, g4);
  CHECK(s4.features == source.features);
  again.apply(s4);
  again.apply(g4);
  CHECK(s4.features == s3.features);
  CHECK(g4.features == g3.features);
}

TEST_CASE("transforms chain every kind and nest, and a later test set is transformed alike") {
  namespace dd = dafuse::data;
  const dataset source = random_set("src", domain::source, 30, 4, 10.0f, 40.0f, 23);
  const dataset target = random_set("tgt", domain::target, 30, 4, 12.0f, 30.0f, 24);
  auto t =
      dd::transforms(dd::scale{0.5f}, dd::log1p{},
                     dd::transforms(dd::standardize{dd::fit_on::each_domain}), dd::binarize{0.0f});
  dataset s = source, g = target;
  t.fit_apply(s, g);
  for (const float v : s.features) CHECK((v == 0.0f || v == 1.0f));

  // By hand: scale and log1p per value, then the target's own statistics, then the threshold.
  const dataset test = random_set("test", domain::target, 6, 4, 11.0f, 30.0f, 25);
  dataset mine = test, prepared = target;
  for (dataset* d : {&mine, &prepared})
    for (float& x : d->features) x = float(std::log1p(double(float(0.5 * double(x)))));
  std::vector<column_stats> st;
  for (index_t k = 0; k < 4; ++k) st.push_back(naive_stats(prepared, k));
  dataset got = test;
  t.apply(got);
  for (index_t i = 0; i < mine.rows; ++i)
    for (index_t k = 0; k < 4; ++k) {
      const double z = (mine.row(i)[k] - st[std::size_t(k)].mean) / st[std::size_t(k)].stddev;
      if (std::abs(z) > 1e-5) CHECK(got.row(i)[k] == (z > 0 ? 1.0f : 0.0f));
    }
}

}  // namespace data_transform_test
