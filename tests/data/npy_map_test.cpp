// SPDX-License-Identifier: Apache-2.0
// Tests for data/npy_map.hpp: mapping gives the values load_npy reads, on written and shared
// files, and every malformed file is refused with load_npy's message.
#include <dafuse/data/npy_map.hpp>
#include "../check.hpp"
#include "npy_files.hpp"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace data_npy_map_test {

namespace {

namespace fs = std::filesystem;
using dafuse::data::host_array;
using dafuse::data::mapped_npy;
using dafuse::test::temp_dir;

using dafuse::test::bytes;
using dafuse::test::make_npy;
using dafuse::test::write_bytes;

//! The message load_npy<T> gives for `path`, or "" if it reads the file.
template <class T>
std::string load_npy_message(const fs::path& path) {
  return dafuse::test::error_message([&] { (void)dafuse::data::load_npy<T>(path); });
}

//! Maps `path` and checks it reads exactly what load_npy<T> reads.
template <class T>
void check_same_as_load_npy(const fs::path& path) {
  CAPTURE(path.string());
  const host_array<T> loaded = dafuse::data::load_npy<T>(path);
  const mapped_npy<T> mapped(path);
  CHECK(mapped.path() == path.string());
  CHECK(mapped.shape() == loaded.shape);
  REQUIRE(mapped.values().size() == loaded.values.size());
  // Bit for bit (memcmp must not see the null pointers of an empty array).
  CHECK((loaded.values.empty() || std::memcmp(mapped.values().data(), loaded.values.data(),
                                              loaded.values.size() * sizeof(T)) == 0));
  const host_array<T> copy = mapped.copy();
  CHECK(copy.shape == loaded.shape);
  CHECK(copy.values == loaded.values);
}

//! Checks mapping `path` as T fails with exactly load_npy<T>'s message.
template <class T>
void check_same_error(const fs::path& path, std::string_view field) {
  const std::string want = load_npy_message<T>(path);
  CAPTURE(want);
  REQUIRE_FALSE(want.empty());
  CHECK(want.find(std::string(field)) != std::string::npos);
  CHECK_THROWS_WITH_AS(mapped_npy<T>{path}, want.c_str(), dafuse::error);
}

}  // namespace

static_assert(!std::is_copy_constructible_v<mapped_npy<float>>);
static_assert(!std::is_copy_assignable_v<mapped_npy<float>>);
static_assert(std::is_nothrow_move_constructible_v<mapped_npy<float>>);
static_assert(std::is_nothrow_move_assignable_v<mapped_npy<float>>);

TEST_CASE("mapped_npy reads the values load_npy reads, for each dtype and rank") {
  const temp_dir dir("npy_map_test");
  std::vector<float> f(3 * 4 * 5);
  for (std::size_t i = 0; i < f.size(); ++i) f[i] = 0.5f * float(i) - 7.0f;
  dafuse::data::save_npy<float>(dir / "f.npy", {3, 4, 5}, f);
  dafuse::data::save_npy<float>(dir / "scalar.npy", {}, std::vector<float>{2.5f});
  dafuse::data::save_npy<std::int32_t>(
      dir / "i.npy", {4}, std::vector<std::int32_t>{-2147483647 - 1, 0, 7, 2147483647});
  std::vector<std::uint8_t> u(7 * 3);
  for (std::size_t i = 0; i < u.size(); ++i) u[i] = std::uint8_t(i * 37);
  dafuse::data::save_npy<std::uint8_t>(dir / "u.npy", {7, 3}, u);
  dafuse::data::save_npy<float>(dir / "empty.npy", {0, 16}, std::vector<float>{});
  check_same_as_load_npy<float>(dir / "f.npy");
  check_same_as_load_npy<float>(dir / "scalar.npy");
  check_same_as_load_npy<std::int32_t>(dir / "i.npy");
  check_same_as_load_npy<std::uint8_t>(dir / "u.npy");
  check_same_as_load_npy<float>(dir / "empty.npy");
  CHECK(mapped_npy<float>(dir / "empty.npy").values().empty());

  // A version 2.0 header, and a uint8 array right after an unpadded header (no alignment needed).
  const std::string_view h2 = "{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }      \n";
  REQUIRE((12 + h2.size()) % 4 == 0);
  bytes v2 = {0x93, 'N', 'U', 'M', 'P', 'Y', 2, 0, static_cast<unsigned char>(h2.size()), 0, 0, 0};
  const bytes data = {1, 0, 0, 0, 0xff, 0xff, 0xff, 0xff};
  v2.insert(v2.end(), h2.begin(), h2.end());
  v2.insert(v2.end(), data.begin(), data.end());
  write_bytes(dir / "v2.npy", v2);
  check_same_as_load_npy<std::int32_t>(dir / "v2.npy");
  CHECK(mapped_npy<std::int32_t>(dir / "v2.npy").values()[1] == -1);
  write_bytes(dir / "odd.npy",
              make_npy(1, "{'descr': '|u1', 'fortran_order': False, 'shape': (3,)}\n", {4, 5, 6}));
  check_same_as_load_npy<std::uint8_t>(dir / "odd.npy");
}

TEST_CASE("mapped_npy reads the shared data files exactly as load_npy does") {
  const fs::path dir = dafuse::test::shared_data_dir();
  if (!fs::exists(dir / "jda_mnist_usps" / "mnist_images.npy")) {
    MESSAGE("skipped: " << dir.string() << " has no jda_mnist_usps/mnist_images.npy");
    return;
  }
  check_same_as_load_npy<float>(dir / "jda_mnist_usps" / "mnist_images.npy");
  check_same_as_load_npy<std::int32_t>(dir / "jda_mnist_usps" / "mnist_labels.npy");
  const mapped_npy<float> m(dir / "jda_mnist_usps" / "mnist_images.npy");
  CHECK(m.shape() == std::vector<std::size_t>{2000, 16, 16});
  if (fs::exists(dir / "amazon_reviews" / "books_test_indices.npy")) {
    check_same_as_load_npy<std::int32_t>(dir / "amazon_reviews" / "books_test_indices.npy");
    check_same_as_load_npy<float>(dir / "amazon_reviews" / "books_test_data.npy");
  }
}

TEST_CASE("mapped_npy moves its mapping and leaves the source empty") {
  const temp_dir dir("npy_map_test");
  dafuse::data::save_npy<float>(dir / "a.npy", {2}, std::vector<float>{1.0f, 2.0f});
  dafuse::data::save_npy<float>(dir / "b.npy", {3}, std::vector<float>{3.0f, 4.0f, 5.0f});
  mapped_npy<float> a(dir / "a.npy");
  const float* data = a.values().data();
  mapped_npy<float> moved(std::move(a));
  CHECK(moved.values().data() == data);  // the same mapping, not a copy
  CHECK(moved.values()[1] == 2.0f);
  CHECK(a.values().empty());  // NOLINT(bugprone-use-after-move): the moved-from state is defined
  CHECK(a.shape().empty());

  mapped_npy<float> b(dir / "b.npy");
  b = std::move(moved);  // unmaps b.npy's mapping
  CHECK(b.shape() == std::vector<std::size_t>{2});
  CHECK(b.values()[0] == 1.0f);
  mapped_npy<float>& alias = b;
  b = std::move(alias);  // self-move keeps the mapping
  CHECK(b.values()[0] == 1.0f);
}

TEST_CASE("mapped_npy refuses malformed files with load_npy's messages") {
  const temp_dir dir("npy_map_test");
  const fs::path p = dir / "bad.npy";

  write_bytes(p, make_npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }     \n",
                          bytes(20, 0)));
  check_same_error<float>(p, ": data: expected 24 bytes");  // truncated
  write_bytes(p, make_npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }         \n",
                          bytes(8, 0)));
  check_same_error<float>(p, "(extra trailing bytes)");
  dafuse::data::save_npy<float>(p, {2}, std::vector<float>{1.0f, 2.0f});
  check_same_error<std::int32_t>(p, ": descr: expected '<i4' (int32), found '<f4' (float32)");
  check_same_error<std::uint8_t>(p, ": descr:");
  write_bytes(p, make_npy(1, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }     \n",
                          bytes(16, 0)));
  check_same_error<float>(p, ": fortran_order: expected False (C order), found True");
  // load_npy swaps big-endian values as it reads; a mapping cannot, and says what can.
  write_bytes(p, make_npy(1, "{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }      \n",
                          {0x3f, 0x80, 0, 0}));
  CHECK(dafuse::data::load_npy<float>(p).values == std::vector<float>{1.0f});
  CHECK_THROWS_WITH_AS(mapped_npy<float>{p},
                       ("dafuse: " + p.string() +
                        ": descr: expected data in the host's byte order to map it, found '>f4' "
                        "(float32, big-endian); use load_npy, which swaps the bytes as it reads")
                           .c_str(),
                       dafuse::error);
  // float64 maps as double only: a mapping never converts (load_npy_as_float does).
  dafuse::data::save_npy<double>(p, {2}, std::vector<double>{0.5, -2.0});
  check_same_error<float>(p,
                          ": descr: expected '<f4' (float32), found '<f8' (float64); convert "
                          "with arr.astype(np.float32)");
  CHECK(mapped_npy<double>(p).values()[1] == -2.0);
  write_bytes(p, {});
  check_same_error<float>(p, ": magic: expected '\\x93NUMPY' (an NPY file), found an empty file");
  write_bytes(p, {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, 200, 0, '{'});
  check_same_error<float>(p, ": header length:");
  write_bytes(p, {'P', 'K', 3, 4});
  check_same_error<float>(p, ": magic:");
}

TEST_CASE("mapped_npy reports a missing file and a directory like load_npy") {
  const temp_dir dir("npy_map_test");
  check_same_error<float>(dir / "missing.npy",
                          ": cannot open for reading: No such file or directory");
  check_same_error<float>(dir.path(), ": cannot open for reading: it is a directory");
  check_same_error<float>("/dev/zero", ": cannot read: it is a character device");
}

TEST_CASE("mapped_npy refuses a FIFO without a writer at once, like load_npy") {
  const temp_dir dir("npy_map_fifo");
  const fs::path fifo = dir / "pipe.npy";
  dafuse::test::make_fifo(fifo);
  // Both must return: a reader that blocked would be released by finishes_within and fail.
  std::string mapped, loaded;
  CHECK(dafuse::test::finishes_within(
      10, fifo, [&] { mapped = dafuse::test::error_message([&] { mapped_npy<float> m(fifo); }); }));
  CHECK(dafuse::test::finishes_within(10, fifo, [&] { loaded = load_npy_message<float>(fifo); }));
  CHECK(mapped == loaded);
  CHECK(mapped.find(": cannot read: it is a FIFO (named pipe), not a regular file") !=
        std::string::npos);
}

TEST_CASE("mapped_npy refuses float data that does not start on a 4-byte boundary") {
  // load_npy copies such a file; mapping it would read misaligned floats.
  const temp_dir dir("npy_map_test");
  const fs::path p = dir / "unaligned.npy";
  const std::string_view header = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,)}\n";
  REQUIRE((10 + header.size()) % 4 != 0);
  const float v[2] = {1.5f, -2.0f};
  bytes data(sizeof v);
  std::memcpy(data.data(), v, sizeof v);
  write_bytes(p, make_npy(1, header, data));
  CHECK(dafuse::data::load_npy<float>(p).values == std::vector<float>{1.5f, -2.0f});
  CHECK_THROWS_WITH_AS(mapped_npy<float>{p},
                       ("dafuse: " + p.string() + ": header length: expected data starting on a " +
                        "multiple of 4 bytes to map it (use load_npy for this file), found data " +
                        "at byte " + std::to_string(10 + header.size()))
                           .c_str(),
                       dafuse::error);
}

}  // namespace data_npy_map_test
