// SPDX-License-Identifier: Apache-2.0
//! @file data/npy.hpp
//! @brief Reading and writing NumPy `.npy` files of numeric arrays on the host, and converting
//! NumPy's defaults (float64, int64) to the float32 and int32 dafuse trains on.
#pragma once
#include <dafuse/config.hpp>
#include <dafuse/core/error.hpp>
#include <dafuse/core/file.hpp>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

// The layout follows the NPY format specification ("A Simple File Format for NumPy Arrays",
// NumPy Enhancement Proposal 1, and the `numpy.lib.format` documentation):
//
//   offset 0   6 bytes   magic "\x93NUMPY"
//   offset 6   1 byte    major version (1, 2 or 3)
//   offset 7   1 byte    minor version (0)
//   offset 8   2 bytes   HEADER_LEN, little-endian uint16   (version 1.0)
//              4 bytes   HEADER_LEN, little-endian uint32   (versions 2.0 and 3.0)
//   then       HEADER_LEN bytes of a Python dict literal, e.g.
//              {'descr': '<f4', 'fortran_order': False, 'shape': (2000, 16, 16), }
//              padded with spaces and ended by '\n' so the data starts on a 64-byte boundary;
//              ASCII in versions 1.0 and 2.0, UTF-8 in version 3.0
//   then       the raw elements, product(shape) of them, in the byte order `descr` names.
//
// Float (f4, f8) and integer (i1 to i8, u1 to u8) elements are read in either byte order, in C
// (row-major) order; anything else (float16, bool, complex, strings, objects, Fortran order) is
// reported with the numpy call that converts it, never silently converted. Two ways to read:
//
//   load_npy<T>          the file's dtype must be T's (byte order aside): the values as stored
//   load_npy_as_float    any float or integer dtype, converted to float32 as it is read
//   load_npy_as_int32    any integer dtype whose values all fit int32 (labels, CSR offsets)

namespace dafuse::data {

static_assert(std::endian::native == std::endian::little,
              "dafuse: data/npy.hpp copies little-endian NPY data as is and needs a little-endian "
              "host");
static_assert(sizeof(float) == 4 && std::numeric_limits<float>::is_iec559,
              "dafuse: data/npy.hpp needs float to be IEEE-754 binary32 ('<f4')");

static_assert(sizeof(double) == 8 && std::numeric_limits<double>::is_iec559,
              "dafuse: data/npy.hpp needs double to be IEEE-754 binary64 ('<f8')");

//! Element types an NPY file may hold for dafuse. float32, int32 and uint8 are trained on as they
//! are; the others are what numpy writes by default or on request, converted on load.
enum class dtype {
  float32,  //!< 'f4': IEEE-754 binary32
  int32,    //!< 'i4': two's-complement 32-bit integer
  uint8,    //!< 'u1': one unsigned byte (byte order does not apply: written '|u1')
  float64,  //!< 'f8': IEEE-754 binary64, numpy's default float
  int8,     //!< 'i1': one signed byte ('|i1')
  int16,    //!< 'i2'
  int64,    //!< 'i8': numpy's default integer on Linux and macOS
  uint16,   //!< 'u2'
  uint32,   //!< 'u4'
  uint64,   //!< 'u8'
};

//! Every dtype, in the enum's order.
inline constexpr dtype all_dtypes[] = {dtype::float32, dtype::int32, dtype::uint8, dtype::float64,
                                       dtype::int8,    dtype::int16, dtype::int64, dtype::uint16,
                                       dtype::uint32,  dtype::uint64};

//! Bytes one element of `t` takes in the file.
constexpr std::size_t size_of(dtype t) {
  switch (t) {
    case dtype::uint8:
    case dtype::int8:
      return 1;
    case dtype::int16:
    case dtype::uint16:
      return 2;
    case dtype::float32:
    case dtype::int32:
    case dtype::uint32:
      return 4;
    case dtype::float64:
    case dtype::int64:
    case dtype::uint64:
      return 8;
  }
  return 0;
}

//! Whether `t` is a float type (f4, f8); the others are integers.
constexpr bool is_float(dtype t) {
  return t == dtype::float32 || t == dtype::float64;
}

//! Whether `t` is a signed integer type.
constexpr bool is_signed_integer(dtype t) {
  return t == dtype::int8 || t == dtype::int16 || t == dtype::int32 || t == dtype::int64;
}

//! The NPY `descr` string numpy writes for `t` on a little-endian machine: "<f4", "|u1".
constexpr std::string_view descr_of(dtype t) {
  switch (t) {
    case dtype::float32:
      return "<f4";
    case dtype::int32:
      return "<i4";
    case dtype::uint8:
      return "|u1";
    case dtype::float64:
      return "<f8";
    case dtype::int8:
      return "|i1";
    case dtype::int16:
      return "<i2";
    case dtype::int64:
      return "<i8";
    case dtype::uint16:
      return "<u2";
    case dtype::uint32:
      return "<u4";
    case dtype::uint64:
      return "<u8";
  }
  return "?";
}

//! The numpy name of `t` ("float32"), for messages and numpy calls (`np.float32`).
constexpr std::string_view name_of(dtype t) {
  switch (t) {
    case dtype::float32:
      return "float32";
    case dtype::int32:
      return "int32";
    case dtype::uint8:
      return "uint8";
    case dtype::float64:
      return "float64";
    case dtype::int8:
      return "int8";
    case dtype::int16:
      return "int16";
    case dtype::int64:
      return "int64";
    case dtype::uint16:
      return "uint16";
    case dtype::uint32:
      return "uint32";
    case dtype::uint64:
      return "uint64";
  }
  return "?";
}

//! C++ element types that map one to one onto a `dtype`.
template <class T>
concept npy_element = std::same_as<T, float> || std::same_as<T, double> ||
    std::same_as<T, std::int8_t> || std::same_as<T, std::int16_t> ||
    std::same_as<T, std::int32_t> || std::same_as<T, std::int64_t> ||
    std::same_as<T, std::uint8_t> || std::same_as<T, std::uint16_t> ||
    std::same_as<T, std::uint32_t> || std::same_as<T, std::uint64_t>;

//! Maps an element type onto its `dtype`; defined only for the `npy_element` types.
template <class T>
struct dtype_of;
template <dtype D>
struct dtype_constant {
  static constexpr dtype value = D;
};
template <>
struct dtype_of<float> : dtype_constant<dtype::float32> {};
template <>
struct dtype_of<double> : dtype_constant<dtype::float64> {};
template <>
struct dtype_of<std::int8_t> : dtype_constant<dtype::int8> {};
template <>
struct dtype_of<std::int16_t> : dtype_constant<dtype::int16> {};
template <>
struct dtype_of<std::int32_t> : dtype_constant<dtype::int32> {};
template <>
struct dtype_of<std::int64_t> : dtype_constant<dtype::int64> {};
template <>
struct dtype_of<std::uint8_t> : dtype_constant<dtype::uint8> {};
template <>
struct dtype_of<std::uint16_t> : dtype_constant<dtype::uint16> {};
template <>
struct dtype_of<std::uint32_t> : dtype_constant<dtype::uint32> {};
template <>
struct dtype_of<std::uint64_t> : dtype_constant<dtype::uint64> {};
template <class T>
inline constexpr dtype dtype_of_v = dtype_of<T>::value;

//! An array read from or written to an NPY file: C-order `values` of the given `shape`.
template <class T>
struct host_array {
  std::vector<std::size_t> shape;  //!< dimensions; empty for a 0-d (scalar) array
  std::vector<T> values;           //!< product(shape) elements, last dimension fastest

  //! Number of samples: shape[0], or 1 for a 0-d array.
  std::size_t rows() const { return shape.empty() ? 1 : shape[0]; }
  //! Elements per sample: the product of shape[1..] (1 for 0-d and 1-d arrays).
  std::size_t row_size() const {
    std::size_t n = 1;
    for (std::size_t i = 1; i < shape.size(); ++i) n *= shape[i];
    return n;
  }
};

//! What the header of an NPY file says.
struct npy_header {
  dtype type;                      //!< element type, from 'descr'
  std::vector<std::size_t> shape;  //!< from 'shape'; empty for a 0-d array
  bool fortran_order;              //!< always false once parsed: column-major files are rejected
  std::size_t data_offset;         //!< bytes from the start of the file to the first element
  //! The values' byte order, from 'descr' ('<' little, '>' big; one-byte types read as little).
  std::endian byte_order = std::endian::little;
};

namespace detail {

//! `shape` written as Python writes a tuple: "()", "(5,)", "(2, 3)".
inline std::string shape_text(std::span<const std::size_t> shape) {
  std::string s = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i != 0) s += ", ";
    s += std::to_string(shape[i]);
  }
  if (shape.size() == 1) s += ',';
  s += ')';
  return s;
}

// Shared with every folder (core/error.hpp, core/file.hpp); the NPY and NPZ code names them here.
using dafuse::detail::os_reason;
using dafuse::detail::quoted_bytes;
using dafuse::detail::read_file;
using dafuse::detail::write_file_atomically;

//! product(shape) * element_size, failing instead of wrapping around.
inline std::size_t checked_bytes(std::span<const std::size_t> shape,
                                 std::size_t element_size,
                                 std::string_view where) {
  // An array with a zero dimension holds nothing, whatever the other dimensions say.
  for (const std::size_t d : shape)
    if (d == 0) return 0;
  constexpr std::size_t max = std::numeric_limits<std::size_t>::max();
  std::size_t n = element_size;
  for (const std::size_t d : shape) {
    if (n > max / d)
      fail(where, "shape", "a total size that fits in std::size_t",
           shape_text(shape) + " of " + std::to_string(element_size) + "-byte elements");
    n *= d;
  }
  return n;
}

//! What a refused dtype is, when numpy has a name for it: " (float16)", " (bool)".
inline std::string_view unsupported_kind(std::string_view descr) {
  if (descr.size() < 2) return "";
  const std::string_view rest = descr.substr(1);
  if (rest == "f2") return " (float16)";
  if (rest == "b1") return " (bool)";
  switch (rest[0]) {
    case 'c':
      return " (complex)";
    case 'U':
    case 'S':
      return " (strings)";
    case 'O':
      return " (Python objects)";
    case 'M':
    case 'm':
      return " (dates or times)";
    case 'V':
      return " (raw or structured records)";
    default:
      return "";
  }
}

//! The numpy call a refused file's message suggests when the caller names none.
inline constexpr std::string_view npy_any_fix =
    "x.astype(np.float32) for features, y.astype(np.int32) for labels";

//! Reads the header dict. Python's literal syntax is more than this needs: it accepts the dicts
//! numpy and other writers produce (any key order, ' or " quotes, spaces, trailing commas).
//! `fix` is the numpy call a refused dtype's message suggests ("x.astype(np.float32)").
class npy_dict_parser {
 public:
  npy_dict_parser(std::string_view text, std::string_view where, std::string_view fix = npy_any_fix)
      : text_(text), where_(where), fix_(fix) {}

  void parse(npy_header& out) {
    bool have_descr = false, have_order = false, have_shape = false;
    skip_space();
    expect('{', "header", "'{' opening the header dict");
    for (;;) {
      skip_space();
      if (peek() == '}') break;
      const std::string key = read_string("header", "a quoted key or '}'");
      skip_space();
      expect(':', "header", "':' after '" + key + "'");
      skip_space();
      if (key == "descr") {
        if (have_descr) duplicate(key);
        read_descr(out);
        have_descr = true;
      } else if (key == "fortran_order") {
        if (have_order) duplicate(key);
        out.fortran_order = read_bool(key);
        have_order = true;
      } else if (key == "shape") {
        if (have_shape) duplicate(key);
        out.shape = read_shape();
        have_shape = true;
      } else {
        fail(where_, "header", "only the keys 'descr', 'fortran_order' and 'shape'",
             "'" + key + "'");
      }
      skip_space();
      if (peek() == ',') {
        ++pos_;  // a trailing comma before '}' is legal Python
        continue;
      }
      if (peek() != '}')
        fail(where_, "header", "',' or '}' after the value of '" + key + "'", here());
    }
    ++pos_;  // '}'
    // What follows the dict is padding: spaces and the final '\n' (which is not enforced).
    skip_space();
    if (pos_ != text_.size()) fail(where_, "header", "only space padding after '}'", here());

    if (!have_descr) fail(where_, "descr", "a 'descr' key in the header dict", "none");
    if (!have_order)
      fail(where_, "fortran_order", "a 'fortran_order' key in the header dict", "none");
    if (!have_shape) fail(where_, "shape", "a 'shape' key in the header dict", "none");
    if (out.fortran_order)
      fail(where_, "fortran_order", "False (C order)", "True; save with np.ascontiguousarray");
  }

 private:
  static bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
  static bool is_digit(char c) { return c >= '0' && c <= '9'; }

  char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  void skip_space() {
    while (pos_ < text_.size() && is_space(text_[pos_])) ++pos_;
  }

  //! The text at the current position, for "found ..." in messages.
  std::string here() const {
    if (pos_ >= text_.size()) return "the end of the header";
    return quoted_bytes(text_.substr(pos_, 24), '"') + " at header offset " + std::to_string(pos_);
  }

  void expect(char c, std::string_view field, const std::string& expected) {
    if (peek() != c) fail(where_, field, expected, here());
    ++pos_;
  }

  [[noreturn]] void duplicate(const std::string& key) const {
    fail(where_, key, "'" + key + "' once in the header dict", "it twice");
  }

  std::string read_string(std::string_view field, std::string_view expected) {
    const char quote = peek();
    if (quote != '\'' && quote != '"') fail(where_, field, expected, here());
    const std::size_t begin = pos_ + 1;
    const std::size_t end = text_.find(quote, begin);
    if (end == std::string_view::npos)
      fail(where_, field, "a closing " + std::string(1, quote), "the end of the header");
    pos_ = end + 1;
    return std::string(text_.substr(begin, end - begin));
  }

  // A type string: the byte order ('<' little, '>' big, '|' for one-byte types), the kind and the
  // size, as numpy writes `dtype.str`. Structured dtypes write a list here and are refused.
  void read_descr(npy_header& out) {
    const std::string d = read_string("descr", "a type string such as '<f4'");
    const std::string_view v(d);
    for (const dtype t : all_dtypes) {
      if (v.size() != 3 || v.substr(1) != descr_of(t).substr(1)) continue;
      const bool one_byte = size_of(t) == 1;
      if (v[0] == '<' || v[0] == '>' || (one_byte && v[0] == '|')) {
        out.type = t;
        out.byte_order = v[0] == '>' && !one_byte ? std::endian::big : std::endian::little;
        return;
      }
    }
    fail(
        where_, "descr",
        "a float or integer type ('<f4', '<f8', '|i1' to '<i8', '|u1' to '<u8'; '>' for "
        "big-endian)",
        quoted_bytes(d) + std::string(unsupported_kind(v)) + "; convert with " + std::string(fix_));
  }

  bool read_bool(const std::string& key) {
    for (const std::string_view word : {std::string_view("True"), std::string_view("False")}) {
      if (text_.substr(pos_, word.size()) == word) {
        pos_ += word.size();
        return word == "True";
      }
    }
    fail(where_, key, "True or False", here());
  }

  // A Python tuple of non-negative integers: "()", "(5,)", "(2, 3)", "(2,3,)". "(5)" is an int in
  // Python, not a tuple, so it is rejected like numpy rejects it.
  std::vector<std::size_t> read_shape() {
    const std::size_t start = pos_;
    const std::string expected = "a tuple of non-negative integers such as (2, 3), (5,) or ()";
    const auto snippet = [&]() {
      const std::size_t close = text_.find(')', start);
      const std::size_t n = close == std::string_view::npos ? 24 : close + 1 - start;
      return quoted_bytes(text_.substr(start, n));
    };
    const auto malformed = [&]() { fail(where_, "shape", expected, snippet()); };
    std::vector<std::size_t> shape;
    if (peek() != '(') malformed();
    ++pos_;
    skip_space();
    bool trailing_comma = false;
    while (peek() != ')') {
      if (peek() == '-') {
        fail(where_, "shape", "non-negative dimensions", snippet());
      }
      if (!is_digit(peek())) malformed();
      constexpr std::size_t max = std::numeric_limits<std::size_t>::max();
      std::size_t d = 0;
      const std::size_t digits_begin = pos_;
      while (is_digit(peek())) {
        const auto digit = static_cast<std::size_t>(peek() - '0');
        if (d > (max - digit) / 10) {
          std::size_t digits_end = pos_;
          while (digits_end < text_.size() && is_digit(text_[digits_end])) ++digits_end;
          fail(where_, "shape", "dimensions that fit in std::size_t",
               std::string(text_.substr(digits_begin, digits_end - digits_begin)));
        }
        d = d * 10 + digit;
        ++pos_;
      }
      if (peek() == 'L' || peek() == 'l') ++pos_;  // Python 2 numpy wrote longs as "2000L"
      shape.push_back(d);
      skip_space();
      trailing_comma = peek() == ',';
      if (trailing_comma) {
        ++pos_;
        skip_space();
      } else if (peek() != ')') {
        malformed();
      }
    }
    if (shape.size() == 1 && !trailing_comma) malformed();
    ++pos_;  // ')'
    return shape;
  }

  std::string_view text_;
  std::string_view where_;
  std::string_view fix_;
  std::size_t pos_ = 0;
};

//! Checks the bytes after the header hold exactly the elements the header promises; returns how
//! many elements that is.
inline std::size_t checked_count(const npy_header& h,
                                 std::uint64_t file_size,
                                 std::string_view where) {
  const std::size_t element = size_of(h.type);
  const std::size_t need = checked_bytes(h.shape, element, where);
  const std::uint64_t have = file_size - h.data_offset;
  if (have != need) {
    fail(where, "data",
         std::to_string(need) + " bytes for shape " + shape_text(h.shape) + " of " +
             std::string(name_of(h.type)),
         std::to_string(have) + (have < need ? " (file truncated)" : " (extra trailing bytes)"));
  }
  return need / element;
}

//! The longest header dict read: numpy writes a few hundred bytes (its own reader stops at 10000
//! by default); a larger HEADER_LEN is a damaged or hostile file, refused before it is read.
inline constexpr std::size_t npy_max_header_bytes = std::size_t(1) << 20;

//! Where the header dict of an NPY file lies: after `prefix` bytes, `length` bytes long.
struct npy_prefix {
  std::size_t prefix;  //!< magic, version and HEADER_LEN: 10 bytes (1.0) or 12 (2.0, 3.0)
  std::size_t length;  //!< HEADER_LEN
};

//! Checks the magic and version at the start of a file of `file_size` bytes whose first bytes
//! are `start` (at least min(12, file_size) of them) and reads HEADER_LEN, which must fit in the
//! file.
inline npy_prefix parse_npy_prefix(std::span<const unsigned char> start,
                                   std::uint64_t file_size,
                                   std::string_view where) {
  const std::string_view raw(reinterpret_cast<const char*>(start.data()), start.size());
  constexpr std::string_view magic("\x93NUMPY", 6);
  if (raw.substr(0, magic.size()) != magic)
    fail(where, "magic", "'\\x93NUMPY' (an NPY file)",
         raw.empty() ? std::string("an empty file") : quoted_bytes(raw.substr(0, 6)));
  if (file_size < 8)
    fail(where, "version", "2 bytes after the magic", std::to_string(file_size - 6));

  const unsigned major = start[6], minor = start[7];
  npy_prefix p{0, 0};
  if (major == 1 && minor == 0) {
    p.prefix = 10;
    if (file_size < p.prefix)
      fail(where, "header length", "2 bytes after the version", std::to_string(file_size - 8));
    p.length = std::size_t{start[8]} | std::size_t{start[9]} << 8;
  } else if ((major == 2 || major == 3) && minor == 0) {
    p.prefix = 12;  // version 2.0 widened HEADER_LEN to 4 bytes; 3.0 made the header UTF-8
    if (file_size < p.prefix)
      fail(where, "header length", "4 bytes after the version", std::to_string(file_size - 8));
    p.length = std::size_t{start[8]} | std::size_t{start[9]} << 8 | std::size_t{start[10]} << 16 |
               std::size_t{start[11]} << 24;
  } else {
    fail(where, "version", "1.0, 2.0 or 3.0", std::to_string(major) + "." + std::to_string(minor));
  }
  if (p.length > file_size - p.prefix) {
    fail(where, "header length",
         "at most the " + std::to_string(file_size - p.prefix) + " bytes left in the file",
         std::to_string(p.length) + " (file truncated)");
  }
  if (p.length > npy_max_header_bytes)
    fail(where, "header length",
         "at most " + std::to_string(npy_max_header_bytes) + " bytes (numpy writes a few hundred)",
         std::to_string(p.length));
  return p;
}

//! The element type's quoted descr and name, for messages: "'<f4' (float32)".
inline std::string dtype_text(dtype t) {
  return "'" + std::string(descr_of(t)) + "' (" + std::string(name_of(t)) + ")";
}

//! The header's dtype as the file writes it: "'<f8' (float64)", "'>i8' (int64, big-endian)".
inline std::string dtype_text(const npy_header& h) {
  if (h.byte_order == std::endian::little) return dtype_text(h.type);
  return "'>" + std::string(descr_of(h.type).substr(1)) + "' (" + std::string(name_of(h.type)) +
         ", big-endian)";
}

//! Fails unless the header's dtype is `want` (in either byte order), saying how to convert.
inline void check_dtype(const npy_header& h, dtype want, std::string_view where) {
  if (h.type != want)
    fail(where, "descr", dtype_text(want),
         dtype_text(h) + "; convert with arr.astype(np." + std::string(name_of(want)) + ")");
}

//! Element `i` of a C-order array of `shape` as "[n][h][w]", for messages.
inline std::string index_text(std::span<const std::size_t> shape, std::size_t i) {
  std::vector<std::size_t> at(shape.size());
  for (std::size_t d = shape.size(); d-- > 0;) {
    at[d] = i % shape[d];
    i /= shape[d];
  }
  std::string s;
  for (const std::size_t a : at) s += "[" + std::to_string(a) + "]";
  return s;
}

//! Reverses the bytes of each of the `count` elements of `size` bytes at `p`.
inline void swap_bytes(unsigned char* p, std::size_t count, std::size_t size) {
  if (size == 1) return;
  for (std::size_t i = 0; i < count; ++i) std::reverse(p + i * size, p + (i + 1) * size);
}

//! What the values of a header are, for allocation messages: "the values of shape (2, 3) of
//! float32".
inline std::string values_text(const npy_header& h, dtype as) {
  return "the values of shape " + shape_text(h.shape) + " of " + std::string(name_of(as));
}

}  // namespace detail

//! Parses the magic, version and header dict at the start of `bytes`. `where` names the file in
//! messages. Rejects anything no loader could read correctly: other dtypes (the message suggests
//! `fix`, a numpy call such as "x.astype(np.float32)"), Fortran order, a header running past the
//! end of `bytes`.
inline npy_header parse_npy_header(std::span<const unsigned char> bytes,
                                   std::string_view where,
                                   std::string_view fix = detail::npy_any_fix) {
  const detail::npy_prefix p = detail::parse_npy_prefix(bytes, bytes.size(), where);
  npy_header h{dtype::float32, {}, false, p.prefix + p.length};
  const std::string_view raw(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  detail::npy_dict_parser(raw.substr(p.prefix, p.length), where, fix).parse(h);
  return h;
}

namespace detail {
//! Reads and parses the header of the NPY file open in `f`, reading the header's bytes only:
//! nothing past them is read before the header has been checked. `fix`: see parse_npy_header.
inline npy_header read_npy_header(const dafuse::detail::input_file& f,
                                  std::string_view fix = npy_any_fix) {
  std::array<unsigned char, 12> start{};
  const auto first = std::size_t(std::min<std::uint64_t>(f.size(), start.size()));
  f.read_at(0, start.data(), first, "header");
  const npy_prefix p =
      parse_npy_prefix(std::span<const unsigned char>(start.data(), first), f.size(), f.where());
  const std::vector<unsigned char> text = f.read_bytes(p.prefix, p.length, "header");
  npy_header h{dtype::float32, {}, false, p.prefix + p.length};
  npy_dict_parser(std::string_view(reinterpret_cast<const char*>(text.data()), text.size()),
                  f.where(), fix)
      .parse(h);
  return h;
}
}  // namespace detail

//! The header of the NPY file at `path`, checked as load_npy checks it; only the header's bytes
//! are read (the file must be a regular file: see core/file.hpp).
inline npy_header read_npy_header(const std::filesystem::path& path) {
  return detail::read_npy_header(dafuse::detail::input_file(path, path.string()));
}

//! Reads an NPY image already in memory (a file's bytes, an NPZ member) whose dtype is exactly
//! `T`'s ('<f4' for float, '<i8' for std::int64_t, ...; big-endian data is swapped); `where` names
//! it in messages. The bytes must hold exactly product(shape) elements after the header.
template <class T>
host_array<T> parse_npy(std::span<const unsigned char> bytes, std::string_view where) {
  static_assert(npy_element<T>,
                "dafuse: load_npy<T> supports T = float, double and the 8- to 64-bit integers of "
                "<cstdint>; use load_npy_as_float or load_npy_as_int32 to convert");
  const npy_header h = parse_npy_header(bytes, where);
  detail::check_dtype(h, dtype_of_v<T>, where);
  const std::size_t count = detail::checked_count(h, bytes.size(), where);
  host_array<T> out{h.shape, dafuse::detail::allocate_values<T>(
                                 count, where, detail::values_text(h, dtype_of_v<T>))};
  if (count != 0) std::memcpy(out.values.data(), bytes.data() + h.data_offset, count * sizeof(T));
  if (h.byte_order != std::endian::native)
    detail::swap_bytes(reinterpret_cast<unsigned char*>(out.values.data()), count, sizeof(T));
  return out;
}

//! Loads an NPY file whose dtype is exactly `T`'s; see parse_npy. The header is read and checked
//! first, its promised size compared with the file's, and the data read straight into the
//! values (big-endian data is then swapped in place): the memory used is the array's. A file
//! that is not a regular file (a FIFO, a device) is refused, and so is an array larger than the
//! machine's memory (data/npy_map.hpp maps one).
template <class T>
host_array<T> load_npy(const std::filesystem::path& path) {
  static_assert(npy_element<T>,
                "dafuse: load_npy<T> supports T = float, double and the 8- to 64-bit integers of "
                "<cstdint>; use load_npy_as_float or load_npy_as_int32 to convert");
  const dafuse::detail::input_file f(path, path.string());
  const npy_header h = detail::read_npy_header(f);
  detail::check_dtype(h, dtype_of_v<T>, f.where());
  const std::size_t count = detail::checked_count(h, f.size(), f.where());
  host_array<T> out{h.shape, dafuse::detail::allocate_values<T>(
                                 count, f.where(), detail::values_text(h, dtype_of_v<T>))};
  if (count != 0) f.read_at(h.data_offset, out.values.data(), count * sizeof(T), "data");
  if (h.byte_order != std::endian::native)
    detail::swap_bytes(reinterpret_cast<unsigned char*>(out.values.data()), count, sizeof(T));
  return out;
}

namespace detail {

//! for_each_npy_value for a file whose elements are `S`.
template <class S, class Use>
void for_each_npy_value_as(const dafuse::detail::input_file& f,
                           const npy_header& h,
                           std::size_t count,
                           Use& use) {
  const bool swap = h.byte_order != std::endian::native;
  f.read_in_pieces(h.data_offset, count * sizeof(S), "data",
                   [&](const unsigned char* bytes, std::size_t n, std::size_t first) {
                     // Pieces are 64 KiB, a multiple of every element size: no value straddles
                     // two.
                     const std::size_t at = first / sizeof(S);
                     for (std::size_t i = 0; i < n / sizeof(S); ++i) {
                       unsigned char b[sizeof(S)];
                       std::memcpy(b, bytes + i * sizeof(S), sizeof(S));  // need not be aligned
                       if (swap) std::reverse(b, b + sizeof(S));
                       S v;
                       std::memcpy(&v, b, sizeof(S));
                       use(at + i, v);
                     }
                   });
}

//! Calls `use(i, v)` for each of the `count` values of the NPY file open in `f` (header `h`), in
//! order, with `v` typed as stored (float, double, std::int8_t, ..., std::uint64_t) and in the
//! host's byte order. The data is read in 64 KiB pieces: no copy of the file's values is kept,
//! so a conversion peaks at the array it writes.
template <class Use>
void for_each_npy_value(const dafuse::detail::input_file& f,
                        const npy_header& h,
                        std::size_t count,
                        Use use) {
  switch (h.type) {
    case dtype::float32:
      return for_each_npy_value_as<float>(f, h, count, use);
    case dtype::float64:
      return for_each_npy_value_as<double>(f, h, count, use);
    case dtype::int8:
      return for_each_npy_value_as<std::int8_t>(f, h, count, use);
    case dtype::int16:
      return for_each_npy_value_as<std::int16_t>(f, h, count, use);
    case dtype::int32:
      return for_each_npy_value_as<std::int32_t>(f, h, count, use);
    case dtype::int64:
      return for_each_npy_value_as<std::int64_t>(f, h, count, use);
    case dtype::uint8:
      return for_each_npy_value_as<std::uint8_t>(f, h, count, use);
    case dtype::uint16:
      return for_each_npy_value_as<std::uint16_t>(f, h, count, use);
    case dtype::uint32:
      return for_each_npy_value_as<std::uint32_t>(f, h, count, use);
    case dtype::uint64:
      return for_each_npy_value_as<std::uint64_t>(f, h, count, use);
  }
}

//! Reads the `count` values of the NPY file open in `f` (header `h`, any dtype) as floats into
//! `out`, converting each with `convert(value)` (value typed as stored) as the data is read.
template <class Convert>
void read_npy_as_float(const dafuse::detail::input_file& f,
                       const npy_header& h,
                       std::size_t count,
                       float* out,
                       Convert convert) {
  for_each_npy_value(f, h, count, [&](std::size_t i, auto v) { out[i] = convert(v); });
}

//! `v` in the shortest form that reads back as the same double, for messages.
inline std::string number_text(double v) {
  char buf[32];
  for (int digits = 6; digits <= 17; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*g", digits, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

//! `v` as float. A finite double beyond float's range would become infinite: refused, naming the
//! element, instead of reported later as a non-finite feature the file does not hold. NaN and
//! infinities pass as they are (the data set's checks name them).
inline float float_of(double v, const npy_header& h, std::size_t i, std::string_view where) {
  const auto x = static_cast<float>(v);
  if (std::isinf(x) && std::isfinite(v))
    fail(where, "value" + index_text(h.shape, i),
         "a value float32 can hold (magnitude at most 3.4028235e+38)", number_text(v));
  return x;
}

//! Reads the `count` values of the NPY file open in `f` (header `h`, an integer dtype) into `out`
//! as int32; a value outside int32's range is refused as `name[i]` ("labels[17]") with the value.
inline void read_npy_as_int32(const dafuse::detail::input_file& f,
                              const npy_header& h,
                              std::size_t count,
                              std::int32_t* out,
                              std::string_view name) {
  for_each_npy_value(f, h, count, [&](std::size_t i, auto v) {
    using S = decltype(v);
    if constexpr (std::is_floating_point_v<S>) {
      fail(f.where(), "descr", "an integer type", dtype_text(h));  // callers refuse floats first
    } else {
      if (!std::in_range<std::int32_t>(v))
        fail(f.where(), std::string(name) + index_text(h.shape, i),
             "a value in int32's range [-2147483648, 2147483647]", std::to_string(v));
      out[i] = static_cast<std::int32_t>(v);
    }
  });
}

//! The numpy call that makes features dafuse reads as they are.
inline constexpr std::string_view npy_float_fix = "x.astype(np.float32)";

//! Reads the values of the NPY file open in `f` (header `h`) as float32; see load_npy_as_float.
inline host_array<float> read_npy_values_as_float(const dafuse::detail::input_file& f,
                                                  const npy_header& h) {
  const std::size_t count = checked_count(h, f.size(), f.where());
  host_array<float> out{h.shape, dafuse::detail::allocate_values<float>(
                                     count, f.where(), values_text(h, dtype::float32))};
  if (h.type == dtype::float32 && h.byte_order == std::endian::native) {
    if (count != 0) f.read_at(h.data_offset, out.values.data(), count * sizeof(float), "data");
  } else {
    float* o = out.values.data();
    for_each_npy_value(f, h, count, [&](std::size_t i, auto v) {
      if constexpr (std::is_same_v<decltype(v), double>)
        o[i] = float_of(v, h, i, f.where());
      else
        o[i] = static_cast<float>(v);
    });
  }
  return out;
}

//! Reads the values of the NPY file open in `f` (header `h`) as int32; see load_npy_as_int32.
inline host_array<std::int32_t> read_npy_values_as_int32(const dafuse::detail::input_file& f,
                                                         const npy_header& h,
                                                         std::string_view name,
                                                         std::string_view fix) {
  if (is_float(h.type))
    fail(f.where(), "descr", "an integer type ('|i1' to '<i8', '|u1' to '<u8')",
         dtype_text(h) + ": " + std::string(name) + " must be integers; convert with " +
             std::string(fix));
  const std::size_t count = checked_count(h, f.size(), f.where());
  host_array<std::int32_t> out{h.shape, dafuse::detail::allocate_values<std::int32_t>(
                                            count, f.where(), values_text(h, dtype::int32))};
  if (h.type == dtype::int32 && h.byte_order == std::endian::native) {
    if (count != 0)
      f.read_at(h.data_offset, out.values.data(), count * sizeof(std::int32_t), "data");
  } else {
    read_npy_as_int32(f, h, count, out.values.data(), name);
  }
  return out;
}

}  // namespace detail

//! Loads an NPY file of any float or integer dtype, in either byte order, and converts its values
//! to float as they are (uint8 255 becomes 255.0f: no scaling to [0, 1]; float64 rounds to the
//! nearest float32, as numpy's `x.astype(np.float32)`; a finite float64 beyond float32's range is
//! refused, naming the element). Read like load_npy: header first, then the data converted as it
//! is read, so the memory used is the float array's (plus a 64 KiB piece), whatever the file's
//! dtype. A refused dtype's message suggests `x.astype(np.float32)`.
inline host_array<float> load_npy_as_float(const std::filesystem::path& path) {
  const dafuse::detail::input_file f(path, path.string());
  return detail::read_npy_values_as_float(f, detail::read_npy_header(f, detail::npy_float_fix));
}

//! Loads an NPY file of any integer dtype (int8 to int64, uint8 to uint64), in either byte order,
//! as int32. Every value must fit int32; the first that does not is refused as `name[i]` (the
//! flat index written per dimension: "value[2][5]") with its value. Float files are refused:
//! the message says the values must be integers and suggests `y.astype(np.int32)`. Read as
//! load_npy_as_float reads: the memory used is the int32 array's.
inline host_array<std::int32_t> load_npy_as_int32(const std::filesystem::path& path,
                                                  std::string_view name = "value") {
  constexpr std::string_view fix = "y.astype(np.int32)";
  const dafuse::detail::input_file f(path, path.string());
  return detail::read_npy_values_as_int32(f, detail::read_npy_header(f, fix), name, fix);
}

//! The bytes of an NPY version 1.0 file holding `values` (C order) with the given `shape`; `where`
//! names it in messages.
template <class T>
std::vector<unsigned char> npy_bytes(const std::vector<std::size_t>& shape,
                                     std::span<const T> values,
                                     std::string_view where) {
  static_assert(npy_element<T>,
                "dafuse: save_npy<T> supports T = float, double and the 8- to 64-bit integers of "
                "<cstdint>; convert the values first");
  const std::size_t count = detail::checked_bytes(shape, sizeof(T), where) / sizeof(T);
  if (values.size() != count)
    fail(where, "values",
         std::to_string(count) + " elements for shape " + detail::shape_text(shape),
         std::to_string(values.size()));

  // numpy's own spelling of the dict, padded with spaces so that 10 + HEADER_LEN (magic, version,
  // HEADER_LEN, dict) is a multiple of 64 and the data is aligned for memory mapping.
  std::string header = "{'descr': '" + std::string(descr_of(dtype_of_v<T>)) +
                       "', 'fortran_order': False, 'shape': " + detail::shape_text(shape) + ", }";
  constexpr std::size_t prefix = 10, align = 64;
  header.append((align - (prefix + header.size() + 1) % align) % align, ' ');
  header += '\n';
  if (header.size() > 0xffff)
    fail(where, "shape", "a header of at most 65535 bytes (NPY version 1.0)",
         std::to_string(shape.size()) + " dimensions needing " + std::to_string(header.size()));

  // Sized once and filled in place: growing a vector from a 10-byte list made GCC 12 warn of an
  // out-of-bounds copy inside vector::insert (-Warray-bounds, a false positive).
  const unsigned char start[prefix] = {0x93,
                                       'N',
                                       'U',
                                       'M',
                                       'P',
                                       'Y',
                                       1,
                                       0,
                                       static_cast<unsigned char>(header.size() & 0xff),
                                       static_cast<unsigned char>(header.size() >> 8)};
  std::vector<unsigned char> bytes(prefix + header.size() + count * sizeof(T));
  std::memcpy(bytes.data(), start, prefix);
  std::memcpy(bytes.data() + prefix, header.data(), header.size());
  if (count != 0)
    std::memcpy(bytes.data() + prefix + header.size(), values.data(), count * sizeof(T));
  return bytes;
}

//! Writes `values` (C order) with the given `shape` as an NPY version 1.0 file, through a
//! temporary file renamed over `path` (core/file.hpp): a failure leaves no half-written `path`.
template <class T>
void save_npy(const std::filesystem::path& path,
              const std::vector<std::size_t>& shape,
              std::span<const T> values) {
  detail::write_file_atomically(path, npy_bytes<T>(shape, values, path.string()));
}

//! Writes `a` as an NPY version 1.0 file; see the overload above.
template <class T>
void save_npy(const std::filesystem::path& path, const host_array<T>& a) {
  save_npy<T>(path, a.shape, std::span<const T>(a.values));
}

}  // namespace dafuse::data
