// SPDX-License-Identifier: Apache-2.0
// Tests for data/csr.hpp: CSR triples on disk, every malformed matrix, the sparse data set and
// its transforms against the same transform on dense rows.
#include <dafuse/data/csr.hpp>

#include "../check.hpp"
#include "npy_files.hpp"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace data_csr_test {

namespace {

namespace fs = std::filesystem;
using dafuse::index_t;
using dafuse::data::csr_matrix;
using dafuse::data::domain;
using dafuse::data::sparse_dataset;
using dafuse::test::temp_dir;

// 3 x 5:
//   [0 1 0 0 2]
//   [0 0 0 0 0]
//   [3 0 4 5 0]
//! doctest::Contains for a std::string built at run time.
doctest::Contains contains(const std::string& text) {
  return doctest::Contains(text.c_str());
}

const std::vector<float> small_dense = {0, 1, 0, 0, 2, 0, 0, 0, 0, 0, 3, 0, 4, 5, 0};

csr_matrix small_csr() {
  return csr_matrix{3, 5, {0, 2, 2, 5}, {1, 4, 0, 2, 3}, {1, 2, 3, 4, 5}};
}

//! Writes `m` as `<prefix>_indptr.npy`, `<prefix>_indices.npy`, `<prefix>_data.npy`.
void save_csr(const fs::path& prefix, const csr_matrix& m) {
  const auto at = [&](std::string_view suffix) {
    return fs::path(prefix.string() + std::string(suffix));
  };
  dafuse::data::save_npy<std::int32_t>(at("_indptr.npy"), {m.indptr.size()}, m.indptr);
  dafuse::data::save_npy<std::int32_t>(at("_indices.npy"), {m.indices.size()}, m.indices);
  dafuse::data::save_npy<float>(at("_data.npy"), {m.values.size()}, m.values);
}

fs::path file(const fs::path& prefix, std::string_view suffix) {
  return fs::path(prefix.string() + std::string(suffix));
}

//! A rows x cols dense matrix with about `density` of its entries non-zero, values in
//! [0.25, 20] as counts-like positives with a few negatives; deterministic.
std::vector<float> random_dense(index_t rows, index_t cols, double density, std::uint32_t seed) {
  std::vector<float> d(std::size_t(rows * cols), 0.0f);
  std::uint32_t s = seed;
  const auto next = [&]() {
    s = s * 1664525u + 1013904223u;  // Numerical Recipes' LCG: enough for test patterns
    return double(s >> 8) / double(1u << 24);
  };
  for (float& v : d)
    if (next() < density) v = float(0.25 + 19.75 * next()) * (next() < 0.1 ? -0.5f : 1.0f);
  return d;
}

void check_same(const csr_matrix& a, const csr_matrix& b) {
  CHECK(a.rows == b.rows);
  CHECK(a.cols == b.cols);
  CHECK(a.indptr == b.indptr);
  CHECK(a.indices == b.indices);
  CHECK(a.values == b.values);
}

}  // namespace

TEST_CASE(
    "to_csr keeps the non-zeros of dense rows in canonical order and to_dense restores them") {
  const csr_matrix m = dafuse::data::to_csr(small_dense.data(), 3, 5);
  check_same(m, small_csr());
  CHECK(m.nnz() == 5);
  CHECK(m.row_nnz(0) == 2);
  CHECK(m.row_nnz(1) == 0);
  CHECK(m.row_nnz(2) == 3);
  CHECK_NOTHROW(dafuse::data::check_csr(m, "small"));
  CHECK(dafuse::data::to_dense(m) == small_dense);

  const std::vector<float> big = random_dense(37, 101, 0.05, 7);
  const csr_matrix r = dafuse::data::to_csr(big.data(), 37, 101);
  CHECK_NOTHROW(dafuse::data::check_csr(r, "random"));
  CHECK(dafuse::data::to_dense(r) == big);
}

TEST_CASE("to_csr and to_dense handle empty shapes") {
  const csr_matrix none = dafuse::data::to_csr(nullptr, 0, 4);
  CHECK(none.indptr == std::vector<std::int32_t>{0});
  CHECK(dafuse::data::to_dense(none).empty());
  const std::vector<float> zeros(6, 0.0f);
  const csr_matrix z = dafuse::data::to_csr(zeros.data(), 2, 3);
  CHECK(z.indptr == std::vector<std::int32_t>{0, 0, 0});
  CHECK(z.nnz() == 0);
  CHECK(dafuse::data::to_dense(z) == zeros);
  CHECK_THROWS_WITH_AS(dafuse::data::to_csr(zeros.data(), -1, 3),
                       contains("to_csr: shape: expected non-negative rows and cols"),
                       dafuse::error);
}

TEST_CASE("to_dense rejects a matrix whose structure it cannot index") {
  csr_matrix m = small_csr();
  m.indptr[3] = 9;
  CHECK_THROWS_WITH_AS(dafuse::data::to_dense(m), contains("to_dense: indptr[3] (nnz)"),
                       dafuse::error);
  m = small_csr();
  m.indices[2] = 5;
  CHECK_THROWS_WITH_AS(
      dafuse::data::to_dense(m),
      contains("to_dense: indices[2] (row 2): expected a column in [0, 5), found 5"),
      dafuse::error);
}

TEST_CASE("save_npy of the three arrays then load_csr gives the matrix back") {
  temp_dir tmp("csr_test");
  const std::vector<float> big = random_dense(20, 300, 0.03, 11);
  const csr_matrix m = dafuse::data::to_csr(big.data(), 20, 300);
  save_csr(tmp / "rand", m);
  check_same(dafuse::data::load_csr(tmp / "rand", 300), m);
  check_same(
      dafuse::data::load_csr(file(tmp / "rand", "_indptr.npy"), file(tmp / "rand", "_indices.npy"),
                             file(tmp / "rand", "_data.npy"), 300),
      m);

  // All rows empty, and no rows at all, are valid CSR matrices.
  const csr_matrix empty_rows{4, 10, {0, 0, 0, 0, 0}, {}, {}};
  save_csr(tmp / "empty_rows", empty_rows);
  check_same(dafuse::data::load_csr(tmp / "empty_rows", 10), empty_rows);
  const csr_matrix no_rows{0, 10, {0}, {}, {}};
  save_csr(tmp / "no_rows", no_rows);
  check_same(dafuse::data::load_csr(tmp / "no_rows", 10), no_rows);
}

TEST_CASE("check_csr names the origin, field, expected and found value of each malformed case") {
  const auto rejects = [](const csr_matrix& m, const std::string& message) {
    CAPTURE(message);
    CHECK_THROWS_WITH_AS(dafuse::data::check_csr(m, "reviews.npz"),
                         contains("dafuse: reviews.npz: " + message), dafuse::error);
  };
  csr_matrix m = small_csr();
  CHECK_NOTHROW(dafuse::data::check_csr(m, "reviews.npz"));

  m = small_csr();
  m.indptr.pop_back();
  rejects(m, "indptr size: expected 4 (rows + 1), found 3");

  m = small_csr();
  m.rows = -1;
  rejects(m, "rows: expected a non-negative row count, found -1");

  m = small_csr();
  m.cols = -5;
  rejects(m, "cols: expected a non-negative column count, found -5");

  m = small_csr();
  m.indptr = {1, 2, 2, 5};
  rejects(m, "indptr[0]: expected 0, found 1");

  m = small_csr();
  m.indptr = {0, 3, 2, 5};
  rejects(m,
          "indptr[2] (end of row 1): expected non-decreasing offsets: at least indptr[1] = 3, "
          "found 2");

  m = small_csr();
  m.indptr = {0, 2, 2, 4};
  rejects(m, "indptr[3] (nnz): expected 5 (the number of values), found 4");

  m = small_csr();
  m.indices.pop_back();
  rejects(m, "indices size: expected 5 (one per value), found 4");

  m = small_csr();
  m.indices[3] = 5;
  rejects(m, "indices[3] (row 2): expected a column in [0, 5), found 5");
  m.indices[3] = -1;
  rejects(m, "indices[3] (row 2): expected a column in [0, 5), found -1");

  m = small_csr();
  m.indices = {1, 4, 2, 0, 3};
  rejects(m,
          "indices[3] (row 2): expected columns strictly ascending within the row: greater "
          "than indices[2] = 2, found 0 (unsorted");

  m = small_csr();
  m.indices = {1, 4, 0, 2, 2};
  rejects(m,
          "indices[4] (row 2): expected columns strictly ascending within the row: greater "
          "than indices[3] = 2, found 2 (a duplicate column");

  m = small_csr();
  m.values[4] = std::numeric_limits<float>::quiet_NaN();
  rejects(m, "values[4] (row 2, column 3): expected a finite value, found nan");
  m.values[4] = -std::numeric_limits<float>::infinity();
  rejects(m, "values[4] (row 2, column 3): expected a finite value, found -inf");
}

TEST_CASE("a column index may repeat across rows, and the first column of a row may be anything") {
  // Ascending order is per row: a new row starts over.
  const csr_matrix m{2, 3, {0, 2, 4}, {1, 2, 0, 2}, {1, 1, 1, 1}};
  CHECK_NOTHROW(dafuse::data::check_csr(m, "m"));
}

TEST_CASE("load_csr names the file each malformed field came from") {
  temp_dir tmp("csr_test");
  const fs::path p = tmp / "bad";
  const auto rejects = [&](std::string_view suffix, const std::string& message) {
    CAPTURE(message);
    CHECK_THROWS_WITH_AS(dafuse::data::load_csr(p, 5),
                         contains("dafuse: " + file(p, suffix).string() + ": " + message),
                         dafuse::error);
  };

  csr_matrix m = small_csr();
  m.indices[0] = 7;
  save_csr(p, m);
  rejects("_indices.npy", "indices[0] (row 0): expected a column in [0, 5), found 7");

  m = small_csr();
  m.values[1] = std::numeric_limits<float>::infinity();
  save_csr(p, m);
  rejects("_data.npy", "values[1] (row 0, column 4): expected a finite value, found inf");

  m = small_csr();
  m.indptr = {0, 2, 1, 5};
  save_csr(p, m);
  rejects("_indptr.npy", "indptr[2] (end of row 1)");

  // A value more than indptr promises: indptr names the data file it must agree with.
  m = small_csr();
  m.indices.push_back(4);
  m.values.push_back(1);
  save_csr(p, m);
  rejects("_indptr.npy", "indptr[3] (nnz): expected 6 (the number of values in " +
                             file(p, "_data.npy").string() + "), found 5");

  m = small_csr();
  m.values.push_back(1);
  save_csr(p, m);
  rejects("_indices.npy", "indices size: expected 6 (one per value in " +
                              file(p, "_data.npy").string() + "), found 5");

  // Each file must be 1-D, of its own dtype, and indptr must hold at least one offset.
  save_csr(p, small_csr());
  dafuse::data::save_npy<std::int32_t>(file(p, "_indptr.npy"), {2, 2},
                                       std::vector<std::int32_t>{0, 2, 2, 5});
  rejects("_indptr.npy", "shape: expected one dimension [rows + 1], found 2 dimensions");
  dafuse::data::save_npy<std::int32_t>(file(p, "_indptr.npy"), {0}, std::vector<std::int32_t>{});
  rejects("_indptr.npy", "shape: expected at least one entry [rows + 1], found [0]");
  save_csr(p, small_csr());
  dafuse::data::save_npy<std::int32_t>(file(p, "_indices.npy"), {}, std::vector<std::int32_t>{1});
  rejects("_indices.npy", "shape: expected one dimension [nnz], found 0 dimensions");
  save_csr(p, small_csr());
  dafuse::data::save_npy<float>(file(p, "_indices.npy"), {5}, std::vector<float>{1, 4, 0, 2, 3});
  rejects("_indices.npy",
          "descr: expected an integer type ('|i1' to '<i8', '|u1' to '<u8'), found '<f4' "
          "(float32): indices must be integers; convert with a.astype(np.int32)");
  save_csr(p, small_csr());
  dafuse::data::save_npy<std::int64_t>(file(p, "_indptr.npy"), {4},
                                       std::vector<std::int64_t>{0, 2, 3, 1ll << 31});
  rejects("_indptr.npy",
          "indptr[3]: expected a value in int32's range [-2147483648, 2147483647], found "
          "2147483648");
  save_csr(p, small_csr());
  dafuse::test::save_array_big_endian<std::int16_t>(file(p, "_data.npy"), {1, 1}, {1});
  rejects("_data.npy", "shape: expected one dimension [nnz]");  // 1-D, checked before reading

  save_csr(p, small_csr());
  fs::remove(file(p, "_data.npy"));
  rejects("_data.npy", "cannot open for reading");
}

TEST_CASE("load_csr reads scipy's int64 offsets and float64 values as int32 and float32") {
  temp_dir tmp("csr_test");
  const fs::path p = tmp / "wide";
  const csr_matrix m = small_csr();
  std::vector<std::int64_t> indptr(m.indptr.begin(), m.indptr.end());
  std::vector<std::int64_t> indices(m.indices.begin(), m.indices.end());
  std::vector<double> values(m.values.begin(), m.values.end());
  values[0] = 0.1;  // rounds to 0.1f
  dafuse::data::save_npy<std::int64_t>(file(p, "_indptr.npy"), {indptr.size()}, indptr);
  dafuse::test::save_array_big_endian<std::int64_t>(file(p, "_indices.npy"), {indices.size()},
                                                    indices);
  dafuse::data::save_npy<double>(file(p, "_data.npy"), {values.size()}, values);
  const csr_matrix got = dafuse::data::load_csr(p, 5);
  CHECK(got.rows == m.rows);
  CHECK(got.indptr == m.indptr);
  CHECK(got.indices == m.indices);
  std::vector<float> want = m.values;
  want[0] = 0.1f;
  CHECK(got.values == want);
  // Integer counts as values (np.save of a count matrix's data) are converted too.
  dafuse::data::save_npy<std::uint16_t>(file(p, "_data.npy"), {5},
                                        std::vector<std::uint16_t>{1, 2, 3, 4, 5});
  CHECK(dafuse::data::load_csr(p, 5).values == std::vector<float>{1, 2, 3, 4, 5});
}

TEST_CASE("load_sparse_dataset reads features and labels and rejects labels that do not match") {
  temp_dir tmp("csr_test");
  const fs::path p = tmp / "set";
  save_csr(p, small_csr());
  dafuse::data::save_npy<std::int32_t>(tmp / "labels.npy", {3}, std::vector<std::int32_t>{0, 1, 1});

  const sparse_dataset d =
      dafuse::data::load_sparse_dataset(p, tmp / "labels.npy", domain::source, 5);
  CHECK(d.origin == p.string());
  CHECK(d.side == domain::source);
  CHECK(d.rows() == 3);
  CHECK(d.width() == 5);
  CHECK(d.has_labels());
  CHECK(d.labels == std::vector<std::int32_t>{0, 1, 1});
  check_same(d.features, small_csr());

  const sparse_dataset t = dafuse::data::load_sparse_dataset(p, "", domain::target, 5);
  CHECK_FALSE(t.has_labels());
  CHECK(t.side == domain::target);

  dafuse::data::save_npy<std::int32_t>(tmp / "labels.npy", {4},
                                       std::vector<std::int32_t>{0, 1, 1, 0});
  CHECK_THROWS_WITH_AS(dafuse::data::load_sparse_dataset(p, tmp / "labels.npy", domain::source, 5),
                       contains((tmp / "labels.npy").string() + ": shape: expected [3] to match " +
                                file(p, "_indptr.npy").string() + ", found [4]"),
                       dafuse::error);
  dafuse::data::save_npy<std::int32_t>(tmp / "labels.npy", {3, 1},
                                       std::vector<std::int32_t>{0, 1, 1});
  CHECK_THROWS_WITH_AS(dafuse::data::load_sparse_dataset(p, tmp / "labels.npy", domain::source, 5),
                       contains((tmp / "labels.npy").string() +
                                ": shape: expected one dimension [N], found 2 dimensions"),
                       dafuse::error);

  // No rows, or no columns: nothing to train on.
  save_csr(tmp / "none", csr_matrix{0, 5, {0}, {}, {}});
  CHECK_THROWS_WITH_AS(
      dafuse::data::load_sparse_dataset(tmp / "none", "", domain::target, 5),
      contains((tmp / "none").string() +
               ": features shape: expected at least one row and one feature, found 0 "
               "rows of width 5"),
      dafuse::error);
}

TEST_CASE("check_labels and check_width on a sparse data set word their errors like dataset's") {
  sparse_dataset d =
      dafuse::data::make_sparse_dataset("reviews", domain::source, small_csr(), {0, 1, 2});
  CHECK_NOTHROW(dafuse::data::check_labels(d, 3));
  CHECK_THROWS_WITH_AS(dafuse::data::check_labels(d, 2),
                       "dafuse: reviews: labels[2]: expected a class in [0, 2), found 2",
                       dafuse::error);
  d.labels[0] = -1;
  CHECK_THROWS_WITH_AS(dafuse::data::check_labels(d, 3),
                       "dafuse: reviews: labels[0]: expected a class in [0, 3), found -1",
                       dafuse::error);
  CHECK_NOTHROW(dafuse::data::check_width(d, 5));
  CHECK_THROWS_WITH_AS(
      dafuse::data::check_width(d, 5000),
      "dafuse: reviews: feature width: expected 5000 (the network's input width), found 5",
      dafuse::error);
  CHECK_THROWS_WITH_AS(
      dafuse::data::make_sparse_dataset("reviews", domain::source, small_csr(), {0, 1}),
      "dafuse: reviews: labels: expected 3 labels (one per feature row), found 2", dafuse::error);
}

TEST_CASE("the sparse transforms equal the same transform on dense rows and keep the pattern") {
  const index_t rows = 41, cols = 97;
  std::vector<float> dense = random_dense(rows, cols, 0.08, 3);
  // A row of zeros, and a row of tiny values whose inverse norm does not fit in a float.
  for (index_t k = 0; k < cols; ++k) dense[std::size_t(5 * cols + k)] = 0.0f;
  for (index_t k = 0; k < cols; ++k) dense[std::size_t(6 * cols + k)] = 0.0f;
  dense[std::size_t(6 * cols)] = 1e-40f;
  const csr_matrix m = dafuse::data::to_csr(dense.data(), rows, cols);
  const auto make = [&]() { return dafuse::data::make_sparse_dataset("t", domain::target, m); };

  SUBCASE("l2_normalize_rows") {
    sparse_dataset d = make();
    dafuse::data::l2_normalize_rows(d);
    std::vector<double> want(dense.begin(), dense.end());
    for (index_t i = 0; i < rows; ++i) {
      double sq = 0;
      for (index_t k = 0; k < cols; ++k)
        sq += want[std::size_t(i * cols + k)] * want[std::size_t(i * cols + k)];
      if (sq > 0)
        for (index_t k = 0; k < cols; ++k) want[std::size_t(i * cols + k)] /= std::sqrt(sq);
    }
    const std::vector<float> got = dafuse::data::to_dense(d.features);
    CHECK(dafuse::test::max_relative_error(std::span(got), std::span(want)) < 1e-6);
    CHECK(got[std::size_t(6 * cols)] == 1.0f);
    for (index_t k = 0; k < cols; ++k) CHECK(got[std::size_t(5 * cols + k)] == 0.0f);
    CHECK(d.features.indices == m.indices);
  }
  SUBCASE("log1p_values") {
    // Counts are non-negative: log1p of the magnitudes.
    for (float& v : dense) v = std::abs(v);
    sparse_dataset d = dafuse::data::make_sparse_dataset(
        "t", domain::target, dafuse::data::to_csr(dense.data(), rows, cols));
    dafuse::data::log1p_values(d);
    std::vector<double> want(dense.size());
    for (std::size_t i = 0; i < dense.size(); ++i) want[i] = std::log1p(double(dense[i]));
    const std::vector<float> got = dafuse::data::to_dense(d.features);
    CHECK(dafuse::test::max_relative_error(std::span(got), std::span(want)) < 1e-6);
    CHECK(d.features.indices == m.indices);
  }
  SUBCASE("binarize_values") {
    sparse_dataset d = make();
    dafuse::data::binarize_values(d);
    std::vector<float> want(dense.size());
    for (std::size_t i = 0; i < dense.size(); ++i) want[i] = dense[i] != 0.0f ? 1.0f : 0.0f;
    CHECK(dafuse::data::to_dense(d.features) == want);
    CHECK(d.features.indices == m.indices);
  }
}

TEST_CASE("log1p_values rejects a value of -1 or less and leaves the data unchanged") {
  csr_matrix m = small_csr();
  m.values[3] = -1.0f;
  sparse_dataset d = dafuse::data::make_sparse_dataset("neg", domain::source, m);
  CHECK_THROWS_WITH_AS(
      dafuse::data::log1p_values(d),
      "dafuse: neg: values[3] (row 2, column 2): expected a value > -1 for log1p, found -1.000000",
      dafuse::error);
  CHECK(d.features.values == m.values);
}

TEST_CASE("binarize_values keeps a stored zero at zero") {
  sparse_dataset d = dafuse::data::make_sparse_dataset(
      "z", domain::source, csr_matrix{1, 3, {0, 3}, {0, 1, 2}, {0.0f, -2.0f, 0.5f}});
  dafuse::data::binarize_values(d);
  CHECK(d.features.values == std::vector<float>{0.0f, 1.0f, 1.0f});
}

TEST_CASE("the Amazon dvd training set loads as 2000 rows of 5000 counts with 184399 non-zeros") {
  const fs::path dir = dafuse::test::shared_data_dir() / "amazon_reviews";
  if (!fs::exists(dir)) {
    MESSAGE("skipped: " << dir.string() << " not found");
    return;
  }
  sparse_dataset d = dafuse::data::load_sparse_dataset(
      dir / "dvd_train", dir / "dvd_train_labels.npy", domain::source, 5000);
  CHECK(d.rows() == 2000);
  CHECK(d.width() == 5000);
  CHECK(d.features.nnz() == 184399);
  CHECK(d.labels.size() == 2000);
  CHECK_NOTHROW(dafuse::data::check_labels(d, 2));
  CHECK_NOTHROW(dafuse::data::check_width(d, 5000));
  // Counts are integers 1..84; 1000 positive and 1000 negative reviews (data/README.md).
  std::size_t off = 0;
  float most = 0;
  for (const float v : d.features.values) {
    off += !(v >= 1.0f && v == std::floor(v));
    most = std::max(most, v);
  }
  CHECK(off == 0);
  CHECK(most <= 84.0f);
  std::size_t positive = 0;
  for (const std::int32_t y : d.labels) positive += y == 1;
  CHECK(positive == 1000);
}

}  // namespace data_csr_test
