// SPDX-License-Identifier: Apache-2.0
// What the tests of train/curves.hpp and train/svg_plot.hpp share: a table like the one fit
// records, and whole files read and written as text.
#pragma once
#include <dafuse/train/curves.hpp>
#include "../check.hpp"

#include <cmath>
#include <cstddef>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>

namespace dafuse::test {

inline std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  REQUIRE(in);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline void write_text(const std::filesystem::path& p, const std::string& text) {
  std::ofstream out(p, std::ios::binary);
  out << text;
}

// A table like the one fit records: losses every row, accuracies every `every` rows.
inline training_curves dann_like(std::size_t rows, std::size_t every) {
  constexpr double na = std::numeric_limits<double>::quiet_NaN();
  training_curves t{"step", "label_loss", "domain_loss", "target_accuracy", "lambda"};
  t.reserve(rows);
  for (std::size_t r = 0; r < rows; ++r) {
    const double s = double(r) * 10;
    t.add({s, std::exp(-s / 300), 0.69 + 0.01 * std::sin(s), r % every == 0 ? 0.5 + s / 4000 : na,
           s / (10.0 * double(rows))});
  }
  return t;
}

}  // namespace dafuse::test
