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

namespace data_npz_test {

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

std::uint32_t le(const bytes& b, std::size_t at, int n) {
  std::uint32_t v = 0;
  for (int i = n; i-- > 0;) v = v << 8 | b[at + std::size_t(i)];
  return v;
}
void put(bytes& b, std::size_t at, std::uint32_t v, int n) {
  for (int i = 0; i < n; ++i) b[at + std::size_t(i)] = (unsigned char)(v >> (8 * i));
}

// An archive save_npz wrote, cut into the members' part (local headers and data) and its
// central-directory entries, so that a test can forge the directory and join them again.
struct zip_parts {
  bytes body;
  std::vector<bytes> entries;
};
zip_parts split(const bytes& file) {
  const std::size_t end = file.size() - 22;
  const std::size_t directory = le(file, end + 16, 4);
  zip_parts p{bytes(file.begin(), file.begin() + std::ptrdiff_t(directory)), {}};
  for (std::size_t i = 0, at = directory; i < le(file, end + 10, 2); ++i) {
    const std::size_t n = 46 + le(file, at + 28, 2) + le(file, at + 30, 2) + le(file, at + 32, 2);
    p.entries.emplace_back(file.begin() + std::ptrdiff_t(at),
                           file.begin() + std::ptrdiff_t(at + n));
    at += n;
  }
  return p;
}
// The archive of `p`, its end record saying `count` entries (their real number when negative).
bytes join(const zip_parts& p, long count = -1) {
  bytes out = p.body;
  const std::size_t directory = out.size();
  for (const bytes& e : p.entries) out.insert(out.end(), e.begin(), e.end());
  const std::size_t size = out.size() - directory;
  const auto n = std::uint32_t(count < 0 ? long(p.entries.size()) : count);
  bytes end(22, 0);
  put(end, 0, 0x06054b50, 4);
  put(end, 8, n, 2);
  put(end, 10, n, 2);
  put(end, 12, std::uint32_t(size), 4);
  put(end, 16, std::uint32_t(directory), 4);
  out.insert(out.end(), end.begin(), end.end());
  return out;
}
// A directory entry (as save_npz writes it: no extra field or comment) under another name.
bytes renamed(const bytes& entry, const std::string& name) {
  bytes e(entry.begin(), entry.begin() + 46);
  put(e, 28, std::uint32_t(name.size()), 2);
  e.insert(e.end(), name.begin(), name.end());
  return e;
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

TEST_CASE("npz: an archive's members are read by name, each only when asked for") {
  const temp_dir tmp("npz_by_name");
  dafuse::data::save_npz(tmp / "a.npz", two_members());
  const dafuse::data::npz_archive a(tmp / "a.npz");
  REQUIRE(a.entries().size() == 2);
  CHECK(a.entries()[0].name == "w.npy");
  CHECK(a.entries()[1].name == "notes.txt");
  const dafuse::data::npz_entry* notes = a.find("notes.txt");
  REQUIRE(notes != nullptr);
  CHECK(notes->size == 2);
  CHECK(a.read(*notes) == bytes{'h', 'i'});
  CHECK(a.find("missing.npy") == nullptr);

  // A damaged member is found when it is read, and a reader that skips it never sees it.
  bytes file = read_bytes(tmp / "a.npz");
  file[std::size_t(notes->data)] ^= 1;
  write_bytes(tmp / "b.npz", file);
  const dafuse::data::npz_archive b(tmp / "b.npz");
  CHECK(b.read(*b.find("w.npy")) == two_members()[0].bytes);
  CHECK(error_message([&] {
          (void)b.read(*b.find("notes.txt"));
        }).find("notes.txt: CRC-32: expected ") != std::string::npos);
}

TEST_CASE("npz: a directory cannot make a small file name more bytes than it holds") {
  const temp_dir tmp("npz_forged_directory");
  dafuse::data::save_npz(tmp / "good.npz", two_members());
  const bytes file = read_bytes(tmp / "good.npz");
  const zip_parts parts = split(file);
  REQUIRE(parts.entries.size() == 2);
  const fs::path bad = tmp / "bad.npz";
  const std::string where = "dafuse: " + bad.string();
  const auto message_for = [&](const bytes& b) {
    write_bytes(bad, b);
    return error_message([&] { (void)dafuse::data::load_npz(bad); });
  };
  const std::size_t w_end = 30 + 5 + two_members()[0].bytes.size();  // w.npy's last byte + 1

  SUBCASE("3000 entries pointing at one member's bytes") {
    zip_parts p = parts;
    for (int i = 0; i < 3000; ++i)
      p.entries.push_back(renamed(parts.entries[0], "copy" + std::to_string(i) + ".npy"));
    CHECK(message_for(join(p)) ==
          where +
              ": copy0.npy: expected bytes of its own, apart from member w.npy's (offsets 0 "
              "to " +
              std::to_string(w_end) + "), found a local header at offset 0, inside them");
  }
  SUBCASE("a member whose header lies inside another's data") {
    zip_parts p = parts;
    put(p.entries[1], 42, 40, 4);  // notes.txt's local header inside w.npy's data
    CHECK(message_for(join(p)).find(where + ": notes.txt: local header: expected its signature") ==
          0);
  }
  SUBCASE("an entry count the directory has no room for") {
    CHECK(message_for(join(parts, 60000)) ==
          where +
              ": central directory: entry count: expected at most 2 (46 bytes each in a "
              "directory of " +
              std::to_string(46 * 2 + 5 + 9) + " bytes), found 60000");
  }
  SUBCASE("a member larger than the file") {
    zip_parts p = parts;
    put(p.entries[0], 20, 0x7fffffff, 4);
    put(p.entries[0], 24, 0x7fffffff, 4);
    CHECK(message_for(join(p)) == where + ": w.npy: size: expected at most the file's " +
                                      std::to_string(file.size()) +
                                      " bytes, found 2147483647 bytes");
  }
  SUBCASE("a member running past the end") {
    zip_parts p = parts;
    const std::uint32_t n = std::uint32_t(file.size() - 40);
    put(p.entries[1], 20, n, 4);
    put(p.entries[1], 24, n, 4);
    CHECK(message_for(join(p)).find(where + ": notes.txt: data: expected " + std::to_string(n) +
                                    " bytes at offset ") == 0);
  }
  SUBCASE("a name given twice") {
    zip_parts p = parts;
    p.entries[1] = renamed(p.entries[1], "w.npy");
    CHECK(message_for(join(p)) == where + ": w.npy: expected each member once, found it twice");
  }
  SUBCASE("names with control bytes are escaped") {
    zip_parts p = parts;
    p.entries[1] = renamed(p.entries[0],
                           "\x1b[2J\x07"
                           "evil");
    const std::string e = message_for(join(p));
    CHECK(e.find("'\\x1b[2J\\x07evil'") != std::string::npos);
    CHECK(e.find('\x1b') == std::string::npos);
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

}  // namespace data_npz_test
