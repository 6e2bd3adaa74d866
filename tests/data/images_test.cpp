// SPDX-License-Identifier: Apache-2.0
// Tests for data/images.hpp: uint8 and float32 images written with save_npy, flattened to rows
// and scaled to [0, 1], and the errors for ranks, dtypes, values and labels.
#include <dafuse/data/images.hpp>
#include "../check.hpp"
#include "npy_files.hpp"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <span>
#include <string>
#include <vector>

namespace data_images_test {

namespace {

namespace fs = std::filesystem;
using dafuse::index_t;
using dafuse::data::dataset;
using dafuse::data::domain;
using dafuse::data::load_image_dataset;
using dafuse::test::temp_dir;

}  // namespace

TEST_CASE("load_image_dataset flattens uint8 [N, H, W] to rows and divides by 255") {
  const temp_dir dir("images_test");
  std::vector<std::uint8_t> pixels(3 * 2 * 4);
  for (std::size_t i = 0; i < pixels.size(); ++i) pixels[i] = std::uint8_t(i * 11);
  dafuse::test::save_array(dir / "x.npy", {3, 2, 4}, pixels);
  dafuse::test::save_array<std::int32_t>(dir / "y.npy", {3}, {2, 0, 1});

  const dataset d = load_image_dataset(dir / "x.npy", dir / "y.npy", domain::source);
  CHECK(d.origin == (dir / "x.npy").string());
  CHECK(d.side == domain::source);
  CHECK(d.rows == 3);
  CHECK(d.width == 8);
  CHECK(d.labels == std::vector<std::int32_t>{2, 0, 1});
  REQUIRE(d.features.size() == pixels.size());
  for (std::size_t i = 0; i < pixels.size(); ++i) {
    CAPTURE(i);
    CHECK(d.features[i] == float(pixels[i]) / 255.0f);  // numpy: x.astype(np.float32) / 255
    CHECK(std::abs(double(d.features[i]) - pixels[i] / 255.0) < 1e-7);
  }

  const dataset raw = load_image_dataset(dir / "x.npy", {}, domain::target, false);
  CHECK_FALSE(raw.has_labels());
  CHECK(raw.side == domain::target);
  for (std::size_t i = 0; i < pixels.size(); ++i) CHECK(raw.features[i] == float(pixels[i]));
}

TEST_CASE("load_image_dataset flattens [N, H, W, C] channels last, 0 and 255 to 0 and 1") {
  const temp_dir dir("images_test");
  std::vector<std::uint8_t> pixels(2 * 2 * 2 * 3);
  for (std::size_t i = 0; i < pixels.size(); ++i) pixels[i] = i % 2 == 0 ? 0 : 255;
  dafuse::test::save_array(dir / "rgb.npy", {2, 2, 2, 3}, pixels);
  const dataset d = load_image_dataset(dir / "rgb.npy", {}, domain::target);
  CHECK(d.rows == 2);
  CHECK(d.width == 12);
  for (std::size_t i = 0; i < pixels.size(); ++i)
    CHECK(d.features[i] == (i % 2 == 0 ? 0.0f : 1.0f));
}

TEST_CASE("load_image_dataset keeps float32 images in [0, 1] as they are") {
  const temp_dir dir("images_test");
  const std::vector<float> v = {0.0f, 0.25f, 1.0f, 0.5f, 1e-30f, 0.999f, 0.0f, 0.75f};
  dafuse::test::save_array(dir / "f.npy", {2, 2, 2}, v);
  const dataset d = load_image_dataset(dir / "f.npy", {}, domain::source);
  CHECK(d.width == 4);
  CHECK(d.features == v);
}

TEST_CASE("load_image_dataset rejects float32 outside [0, 1] naming the pixel, unless asked") {
  const temp_dir dir("images_test");
  std::vector<float> v(2 * 3 * 2, 0.5f);
  v[1 * 6 + 2 * 2 + 1] = 255.0f;
  dafuse::test::save_array(dir / "f.npy", {2, 3, 2}, v);
  const std::string path = (dir / "f.npy").string();
  CHECK_THROWS_WITH_AS(load_image_dataset(dir / "f.npy", {}, domain::source),
                       ("dafuse: " + path +
                        ": value[1][2][1]: expected float32 pixels in [0, 1] (pass scale_to_unit "
                        "= false to keep other values as they are), found 255.000000")
                           .c_str(),
                       dafuse::error);
  const dataset raw = load_image_dataset(dir / "f.npy", {}, domain::source, false);
  CHECK(raw.features == v);

  v[0] = -0.0625f;  // the first offending value is the one reported
  dafuse::test::save_array(dir / "f.npy", {2, 3, 2}, v);
  CHECK_THROWS_WITH_AS(load_image_dataset(dir / "f.npy", {}, domain::source),
                       doctest::Contains("value[0][0][0]: expected float32 pixels in [0, 1]"),
                       dafuse::error);

  // NaN is outside [0, 1]; without scaling, make_dataset still refuses it.
  v[0] = std::numeric_limits<float>::quiet_NaN();
  dafuse::test::save_array(dir / "f.npy", {2, 3, 2}, v);
  CHECK_THROWS_WITH_AS(load_image_dataset(dir / "f.npy", {}, domain::source),
                       doctest::Contains("value[0][0][0]"), dafuse::error);
  CHECK_THROWS_WITH_AS(
      load_image_dataset(dir / "f.npy", {}, domain::source, false),
      doctest::Contains((path + ": features[0][0]: expected a finite value").c_str()),
      dafuse::error);
}

TEST_CASE("load_image_dataset rejects other ranks, int32 pixels and empty sets") {
  const temp_dir dir("images_test");
  const std::string flat = (dir / "flat.npy").string();
  dafuse::test::save_array<std::uint8_t>(dir / "flat.npy", {2, 4}, std::vector<std::uint8_t>(8));
  CHECK_THROWS_WITH_AS(
      load_image_dataset(dir / "flat.npy", {}, domain::source),
      ("dafuse: " + flat + ": shape: expected images [N, H, W] or [N, H, W, C], found (2, 4)")
          .c_str(),
      dafuse::error);
  dafuse::test::save_array<std::uint8_t>(dir / "five.npy", {1, 1, 1, 1, 1}, {7});
  CHECK_THROWS_WITH_AS(load_image_dataset(dir / "five.npy", {}, domain::source),
                       doctest::Contains("shape: expected images"), dafuse::error);

  dafuse::test::save_array<std::int32_t>(dir / "int.npy", {1, 2, 2}, {0, 1, 2, 3});
  CHECK_THROWS_WITH_AS(load_image_dataset(dir / "int.npy", {}, domain::source),
                       ("dafuse: " + (dir / "int.npy").string() +
                        ": descr: expected '|u1' (uint8) or float ('<f4', '<f8') images, found "
                        "'<i4' (int32); convert with x.astype(np.float32)")
                           .c_str(),
                       dafuse::error);

  dafuse::test::save_array<std::uint8_t>(dir / "none.npy", {0, 4, 4}, {});
  CHECK_THROWS_WITH_AS(load_image_dataset(dir / "none.npy", {}, domain::source),
                       doctest::Contains("none.npy: features shape: expected at least one row"),
                       dafuse::error);

  CHECK_THROWS_WITH_AS(load_image_dataset(dir / "missing.npy", {}, domain::source),
                       doctest::Contains("missing.npy: cannot open for reading"), dafuse::error);
}

TEST_CASE("load_image_dataset rejects labels of another length, rank or dtype by their file") {
  const temp_dir dir("images_test");
  dafuse::test::save_array<std::uint8_t>(dir / "x.npy", {3, 2, 2}, std::vector<std::uint8_t>(12));
  dafuse::test::save_array<std::int32_t>(dir / "short.npy", {2}, {0, 1});
  dafuse::test::save_array<std::int32_t>(dir / "square.npy", {3, 1}, {0, 1, 2});
  dafuse::test::save_array<float>(dir / "float.npy", {3}, {0, 1, 2});
  const std::string x = (dir / "x.npy").string();
  CHECK_THROWS_WITH_AS(load_image_dataset(dir / "x.npy", dir / "short.npy", domain::source),
                       ("dafuse: " + (dir / "short.npy").string() +
                        ": shape: expected [3] to "
                        "match " +
                        x + ", found [2]")
                           .c_str(),
                       dafuse::error);
  CHECK_THROWS_WITH_AS(load_image_dataset(dir / "x.npy", dir / "square.npy", domain::source),
                       doctest::Contains("square.npy: shape: expected one dimension [N]"),
                       dafuse::error);
  CHECK_THROWS_WITH_AS(load_image_dataset(dir / "x.npy", dir / "float.npy", domain::source),
                       doctest::Contains("float.npy: descr: expected an integer type"),
                       dafuse::error);
}

TEST_CASE("the JDA MNIST digits load as images in [0, 1] equal to load_dataset's rows") {
  const fs::path dir = dafuse::test::shared_data_dir() / "jda_mnist_usps";
  if (!fs::exists(dir / "mnist_images.npy")) {
    MESSAGE("skipped: " << dir.string() << " not found");
    return;
  }
  const dataset d =
      load_image_dataset(dir / "mnist_images.npy", dir / "mnist_labels.npy", domain::source);
  const dataset ref = dafuse::data::load_dataset(dir / "mnist_images.npy", dir / "mnist_labels.npy",
                                                 domain::source);
  CHECK(d.rows == 2000);
  CHECK(d.width == 256);
  CHECK(d.features == ref.features);
  CHECK(d.labels == ref.labels);
}

}  // namespace data_images_test
