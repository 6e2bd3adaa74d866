// Writing NPY files for the data tests: raw bytes, hand-built headers, and arrays through
// save_npy. One place for what npy, npy_map, images and validation tests all need.
#pragma once
#include <dafuse/data/npy.hpp>

#include "../check.hpp"

#include <cstddef>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace dafuse::test {

using bytes = std::vector<unsigned char>;

//! Writes `b` to `path` as it is.
inline void write_bytes(const std::filesystem::path& path, const bytes& b) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
  REQUIRE(out.good());
}

//! An NPY file built by hand: magic, version major.0, HEADER_LEN (2 bytes for 1.0, 4 otherwise),
//! the header text as given (no padding added) and then `data`.
inline bytes make_npy(unsigned major, std::string_view header, const bytes& data = {}) {
  bytes b = {0x93, 'N', 'U', 'M', 'P', 'Y', static_cast<unsigned char>(major), 0};
  const std::size_t n = header.size();
  b.push_back(static_cast<unsigned char>(n & 0xff));
  b.push_back(static_cast<unsigned char>((n >> 8) & 0xff));
  if (major != 1) {
    b.push_back(static_cast<unsigned char>((n >> 16) & 0xff));
    b.push_back(static_cast<unsigned char>((n >> 24) & 0xff));
  }
  b.insert(b.end(), header.begin(), header.end());
  b.insert(b.end(), data.begin(), data.end());
  return b;
}

//! Saves `v` with `shape` through data::save_npy.
template <class T>
void save_array(const std::filesystem::path& path,
                const std::vector<std::size_t>& shape,
                const std::vector<T>& v) {
  data::save_npy<T>(path, shape, std::span<const T>(v));
}

//! Saves `v` as numpy saves `v.astype(v.dtype.newbyteorder('>'))`: save_npy's file with '>' in
//! the descr and every value's bytes reversed (one-byte types keep '|': no byte order).
template <class T>
void save_array_big_endian(const std::filesystem::path& path,
                           const std::vector<std::size_t>& shape,
                           const std::vector<T>& v) {
  bytes b = data::npy_bytes<T>(shape, std::span<const T>(v), path.string());
  const data::npy_header h = data::parse_npy_header(b, path.string());
  if (sizeof(T) > 1) {
    const std::string_view text(reinterpret_cast<const char*>(b.data()), h.data_offset);
    const std::size_t at = text.find("'<");
    REQUIRE(at != std::string_view::npos);
    b[at + 1] = '>';
    data::detail::swap_bytes(b.data() + h.data_offset, v.size(), sizeof(T));
  }
  write_bytes(path, b);
}

}  // namespace dafuse::test
