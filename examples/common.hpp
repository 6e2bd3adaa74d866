// Small helpers the examples share: command-line numbers and mean ± std over seeds.
#pragma once
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace examples {

//! Value of `--name N` on the command line, or `fallback`. Exits with a message on a bad value.
inline long option(int argc, char** argv, const char* name, long fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], name) == 0) {
      char* end = nullptr;
      const long v = std::strtol(argv[i + 1], &end, 10);
      if (end == argv[i + 1] || *end != '\0' || v < 1) {
        std::fprintf(stderr, "%s: %s: expected a positive integer, found '%s'\n", argv[0], name,
                     argv[i + 1]);
        std::exit(2);
      }
      return v;
    }
  return fallback;
}

//! Text value of `--name VALUE`, or `fallback`.
inline std::string text_option(int argc, char** argv, const char* name, std::string fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], name) == 0) return argv[i + 1];
  return fallback;
}

struct summary {
  double mean = 0, std = 0;  // sample standard deviation (n − 1), 0 for one value
};

inline summary summarize(const std::vector<double>& v) {
  summary s;
  for (double x : v) s.mean += x;
  s.mean /= double(v.size());
  if (v.size() > 1) {
    for (double x : v) s.std += (x - s.mean) * (x - s.mean);
    s.std = std::sqrt(s.std / double(v.size() - 1));
  }
  return s;
}

}  // namespace examples
