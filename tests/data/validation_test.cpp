// SPDX-License-Identifier: Apache-2.0
// The validation errors of data/dataset.hpp reached through files, as a user meets them: each
// message names the file, the entry and what was expected (the array-level checks are in
// dataset_test.cpp).
#include <dafuse/data/dataset.hpp>
#include <dafuse/data/split.hpp>
#include "../check.hpp"
#include "npy_files.hpp"

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <span>
#include <string>
#include <vector>

namespace data_validation_test {

namespace {

namespace fs = std::filesystem;
using dafuse::data::domain;
using dafuse::data::load_dataset;
using dafuse::test::temp_dir;

}  // namespace

TEST_CASE("load_dataset names the file and entry of a NaN or infinite feature") {
  const temp_dir dir("validation_test");
  std::vector<float> x(3 * 4, 0.5f);
  x[2 * 4 + 1] = std::numeric_limits<float>::quiet_NaN();
  dafuse::test::save_array(dir / "nan.npy", {3, 4}, x);
  const std::string nan_path = (dir / "nan.npy").string();
  CHECK_THROWS_WITH_AS(
      load_dataset(dir / "nan.npy", {}, domain::source),
      ("dafuse: " + nan_path + ": features[2][1]: expected a finite value, found nan").c_str(),
      dafuse::error);
  x[2 * 4 + 1] = 0.0f;
  x[0] = -std::numeric_limits<float>::infinity();
  dafuse::test::save_array(dir / "inf.npy", {3, 2, 2}, x);
  CHECK_THROWS_WITH_AS(load_dataset(dir / "inf.npy", {}, domain::target),
                       doctest::Contains("inf.npy: features[0][0]: expected a finite value, found "
                                         "-inf"),
                       dafuse::error);
}

TEST_CASE("load_dataset rejects a file of no rows, no features or a single value") {
  const temp_dir dir("validation_test");
  dafuse::test::save_array<float>(dir / "rows.npy", {0, 3}, {});
  CHECK_THROWS_WITH_AS(load_dataset(dir / "rows.npy", {}, domain::source),
                       ("dafuse: " + (dir / "rows.npy").string() +
                        ": features shape: expected at least one row and one feature, found 0 "
                        "rows of width 3")
                           .c_str(),
                       dafuse::error);
  dafuse::test::save_array<float>(dir / "cols.npy", {2, 0}, {});
  CHECK_THROWS_WITH_AS(load_dataset(dir / "cols.npy", {}, domain::source),
                       doctest::Contains("cols.npy: features shape: expected at least one row"),
                       dafuse::error);
  // A 0-d array is refused as features even with labels next to it.
  dafuse::test::save_array<float>(dir / "scalar.npy", {}, {1.0f});
  dafuse::test::save_array<std::int32_t>(dir / "one.npy", {1}, {0});
  CHECK_THROWS_WITH_AS(load_dataset(dir / "scalar.npy", dir / "one.npy", domain::source),
                       doctest::Contains("scalar.npy: features shape: expected at least one "
                                         "dimension [rows, ...], found a 0-d array"),
                       dafuse::error);
}

TEST_CASE("load_dataset names whichever of the two files is missing") {
  const temp_dir dir("validation_test");
  dafuse::test::save_array<float>(dir / "x.npy", {2, 2}, {0, 1, 2, 3});
  CHECK_THROWS_WITH_AS(
      load_dataset(dir / "none.npy", dir / "x.npy", domain::source),
      doctest::Contains(((dir / "none.npy").string() + ": cannot open for reading").c_str()),
      dafuse::error);
  CHECK_THROWS_WITH_AS(
      load_dataset(dir / "x.npy", dir / "labels.npy", domain::source),
      doctest::Contains(((dir / "labels.npy").string() + ": cannot open for reading").c_str()),
      dafuse::error);
}

TEST_CASE("labels read from a file are checked against the class count by their index there") {
  const temp_dir dir("validation_test");
  dafuse::test::save_array<float>(dir / "x.npy", {4, 1}, {0, 1, 2, 3});
  dafuse::test::save_array<std::int32_t>(dir / "neg.npy", {4}, {0, 1, -1, 2});
  dafuse::test::save_array<std::int32_t>(dir / "big.npy", {4}, {0, 1, 2, 10});
  const auto neg = load_dataset(dir / "x.npy", dir / "neg.npy", domain::source);
  const std::string x = (dir / "x.npy").string();
  // The labels file is named, not the features file: that is the file to fix.
  CHECK_THROWS_WITH_AS(
      dafuse::data::check_labels(neg, 10),
      ("dafuse: " + (dir / "neg.npy").string() +
       ": labels[2]: expected a class in [0, 10) (the labels of " + x + "), found -1")
          .c_str(),
      dafuse::error);
  const auto big = load_dataset(dir / "x.npy", dir / "big.npy", domain::target);
  CHECK_THROWS_WITH_AS(
      dafuse::data::check_labels(big, 10),
      ("dafuse: " + (dir / "big.npy").string() +
       ": labels[3]: expected a class in [0, 10) (the labels of " + x + "), found 10")
          .c_str(),
      dafuse::error);
  // A part split off for validation numbers its rows anew: it names its own origin.
  const auto parts = dafuse::data::split_validation(big, 0.5, 1);
  CHECK(parts.train.labels_origin.empty());
}

}  // namespace data_validation_test
