// Small helpers the examples share: command-line numbers and mean ± std over seeds.
#pragma once
#include <dafuse/dafuse.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <numbers>
#include <string>
#include <vector>

namespace examples {

//! Checks the whole command line before anything runs: each argument is `--name VALUE` with a
//! name from `known`. `--help` prints `usage` and exits 0; an unknown name, or a name without its
//! value, exits 2 with a message naming it (a misspelt option must not start a long default run).
inline void check_options(int argc,
                          char** argv,
                          std::initializer_list<const char*> known,
                          const char* usage) {
  for (int i = 1; i < argc; i += 2) {
    if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
      std::printf("usage: %s %s\n", argv[0], usage);
      std::exit(0);
    }
    bool is_known = false;
    for (const char* name : known) is_known = is_known || std::strcmp(argv[i], name) == 0;
    if (!is_known) {
      std::fprintf(stderr, "%s: unknown option '%s' (usage: %s %s)\n", argv[0], argv[i], argv[0],
                   usage);
      std::exit(2);
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "%s: %s: expected a value after it\n", argv[0], argv[i]);
      std::exit(2);
    }
  }
}

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

//! Target accuracies and training time of source-only and DANN runs over a range of seeds.
struct comparison {
  std::vector<double> source_only, dann;  //!< target accuracy per seed
  double seconds = 0;                     //!< training time of all runs
  long skipped_steps = 0;                 //!< updates skipped for non-finite gradients
};

//! Trains `SourceOnlyStep` and `DannStep` from the same arguments for each seed first_seed, …,
//! first_seed + seeds − 1 (args_for(seed) gives them) and prints one line per seed.
template <class SourceOnlyStep, class DannStep, class ArgsFor>
comparison compare_heads(const dafuse::data::dataset& source,
                         const dafuse::data::dataset& target,
                         long seeds,
                         ArgsFor args_for,
                         long first_seed = 1) {
  comparison c;
  for (long seed = first_seed; seed < first_seed + seeds; ++seed) {
    const dafuse::fit_args args = args_for(std::uint64_t(seed));
    const dafuse::fit_result so = dafuse::fit<SourceOnlyStep>(source, target, args);
    const dafuse::fit_result da = dafuse::fit<DannStep>(source, target, args);
    c.source_only.push_back(so.target_accuracy);
    c.dann.push_back(da.target_accuracy);
    c.seconds += so.seconds + da.seconds;
    c.skipped_steps += long(so.skipped_steps + da.skipped_steps);
    std::printf("seed %ld: source-only %.2f %% (%.3f s)   DANN %.2f %% (%.3f s)\n", seed,
                100 * so.target_accuracy, so.seconds, 100 * da.target_accuracy, da.seconds);
  }
  return c;
}

// `n` points of two moons (as scikit-learn's make_moons: upper moon label 0, lower moon label 1,
// t evenly spaced on [0, π]) with N(0, noise²) jitter, rotated by `degrees` about (0.5, 0.25).
inline dafuse::data::dataset two_moons(
    int n, double noise, double degrees, std::uint32_t draw, dafuse::data::domain side) {
  dafuse::counter_rng rng(2016, dafuse::rng_stream::synthetic_data, draw);
  const double a = degrees * std::numbers::pi / 180, c = std::cos(a), s = std::sin(a);
  dafuse::data::host_array<float> x{{std::size_t(n), 2}, std::vector<float>(2 * std::size_t(n))};
  std::vector<std::int32_t> y(static_cast<std::size_t>(n));
  const int half = n / 2;
  for (int i = 0; i < n; ++i) {
    const bool lower = i >= half;
    const int k = lower ? i - half : i, count = lower ? n - half : half;
    const double t = std::numbers::pi * k / (count - 1);
    double px = lower ? 1 - std::cos(t) : std::cos(t);
    double py = lower ? 0.5 - std::sin(t) : std::sin(t);
    px += noise * rng.normal<double>() - 0.5;
    py += noise * rng.normal<double>() - 0.25;
    x.values[2 * i] = float(c * px - s * py + 0.5);
    x.values[2 * i + 1] = float(s * px + c * py + 0.25);
    y[std::size_t(i)] = lower ? 1 : 0;
  }
  return dafuse::data::make_dataset(side == dafuse::data::domain::source
                                        ? "two moons (source)"
                                        : "two moons rotated 35° (target)",
                                    side, std::move(x), std::move(y));
}

}  // namespace examples
