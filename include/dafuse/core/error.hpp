// SPDX-License-Identifier: Apache-2.0
//! @file core/error.hpp
//! @brief The exception dafuse throws, and helpers that word its messages the same way everywhere.
#pragma once
#include <dafuse/config.hpp>

#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>

namespace dafuse {

//! Every run-time failure dafuse reports. The message always says where (a file, an argument
//! struct), which field, what was expected and what was found, so a user can fix the input
//! without reading the library.
class error : public std::runtime_error {
 public:
  explicit error(const std::string& message) : std::runtime_error("dafuse: " + message) {}
};

//! Throws `dafuse: <where>: <field>: expected <expected>, found <found>`.
[[noreturn]] inline void fail(std::string_view where,
                              std::string_view field,
                              std::string_view expected,
                              std::string_view found) {
  std::string m;
  m.reserve(where.size() + field.size() + expected.size() + found.size() + 32);
  m.append(where).append(": ").append(field).append(": expected ").append(expected);
  m.append(", found ").append(found);
  throw error(m);
}

//! Throws `dafuse: <where>: <what>` for failures that are not about one field (I/O errors).
[[noreturn]] inline void fail(std::string_view where, std::string_view what) {
  std::string m(where);
  m.append(": ").append(what);
  throw error(m);
}

namespace detail {

//! `bytes` quoted, with anything not printable ASCII (and the backslash) written as \xNN: text
//! taken from a file goes into messages this way, so a crafted file cannot put control bytes
//! (terminal escapes, line breaks) on the user's screen.
inline std::string quoted_bytes(std::string_view bytes, char quote = '\'') {
  static constexpr char hex[] = "0123456789abcdef";
  std::string s(1, quote);
  for (const char c : bytes) {
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7f && c != '\\') {
      s += c;
    } else {
      s += "\\x";
      s += hex[u >> 4];
      s += hex[u & 0xf];
    }
  }
  s += quote;
  return s;
}

//! `text` as it is when it is plain printable text, else quoted_bytes(text): a name taken from a
//! file (a member, a field, a stored setting) reads plainly in messages unless it needs escaping.
inline std::string shown(std::string_view text) {
  bool plain = !text.empty();
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    plain = plain && u >= 0x20 && u < 0x7f && c != '\\' && c != '\'';
  }
  return plain ? std::string(text) : quoted_bytes(text);
}

//! Describes an OS error number for a message ("No such file or directory").
inline std::string os_reason(int err) {
  return err != 0 ? std::generic_category().message(err) : std::string("unknown reason");
}

}  // namespace detail

}  // namespace dafuse
