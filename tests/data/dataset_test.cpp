// SPDX-License-Identifier: Apache-2.0
// Tests for data/dataset.hpp: building data sets from arrays and NPY files, the checks that name
// the offending file and entry, and row normalisation.
#include <dafuse/data/dataset.hpp>
#include "../check.hpp"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <numeric>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace data_dataset_test {

namespace {

namespace fs = std::filesystem;
using dafuse::index_t;
using dafuse::data::dataset;
using dafuse::data::domain;
using dafuse::data::host_array;
using dafuse::data::make_dataset;

//! An array of the given shape holding 0, 1, 2, ... in C order.
host_array<float> iota_array(std::vector<std::size_t> shape) {
  std::size_t n = 1;
  for (const std::size_t d : shape) n *= d;
  host_array<float> a{std::move(shape), std::vector<float>(n)};
  std::iota(a.values.begin(), a.values.end(), 0.0f);
  return a;
}

//! A labelled source set built from a row-major list of rows.
dataset rows_of(std::vector<std::vector<float>> rows, std::vector<std::int32_t> labels = {}) {
  host_array<float> a{{rows.size(), rows.front().size()}, {}};
  for (const auto& r : rows) a.values.insert(a.values.end(), r.begin(), r.end());
  return make_dataset("rows", domain::source, std::move(a), std::move(labels));
}

}  // namespace

TEST_CASE("make_dataset flattens [N, H, W] features into rows of H*W") {
  const dataset d = make_dataset("images.npy", domain::target, iota_array({3, 2, 4}), {2, 0, 1});
  CHECK(d.origin == "images.npy");
  CHECK(d.side == domain::target);
  CHECK(d.rows == 3);
  CHECK(d.width == 8);
  REQUIRE(d.features.size() == 24);
  for (index_t i = 0; i < d.rows; ++i)
    for (index_t k = 0; k < d.width; ++k) CHECK(d.row(i)[k] == float(i * 8 + k));
  CHECK(d.has_labels());
  CHECK(d.labels == std::vector<std::int32_t>{2, 0, 1});
}

TEST_CASE("make_dataset keeps [N, d] rows as they are and reads [N] as width 1") {
  const dataset d = make_dataset("x", domain::source, iota_array({4, 3}));
  CHECK(d.rows == 4);
  CHECK(d.width == 3);
  CHECK(d.row(2)[1] == 7.0f);
  CHECK_FALSE(d.has_labels());
  const dataset v = make_dataset("v", domain::source, iota_array({5}));
  CHECK(v.rows == 5);
  CHECK(v.width == 1);
  CHECK(v.row(4)[0] == 4.0f);
}

TEST_CASE("make_dataset rejects empty sets naming the origin") {
  CHECK_THROWS_WITH_AS(make_dataset("empty.npy", domain::source, iota_array({0, 4})),
                       doctest::Contains("empty.npy: features shape"), dafuse::error);
  CHECK_THROWS_WITH_AS(make_dataset("narrow.npy", domain::source, iota_array({3, 0})),
                       doctest::Contains("narrow.npy: features shape"), dafuse::error);
  CHECK_THROWS_WITH_AS(make_dataset("none.npy", domain::source, iota_array({0})),
                       doctest::Contains("none.npy: features shape"), dafuse::error);
  CHECK_THROWS_WITH_AS(make_dataset("scalar.npy", domain::source, host_array<float>{{}, {1.0f}}),
                       doctest::Contains("scalar.npy: features shape"), dafuse::error);
}

TEST_CASE("make_dataset rejects a label count that differs from the row count") {
  CHECK_THROWS_WITH_AS(make_dataset("x.npy", domain::source, iota_array({3, 2}), {0, 1}),
                       doctest::Contains("x.npy: labels: expected 3 labels"), dafuse::error);
  CHECK_THROWS_WITH_AS(make_dataset("x.npy", domain::source, iota_array({3, 2}), {0, 1, 2, 3}),
                       doctest::Contains("found 4"), dafuse::error);
}

TEST_CASE("make_dataset rejects NaN and infinite features naming the row and column") {
  host_array<float> a = iota_array({2, 4});
  a.values[1 * 4 + 2] = std::numeric_limits<float>::quiet_NaN();
  CHECK_THROWS_WITH_AS(make_dataset("feats.npy", domain::source, a),
                       doctest::Contains("feats.npy: features[1][2]"), dafuse::error);

  host_array<float> b = iota_array({3, 4});
  b.values[0 * 4 + 3] = -std::numeric_limits<float>::infinity();
  CHECK_THROWS_WITH_AS(make_dataset("inf.npy", domain::target, b),
                       doctest::Contains("inf.npy: features[0][3]"), dafuse::error);

  // The position is in the flattened rows: element (1, 1, 0) of [2, 2, 2] is features[1][2].
  host_array<float> c = iota_array({2, 2, 2});
  c.values[1 * 4 + 1 * 2 + 0] = std::numeric_limits<float>::infinity();
  CHECK_THROWS_WITH_AS(make_dataset("cube.npy", domain::source, c),
                       doctest::Contains("cube.npy: features[1][2]"), dafuse::error);
}

TEST_CASE("load_dataset reads features and labels written by save_npy") {
  const dafuse::test::temp_dir dir("dataset_test");
  const host_array<float> x = iota_array({4, 2, 3});
  const std::vector<std::int32_t> y = {3, 1, 0, 2};
  dafuse::data::save_npy(dir / "x.npy", x);
  dafuse::data::save_npy<std::int32_t>(dir / "y.npy", {4}, std::span<const std::int32_t>(y));

  const dataset d = dafuse::data::load_dataset(dir / "x.npy", dir / "y.npy", domain::source);
  CHECK(d.origin == (dir / "x.npy").string());
  CHECK(d.side == domain::source);
  CHECK(d.rows == 4);
  CHECK(d.width == 6);
  CHECK(d.features == x.values);
  CHECK(d.labels == y);

  // Without a labels path the set is unlabelled (a target domain).
  const dataset t = dafuse::data::load_dataset(dir / "x.npy", {}, domain::target);
  CHECK(t.side == domain::target);
  CHECK_FALSE(t.has_labels());
  CHECK(t.features == x.values);

  // uint8 images are read as their values, not scaled.
  const std::vector<std::uint8_t> bytes = {0, 1, 128, 255};
  dafuse::data::save_npy<std::uint8_t>(dir / "u8.npy", {2, 2},
                                       std::span<const std::uint8_t>(bytes));
  const dataset u = dafuse::data::load_dataset(dir / "u8.npy", {}, domain::target);
  CHECK(u.features == std::vector<float>{0.0f, 1.0f, 128.0f, 255.0f});
}

TEST_CASE("load_dataset rejects a labels file of the wrong length or shape, naming it") {
  const dafuse::test::temp_dir dir("dataset_test");
  dafuse::data::save_npy(dir / "x.npy", iota_array({4, 3}));
  const std::vector<std::int32_t> three = {0, 1, 2};
  dafuse::data::save_npy<std::int32_t>(dir / "short.npy", {3},
                                       std::span<const std::int32_t>(three));
  const std::vector<std::int32_t> four = {0, 1, 2, 3};
  dafuse::data::save_npy<std::int32_t>(dir / "square.npy", {2, 2},
                                       std::span<const std::int32_t>(four));

  const std::string short_path = (dir / "short.npy").string();
  CHECK_THROWS_WITH_AS(dafuse::data::load_dataset(dir / "x.npy", dir / "short.npy", domain::source),
                       doctest::Contains((short_path + ": shape: expected [4]").c_str()),
                       dafuse::error);
  const std::string square_path = (dir / "square.npy").string();
  CHECK_THROWS_WITH_AS(
      dafuse::data::load_dataset(dir / "x.npy", dir / "square.npy", domain::source),
      doctest::Contains((square_path + ": shape").c_str()), dafuse::error);
  // Labels must be integers: float labels are refused by the labels file's name, with the fix.
  dafuse::data::save_npy(dir / "float_labels.npy", iota_array({4}));
  CHECK_THROWS_WITH_AS(
      dafuse::data::load_dataset(dir / "x.npy", dir / "float_labels.npy", domain::source),
      ("dafuse: " + (dir / "float_labels.npy").string() +
       ": descr: expected an integer type ('|i1' to '<i8', '|u1' to '<u8'), found '<f4' "
       "(float32): labels must be integers; convert with y.astype(np.int32)")
          .c_str(),
      dafuse::error);
}

TEST_CASE("load_dataset reads numpy's defaults: float64 features and int64 labels") {
  const dafuse::test::temp_dir dir("dataset_test");
  const host_array<float> x = iota_array({4, 3});
  const std::vector<double> x64(x.values.begin(), x.values.end());
  dafuse::data::save_npy<double>(dir / "x.npy", {4, 3}, x64);
  const std::vector<std::int32_t> y = {3, 1, 0, 2};
  const auto check = [&](auto t) {
    using T = decltype(t);
    CAPTURE(dafuse::data::name_of(dafuse::data::dtype_of_v<T>));
    dafuse::data::save_npy<T>(dir / "y.npy", {4}, std::vector<T>(y.begin(), y.end()));
    const dataset d = dafuse::data::load_dataset(dir / "x.npy", dir / "y.npy", domain::source);
    CHECK(d.features == x.values);
    CHECK(d.labels == y);
    CHECK(d.labels_origin == (dir / "y.npy").string());
  };
  check(std::int64_t{});
  check(std::int8_t{});
  check(std::int16_t{});
  check(std::uint8_t{});
  check(std::uint16_t{});
  check(std::uint32_t{});
  check(std::uint64_t{});
}

TEST_CASE("an int64 label outside int32's range is refused naming the file, the row and value") {
  const dafuse::test::temp_dir dir("dataset_test");
  dafuse::data::save_npy(dir / "x.npy", iota_array({4, 3}));
  dafuse::data::save_npy<std::int64_t>(dir / "y.npy", {4},
                                       std::vector<std::int64_t>{0, 1, -4294967296, 2});
  CHECK_THROWS_WITH_AS(
      dafuse::data::load_dataset(dir / "x.npy", dir / "y.npy", domain::source),
      ("dafuse: " + (dir / "y.npy").string() +
       ": labels[2]: expected a value in int32's range [-2147483648, 2147483647], found "
       "-4294967296")
          .c_str(),
      dafuse::error);
  // The shape is checked from the header first: a labels file of another length is named so,
  // whatever its values.
  dafuse::data::save_npy<std::int64_t>(dir / "y.npy", {2},
                                       std::vector<std::int64_t>{0, std::int64_t(1) << 40});
  CHECK_THROWS_WITH_AS(dafuse::data::load_dataset(dir / "x.npy", dir / "y.npy", domain::source),
                       doctest::Contains("y.npy: shape: expected [4]"), dafuse::error);
}

TEST_CASE("check_labels accepts classes in [0, classes) and rejects -1 and classes itself") {
  const dataset ok = rows_of({{1}, {2}, {3}}, {0, 2, 1});
  CHECK_NOTHROW(dafuse::data::check_labels(ok, 3));
  const dataset negative = rows_of({{1}, {2}, {3}}, {0, -1, 1});
  CHECK_THROWS_WITH_AS(dafuse::data::check_labels(negative, 3),
                       doctest::Contains("rows: labels[1]: expected a class in [0, 3), found -1"),
                       dafuse::error);
  const dataset too_big = rows_of({{1}, {2}, {3}}, {0, 1, 3});
  CHECK_THROWS_WITH_AS(dafuse::data::check_labels(too_big, 3),
                       doctest::Contains("rows: labels[2]: expected a class in [0, 3), found 3"),
                       dafuse::error);
  // A smaller class count turns a valid label into a bad one.
  CHECK_THROWS_WITH_AS(dafuse::data::check_labels(ok, 2), doctest::Contains("labels[1]"),
                       dafuse::error);
}

TEST_CASE("check_width names the origin, the width the network reads and the one found") {
  const dataset d = make_dataset("feats.npy", domain::source, iota_array({2, 6}));
  CHECK_NOTHROW(dafuse::data::check_width(d, 6));
  CHECK_THROWS_WITH_AS(dafuse::data::check_width(d, 5),
                       doctest::Contains("feats.npy: feature width: expected 5 (the network's "
                                         "input width), found 6"),
                       dafuse::error);
}

TEST_CASE("l2_normalize_rows gives unit rows and keeps zero rows zero") {
  dataset d = rows_of({{3, 4, 0}, {0, 0, 0}, {1, -1, 1}, {1e-20f, 0, 0}});
  dafuse::data::l2_normalize_rows(d);
  CHECK(d.row(0)[0] == doctest::Approx(0.6).epsilon(1e-6));
  CHECK(d.row(0)[1] == doctest::Approx(0.8).epsilon(1e-6));
  CHECK(d.row(0)[2] == 0.0f);
  for (index_t k = 0; k < 3; ++k) CHECK(d.row(1)[k] == 0.0f);
  CHECK(d.row(2)[1] == doctest::Approx(-1.0 / std::sqrt(3.0)).epsilon(1e-6));
  CHECK(d.row(3)[0] == doctest::Approx(1.0).epsilon(1e-6));  // tiny rows are scaled up too
  for (const index_t i : {0, 2, 3}) {
    CAPTURE(i);
    double sq = 0;
    for (index_t k = 0; k < d.width; ++k) sq += double(d.row(i)[k]) * double(d.row(i)[k]);
    CHECK(std::sqrt(sq) == doctest::Approx(1.0).epsilon(1e-6));
  }
}

TEST_CASE("the JDA MNIST digits load as 2000 rows of 16x16 = 256 features") {
  const fs::path dir = dafuse::test::shared_data_dir() / "jda_mnist_usps";
  if (!fs::exists(dir)) {
    MESSAGE("skipped: " << dir.string() << " not found");
    return;
  }
  dataset d = dafuse::data::load_dataset(dir / "mnist_images.npy", dir / "mnist_labels.npy",
                                         domain::source);
  CHECK(d.rows == 2000);
  CHECK(d.width == 256);
  CHECK(d.labels.size() == 2000);
  CHECK_NOTHROW(dafuse::data::check_labels(d, 10));
  CHECK_NOTHROW(dafuse::data::check_width(d, 256));
  // Values are k/256 for k in [0, 255] (data/README.md).
  std::size_t off_grid = 0;
  for (const float v : d.features) {
    const float k = v * 256.0f;
    off_grid += !(k >= 0.0f && k <= 255.0f && k == std::floor(k));
  }
  CHECK(off_grid == 0);
}

TEST_CASE("make_dataset rejects a value count that does not match the shape") {
  dafuse::data::host_array<float> x{{2, 3}, {1, 2, 3, 4}};
  CHECK_THROWS_WITH_AS(
      dafuse::data::make_dataset("short.npy", dafuse::data::domain::source, std::move(x)),
      doctest::Contains("short.npy: features: expected 6 values for 2 rows of width 3, found 4"),
      dafuse::error);
}

}  // namespace data_dataset_test
