// SPDX-License-Identifier: Apache-2.0
// Tests for data/split.hpp: a seeded validation split partitions the rows, keeps labels with
// their rows in dense and sparse sets alike, and refuses fractions that leave a side empty.
#include <dafuse/data/split.hpp>
#include "../check.hpp"

#include <algorithm>
#include <cstdint>
#include <set>
#include <vector>

namespace data_split_test {

namespace df = dafuse;

namespace {
//! Row r holds (r, r + 0.5) and label r % 3, so every row can be traced back.
df::data::dataset numbered(df::index_t rows) {
  df::data::host_array<float> x{{std::size_t(rows), 2}, {}};
  std::vector<std::int32_t> y;
  for (df::index_t r = 0; r < rows; ++r) {
    x.values.push_back(float(r));
    x.values.push_back(float(r) + 0.5f);
    y.push_back(std::int32_t(r % 3));
  }
  return df::data::make_dataset("numbered.npy", df::data::domain::source, std::move(x),
                                std::move(y));
}
std::set<int> rows_of(const df::data::dataset& d) {
  std::set<int> s;
  for (df::index_t r = 0; r < d.rows; ++r) {
    CHECK(d.row(r)[1] == d.row(r)[0] + 0.5f);
    CHECK(d.labels[std::size_t(r)] == int(d.row(r)[0]) % 3);
    s.insert(int(d.row(r)[0]));
  }
  return s;
}
}  // namespace

TEST_CASE("a validation split partitions the rows, keeps labels and depends only on the seed") {
  const df::data::dataset d = numbered(50);
  const auto a = df::data::split_validation(d, 0.2, 7);
  CHECK(a.validation.rows == 10);
  CHECK(a.train.rows == 40);
  const std::set<int> train = rows_of(a.train), held = rows_of(a.validation);
  std::vector<int> both;
  std::set_intersection(train.begin(), train.end(), held.begin(), held.end(),
                        std::back_inserter(both));
  CHECK(both.empty());
  CHECK(train.size() + held.size() == 50);
  CHECK(a.validation.origin == "numbered.npy (validation rows)");
  const auto b = df::data::split_validation(d, 0.2, 7);
  CHECK(b.validation.features == a.validation.features);
  const auto c = df::data::split_validation(d, 0.2, 8);
  CHECK(c.validation.features != a.validation.features);
}

TEST_CASE("a sparse split holds the same rows as the dense split of the same data") {
  const df::data::dataset d = numbered(30);
  df::data::sparse_dataset s = df::data::make_sparse_dataset(
      "numbered", df::data::domain::source, df::data::to_csr(d.features.data(), 30, 2), d.labels);
  const auto dense = df::data::split_validation(d, 0.3, 11);
  const auto sparse = df::data::split_validation(s, 0.3, 11);
  CHECK(df::data::to_dense(sparse.validation.features) == dense.validation.features);
  CHECK(df::data::to_dense(sparse.train.features) == dense.train.features);
  CHECK(sparse.validation.labels == dense.validation.labels);
  df::data::check_csr(sparse.train.features, "train part");
}

TEST_CASE("a split that leaves a side empty is refused naming the data set") {
  const df::data::dataset d = numbered(10);
  for (const double f : {0.0, 1.0, -0.2, 0.01, 0.97})
    CHECK_THROWS_WITH_AS(df::data::split_validation(d, f, 1),
                         doctest::Contains("numbered.npy: validation fraction: expected a "
                                           "fraction in (0, 1)"),
                         df::error);
}

TEST_CASE("sample_rows takes evenly spaced rows, or all of them") {
  const df::data::dataset d = numbered(10);
  const df::data::dataset s = df::data::sample_rows(d, 4);
  REQUIRE(s.rows == 4);
  CHECK(s.row(0)[0] == 0.0f);
  CHECK(s.row(1)[0] == 2.0f);
  CHECK(s.row(3)[0] == 7.0f);
  CHECK(df::data::sample_rows(d, 20).rows == 10);
}

}  // namespace data_split_test
