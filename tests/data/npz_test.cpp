// SPDX-License-Identifier: Apache-2.0
// Tests for data/npz.hpp: round trips, numpy's own archives, and every rejected archive.
#include <dafuse/data/npz.hpp>

#include "../check.hpp"

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;
using dafuse::data::npz_member;
using dafuse::test::error_message;
using dafuse::test::temp_dir;
using bytes = std::vector<unsigned char>;

const fs::path fixtures = fs::path(DAFUSE_SOURCE_DIR) / "tests" / "data" / "npz";

bytes read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return bytes(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}
void write_bytes(const fs::path& path, const bytes& b) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
}

std::vector<npz_member> two_members() {
  const std::vector<float> w{1.5f, -2.0f, 0.25f, 8.0f};
  return {{"w.npy", dafuse::data::npy_bytes<float>({2, 2}, std::span<const float>(w), "w")},
          {"notes.txt", {'h', 'i'}}};
}

}  // namespace

TEST_CASE("npz: a written archive reads back member for member") {
  const temp_dir tmp("npz_round_trip");
  const fs::path path = tmp / "a.npz";
  const std::vector<npz_member> in = two_members();
  dafuse::data::save_npz(path, in);
  CHECK_FALSE(fs::exists(fs::path(path.string() + ".tmp")));
  const std::vector<npz_member> out = dafuse::data::load_npz(path);
  REQUIRE(out.size() == in.size());
  for (std::size_t i = 0; i < in.size(); ++i) {
    CHECK(out[i].name == in[i].name);
    CHECK(out[i].bytes == in[i].bytes);
  }
  const npz_member* w = dafuse::data::find_member(out, "w.npy");
  REQUIRE(w != nullptr);
  const auto a = dafuse::data::parse_npy<float>(w->bytes, "w");
  CHECK(a.shape == std::vector<std::size_t>{2, 2});
  CHECK(a.values == std::vector<float>{1.5f, -2.0f, 0.25f, 8.0f});
  CHECK(dafuse::data::find_member(out, "missing.npy") == nullptr);

  // Equal members give byte-identical files (a fixed timestamp).
  dafuse::data::save_npz(tmp / "b.npz", in);
  CHECK(read_bytes(path) == read_bytes(tmp / "b.npz"));

  // An empty archive is a valid one.
  dafuse::data::save_npz(tmp / "empty.npz", {});
  CHECK(dafuse::data::load_npz(tmp / "empty.npz").empty());
}

TEST_CASE("npz: reads numpy.savez's archives (ZIP64 local headers)") {
  const std::vector<npz_member> m = dafuse::data::load_npz(fixtures / "numpy_savez.npz");
  REQUIRE(m.size() == 2);
  const npz_member* w = dafuse::data::find_member(m, "weights.npy");
  const npz_member* c = dafuse::data::find_member(m, "counts.npy");
  REQUIRE(w != nullptr);
  REQUIRE(c != nullptr);
  const auto weights = dafuse::data::parse_npy<float>(w->bytes, "weights");
  CHECK(weights.shape == std::vector<std::size_t>{2, 3});
  CHECK(weights.values == std::vector<float>{0, 0.25f, 0.5f, 0.75f, 1, 1.25f});
  CHECK(dafuse::data::parse_npy<std::int32_t>(c->bytes, "counts").values ==
        std::vector<std::int32_t>{7, -1, 3});
}

TEST_CASE("npz: refuses what it cannot read exactly, naming the file and member") {
  const temp_dir tmp("npz_errors");
  const fs::path good = tmp / "good.npz";
  dafuse::data::save_npz(good, two_members());
  const bytes file = read_bytes(good);
  const std::string where = "dafuse: " + (tmp / "bad.npz").string();
  const auto message_for = [&](const bytes& b) {
    write_bytes(tmp / "bad.npz", b);
    return error_message([&] { (void)dafuse::data::load_npz(tmp / "bad.npz"); });
  };

  SUBCASE("compressed members") {
    const std::string e = error_message(
        [&] { (void)dafuse::data::load_npz(fixtures / "numpy_savez_compressed.npz"); });
    CHECK(e.find("weights.npy: compression method: expected 0 (stored") != std::string::npos);
    CHECK(e.find("found 8") != std::string::npos);
  }
  SUBCASE("a flipped data byte fails its CRC") {
    bytes b = file;
    b[30 + 5 + 70] ^= 0x40;  // inside w.npy's data (local header, name, NPY header)
    const std::string e = message_for(b);
    CHECK(e.find(where + ": w.npy: CRC-32: expected ") == 0);
    CHECK(e.find("(the member is corrupted)") != std::string::npos);
  }
  SUBCASE("truncated: the end record is gone") {
    const std::string e = message_for(bytes(file.begin(), file.end() - 10));
    CHECK(e == where +
                   ": end of central directory: expected a ZIP archive (numpy.savez), found "
                   "no end record (not a ZIP file, or truncated)");
  }
  SUBCASE("truncated in the data, end record kept") {
    // Drop bytes from the first member: every offset after it now points past its structure.
    bytes b(file.begin(), file.begin() + 40);
    b.insert(b.end(), file.begin() + 80, file.end());
    const std::string e = message_for(b);
    CHECK(e.find(where) == 0);
    CHECK_FALSE(e.empty());
  }
  SUBCASE("not a ZIP file at all") {
    const std::string e = message_for(bytes(100, 'x'));
    CHECK(e.find("end of central directory") != std::string::npos);
    CHECK(message_for({}).find("of at least 22 bytes, found 0 bytes") != std::string::npos);
  }
  SUBCASE("a missing file") {
    const std::string e = error_message([&] { (void)dafuse::data::load_npz(tmp / "absent.npz"); });
    CHECK(e.find((tmp / "absent.npz").string()) != std::string::npos);
  }
  // Every prefix of the file is refused with a message, never read past its end (ASan).
  SUBCASE("every truncation is refused") {
    for (std::size_t n = 0; n < file.size(); ++n)
      CHECK_FALSE(message_for(bytes(file.begin(), file.begin() + std::ptrdiff_t(n))).empty());
  }
}

TEST_CASE("loading reads each member straight into its bytes: the peak is about the members'") {
  const temp_dir tmp("npz_peak");
  const fs::path path = tmp / "big.npz";
  constexpr std::size_t member_bytes = std::size_t(48) << 20;
  {
    std::vector<npz_member> members{{"a.bin", bytes(member_bytes)}};
    for (std::size_t i = 0; i < member_bytes; i += 4096)
      members[0].bytes[i] = (unsigned char)(i >> 12);
    dafuse::data::save_npz(path, members);
  }
  const dafuse::test::peak_memory peak;
  const std::vector<npz_member> loaded = dafuse::data::load_npz(path);
  REQUIRE(loaded.size() == 1);
  CHECK(loaded[0].bytes.size() == member_bytes);
  CHECK(loaded[0].bytes[4096 * 7] == 7);
  if (peak.usable()) CHECK(peak.growth_bytes() < 1.1 * double(member_bytes));  // was 2x
}
