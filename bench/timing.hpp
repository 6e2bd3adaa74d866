// How the benchmarks time things: the median and quartiles of many timed calls after warm-up.
#pragma once
#include <algorithm>
#include <chrono>
#include <vector>

namespace bench {

//! Median and interquartile range of a set of times (any unit).
struct timing {
  double median = 0, q1 = 0, q3 = 0;
  long calls = 0;  //!< timed calls
};

//! The quartiles of `values` (not empty).
inline timing quartiles(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return {values[n / 2], values[n / 4], values[3 * n / 4], long(n)};
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

//! Calls f() untimed for `warmup_seconds` (at least 3 calls), then times calls until `seconds`
//! of them have been timed (at least `min_reps`, at most `max_reps`): microseconds per call. A
//! budget in time instead of a count, so that a slow step (a convolution, the eager execution)
//! costs the run no more than a fast one.
template <class F>
timing time_calls_for(double warmup_seconds, double seconds, long min_reps, long max_reps, F&& f) {
  using clock = std::chrono::steady_clock;
  const auto warm_start = clock::now();
  for (long w = 0;
       w < 3 || std::chrono::duration<double>(clock::now() - warm_start).count() < warmup_seconds;
       ++w)
    f();
  std::vector<double> us;
  us.reserve(static_cast<std::size_t>(std::min(max_reps, 1L << 16)));
  double total = 0;
  while (long(us.size()) < max_reps && (long(us.size()) < min_reps || total < seconds * 1e6)) {
    const auto t0 = clock::now();
    f();
    us.push_back(std::chrono::duration<double, std::micro>(clock::now() - t0).count());
    total += us.back();
  }
  return quartiles(std::move(us));
}

}  // namespace bench
