// SPDX-License-Identifier: Apache-2.0
//! @file core/profiler.hpp
//! @brief `profiler`: where the training loop's time goes, per phase, as a table and a trace.
//!
//! The loop marks its phases (waiting for data, forward, backward, update, evaluation,
//! checkpoint) with `profile_scope`; the profiler sums calls and time per phase, keeps each
//! interval as a trace event up to a cap fixed at construction, and writes a summary table (like
//! torch.profiler's `key_averages().table()`) and a Chrome trace (Trace Event Format, JSON object
//! form) that chrome://tracing and https://ui.perfetto.dev open.
//!
//! Recording never allocates: the event storage is allocated once by the constructor (untouched,
//! so it costs address space, not resident memory, until events fill it); past the cap, totals
//! keep counting and events are only counted as dropped. The first fill of each 4 KiB page of
//! storage (170 events) takes a page fault; it happens after the interval's end clock read, so it
//! lands in no phase ("other" in the summary), and clear() reuses the touched pages.
//!
//! Host memory only: the peak and current resident set size of the process. Device memory is not
//! recorded yet.
//!
//! Thread safety: one profiler belongs to one thread (the training loop's). Nothing is
//! synchronised; record from one thread, and read or write the results from that thread or after
//! it has stopped recording.
#pragma once
#include <dafuse/config.hpp>
#include <dafuse/core/error.hpp>
#include <dafuse/core/file.hpp>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <ostream>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#if defined(__linux__)
#include <sys/resource.h>
#include <unistd.h>
#endif

namespace dafuse {

//! The parts of a training step and loop that the profiler tells apart.
enum class phase : std::uint8_t {
  data_wait,   //!< waiting for the next batch (the loader's copy or a prefetch queue)
  forward,     //!< forward pass and losses
  backward,    //!< gradients
  update,      //!< clipping, loss scaling and the optimiser's update
  evaluation,  //!< accuracy on held-out or target data
  checkpoint,  //!< saving or loading parameters
};

//! How many phases there are (the enumerators are 0 .. phase_count − 1).
inline constexpr std::size_t phase_count = 6;
static_assert(static_cast<std::size_t>(phase::checkpoint) + 1 == phase_count,
              "dafuse: phase_count must follow the last phase");

//! The phase's enumerator spelt as a string ("data_wait", "forward", ...); it names the phase in
//! the summary and in the trace.
constexpr const char* name(phase p) noexcept {
  switch (p) {
    case phase::data_wait:
      return "data_wait";
    case phase::forward:
      return "forward";
    case phase::backward:
      return "backward";
    case phase::update:
      return "update";
    case phase::evaluation:
      return "evaluation";
    case phase::checkpoint:
      return "checkpoint";
  }
  return "unknown";
}

namespace detail {
//! Appends an integer, locale-independent.
inline void append_integer(std::string& out, long long v) {
  char buf[24];
  out.append(buf, std::to_chars(buf, buf + sizeof buf, v).ptr);
}
//! Appends `v` with `decimals` digits after the point, locale-independent (to_chars, not printf).
inline void append_fixed(std::string& out, double v, int decimals) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed, decimals);
  if (r.ec == std::errc())
    out.append(buf, r.ptr);
  else
    out.append("?");  // only for magnitudes beyond 1e60, which no duration here reaches
}
//! Appends a signed nanosecond count as microseconds with exactly three decimals: the trace's
//! numbers are then exact, whatever the double formatting.
inline void append_micros(std::string& out, std::int64_t ns) {
  if (ns < 0) {
    out += '-';
    ns = -ns;
  }
  append_integer(out, ns / 1000);
  const auto frac = static_cast<int>(ns % 1000);
  out += '.';
  out += static_cast<char>('0' + frac / 100);
  out += static_cast<char>('0' + frac / 10 % 10);
  out += static_cast<char>('0' + frac % 10);
}
//! Columns a UTF-8 string takes in a terminal (one per code point: the table's text has no wide
//! characters, only "µ").
inline std::size_t display_width(std::string_view s) {
  return static_cast<std::size_t>(std::count_if(
      s.begin(), s.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xc0) != 0x80; }));
}
}  // namespace detail

//! Times the phases of a training loop; see the file comment. Move-only.
class profiler {
 public:
  using clock = std::chrono::steady_clock;  //!< monotonic: immune to wall-clock changes

  //! One recorded interval.
  struct event {
    clock::duration start;     //!< since the profiler's creation or last clear()
    clock::duration duration;  //!< end − begin (zero if end came before begin)
    phase what;                //!< which phase
  };

  //! One phase's aggregates, in seconds; all zero for a phase never recorded.
  struct phase_stats {
    std::size_t calls = 0;     //!< intervals recorded, including those whose events were dropped
    double total_seconds = 0;  //!< sum of their durations
    double min_seconds = 0;    //!< shortest
    double max_seconds = 0;    //!< longest
    //! total / calls (0 without calls)
    double mean_seconds() const { return calls ? total_seconds / double(calls) : 0.0; }
  };

  //! 2^20 events: 24 MiB of address space, a quarter of a million DANN steps of four phases
  //! (about three minutes at the 721 µs step of docs/benchmarks.md).
  static constexpr std::size_t default_max_events = std::size_t(1) << 20;

  //! Allocates room for `max_events` trace events now; the clock starts now.
  explicit profiler(std::size_t max_events = default_max_events)
      : events_(std::make_unique_for_overwrite<event[]>(max_events)),
        max_events_(max_events),
        origin_(clock::now()) {}

  //! Adds the interval [begin, end) to `p`'s totals and, below the cap, as a trace event.
  //! Allocates nothing and cannot throw.
  void record(phase p, clock::time_point begin, clock::time_point end) noexcept {
    const clock::duration d = end > begin ? end - begin : clock::duration::zero();
    totals& t = totals_[static_cast<std::size_t>(p)];
    ++t.calls;
    t.total += d;
    t.min = std::min(t.min, d);
    t.max = std::max(t.max, d);
    if (stored_ < max_events_)
      events_[stored_++] = event{begin - origin_, d, p};
    else
      ++dropped_;
  }

  //! Forgets every total and event, and restarts the wall clock; keeps the event storage. An
  //! interval that began before clear() and is recorded after it gets a negative start.
  void clear() noexcept {
    totals_ = {};
    stored_ = 0;
    dropped_ = 0;
    origin_ = clock::now();
  }

  //! Intervals recorded for `p` (events dropped at the cap included).
  std::size_t calls(phase p) const noexcept { return totals_[static_cast<std::size_t>(p)].calls; }
  //! Seconds recorded for `p`.
  double total_seconds(phase p) const noexcept {
    return seconds(totals_[static_cast<std::size_t>(p)].total);
  }
  //! Calls, total, min and max of `p`.
  phase_stats stats(phase p) const noexcept {
    const totals& t = totals_[static_cast<std::size_t>(p)];
    if (t.calls == 0) return {};
    return {t.calls, seconds(t.total), seconds(t.min), seconds(t.max)};
  }
  //! Seconds since the profiler was created or last cleared.
  double wall_seconds() const noexcept { return seconds(clock::now() - origin_); }
  //! When the profiler was created or last cleared: events' `start` counts from here.
  clock::time_point origin() const noexcept { return origin_; }

  //! The stored events, in the order they were recorded (the order intervals ended).
  std::span<const event> events() const noexcept { return {events_.get(), stored_}; }
  //! Events not stored because the cap was reached (their time is in the totals).
  std::size_t dropped_events() const noexcept { return dropped_; }
  //! The cap given to the constructor.
  std::size_t max_events() const noexcept { return max_events_; }

  //! Peak resident set size of this process in bytes (Linux: getrusage's ru_maxrss), 0 where the
  //! platform does not say. Host memory only.
  static std::size_t peak_rss_bytes() noexcept {
#if defined(__linux__)
    rusage u{};
    if (::getrusage(RUSAGE_SELF, &u) != 0 || u.ru_maxrss <= 0) return 0;
    // The kernel's RSS counters are batched per CPU, so ru_maxrss (KiB) can trail the current
    // size read from statm by a few hundred KiB; a peak below the present is never right.
    return std::max(static_cast<std::size_t>(u.ru_maxrss) * 1024, current_rss_bytes());
#else
    return 0;
#endif
  }

  //! Current resident set size of this process in bytes (Linux: /proc/self/statm), 0 where the
  //! platform does not say.
  static std::size_t current_rss_bytes() noexcept {
#if defined(__linux__)
    std::FILE* f = std::fopen("/proc/self/statm", "r");
    if (!f) return 0;
    unsigned long long size = 0, resident = 0;  // in pages
    const int n = std::fscanf(f, "%llu %llu", &size, &resident);
    std::fclose(f);
    const long page = ::sysconf(_SC_PAGESIZE);
    if (n == 2 && page > 0) return static_cast<std::size_t>(resident * (unsigned long long)page);
#endif
    return 0;
  }

  //! A table of the phases with calls (calls, total, mean, min, max, share of the phases' sum),
  //! then the wall time and the part of it in no phase, the memory and the trace's fill.
  std::string summary() const;

  //! Writes the Chrome trace (Trace Event Format, JSON object form) to `out`: a complete event
  //! ("ph":"X", ts and dur in µs from the profiler's origin) per stored event, process and
  //! thread names, and in "otherData" the dropped events and the memory.
  void write_chrome_trace(std::ostream& out) const;

  //! The same into the file `path`, through a temporary file renamed over it (core/file.hpp), so
  //! a failure never leaves a half-written trace. Throws dafuse::error naming `path` and the
  //! system's reason when the file cannot be opened, written or renamed.
  void write_chrome_trace(const std::filesystem::path& path) const;

 private:
  struct totals {
    std::size_t calls = 0;
    clock::duration total = clock::duration::zero();
    clock::duration min = clock::duration::max();
    clock::duration max = clock::duration::zero();
  };
  static double seconds(clock::duration d) noexcept {
    return std::chrono::duration<double>(d).count();
  }
  std::string trace_text() const;

  std::unique_ptr<event[]> events_;
  std::size_t max_events_ = 0;
  std::size_t stored_ = 0;
  std::size_t dropped_ = 0;
  clock::time_point origin_;
  std::array<totals, phase_count> totals_{};
};

//! Times one phase from construction to destruction (or stop()) into a profiler that may be
//! absent: with a null profiler it reads no clock and costs a branch in the constructor and one
//! in the destructor, so a loop can always say
//!
//!     profile_scope s(prof, phase::forward);   // prof: profiler*, null when not profiling
//!
//! Scopes of one profiler should not nest: the summary's share and "other" assume the phases do
//! not overlap (nested scopes count the inner time twice).
class profile_scope {
 public:
  [[nodiscard]] profile_scope(profiler* p, phase what) noexcept : p_(p), what_(what) {
    if (p_) begin_ = profiler::clock::now();
  }
  [[nodiscard]] profile_scope(profiler& p, phase what) noexcept : profile_scope(&p, what) {}
  ~profile_scope() { stop(); }
  profile_scope(const profile_scope&) = delete;
  profile_scope& operator=(const profile_scope&) = delete;

  //! Records the interval now instead of at destruction; later calls do nothing.
  void stop() noexcept {
    if (p_) {
      p_->record(what_, begin_, profiler::clock::now());
      p_ = nullptr;
    }
  }

 private:
  profiler* p_;
  profiler::clock::time_point begin_;
  phase what_;
};

// ---- Out-of-line members (inline: header-only) ----

inline std::string profiler::summary() const {
  constexpr std::size_t columns = 7;
  using row = std::array<std::string, columns>;
  std::vector<row> rows;
  rows.push_back({"phase", "calls", "total (ms)", "mean (µs)", "min (µs)", "max (µs)", "share"});

  clock::duration sum = clock::duration::zero();
  std::size_t all_calls = 0;
  for (const totals& t : totals_) {
    sum += t.total;
    all_calls += t.calls;
  }
  const double sum_s = seconds(sum);
  for (std::size_t i = 0; i < phase_count; ++i) {
    const phase p = static_cast<phase>(i);
    const phase_stats s = stats(p);
    if (s.calls == 0) continue;
    row r;
    r[0] = name(p);
    detail::append_integer(r[1], static_cast<long long>(s.calls));
    detail::append_fixed(r[2], s.total_seconds * 1e3, 3);
    detail::append_fixed(r[3], s.mean_seconds() * 1e6, 1);
    detail::append_fixed(r[4], s.min_seconds * 1e6, 1);
    detail::append_fixed(r[5], s.max_seconds * 1e6, 1);
    detail::append_fixed(r[6], sum_s > 0 ? 100 * s.total_seconds / sum_s : 0.0, 1);
    r[6] += '%';
    rows.push_back(std::move(r));
  }
  if (rows.size() > 1) {
    row r{"all phases"};
    detail::append_integer(r[1], static_cast<long long>(all_calls));
    detail::append_fixed(r[2], sum_s * 1e3, 3);
    r[6] = "100.0%";
    rows.push_back(std::move(r));
  }

  std::array<std::size_t, columns> width{};
  for (const row& r : rows)
    for (std::size_t c = 0; c < columns; ++c)
      width[c] = std::max(width[c], detail::display_width(r[c]));
  std::string out;
  const auto put_rule = [&] {
    for (std::size_t c = 0; c < columns; ++c) {
      if (c) out += "  ";
      out.append(width[c], '-');
    }
    out += '\n';
  };
  const auto put_row = [&](const row& r) {
    for (std::size_t c = 0; c < columns; ++c) {
      const std::size_t pad = width[c] - detail::display_width(r[c]);
      if (c) out += "  ";
      if (c == 0)
        out.append(r[c]).append(pad, ' ');  // names left, numbers right
      else
        out.append(pad, ' ').append(r[c]);
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    out += '\n';
  };
  put_rule();
  put_row(rows[0]);
  put_rule();
  for (std::size_t i = 1; i < rows.size(); ++i) {
    if (i + 1 == rows.size() && rows.size() > 2) put_rule();
    put_row(rows[i]);
  }
  if (rows.size() == 1) out += "(no phase recorded)\n";
  put_rule();

  const double wall = wall_seconds();
  out += "wall time ";
  detail::append_fixed(out, wall * 1e3, 3);
  out += " ms (since creation or clear()); in no phase (\"other\") ";
  if (sum_s <= wall) {
    detail::append_fixed(out, (wall - sum_s) * 1e3, 3);
    out += " ms = ";
    detail::append_fixed(out, wall > 0 ? 100 * (wall - sum_s) / wall : 0.0, 1);
    out += "% of wall\n";
  } else {
    out += "none: the phases add up to more (overlapping scopes?)\n";
  }
  const auto mib = [](std::size_t bytes) { return double(bytes) / (1024.0 * 1024.0); };
  const std::size_t current = current_rss_bytes();  // first: peak_rss_bytes() covers it
  out += "peak memory (host RSS) ";
  detail::append_fixed(out, mib(std::max(peak_rss_bytes(), current)), 1);
  out += " MiB, current ";
  detail::append_fixed(out, mib(current), 1);
  out += " MiB; device memory is not recorded\n";
  out += "trace events stored ";
  detail::append_integer(out, static_cast<long long>(stored_));
  out += " of at most ";
  detail::append_integer(out, static_cast<long long>(max_events_));
  out += ", dropped ";
  detail::append_integer(out, static_cast<long long>(dropped_));
  out += '\n';
  return out;
}

inline std::string profiler::trace_text() const {
  std::string out;
  out.reserve(128 + stored_ * 96);
  // Metadata events name the track; pid and tid are fixed (one loop, one thread).
  out +=
      "{\"traceEvents\":[\n"
      "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1,\"tid\":1,\"args\":{\"name\":\"dafuse\"}},"
      "\n"
      "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":1,\"args\":{\"name\":\"training "
      "loop\"}}";
  for (std::size_t i = 0; i < stored_; ++i) {
    const event& e = events_[i];
    out += ",\n{\"name\":\"";
    out += name(e.what);
    out += "\",\"cat\":\"dafuse\",\"ph\":\"X\",\"ts\":";
    detail::append_micros(out,
                          std::chrono::duration_cast<std::chrono::nanoseconds>(e.start).count());
    out += ",\"dur\":";
    detail::append_micros(out,
                          std::chrono::duration_cast<std::chrono::nanoseconds>(e.duration).count());
    out += ",\"pid\":1,\"tid\":1}";
  }
  out += "\n],\n\"displayTimeUnit\":\"ms\",\n\"otherData\":{\"producer\":\"dafuse ";
  detail::append_integer(out, DAFUSE_VERSION_MAJOR);
  out += '.';
  detail::append_integer(out, DAFUSE_VERSION_MINOR);
  out += '.';
  detail::append_integer(out, DAFUSE_VERSION_PATCH);
  out += "\",\"events_stored\":";
  detail::append_integer(out, static_cast<long long>(stored_));
  out += ",\"events_dropped\":";
  detail::append_integer(out, static_cast<long long>(dropped_));
  out += ",\"wall_us\":";
  detail::append_micros(
      out, std::chrono::duration_cast<std::chrono::nanoseconds>(clock::now() - origin_).count());
  const std::size_t current = current_rss_bytes();
  out += ",\"peak_rss_bytes\":";
  detail::append_integer(out, static_cast<long long>(std::max(peak_rss_bytes(), current)));
  out += ",\"current_rss_bytes\":";
  detail::append_integer(out, static_cast<long long>(current));
  out += ",\"device_memory\":\"not recorded\"}}\n";
  return out;
}

inline void profiler::write_chrome_trace(std::ostream& out) const {
  const std::string text = trace_text();
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
}

inline void profiler::write_chrome_trace(const std::filesystem::path& path) const {
  detail::write_file_atomically(path, std::string_view(trace_text()));
}

}  // namespace dafuse
