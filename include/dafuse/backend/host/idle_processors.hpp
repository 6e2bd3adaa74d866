// SPDX-License-Identifier: Apache-2.0
//! @file backend/host/idle_processors.hpp
//! @brief How much of the processors this process may run on sat idle: the sign a team_pacer
//! reads before it tries its team again on a machine that was busy.
//!
//! Linux counts each processor's idle time (idle + iowait, in USER_HZ ticks) in /proc/stat. The
//! sum over the processors in this thread's affinity mask, taken at two moments, gives the idle
//! processors on average between them: (Δidle ticks / USER_HZ) / Δwall seconds. A team of two
//! on a machine whose other processor is held by another process has nothing to gain; that
//! figure says so without holding a team to find out. Elsewhere (or if /proc is not readable)
//! the sample is unknown and the pacer probes as it would without it.
#pragma once
#include <dafuse/config.hpp>

#include <chrono>
#include <cstdint>
#include <cstring>

#if defined(__linux__)
#include <fcntl.h>
#include <sched.h>
#include <unistd.h>
#endif

namespace dafuse::backend::host {

//! The idle time of the processors this thread may run on, summed since boot, and when it was
//! read. `known` is false where it cannot be read.
struct idle_sample {
  bool known = false;
  double idle_seconds = 0;  //!< summed over the processors, so it grows up to their count a second
  double wall_seconds = 0;  //!< steady clock
};

//! Idle processors on average between two samples: Δidle / Δwall; negative when either sample is
//! unknown or no time passed.
inline double idle_processors_between(const idle_sample& from, const idle_sample& to) {
  const double wall = to.wall_seconds - from.wall_seconds;
  if (!from.known || !to.known || wall <= 0) return -1;
  return (to.idle_seconds - from.idle_seconds) / wall;
}

//! Seconds on the steady clock (the samples' wall time).
inline double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

namespace detail {

//! Sums the idle and iowait ticks (the 4th and 5th numbers) of the `cpuN` lines of /proc/stat's
//! text whose N is in `allowed` (called with whole lines). Returns false on a malformed line.
template <class Allowed>
bool add_idle_ticks(const char* line, const char* end, Allowed&& allowed, std::uint64_t& ticks) {
  if (end - line < 4 || std::memcmp(line, "cpu", 3) != 0 || line[3] < '0' || line[3] > '9')
    return true;  // the "cpu " total and the other lines are not per processor
  const char* p = line + 3;
  unsigned cpu = 0;
  while (p < end && *p >= '0' && *p <= '9') cpu = cpu * 10 + unsigned(*p++ - '0');
  std::uint64_t field[5] = {};
  for (std::uint64_t& f : field) {
    while (p < end && *p == ' ') ++p;
    if (p == end || *p < '0' || *p > '9') return false;
    while (p < end && *p >= '0' && *p <= '9') f = f * 10 + std::uint64_t(*p++ - '0');
  }
  if (allowed(cpu)) ticks += field[3] + field[4];
  return true;
}

}  // namespace detail

//! Reads the idle time of this thread's processors now (unknown outside Linux, or when /proc/stat
//! or the affinity mask cannot be read). Reads /proc/stat in 4 KiB pieces on the stack: no
//! allocation, as it runs between steps.
inline idle_sample sample_idle_processors() {
  idle_sample s;
  s.wall_seconds = steady_seconds();
#if defined(__linux__)
  cpu_set_t mask;
  CPU_ZERO(&mask);
  if (sched_getaffinity(0, sizeof mask, &mask) != 0) return s;
  const long hz = sysconf(_SC_CLK_TCK);
  const int fd = ::open("/proc/stat", O_RDONLY | O_CLOEXEC);
  if (fd < 0 || hz <= 0) {
    if (fd >= 0) ::close(fd);
    return s;
  }
  const auto allowed = [&mask](unsigned cpu) { return cpu < CPU_SETSIZE && CPU_ISSET(cpu, &mask); };
  char buffer[4096];
  std::size_t kept = 0;  // the start of a line cut by the last read, moved to the front
  std::uint64_t ticks = 0;
  bool ok = true, seen_cpu = false, done = false;
  while (!done) {
    const ssize_t got = ::read(fd, buffer + kept, sizeof buffer - kept);
    if (got <= 0) {
      ok = ok && got == 0;
      break;
    }
    const char* line = buffer;
    const char* const end = buffer + kept + std::size_t(got);
    // The per-processor lines come first: the first other line after them ends the reading.
    for (const char* nl;
         !done && (nl = static_cast<const char*>(std::memchr(line, '\n', std::size_t(end - line))));
         line = nl + 1) {
      if (nl - line >= 3 && std::memcmp(line, "cpu", 3) == 0) {
        seen_cpu = true;
        ok = ok && detail::add_idle_ticks(line, nl, allowed, ticks);
      } else if (seen_cpu) {
        done = true;
      }
    }
    kept = std::size_t(end - line);
    if (seen_cpu && kept >= 3 && std::memcmp(line, "cpu", 3) != 0) break;
    if (kept == sizeof buffer) {  // a processor's line longer than 4 KiB: not a known format
      ok = false;
      break;
    }
    std::memmove(buffer, line, kept);
  }
  ::close(fd);
  if (!ok || !seen_cpu) return s;
  s.known = true;
  s.idle_seconds = double(ticks) / double(hz);
#endif
  return s;
}

//! Where a team_pacer reads the time and the idle time: the steady clock and /proc/stat, or a
//! test's own.
struct idle_source {
  double (*seconds)() = steady_seconds;
  idle_sample (*sample)() = sample_idle_processors;
};

}  // namespace dafuse::backend::host
