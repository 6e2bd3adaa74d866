// SPDX-License-Identifier: Apache-2.0
//! @file data/npz.hpp
//! @brief NumPy `.npz` archives: named NPY members in an uncompressed ZIP file.
//!
//! What numpy.savez writes and numpy.load reads: a ZIP archive whose members are stored (method
//! 0, no compression), each an NPY image named `<key>.npy`. Writing produces plain ZIP (no
//! ZIP64; archives up to 4 GiB). Reading takes sizes and offsets from the central directory,
//! which also covers numpy's own archives (their local headers carry ZIP64 extra fields), checks
//! every member's CRC-32, and refuses compressed members (numpy.savez_compressed), encrypted
//! ones, anything running past the end of the file, a name given twice and members that share
//! bytes: whatever its directory says, an archive's members add up to at most its size.
#pragma once
#include <dafuse/config.hpp>
#include <dafuse/core/crc32.hpp>
#include <dafuse/core/error.hpp>
#include <dafuse/core/file.hpp>
#include <dafuse/data/npy.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace dafuse::data {

//! One member of an archive: its name in the ZIP directory ("features.0.weight.npy") and bytes.
struct npz_member {
  std::string name;
  std::vector<unsigned char> bytes;
};

namespace detail {

inline constexpr std::uint32_t zip_local_signature = 0x04034b50;
inline constexpr std::uint32_t zip_central_signature = 0x02014b50;
inline constexpr std::uint32_t zip_end_signature = 0x06054b50;
inline constexpr std::uint32_t zip64_end_signature = 0x06064b50;
inline constexpr std::uint32_t zip64_locator_signature = 0x07064b50;
inline constexpr std::size_t zip_local_size = 30, zip_central_size = 46, zip_end_size = 22;

//! Little-endian fields appended to a byte vector.
struct zip_writer {
  std::vector<unsigned char>& out;
  void u16(std::uint32_t v) {
    out.push_back(static_cast<unsigned char>(v));
    out.push_back(static_cast<unsigned char>(v >> 8));
  }
  void u32(std::uint32_t v) {
    u16(v & 0xffff);
    u16(v >> 16);
  }
  void text(std::string_view s) { out.insert(out.end(), s.begin(), s.end()); }
};

//! Little-endian fields read from a part of a file (`bytes`, the file's bytes from offset
//! `base`); offsets are the file's. Every read is bounds-checked against the file, and a short
//! read names the structure that was cut off.
struct zip_reader {
  std::span<const unsigned char> bytes;
  std::uint64_t base = 0;
  std::uint64_t file_size = 0;
  std::string_view where;
  void need(std::uint64_t at, std::uint64_t n, std::string_view what) const {
    if (at > file_size || n > file_size - at)
      fail(where, what, std::to_string(n) + " bytes at offset " + std::to_string(at),
           "a file of " + std::to_string(file_size) + " bytes (truncated)");
    if (at < base || at - base > bytes.size() || n > bytes.size() - (at - base))
      fail(where, what, "inside the part of the file read for it", "offset " + std::to_string(at));
  }
  std::uint64_t le(std::uint64_t at, std::size_t n) const {
    need(at, n, "field");
    std::uint64_t v = 0;
    for (std::size_t i = n; i-- > 0;) v = v << 8 | bytes[std::size_t(at - base) + i];
    return v;
  }
  std::uint32_t u16(std::uint64_t at) const { return std::uint32_t(le(at, 2)); }
  std::uint32_t u32(std::uint64_t at) const { return std::uint32_t(le(at, 4)); }
  std::uint64_t u64(std::uint64_t at) const { return le(at, 8); }
  //! The `n` bytes at `at` (checked as need()).
  std::span<const unsigned char> span(std::uint64_t at,
                                      std::size_t n,
                                      std::string_view what) const {
    need(at, n, what);
    return bytes.subspan(std::size_t(at - base), n);
  }
};

//! A reader of the `n` bytes at `offset` of `file`, read into `storage`.
inline zip_reader read_zip_part(const dafuse::detail::input_file& file,
                                std::uint64_t offset,
                                std::uint64_t n,
                                std::string_view what,
                                std::vector<unsigned char>& storage) {
  storage = file.read_bytes(offset, n, what);
  return {storage, offset, file.size(), file.where()};
}

//! Where the central directory is and how many entries it has, from the end records.
struct zip_directory {
  std::uint64_t entries = 0, offset = 0, size = 0;
};

//! Reads the end records: the last 22 bytes, plus a comment of at most 65535 bytes and a ZIP64
//! locator of 20 before them, then the ZIP64 end record where there is one.
inline zip_directory find_zip_directory(const dafuse::detail::input_file& file) {
  const std::uint64_t n = file.size();
  const std::string_view where = file.where();
  if (n < zip_end_size)
    fail(where, "end of central directory", "a ZIP archive (numpy.savez) of at least 22 bytes",
         std::to_string(n) + " bytes");
  std::vector<unsigned char> tail_bytes, end64_bytes;
  const std::uint64_t tail = std::min<std::uint64_t>(n, zip_end_size + 0xffff + 20);
  const zip_reader r = read_zip_part(file, n - tail, tail, "end of central directory", tail_bytes);
  const std::uint64_t lowest = n - zip_end_size - std::min<std::uint64_t>(n - zip_end_size, 0xffff);
  std::uint64_t at = n - zip_end_size + 1;
  bool found = false;
  while (at-- > lowest) {
    if (r.u32(at) == zip_end_signature && at + zip_end_size + r.u16(at + 20) == n) {
      found = true;
      break;
    }
  }
  if (!found)
    fail(where, "end of central directory", "a ZIP archive (numpy.savez)",
         "no end record (not a ZIP file, or truncated)");
  if (r.u16(at + 4) != 0 || r.u16(at + 6) != 0)
    fail(where, "disk number", "a single-file archive", "a multi-volume one");
  zip_directory d{r.u16(at + 10), r.u32(at + 16), r.u32(at + 12)};
  if (d.entries == 0xffff || d.offset == 0xffffffff || d.size == 0xffffffff) {
    // ZIP64: a locator just before the end record points at the ZIP64 end record.
    if (at < 20 || at - 20 < n - tail || r.u32(at - 20) != zip64_locator_signature)
      fail(where, "ZIP64 end locator", "one before the end record", "none");
    const std::uint64_t end64 = r.u64(at - 20 + 8);
    if (end64 > n) fail(where, "ZIP64 end record", "an offset inside the file", "past its end");
    if (n - end64 < 56)
      fail(where, "ZIP64 end record", "56 bytes at offset " + std::to_string(end64),
           "a file of " + std::to_string(n) + " bytes (truncated)");
    const zip_reader e = read_zip_part(file, end64, 56, "ZIP64 end record", end64_bytes);
    if (e.u32(end64) != zip64_end_signature)
      fail(where, "ZIP64 end record", "its signature", "other bytes");
    d = {e.u64(end64 + 32), e.u64(end64 + 48), e.u64(end64 + 40)};
  }
  if (d.offset > n || d.size > n - d.offset)
    fail(where, "central directory", "inside the file (" + std::to_string(n) + " bytes)",
         std::to_string(d.size) + " bytes at offset " + std::to_string(d.offset));
  return d;
}

}  // namespace detail

//! Writes `members` as an uncompressed ZIP archive (numpy.savez's format) to `path`, through a
//! temporary file renamed over it: a failure leaves no half-written `path`.
inline void save_npz(const std::filesystem::path& path, std::span<const npz_member> members) {
  const std::string where = path.string();
  std::vector<unsigned char> out, directory;
  detail::zip_writer file{out}, dir{directory};
  // 1980-01-01 00:00 (the earliest DOS date): a fixed time keeps equal models' files identical.
  constexpr std::uint32_t dos_time = 0, dos_date = (0 << 9) | (1 << 5) | 1;
  for (const npz_member& m : members) {
    if (m.name.empty() || m.name.size() > 0xffff)
      fail(where, "member name", "1 to 65535 bytes", std::to_string(m.name.size()) + " bytes");
    if (m.bytes.size() >= 0xffffffffu || out.size() >= 0xffffffffu)
      fail(where, m.name, "a member and an archive under 4 GiB (no ZIP64)",
           std::to_string(m.bytes.size()) + " bytes");
    const std::uint32_t crc = dafuse::detail::crc32(m.bytes.data(), m.bytes.size());
    const auto size = std::uint32_t(m.bytes.size());
    const auto offset = std::uint32_t(out.size());
    const auto common = [&](detail::zip_writer& w) {
      w.u16(20);  // version needed to extract: 2.0
      w.u16(0);   // flags
      w.u16(0);   // method: stored
      w.u16(dos_time);
      w.u16(dos_date);
      w.u32(crc);
      w.u32(size);  // compressed size
      w.u32(size);  // uncompressed size
      w.u16(std::uint32_t(m.name.size()));
      w.u16(0);  // extra field length
    };
    file.u32(detail::zip_local_signature);
    common(file);
    file.text(m.name);
    out.insert(out.end(), m.bytes.begin(), m.bytes.end());

    dir.u32(detail::zip_central_signature);
    dir.u16(20);  // made by: 2.0, MS-DOS attributes
    common(dir);
    dir.u16(0);  // comment length
    dir.u16(0);  // disk number
    dir.u16(0);  // internal attributes
    dir.u32(0);  // external attributes
    dir.u32(offset);
    dir.text(m.name);
  }
  if (members.size() >= 0xffff || out.size() + directory.size() >= 0xffffffffu)
    fail(where, "members", "fewer than 65535 and under 4 GiB in all (no ZIP64)",
         std::to_string(members.size()));
  const auto directory_offset = std::uint32_t(out.size());
  out.insert(out.end(), directory.begin(), directory.end());
  file.u32(detail::zip_end_signature);
  file.u16(0);  // this disk
  file.u16(0);  // disk of the central directory
  file.u16(std::uint32_t(members.size()));
  file.u16(std::uint32_t(members.size()));
  file.u32(std::uint32_t(directory.size()));
  file.u32(directory_offset);
  file.u16(0);  // comment length
  detail::write_file_atomically(path, out);
}

//! Where one member of an archive lies: from its central-directory entry and local header.
struct npz_entry {
  std::string name;          //!< as the directory spells it ("features.0.weight.npy")
  std::uint64_t header = 0;  //!< offset of its local header: the member's range starts here
  std::uint64_t data = 0;    //!< offset of its bytes
  std::uint64_t size = 0;    //!< its bytes' count
  std::uint32_t crc = 0;     //!< CRC-32 of its bytes, as stored
};

//! An open ZIP archive (numpy.savez's format) whose members are read by name. Opening reads the
//! end records, the central directory and each member's local header, and checks them all: the
//! entry count against the directory's size, each member stored, unencrypted and inside the file,
//! no name twice, and no two members' ranges (local header to last byte) overlapping. So the
//! members' sizes add up to at most the file's, whatever the directory says, and a member is
//! read only when asked for, checked against its CRC-32.
class npz_archive {
 public:
  explicit npz_archive(const std::filesystem::path& path) : file_(path, path.string()) {
    const std::string& where = file_.where();
    const std::uint64_t file_size = file_.size();
    const detail::zip_directory d = detail::find_zip_directory(file_);
    // Each entry takes at least its fixed 46 bytes of the directory: a count beyond that is a
    // forged one, refused before anything is sized by it.
    if (d.entries > d.size / detail::zip_central_size)
      fail(where, "central directory: entry count",
           "at most " + std::to_string(d.size / detail::zip_central_size) + " (" +
               std::to_string(detail::zip_central_size) + " bytes each in a directory of " +
               std::to_string(d.size) + " bytes)",
           std::to_string(d.entries));
    std::vector<unsigned char> directory_bytes, local_bytes;
    const detail::zip_reader r =
        detail::read_zip_part(file_, d.offset, d.size, "central directory", directory_bytes);
    entries_.reserve(std::size_t(d.entries));
    std::uint64_t at = d.offset;
    const std::uint64_t directory_end = d.offset + d.size;
    for (std::uint64_t e = 0; e < d.entries; ++e) {
      const std::string entry = "central directory entry " + std::to_string(e);
      if (at + detail::zip_central_size > directory_end)
        fail(where, entry,
             std::to_string(detail::zip_central_size) + " bytes at offset " + std::to_string(at),
             "the end of the central directory");
      if (r.u32(at) != detail::zip_central_signature)
        fail(where, entry, "its signature", "other bytes");
      const std::uint32_t flags = r.u16(at + 8), method = r.u16(at + 10);
      npz_entry m;
      m.crc = r.u32(at + 16);
      std::uint64_t packed = r.u32(at + 20);
      m.size = r.u32(at + 24);
      const std::size_t name_length = r.u16(at + 28), extra_length = r.u16(at + 30),
                        comment_length = r.u16(at + 32);
      m.header = r.u32(at + 42);
      const std::span<const unsigned char> text =
          r.span(at + detail::zip_central_size, name_length + extra_length + comment_length, entry);
      m.name.assign(reinterpret_cast<const char*>(text.data()), name_length);
      const std::string member = where + ": " + dafuse::detail::shown(m.name);
      // A ZIP64 extra field (id 1) holds, in this order, whichever of the sizes and the offset
      // read as 0xffffffff above.
      for (std::uint64_t x = at + detail::zip_central_size + name_length, x_end = x + extra_length;
           x + 4 <= x_end;) {
        const std::uint32_t id = r.u16(x), length = r.u16(x + 2);
        if (x + 4 + length > x_end) fail(member, "extra field", "inside its entry", "past its end");
        if (id == 1) {
          std::uint64_t f = x + 4;
          const auto next = [&](std::uint64_t& v) {
            if (v != 0xffffffff) return;
            if (f + 8 > x + 4 + length)
              fail(member, "ZIP64 extra field", "8 more bytes", "the end of the field");
            v = r.u64(f);
            f += 8;
          };
          next(m.size);
          next(packed);
          next(m.header);
        }
        x += 4 + length;
      }
      if (flags & 1) fail(member, "flags", "an unencrypted member", "an encrypted one");
      if (method != 0)
        fail(member, "compression method",
             "0 (stored, as numpy.savez writes; dafuse does not read numpy.savez_compressed)",
             std::to_string(method));
      if (packed != m.size)
        fail(member, "compressed size", "the uncompressed size " + std::to_string(m.size),
             std::to_string(packed));
      if (m.size > file_size)
        fail(member, "size", "at most the file's " + std::to_string(file_size) + " bytes",
             std::to_string(m.size) + " bytes");
      if (m.header > file_size)
        fail(member, "local header offset",
             "inside the file (" + std::to_string(file_size) + " bytes)", std::to_string(m.header));
      const detail::zip_reader l = detail::read_zip_part(file_, m.header, detail::zip_local_size,
                                                         member + ": local header", local_bytes);
      if (l.u32(m.header) != detail::zip_local_signature)
        fail(member, "local header", "its signature", "other bytes");
      m.data = m.header + detail::zip_local_size + l.u16(m.header + 26) + l.u16(m.header + 28);
      if (m.data > file_size || m.size > file_size - m.data)
        fail(member, "data",
             std::to_string(m.size) + " bytes at offset " + std::to_string(m.data) +
                 " inside a file of " + std::to_string(file_size) + " bytes",
             "them running past its end");
      if (!index_.emplace(m.name, entries_.size()).second)
        fail(where, dafuse::detail::shown(m.name), "each member once", "it twice");
      entries_.push_back(std::move(m));
      at += detail::zip_central_size + name_length + extra_length + comment_length;
    }
    // Members that share bytes would let a small file name many large members: each range,
    // from its local header to its last byte, must end before the next one starts.
    std::vector<std::size_t> order(entries_.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      return std::pair(entries_[a].header, a) < std::pair(entries_[b].header, b);
    });
    for (std::size_t k = 1; k < order.size(); ++k) {
      const npz_entry& before = entries_[order[k - 1]];
      const npz_entry& next = entries_[order[k]];
      if (next.header < before.data + before.size)
        fail(where, dafuse::detail::shown(next.name),
             "bytes of its own, apart from member " + dafuse::detail::shown(before.name) +
                 "'s (offsets " + std::to_string(before.header) + " to " +
                 std::to_string(before.data + before.size) + ")",
             "a local header at offset " + std::to_string(next.header) + ", inside them");
    }
  }

  //! The file's name, as messages give it.
  const std::string& where() const noexcept { return file_.where(); }
  //! The file's size in bytes.
  std::uint64_t file_size() const noexcept { return file_.size(); }
  //! Every member, in directory order (names and places; no member's bytes are read).
  std::span<const npz_entry> entries() const noexcept { return entries_; }
  //! The member called `name`, or nullptr.
  const npz_entry* find(std::string_view name) const {
    const auto it = index_.find(std::string(name));
    return it == index_.end() ? nullptr : &entries_[it->second];
  }
  //! The bytes of member `e` (one of entries()), checked against its CRC-32.
  std::vector<unsigned char> read(const npz_entry& e) const {
    const std::string member = where() + ": " + dafuse::detail::shown(e.name);
    std::vector<unsigned char> bytes = file_.read_bytes(e.data, e.size, member + ": data");
    if (const std::uint32_t actual = dafuse::detail::crc32(bytes.data(), bytes.size());
        actual != e.crc)
      fail(member, "CRC-32", std::to_string(e.crc) + " as stored",
           std::to_string(actual) + " (the member is corrupted)");
    return bytes;
  }

 private:
  dafuse::detail::input_file file_;
  std::vector<npz_entry> entries_;
  std::unordered_map<std::string, std::size_t> index_;  // name -> entries_ index
};

//! Every member of the ZIP archive at `path`, in directory order, each checked against its
//! CRC-32. Fails, naming the file and the member, on anything it cannot read exactly (see
//! npz_archive, which reads members by name). Each member is read straight into its bytes: the
//! peak is about the members' size, which the archive's checks bound by the file's.
inline std::vector<npz_member> load_npz(const std::filesystem::path& path) {
  const npz_archive archive(path);
  std::vector<npz_member> members;
  members.reserve(archive.entries().size());
  for (const npz_entry& e : archive.entries()) members.push_back({e.name, archive.read(e)});
  return members;
}

//! The member called `name` of `members`, or nullptr.
inline const npz_member* find_member(std::span<const npz_member> members, std::string_view name) {
  for (const npz_member& m : members)
    if (m.name == name) return &m;
  return nullptr;
}

}  // namespace dafuse::data
