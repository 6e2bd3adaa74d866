// SPDX-License-Identifier: Apache-2.0
//! @file backend/host/team.hpp
//! @brief One OpenMP team held for a whole step, its threads handed each parallel product.
//!
//! A dense step runs about ten parallel pieces (the split products, the update). A
//! `#pragma omp parallel` region for each costs libgomp's fork and join, a release and an arrival,
//! each a cache line passed between the cores and back: several line round trips a piece.
//!
//! with_thread_team(body) opens one region for the step: thread 0 runs body() (the step, serial
//! parts included) and the other threads wait, spinning, for work. Inside it, run_on_team(n, job)
//! hands job(me, team, sync) to the held threads: one store that they see, and one store each
//! back when they finish, so a piece starts and ends in about one line's round trip. Outside a
//! held team, run_on_team opens an OpenMP region of n threads as before, so every caller (the
//! eager step, predict, a product called on its own) keeps working unchanged.
//!
//! The jobs are the same code either way: a job loops over its blocks as `for (b = me; b <
//! blocks; b += team)`, and `sync()` is a barrier among the team's `team` threads (`#pragma omp
//! barrier` in an OpenMP region). Values do not depend on which path ran them. Jobs and barriers
//! are passed through one pointer each (team_job, team_sync), so that a job's body is compiled
//! once and the hand-over once for all jobs (docs/benchmarks.md, "Compile time").
//!
//! A held team pays only while its threads run when work is posted. On a machine with more
//! runnable threads than cores, a helper that the scheduler has taken off its core holds up every
//! job until its next time slice (milliseconds). team_pacer compares a held step's time in its
//! jobs with the work its threads did there and, when the team costs more than the calling thread
//! alone would, holds a team whose threads sleep at once, then runs the steps on the calling
//! thread (a team of one), and later tries spinning again. Jobs loop over their parts, not over
//! the threads, so the values are the same bits at every level.
#pragma once
#include <dafuse/config.hpp>

#include <dafuse/backend/host/idle_processors.hpp>
#include <dafuse/backend/host/tuning.hpp>
#include <dafuse/core/error.hpp>
#include <dafuse/core/meta.hpp>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>

#if defined(_OPENMP)
#include <omp.h>
#endif
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif
#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace dafuse::backend::host {

namespace detail {

//! A counter other threads wait on, alone in its 64-byte line (so a thread waiting on one does
//! not take the line another thread is writing), with a count of the threads asleep on it, so
//! that publishing wakes them with a system call only when there are some. 32 bits: on Linux a
//! sleeper sleeps on the counter itself (a futex). Generations wrap around; only equality is
//! compared.
struct alignas(64) line_counter {
  std::atomic<std::uint32_t> value{0};
  std::atomic<std::uint32_t> sleepers{0};

  void publish(std::uint32_t v) {
    // Sequentially consistent, as the sleeper's count-then-check: either the sleeper sees the
    // new value and does not sleep, or the publisher sees the sleeper and wakes it.
    value.store(v, std::memory_order_seq_cst);
    if (sleepers.load(std::memory_order_seq_cst) != 0) wake_all();
  }

  //! Sleeps while the counter holds `old` (may return early: callers check again).
  void sleep_while(std::uint32_t old) {
    sleepers.fetch_add(1, std::memory_order_seq_cst);
    if (value.load(std::memory_order_seq_cst) == old) {
#if defined(__linux__)
      syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&value), FUTEX_WAIT_PRIVATE, old, nullptr,
              nullptr, 0);
#else
      value.wait(old, std::memory_order_seq_cst);
#endif
    }
    sleepers.fetch_sub(1, std::memory_order_seq_cst);
  }

 private:
  void wake_all() {
#if defined(__linux__)
    syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&value), FUTEX_WAKE_PRIVATE, INT_MAX,
            nullptr, nullptr, 0);
#else
    value.notify_all();
#endif
  }
};
static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t));

//! Waits until `c` no longer holds `old` and returns what it holds: first `spins` reads with the
//! x86 PAUSE hint between them (a wait inside a step is a few µs, and sleeping and waking would
//! cost more), then asleep, so a thread that waits longer gives its core away (a host with more
//! runnable threads than cores, a long serial stretch of the step).
inline std::uint32_t wait_for_change(line_counter& c, std::uint32_t old, int spins) {
  for (int i = 0; i < spins; ++i) {
    const std::uint32_t v = c.value.load(std::memory_order_acquire);
    if (v != old) return v;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  }
  for (;;) {
    const std::uint32_t v = c.value.load(std::memory_order_acquire);
    if (v != old) return v;
    c.sleep_while(old);
  }
}

//! A cheap clock for ratios of times measured on one thread: the time-stamp counter on x86
//! (invariant on the processors dafuse targets), steady_clock's ticks elsewhere.
inline std::uint64_t ticks() {
#if defined(__x86_64__) || defined(__i386__)
  return __rdtsc();
#else
  return std::uint64_t(std::chrono::steady_clock::now().time_since_epoch().count());
#endif
}

}  // namespace detail

//! The barrier a job's threads meet at: sync() returns once every thread of the job has called
//! it. One type for the three barriers (none for a team of one, OpenMP's, a held team's), so that
//! each job's body is compiled once, not once per barrier.
class team_sync {
 public:
  //! No barrier: a team of one.
  team_sync() = default;
  //! Calls barrier() (which outlives this).
  template <class Barrier>
  explicit team_sync(Barrier& barrier)
      : barrier_(&barrier), call_([](void* b) { (*static_cast<Barrier*>(b))(); }) {}
  void operator()() const {
    if (call_) call_(barrier_);
  }

 private:
  void* barrier_ = nullptr;
  void (*call_)(void*) = nullptr;
};

//! A job run_on_team runs: job(me, team, sync) on each of its threads, called through one
//! pointer, so that the code that deals jobs to threads (an OpenMP region, a held team's
//! hand-over) is compiled once rather than once per job.
class team_job {
 public:
  template <class Job>
  explicit team_job(Job& job)
      : job_(&job), call_([](void* j, int me, int team, const team_sync& sync) {
          (*static_cast<Job*>(j))(me, team, sync);
        }) {}
  void operator()(int me, int team, const team_sync& sync) const { call_(job_, me, team, sync); }

 private:
  void* job_;
  void (*call_)(void*, int, int, const team_sync&);
};

//! How a step's team runs: `adaptive` (the default) holds it while it pays for itself (see
//! team_pacer), `parallel` always, `serial` never (every job on the calling thread: the same bits,
//! for checks and for timing one against the other). DAFUSE_TEAM_PACING sets it for a process.
enum class team_pacing { adaptive, parallel, serial };

//! DAFUSE_TEAM_PACING's value: adaptive when unset or empty; anything but the three names throws.
inline team_pacing team_pacing_from_environment() {
  const char* v = std::getenv("DAFUSE_TEAM_PACING");
  if (!v || !*v || !std::strcmp(v, "adaptive")) return team_pacing::adaptive;
  if (!std::strcmp(v, "parallel")) return team_pacing::parallel;
  if (!std::strcmp(v, "serial")) return team_pacing::serial;
  std::string found = "'";
  for (const char* c = v; *c && found.size() < 40; ++c)
    found += std::isprint(static_cast<unsigned char>(*c)) ? *c : '?';
  fail("environment", "DAFUSE_TEAM_PACING", "adaptive, parallel or serial", found + "'");
}

//! How a held team's waiting threads wait, and whether a step holds a team at all: the levels a
//! team_pacer moves through on a busy machine.
enum class team_level {
  spinning,  //!< held; waiters spin (team_spins) before they sleep: the fastest on a quiet machine
  sleeping,  //!< held; waiters sleep at once, so a woken one is scheduled ahead of a busy process
  caller,    //!< not held: every job runs on the calling thread (a team of one)
};

//! Decides, step by step, how a step runs its team.
//!
//! In a held step, thread 0 spends `held` ticks in the team's jobs, from posting each to the last
//! thread's end; each thread works (outside its waits at barriers) for some ticks, and their sum is
//! about what the jobs would take on the calling thread alone. The team loses when that sum is
//! less than `held`. On a quiet machine the waits are a handoff's microseconds; with a helper
//! taken off its core by the scheduler they are time slices.
//!
//! The held steps of a window are judged after each: a window is lost as soon as they lose (a held
//! step beside busy processes can cost several steps on one thread, so a losing window is cut
//! short) and won after `window` steps that do not. A lost window moves one level down (spinning
//! → sleeping → caller) for `backoff` steps, and each loss doubles the backoff up to max_backoff;
//! when the backoff runs out the team spins again, and a won window of spinning resets it.
//!
//! A step kept on the calling thread goes back to the team only when the processors sat idle
//! since it went there (idle_processors.hpp: at least team_idle_to_return processors on average,
//! judged over at least team_idle_min_seconds): a machine that stays busy so pays no held steps
//! to find out that it still is. Where the idle time cannot be read, the team is tried when the
//! backoff runs out.
class team_pacer {
 public:
  static constexpr int window = detail::team_window;  //!< held steps judged together
  //! Steps one level down after a first lost window.
  static constexpr int first_backoff = detail::team_first_backoff;
  //! The longest stay before spinning is tried again.
  static constexpr int max_backoff = detail::team_max_backoff;

  //! `idle`: where the time and the processors' idle time are read (tests pass their own).
  explicit team_pacer(team_pacing pacing = team_pacing_from_environment(), idle_source idle = {})
      : pacing_(pacing), idle_(idle) {}

  team_pacing pacing() const { return pacing_; }
  //! How the next step runs its team.
  team_level level() const {
    switch (pacing_) {
      case team_pacing::parallel:
        return team_level::spinning;
      case team_pacing::serial:
        return team_level::caller;
      default:
        return level_;
    }
  }
  //! Steps before spinning is tried again (0 while spinning).
  int steps_left() const { return left_; }

  //! After a held step: thread 0's ticks in the team's jobs, and the ticks of work its threads
  //! did in them (outside their waits), summed.
  void held_step(std::uint64_t held, std::uint64_t work) {
    if (pacing_ != team_pacing::adaptive) return;
    held_ += held;
    work_ += work;
    ++steps_;
    const bool lost = held_ > work_;
    if (lost) {
      level_ = level_ == team_level::spinning ? team_level::sleeping : team_level::caller;
      if (level_ == team_level::caller) off_since_ = idle_.sample();
      left_ = backoff_;
      backoff_ = std::min(2 * backoff_, max_backoff);
    } else if (steps_ == window && level_ == team_level::spinning) {
      backoff_ = first_backoff;
    }
    if (lost || steps_ == window) steps_ = 0, held_ = work_ = 0;
    count_down();
  }
  //! After a step run on the calling thread.
  void caller_step() {
    if (pacing_ == team_pacing::adaptive) count_down();
  }

 private:
  void count_down() {
    if (left_ > 0 && --left_ == 0) {
      if (level_ == team_level::caller && !processors_were_idle()) {
        left_ = backoff_;
        return;
      }
      level_ = team_level::spinning;
      steps_ = 0, held_ = work_ = 0;
    }
  }

  //! Whether to try the team again: yes where the idle time cannot be read; no while the stay is
  //! too short to read it from (under team_idle_min_seconds: the clock alone is read then); else
  //! whether the processors sat idle enough since the team went off. A judged stretch starts the
  //! next.
  bool processors_were_idle() {
    if (!off_since_.known) return true;
    if (idle_.seconds() - off_since_.wall_seconds < detail::team_idle_min_seconds) return false;
    const idle_sample sample = idle_.sample();
    const double idle = idle_processors_between(off_since_, sample);
    off_since_ = sample;
    return idle < 0 || idle >= detail::team_idle_to_return;
  }

  team_pacing pacing_;
  idle_source idle_;
  idle_sample off_since_;  // the idle time when the team went off (or was last judged to stay off)
  team_level level_ = team_level::spinning;
  int steps_ = 0;
  std::uint64_t held_ = 0, work_ = 0;
  int left_ = 0;
  int backoff_ = first_backoff;
};

//! The threads of one OpenMP region, held by with_thread_team: thread 0 posts jobs, threads 1 to
//! size − 1 run their share of each and report back. Used only through with_thread_team and
//! run_on_team.
class thread_team {
 public:
  //! The most threads a team holds (a larger OpenMP team is capped to it).
  static constexpr int max_threads = 256;

  //! A team of `size` threads on a machine with `processors` of them (omp_get_num_procs()),
  //! whose waiting threads spin as libgomp's do (see spin_count), or sleep at once when
  //! `sleeping` (unless OMP_WAIT_POLICY=active).
  thread_team(int size, int processors, bool sleeping = false)
      : size_(size), spins_(spin_count(size, processors, sleeping)) {}
  thread_team(const thread_team&) = delete;
  thread_team& operator=(const thread_team&) = delete;

  int size() const { return size_; }

  //! The team the calling thread holds, if any (set on thread 0 while with_thread_team runs).
  static thread_team*& held() {
    static thread_local thread_team* team = nullptr;
    return team;
  }

  //! Thread 0: runs job(me, n, sync) on threads 0 to n − 1 (n ≤ size()) and returns when all
  //! have finished. A job run from inside a job (which no product does) runs on its caller alone.
  //! A job must not throw: an exception ends the program (as one leaving an OpenMP region does),
  //! where it would otherwise leave the other threads waiting at its barrier.
  void run(int n, team_job job) {
    if (busy_ || n <= 1) {
      job(0, 1, team_sync{});
      return;
    }
    busy_ = true;
    job_ = &job;
    count_ = n;
    const std::uint32_t generation = ++generation_;
    const std::uint64_t start = detail::ticks();
    posted_.publish(generation);
    [&]() noexcept { run_share(0); }();
    // Every thread acknowledges every generation (those past n without running the job), so the
    // job's fields may be rewritten once all have.
    const std::uint64_t own_done = detail::ticks();
    accounts_[0].inside += own_done - start;
    for (int t = 1; t < size_; ++t)
      if (done_[t].value.load(std::memory_order_acquire) != generation)
        detail::wait_for_change(done_[t], generation - 1, spins_);
    held_ += detail::ticks() - start;
    busy_ = false;
  }

  //! Threads 1 to size() − 1: run each posted job until stop() is posted.
  void serve(int me) {
    std::uint32_t seen = 0;
    for (;;) {
      seen = detail::wait_for_change(posted_, seen, spins_);
      if (stop_) return;
      if (me < count_) {
        const std::uint64_t start = detail::ticks();
        [&]() noexcept { run_share(me); }();
        accounts_[me].inside += detail::ticks() - start;
      }
      done_[me].publish(seen);
    }
  }

  //! Thread 0: lets the serving threads return.
  void stop() {
    stop_ = true;
    posted_.publish(++generation_);
  }

 private:
  template <class Body>
  friend void with_thread_team(bool, team_pacer*, Body&&);

  // Thread `me`'s share of the posted job, its waits at the job's barriers counted.
  void run_share(int me) {
    const int count = count_;
    std::uint64_t& waited = accounts_[me].waited;
    auto barrier = [this, count, &waited] {
      const std::uint64_t t = detail::ticks();
      sync(count);
      waited += detail::ticks() - t;
    };
    (*job_)(me, count, team_sync(barrier));
  }

  // A barrier among threads 0 to n − 1: the last to arrive resets the count and moves the phase
  // on; the others wait for the phase to move. The phase is read before arriving, so a thread
  // that leaves one barrier and arrives at the next cannot mistake the old phase for the new.
  void sync(int n) {
    const std::uint32_t phase = phase_.value.load(std::memory_order_acquire);
    if (arrived_.value.fetch_add(1, std::memory_order_acq_rel) + 1 == std::uint32_t(n)) {
      arrived_.value.store(0, std::memory_order_relaxed);
      phase_.publish(phase + 1);
      return;
    }
    detail::wait_for_change(phase_, phase, spins_);
  }

  // PAUSEs a waiting thread spins for before it sleeps: longer than any wait inside a step (waking
  // a sleeper can take milliseconds while another process holds its core), fewer with more threads
  // than processors, where the thread waited for may need the waiter's core; none with
  // OMP_WAIT_POLICY=passive or for a sleeping team (team_level), and without end with
  // OMP_WAIT_POLICY=active, as in libgomp.
  static int spin_count(int size, int processors, bool sleeping) {
    const char* policy = std::getenv("OMP_WAIT_POLICY");
    const auto is = [policy](const char* name) {
      if (!policy) return false;
      for (const char *p = policy, *q = name;; ++p, ++q) {
        if (std::tolower(static_cast<unsigned char>(*p)) != *q) return false;
        if (!*p) return true;
      }
    };
    if (is("passive")) return 0;
    if (is("active")) return INT_MAX;
    if (sleeping) return 0;
    return size > processors ? detail::team_spins_oversubscribed : detail::team_spins;
  }

  int size_;
  const int spins_;
  bool busy_ = false;             // thread 0 only
  std::uint32_t generation_ = 0;  // thread 0 only: the last generation posted
  // Written by thread 0 before it posts a generation, read by the others after they see it.
  const team_job* job_ = nullptr;
  int count_ = 0;
  bool stop_ = false;
  std::uint64_t held_ = 0;  // thread 0 only: ticks from posting jobs to their last thread's end
  // Each thread's ticks in jobs and, of those, waiting at barriers: written by that thread alone,
  // read by thread 0 once the region has ended.
  struct alignas(64) account {
    std::uint64_t inside = 0, waited = 0;
  };
  account accounts_[max_threads];
  detail::line_counter posted_, arrived_, phase_;
  detail::line_counter done_[max_threads];
};

//! Runs body() on the calling thread with a thread_team held for it, so that the run_on_team
//! calls inside it reuse one OpenMP region. Runs body() plainly when `wanted` is false (a step
//! with nothing to split would only pay for the region), without OpenMP, with one thread, inside
//! another parallel region or inside another held team. With a pacer, a step it keeps off the team
//! runs body() with a team of one held (every job on the calling thread, no region), and a held
//! step's waits are reported to it. An exception from body() ends the region and is rethrown on
//! the calling thread.
template <class Body>
void with_thread_team(bool wanted, team_pacer* pacer, Body&& body) {
#if defined(_OPENMP)
  if (!wanted || thread_team::held() || omp_in_parallel() || omp_get_max_threads() < 2) {
    body();
    return;
  }
  const team_level level = pacer ? pacer->level() : team_level::spinning;
  if (level == team_level::caller) {
    thread_team alone(1, omp_get_num_procs());
    thread_team::held() = &alone;
    struct release {
      ~release() { thread_team::held() = nullptr; }
    } released;
    body();
    pacer->caller_step();
    return;
  }
  const int threads = std::min(omp_get_max_threads(), thread_team::max_threads);
  thread_team team(threads, omp_get_num_procs(), level == team_level::sleeping);
  std::exception_ptr error;
#pragma omp parallel num_threads(threads)
  {
    const int me = omp_get_thread_num();
    if (me == 0) {
      team.size_ = omp_get_num_threads();  // the region may have fewer threads than asked
      thread_team* const previous = thread_team::held();
      thread_team::held() = &team;
      try {
        body();
      } catch (...) {
        error = std::current_exception();
      }
      thread_team::held() = previous;
      team.stop();
    } else {
      team.serve(me);
    }
  }
  if (error) std::rethrow_exception(error);
  if (pacer) {
    std::uint64_t work = 0;
    for (int t = 0; t < team.size_; ++t)
      work += team.accounts_[t].inside - team.accounts_[t].waited;
    pacer->held_step(team.held_, work);
  }
#else
  (void)wanted;
  (void)pacer;
  body();
#endif
}

//! with_thread_team without a pacer: the team is held whenever it is wanted.
template <class Body>
void with_thread_team(bool wanted, Body&& body) {
  with_thread_team(wanted, static_cast<team_pacer*>(nullptr), std::forward<Body>(body));
}

//! The part that owns block `block` of a range dealt among `parts` in blocks: 0, 1, …, parts − 1,
//! then back from parts − 1 to 0, and so on. Dealt back and forth, the parts' shares of a range
//! whose blocks grow lighter (a vocabulary sorted by frequency) even out; dealt round and round,
//! part 0 would take the heaviest block of every round.
constexpr int dealt_owner(index_t block, int parts) {
  const index_t round = block / parts, place = block % parts;
  return int(round % 2 == 0 ? place : parts - 1 - place);
}

//! Threads a run_on_team call can use: the held team's, else OpenMP's for a new region (1
//! without OpenMP).
inline int available_threads() {
  if (const thread_team* team = thread_team::held()) return team->size();
#if defined(_OPENMP)
  return omp_get_max_threads();
#else
  return 1;
#endif
}

//! run_on_team for a job already wrapped.
inline void run_team_job(int threads, team_job job) {
  if (threads > 1) {
    if (thread_team* team = thread_team::held()) {
      team->run(std::min(threads, team->size()), job);
      return;
    }
#if defined(_OPENMP)
#pragma omp parallel num_threads(threads)
    {
      // An orphaned barrier binds to the region the job runs in.
      auto barrier = [] {
#pragma omp barrier
      };
      job(omp_get_thread_num(), omp_get_num_threads(), team_sync(barrier));
    }
    return;
#endif
  }
  job(0, 1, team_sync{});
}

//! Runs job(me, team, sync) on `threads` threads (me in [0, team), team ≤ threads; sync, a
//! team_sync, a barrier among them): on the held team's threads inside with_thread_team, else in
//! an OpenMP region of its own, else (threads ≤ 1, or no OpenMP) as job(0, 1, no barrier) on the
//! calling thread.
template <class Job>
void run_on_team(int threads, Job&& job) {
  // One thread (a step the pacer keeps on its caller, a small piece) calls the job directly:
  // the same instantiation of its body, without the hand-over's indirect call.
  if (threads <= 1) {
    job(0, 1, team_sync{});
    return;
  }
  run_team_job(threads, team_job(job));
}

}  // namespace dafuse::backend::host
