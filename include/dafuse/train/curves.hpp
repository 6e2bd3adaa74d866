// SPDX-License-Identifier: Apache-2.0
//! @file train/curves.hpp
//! @brief `training_curves`: values recorded during fit, one row per logged step, written to and
//! read from CSV (train/svg_plot.hpp draws them).
#pragma once
#include <dafuse/config.hpp>
#include <dafuse/core/error.hpp>
#include <dafuse/core/file.hpp>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <initializer_list>
#include <istream>
#include <limits>
#include <optional>
#include <ostream>
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

namespace dafuse {

namespace detail::curves {

//! A check that failed: the field, what was expected, what was found (the words of `fail`).
struct problem {
  std::string field, expected, found;
};

//! `s` in quotes, cut to 60 characters, control bytes escaped, for error messages about
//! malformed input.
inline std::string shown(std::string_view s) {
  constexpr std::size_t most = 60;
  std::string out = quoted_bytes(s.substr(0, most), '"');
  if (s.size() > most) out.insert(out.size() - 1, "...");
  return out;
}

//! Shortest decimal text that reads back to the same double (std::to_chars: locale-independent,
//! unlike printf, whose decimal point follows the C locale).
inline void append_number(std::string& out, double v) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

//! A CSV field per RFC 4180: quoted when it holds a comma, a quote or a line break (none of which
//! may appear unquoted), with each quote doubled.
inline void append_csv_field(std::string& out, std::string_view s) {
  if (s.find_first_of(",\"\r\n") == std::string_view::npos) {
    out.append(s);
    return;
  }
  out += '"';
  for (const char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  out += '"';
}

//! Splits one CSV line into fields (RFC 4180 quoting; fields never span lines here, because column
//! names have no line breaks and numbers none either). Returns what was wrong, if anything.
inline std::optional<problem> split_csv_line(std::string_view line,
                                             std::vector<std::string>& fields) {
  fields.clear();
  std::size_t i = 0;
  while (true) {
    std::string field;
    if (i < line.size() && line[i] == '"') {
      const std::size_t start = i++;
      while (true) {
        if (i >= line.size())
          return problem{"", "a closing quote before the end of the line",
                         "the unterminated field " + shown(line.substr(start))};
        if (line[i] == '"') {
          if (i + 1 < line.size() && line[i + 1] == '"') {
            field += '"';
            i += 2;
            continue;
          }
          ++i;
          break;
        }
        field += line[i++];
      }
      if (i < line.size() && line[i] != ',')
        return problem{"", "',' or the end of the line after a closing quote",
                       shown(line.substr(i))};
    } else {
      const std::size_t end = std::min(line.find(',', i), line.size());
      field.assign(line.substr(i, end - i));
      i = end;
    }
    fields.push_back(std::move(field));
    if (i >= line.size()) return std::nullopt;
    ++i;  // the comma
  }
}

//! A CSV value: empty (or spaces) is NaN, "not measured"; otherwise a decimal number as
//! std::from_chars reads it ("1.5", "-2e-07", "inf", "nan"; a leading '+' is allowed too).
inline std::optional<double> parse_value(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  if (s.empty()) return std::numeric_limits<double>::quiet_NaN();
  if (s.size() > 1 && s.front() == '+' && s[1] != '-') s.remove_prefix(1);
  double v = 0;
  const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  if (r.ec != std::errc() || r.ptr != s.data() + s.size()) return std::nullopt;
  return v;
}

//! The columns' invariants: "step" first, then distinct non-empty names without line breaks.
inline std::optional<problem> column_problem(const std::vector<std::string>& names) {
  if (names.empty()) return problem{"columns", "\"step\" as the first column", "no columns"};
  if (names[0] != "step")
    return problem{"columns", "\"step\" as the first column", shown(names[0])};
  for (std::size_t i = 1; i < names.size(); ++i) {
    const std::string field = "column " + std::to_string(i + 1);
    if (names[i].empty() || names[i].find_first_of("\r\n") != std::string::npos)
      return problem{field, "a non-empty name without line breaks", shown(names[i])};
    for (std::size_t j = 0; j < i; ++j)
      if (names[j] == names[i])
        return problem{field, "a name no earlier column has", shown(names[i])};
  }
  return std::nullopt;
}

//! A row's invariants: one value per column, and a finite integer step.
inline std::optional<problem> row_problem(std::span<const double> row,
                                          const std::vector<std::string>& names) {
  if (row.size() != names.size()) {
    std::string expected = std::to_string(names.size()) + " values (";
    for (std::size_t i = 0; i < names.size(); ++i) {
      if (i > 0) expected += ", ";
      expected += names[i];
    }
    return problem{"row", expected + ")", std::to_string(row.size()) + " values"};
  }
  if (!std::isfinite(row[0]) || std::floor(row[0]) != row[0]) {
    std::string found;
    if (std::isnan(row[0]))
      found = "NaN (an empty field)";
    else
      append_number(found, row[0]);
    return problem{"step", "a finite integer", found};
  }
  return std::nullopt;
}

}  // namespace detail::curves

//! A table of values recorded during training: fixed named columns, the first "step", one row
//! per logged step. A NaN value means "not measured at this row" (target accuracy evaluated every
//! K steps, say); it is written to CSV as an empty field, and write_svg (train/svg_plot.hpp) says
//! how plots show it.
class training_curves {
 public:
  //! The value of a cell not measured at its row.
  static constexpr double not_measured = std::numeric_limits<double>::quiet_NaN();

  //! A table with the step column only.
  training_curves() : training_curves({"step"}) {}
  //! A table with these columns: "step" first, then distinct non-empty names without line breaks.
  explicit training_curves(std::vector<std::string> columns) : columns_(std::move(columns)) {
    if (auto p = detail::curves::column_problem(columns_))
      fail("training_curves", p->field, p->expected, p->found);
  }
  training_curves(std::initializer_list<std::string> columns)
      : training_curves(std::vector<std::string>(columns)) {}

  //! The column names, "step" first.
  const std::vector<std::string>& columns() const noexcept { return columns_; }
  //! Number of rows added.
  std::size_t rows() const noexcept {
    return columns_.empty() ? 0 : values_.size() / columns_.size();  // empty only if moved from
  }
  //! The index of column `name`, if there is one.
  std::optional<std::size_t> find_column(std::string_view name) const {
    for (std::size_t i = 0; i < columns_.size(); ++i)
      if (columns_[i] == name) return i;
    return std::nullopt;
  }
  //! Column `name`'s values, one per row (NaN where not measured); fails if there is no such
  //! column.
  std::vector<double> column(std::string_view name) const {
    const auto c = find_column(name);
    if (!c)
      fail("training_curves::column", "name", "one of " + column_list(),
           detail::curves::shown(name));
    std::vector<double> out(rows());
    for (std::size_t r = 0; r < out.size(); ++r) out[r] = values_[r * columns_.size() + *c];
    return out;
  }
  //! Row `r`'s values, one per column.
  std::span<const double> row(std::size_t r) const {
    if (r >= rows())
      fail("training_curves::row", "index", "less than " + std::to_string(rows()),
           std::to_string(r));
    return std::span<const double>(values_).subspan(r * columns_.size(), columns_.size());
  }
  //! Room for `rows` rows without reallocating (fit knows steps / log interval up front).
  void reserve(std::size_t rows) { values_.reserve(rows * columns_.size()); }

  //! Appends a row: one value per column, the step first (a finite integer); NaN where a value
  //! was not measured.
  void add(std::span<const double> row) {
    if (auto p = detail::curves::row_problem(row, columns_))
      fail("training_curves::add", p->field, p->expected, p->found);
    values_.insert(values_.end(), row.begin(), row.end());
  }
  void add(std::initializer_list<double> row) {
    add(std::span<const double>(row.begin(), row.size()));
  }

  //! CSV (RFC 4180): a header of the column names, quoted where needed, then one line per row.
  //! Numbers are the shortest text that reads back to the same double; NaN is an empty field.
  void write_csv(std::ostream& out) const {
    const std::string text = csv_text();
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    if (!out) fail("training_curves::write_csv", "cannot write to the stream");
  }
  //! Writes the CSV to `path` through a temporary file of its own in the same directory,
  //! renamed over `path` (core/file.hpp); failures name the path and the system's reason.
  void write_csv(const std::filesystem::path& path) const {
    detail::write_file_atomically(path, std::string_view(csv_text()));
  }

  //! Reads a table written by write_csv (or by hand: CRLF line ends, a UTF-8 byte-order mark,
  //! quoted numbers, spaces around numbers and blank lines are accepted). Errors name `where`, the
  //! line and what was expected there.
  static training_curves read_csv(std::istream& in, std::string_view where = "<stream>") {
    std::optional<training_curves> out;
    std::string line;
    std::vector<std::string> fields;
    std::vector<double> row;
    std::size_t line_no = 0;
    while (std::getline(in, line)) {
      ++line_no;
      if (line_no == 1 && line.starts_with("\xEF\xBB\xBF")) line.erase(0, 3);
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line.empty()) continue;
      const std::string at = "line " + std::to_string(line_no);
      if (auto p = detail::curves::split_csv_line(line, fields))
        fail(where, at, p->expected, p->found);
      if (!out) {
        if (fields[0] != "step")
          fail(where, at, "a header whose first field is \"step\"",
               detail::curves::shown(fields[0]));
        if (auto p = detail::curves::column_problem(fields))
          fail(where, at + ": " + p->field, p->expected, p->found);
        out.emplace(fields);
        continue;
      }
      const std::size_t width = out->columns().size();
      if (fields.size() != width)
        fail(where, at, std::to_string(width) + " fields, as in the header",
             std::to_string(fields.size()));
      row.clear();
      for (std::size_t k = 0; k < width; ++k) {
        const auto v = detail::curves::parse_value(fields[k]);
        if (!v)
          fail(where, at + ": " + out->columns()[k], "a number or an empty field (not measured)",
               detail::curves::shown(fields[k]));
        row.push_back(*v);
      }
      if (auto p = detail::curves::row_problem(row, out->columns()))
        fail(where, at + ": " + p->field, p->expected, p->found);
      out->values_.insert(out->values_.end(), row.begin(), row.end());
    }
    if (in.bad()) fail(where, "cannot read: " + detail::os_reason(errno));
    if (!out) fail(where, "line 1", "a header line whose first field is \"step\"", "an empty file");
    return std::move(*out);
  }
  //! Reads the CSV file at `path` (a regular file, read whole: core/file.hpp); see the overload
  //! above.
  static training_curves read_csv(const std::filesystem::path& path) {
    const std::vector<unsigned char> bytes = detail::read_file(path, path.string());
    std::istringstream in(std::string(bytes.begin(), bytes.end()));
    return read_csv(in, path.string());
  }

 private:
  std::string column_list() const {
    std::string s;
    for (std::size_t i = 0; i < columns_.size(); ++i) s.append(i ? ", " : "").append(columns_[i]);
    return s;
  }

  std::string csv_text() const {
    std::string out;
    out.reserve((rows() + 1) * columns_.size() * 12);
    for (std::size_t c = 0; c < columns_.size(); ++c) {
      if (c > 0) out += ',';
      detail::curves::append_csv_field(out, columns_[c]);
    }
    out += '\n';
    for (std::size_t r = 0; r < rows(); ++r) {
      for (std::size_t c = 0; c < columns_.size(); ++c) {
        if (c > 0) out += ',';
        const double v = values_[r * columns_.size() + c];
        if (!std::isnan(v)) detail::curves::append_number(out, v);
      }
      out += '\n';
    }
    return out;
  }

  std::vector<std::string> columns_;
  std::vector<double> values_;  // [rows, columns], row-major
};

}  // namespace dafuse
