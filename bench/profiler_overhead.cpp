// What a profile_scope costs: 10 million scopes with a null profiler, with a profiler storing
// events, and the clock read alone for reference; the median of 7 runs of each, in ns per scope.
// The profiler pointer is read through a volatile each iteration, so the null test cannot be
// hoisted out of the loop. Run: build/bench/profiler_overhead
#include <dafuse/core/profiler.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

namespace df = dafuse;

template <class F, class Reset = void (*)()>
double ns_per_iteration(
    long n, F&& body, Reset reset = [] {}) {
  std::vector<double> runs;
  for (int r = 0; r < 7; ++r) {
    reset();  // outside the timed loop
    const auto t0 = std::chrono::steady_clock::now();
    for (long i = 0; i < n; ++i) body();
    runs.push_back(
        std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() /
        double(n));
  }
  std::sort(runs.begin(), runs.end());
  return runs[runs.size() / 2];
}

int main() {
  const long n = 10'000'000;
  df::profiler prof(std::size_t(n) + 16);  // room for every event of one run
  df::profiler* volatile none = nullptr;
  df::profiler* volatile some = &prof;
  volatile long sink = 0;
  const double empty = ns_per_iteration(n, [&] { sink = sink + 1; });
  const double null_scope = ns_per_iteration(n, [&] {
    df::profile_scope s(none, df::phase::forward);
    sink = sink + 1;
  });
  const double clock = ns_per_iteration(
      n, [&] { sink = sink + std::chrono::steady_clock::now().time_since_epoch().count() % 2; });
  const double stored = ns_per_iteration(
      n,
      [&] {
        df::profile_scope s(some, df::phase::forward);
        sink = sink + 1;
      },
      [&] { prof.clear(); });  // keeps the storage: each run refills the same events
  std::printf("empty loop                      %6.2f ns\n", empty);
  std::printf("profile_scope with nullptr      %6.2f ns\n", null_scope);
  std::printf("steady_clock::now()             %6.2f ns\n", clock);
  std::printf("profile_scope with a profiler   %6.2f ns (event stored)\n", stored);
}
