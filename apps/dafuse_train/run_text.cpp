// SPDX-License-Identifier: Apache-2.0
#include "run_text.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace dafuse_train {

std::string json_string(std::string_view s) {
  std::string out = "\"";
  for (const char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

std::string number(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.10g", v);
  return buf;
}

std::string number(float v) {
  if (!std::isfinite(v)) return "null";
  char buf[32];
  for (int digits = 6; digits <= 9; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*g", digits, double(v));
    if (std::strtof(buf, nullptr) == v) break;
  }
  return buf;
}

std::string duration(double seconds) {
  char buf[32];
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const long s = std::lround(seconds);
  if (s < 60)
    std::snprintf(buf, sizeof buf, "%ld s", s);
  else if (s < 3600)
    std::snprintf(buf, sizeof buf, "%ld min %02ld s", s / 60, s % 60);
  else
    std::snprintf(buf, sizeof buf, "%ld h %02ld min", s / 3600, (s % 3600) / 60);
  return buf;
}

std::string percent(double v) {
  if (!std::isfinite(v)) return "n/a";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f %%", 100 * v);
  return buf;
}

std::string percent_std(double mean, double std) {
  if (!std::isfinite(mean)) return "n/a";
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.2f ± %.2f %%", 100 * mean, 100 * std);
  return buf;
}

std::string value_list(const std::vector<float>& v) {
  std::string out;
  for (const float x : v) out.append(out.empty() ? "" : ", ").append(number(x));
  return out;
}

}  // namespace dafuse_train
