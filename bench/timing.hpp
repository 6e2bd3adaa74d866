// How the benchmarks time things: the median and quartiles of many timed calls after warm-up.
#pragma once
#include <algorithm>
#include <chrono>
#include <vector>

namespace bench {

//! Median and interquartile range of a set of times (any unit).
struct timing {
  double median = 0, q1 = 0, q3 = 0;
};

//! The quartiles of `values` (not empty).
inline timing quartiles(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return {values[n / 2], values[n / 4], values[3 * n / 4]};
}

//! Calls f() `warmup` times untimed, then `reps` times, timing each call: microseconds per call.
template <class F>
timing time_calls(long warmup, long reps, F&& f) {
  for (long w = 0; w < warmup; ++w) f();
  std::vector<double> us(static_cast<std::size_t>(reps));
  for (long r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    us[std::size_t(r)] =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  }
  return quartiles(std::move(us));
}

}  // namespace bench
