// SPDX-License-Identifier: Apache-2.0
// Tests for backend/host/team.hpp: run_on_team gives every thread number in [0, team) once
// per job, with or without a held team; sync() is a barrier (what each thread wrote before it
// is seen by all after it, over many rounds); jobs posted one after another on a held team see
// each other's writes; a job posted from inside a job runs on its caller; with_thread_team runs
// its body plainly when not wanted, nested, or inside another parallel region; and an exception
// from the body reaches the caller with the team released, so the next team starts cleanly. The
// pacer moves down its levels on lost windows, back up when its backoff runs out, and a step it
// keeps off the team holds a team of one; DAFUSE_TEAM_PACING names its mode or is refused.
#include <dafuse/backend/host/team.hpp>
#include "../check.hpp"

#if defined(_OPENMP)
#include <omp.h>
#endif

#include <atomic>
#include <chrono>
#include <cstring>
#include <stdexcept>
#include <thread>
#include <vector>

namespace backend_team_test {

namespace {

namespace host = dafuse::backend::host;

//! Threads a run_on_team call outside a held team gets here.
int max_threads() {
#if defined(_OPENMP)
  return omp_get_max_threads();
#else
  return 1;
#endif
}

//! Runs one job of `threads` threads and returns how often each thread number ran, and the team
//! size each saw (all must agree).
std::vector<int> numbers_seen(int threads, int& team_seen) {
  std::vector<std::atomic<int>> runs(static_cast<std::size_t>(host::thread_team::max_threads));
  std::atomic<int> team{0};
  host::run_on_team(threads, [&](int me, int count, auto&&) {
    runs[std::size_t(me)].fetch_add(1);
    int expected = 0;
    if (!team.compare_exchange_strong(expected, count) && expected != count) team.store(-1);
  });
  team_seen = team.load();
  std::vector<int> out;
  for (int t = 0; t < team_seen && team_seen > 0; ++t) out.push_back(runs[std::size_t(t)].load());
  int beyond = 0;
  for (std::size_t t = std::size_t(std::max(team_seen, 0)); t < runs.size(); ++t)
    beyond += runs[t].load();
  CHECK(beyond == 0);
  return out;
}

//! Every thread number of the team runs once, and the team is no larger than asked.
void check_every_number_once(int threads) {
  int team = 0;
  const std::vector<int> runs = numbers_seen(threads, team);
  REQUIRE(team >= 1);
  CHECK(team <= std::max(threads, 1));
  for (int r : runs) CHECK(r == 1);
}

//! Rounds of: each thread writes its slot, sync(), each thread checks every slot, sync(). A
//! barrier that let a thread through early would show a stale slot.
void check_barrier(int threads, int rounds) {
  std::vector<int> slots(std::size_t(host::thread_team::max_threads), -1);
  std::atomic<int> stale{0};
  host::run_on_team(threads, [&](int me, int team, auto&& sync) {
    for (int r = 0; r < rounds; ++r) {
      slots[std::size_t(me)] = r;
      sync();
      for (int t = 0; t < team; ++t)
        if (slots[std::size_t(t)] != r) stale.fetch_add(1);
      sync();
    }
  });
  CHECK(stale.load() == 0);
}

}  // namespace

TEST_CASE("run_on_team runs each thread number once, in a region of its own") {
  CHECK(host::thread_team::held() == nullptr);
  check_every_number_once(1);
  check_every_number_once(2);
  check_every_number_once(max_threads());
  check_barrier(max_threads(), 200);
  int team = 0;
  numbers_seen(0, team);  // no threads asked: the caller alone
  CHECK(team == 1);
}

TEST_CASE("run_on_team on a held team: each number once, a barrier, writes seen by the next job") {
  bool held = false;
  host::with_thread_team(true, [&] {
    held = host::thread_team::held() != nullptr;
    if (max_threads() > 1) {
      REQUIRE(host::thread_team::held() != nullptr);
      CHECK(host::available_threads() == host::thread_team::held()->size());
    }
    for (int job = 0; job < 50; ++job) {
      check_every_number_once(host::available_threads());
      check_every_number_once(2);
      check_every_number_once(1);
    }
    check_barrier(host::available_threads(), 2000);
    // One job's plain writes are seen by the next job on any thread (each job ends with every
    // thread's release and thread 0's acquire, and starts with the reverse).
    const int threads = host::available_threads();
    std::vector<long> values(std::size_t(threads), 0);
    std::atomic<long> wrong{0};
    for (int job = 1; job <= 500; ++job) {
      host::run_on_team(threads, [&](int me, int team, auto&&) {
        if (values[std::size_t((me + 1) % team)] != job - 1) wrong.fetch_add(1);
      });
      host::run_on_team(threads, [&](int me, int, auto&&) { values[std::size_t(me)] = job; });
    }
    CHECK(wrong.load() == 0);
  });
  CHECK(held == (max_threads() > 1));
  CHECK(host::thread_team::held() == nullptr);
}

TEST_CASE("a job posted from inside a job runs on its caller alone") {
  host::with_thread_team(true, [&] {
    std::atomic<int> inner_runs{0}, inner_team{0};
    host::run_on_team(host::available_threads(), [&](int me, int, auto&&) {
      if (me != 0) return;
      host::run_on_team(host::available_threads(), [&](int, int team, auto&&) {
        inner_runs.fetch_add(1);
        inner_team.store(team);
      });
    });
    CHECK(inner_runs.load() == 1);
    CHECK(inner_team.load() == 1);
  });
}

TEST_CASE("with_thread_team runs its body plainly when not wanted, nested or inside a region") {
  host::with_thread_team(false, [] { CHECK(host::thread_team::held() == nullptr); });
  host::with_thread_team(true, [] {
    host::thread_team* const outer = host::thread_team::held();
    host::with_thread_team(true, [&] { CHECK(host::thread_team::held() == outer); });
    CHECK(host::thread_team::held() == outer);
  });
#if defined(_OPENMP)
  int held_inside = 0;
#pragma omp parallel num_threads(2) reduction(+ : held_inside)
  host::with_thread_team(true, [&] {
    if (host::thread_team::held()) ++held_inside;
    check_every_number_once(2);  // a nested region: one thread, inactive
  });
  CHECK(held_inside == 0);
#endif
}

TEST_CASE("an exception from the body reaches the caller and releases the team") {
  int body_runs = 0;
  CHECK_THROWS_WITH_AS(host::with_thread_team(true,
                                              [&] {
                                                ++body_runs;
                                                check_every_number_once(2);
                                                throw std::runtime_error("dafuse: from body");
                                              }),
                       "dafuse: from body", std::runtime_error);
  CHECK(body_runs == 1);
  CHECK(host::thread_team::held() == nullptr);
  // The next team starts and runs jobs as usual.
  host::with_thread_team(true, [] {
    check_every_number_once(host::available_threads());
    check_barrier(host::available_threads(), 100);
  });
}

// ---- The pacer ------------------------------------------------------------------------------

namespace {
//! Reports `steps` held steps of `held` ticks each, whose threads worked `work` ticks.
void held_steps(host::team_pacer& pacer, int steps, std::uint64_t held, std::uint64_t work) {
  for (int s = 0; s < steps; ++s) pacer.held_step(held, work);
}
void caller_steps(host::team_pacer& pacer, int steps) {
  for (int s = 0; s < steps; ++s) pacer.caller_step();
}

//! An idle source that cannot read the idle time (as off Linux): the pacer then tries the team
//! whenever its backoff runs out.
host::idle_source unknown_idle() {
  return {[] { return 0.0; }, [] { return host::idle_sample{}; }};
}

//! A machine the tests drive: the clock and the processors' idle seconds, summed, as the next
//! reads give them; `reads` counts the idle samples taken.
struct fake_machine {
  static inline double now = 0, idle = 0;
  static inline int reads = 0;
  static host::idle_source source() {
    now = idle = 0;
    reads = 0;
    return {[] { return now; },
            [] {
              ++reads;
              return host::idle_sample{true, idle, now};
            }};
  }
  //! `seconds` pass with `processors` of them idle on average.
  static void pass(double seconds, double processors) {
    now += seconds;
    idle += seconds * processors;
  }
};

//! Moves a fresh pacer to the caller level: a lost spinning window, then a lost sleeping step.
void move_to_caller(host::team_pacer& pacer) {
  pacer.held_step(900, 200);
  pacer.held_step(900, 200);
  REQUIRE(pacer.level() == host::team_level::caller);
  REQUIRE(pacer.steps_left() == 2 * host::team_pacer::first_backoff - 1);
}
}  // namespace

TEST_CASE("the pacer keeps a team that pays and moves down a level on a lost window") {
  host::team_pacer pacer(host::team_pacing::adaptive, unknown_idle());
  using level = host::team_level;
  // Two threads that each worked 100 ticks of a 110-tick step: the team pays.
  held_steps(pacer, 10 * host::team_pacer::window, 110, 200);
  CHECK(pacer.level() == level::spinning);
  CHECK(pacer.steps_left() == 0);
  // One step where the others' waits make the step longer than its work alone: lost at once.
  held_steps(pacer, 3, 110, 200);
  pacer.held_step(5000, 200);
  CHECK(pacer.level() == level::sleeping);
  CHECK(pacer.steps_left() == host::team_pacer::first_backoff - 1);
  // Sleeping and losing again: the caller alone, for twice as long.
  pacer.held_step(900, 200);
  CHECK(pacer.level() == level::caller);
  CHECK(pacer.steps_left() == 2 * host::team_pacer::first_backoff - 1);
  caller_steps(pacer, 2 * host::team_pacer::first_backoff - 2);
  CHECK(pacer.level() == level::caller);
  pacer.caller_step();
  CHECK(pacer.level() == level::spinning);  // the backoff ran out: the team is tried again
  // Losing straight away doubles the backoff again; a won window of spinning resets it.
  pacer.held_step(900, 200);
  CHECK(pacer.level() == level::sleeping);
  CHECK(pacer.steps_left() == 4 * host::team_pacer::first_backoff - 1);
  held_steps(pacer, 4 * host::team_pacer::first_backoff - 1, 110, 200);  // sleeping pays
  CHECK(pacer.level() == level::spinning);
  held_steps(pacer, host::team_pacer::window, 110, 200);
  pacer.held_step(900, 200);
  CHECK(pacer.steps_left() == host::team_pacer::first_backoff - 1);
}

TEST_CASE("the pacer judges a window as a whole and caps its backoff") {
  using level = host::team_level;
  host::team_pacer pacer(host::team_pacing::adaptive, unknown_idle());
  // A slow step among fast ones: 15 steps of 100 against 200 of work, then one of 2000: the
  // window's 3500 ticks are more than its 3200 of work.
  held_steps(pacer, 15, 100, 200);
  CHECK(pacer.level() == level::spinning);
  pacer.held_step(2000, 200);
  CHECK(pacer.level() == level::sleeping);
  // Held steps only ever lose from here, at the sleeping and then at the spinning level.
  for (int i = 0; i < 40; ++i) {
    if (pacer.level() == level::caller)
      caller_steps(pacer, pacer.steps_left());
    else
      pacer.held_step(900, 200);
  }
  CHECK(pacer.steps_left() <= host::team_pacer::max_backoff);
  pacer.held_step(900, 200);
  CHECK(pacer.steps_left() == host::team_pacer::max_backoff - 1);
}

TEST_CASE("kept off, the pacer returns to the team only once the processors sat idle") {
  using level = host::team_level;
  host::team_pacer pacer(host::team_pacing::adaptive, fake_machine::source());
  move_to_caller(pacer);
  CHECK(fake_machine::reads == 1);  // the idle time when the team went off
  // The backoff runs out before team_idle_min_seconds: only the clock is read, and the caller
  // keeps the steps for another backoff.
  fake_machine::pass(0.5 * host::detail::team_idle_min_seconds, 1.0);
  caller_steps(pacer, 2 * host::team_pacer::first_backoff - 1);
  CHECK(pacer.level() == level::caller);
  CHECK(fake_machine::reads == 1);
  CHECK(pacer.steps_left() == 4 * host::team_pacer::first_backoff);  // the backoff, doubled twice
  // Long enough, and every processor busy (another process on the other one): still off, with
  // no held step to find out.
  fake_machine::pass(2 * host::detail::team_idle_min_seconds, 0.02);
  caller_steps(pacer, pacer.steps_left());
  CHECK(pacer.level() == level::caller);
  CHECK(fake_machine::reads == 2);
  // Many stretches of a busy machine: never back to the team.
  for (int i = 0; i < 50; ++i) {
    fake_machine::pass(1.5 * host::detail::team_idle_min_seconds, 0.3);
    caller_steps(pacer, pacer.steps_left());
    CHECK(pacer.level() == level::caller);
  }
  // The other process ends: a processor sits idle, and the team is tried again.
  fake_machine::pass(1.5 * host::detail::team_idle_min_seconds, 0.95);
  caller_steps(pacer, pacer.steps_left());
  CHECK(pacer.level() == level::spinning);
  CHECK(fake_machine::reads == 53);
}

TEST_CASE("an idle stretch is judged from the moment the team went off") {
  using level = host::team_level;
  host::team_pacer pacer(host::team_pacing::adaptive, fake_machine::source());
  fake_machine::pass(10.0, 1.0);  // idle before the team went off: not counted
  move_to_caller(pacer);
  fake_machine::pass(1.5 * host::detail::team_idle_min_seconds, 0.0);
  caller_steps(pacer, pacer.steps_left());
  CHECK(pacer.level() == level::caller);
}

TEST_CASE("idle_processors_between divides idle seconds by wall seconds, and knows its limits") {
  const host::idle_sample a{true, 10.0, 100.0}, b{true, 11.5, 102.0};
  CHECK(host::idle_processors_between(a, b) == doctest::Approx(0.75));
  CHECK(host::idle_processors_between(a, a) < 0);                    // no time passed
  CHECK(host::idle_processors_between(host::idle_sample{}, b) < 0);  // unknown
  CHECK(host::idle_processors_between(a, host::idle_sample{}) < 0);
}

TEST_CASE("the idle ticks of the allowed processors' lines are summed, and bad lines refused") {
  const auto sum = [](const char* text, unsigned skip, bool& ok) {
    std::uint64_t ticks = 0;
    ok = host::detail::add_idle_ticks(
        text, text + std::strlen(text), [skip](unsigned cpu) { return cpu != skip; }, ticks);
    return ticks;
  };
  bool ok = false;
  // user nice system idle iowait ...: idle + iowait counts.
  CHECK(sum("cpu3 10 20 30 400 5 6 7 0 0 0", 99, ok) == 405);
  CHECK(ok);
  CHECK(sum("cpu3 10 20 30 400 5 6 7 0 0 0", 3, ok) == 0);  // not in the affinity mask
  CHECK(ok);
  CHECK(sum("cpu  10 20 30 400 5 6 7 0 0 0", 99, ok) == 0);  // the total line
  CHECK(ok);
  CHECK(sum("intr 1 2 3", 99, ok) == 0);
  CHECK(ok);
  sum("cpu12 10 20 x", 99, ok);
  CHECK_FALSE(ok);
  sum("cpu1 10 20 30", 99, ok);  // fewer than five numbers
  CHECK_FALSE(ok);
}

TEST_CASE("the processors' idle time reads on Linux and grows while they idle") {
  const host::idle_sample a = host::sample_idle_processors();
#if defined(__linux__)
  REQUIRE(a.known);
  CHECK(a.idle_seconds >= 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const host::idle_sample b = host::sample_idle_processors();
  REQUIRE(b.known);
  CHECK(b.wall_seconds > a.wall_seconds);
  CHECK(b.idle_seconds >= a.idle_seconds);
  // Never more idle processors than the process may run on (a tick of slack each).
  const double most = double(std::thread::hardware_concurrency()) + 1.0;
  CHECK(host::idle_processors_between(a, b) <= most * (1 + 0.02 / 0.05));
#else
  CHECK_FALSE(a.known);
#endif
}

TEST_CASE("the parallel and serial pacings never move") {
  host::team_pacer parallel(host::team_pacing::parallel), serial(host::team_pacing::serial);
  for (int i = 0; i < 100; ++i) {
    parallel.held_step(1000, 1);
    serial.caller_step();
  }
  CHECK(parallel.level() == host::team_level::spinning);
  CHECK(serial.level() == host::team_level::caller);
}

TEST_CASE("DAFUSE_TEAM_PACING names the pacing, and anything else is refused with its value") {
  using df_pacing = host::team_pacing;
  {
    const dafuse::test::environment_variable unset("DAFUSE_TEAM_PACING", nullptr);
    CHECK(host::team_pacing_from_environment() == df_pacing::adaptive);
  }
  const std::pair<const char*, df_pacing> names[] = {{"", df_pacing::adaptive},
                                                     {"adaptive", df_pacing::adaptive},
                                                     {"parallel", df_pacing::parallel},
                                                     {"serial", df_pacing::serial}};
  for (const auto& [name, pacing] : names) {
    const dafuse::test::environment_variable set("DAFUSE_TEAM_PACING", name);
    CHECK(host::team_pacing_from_environment() == pacing);
  }
  const dafuse::test::environment_variable bad("DAFUSE_TEAM_PACING", "Serial\x1b[2J");
  CHECK(dafuse::test::error_message([] { host::team_pacer p; }) ==
        "dafuse: environment: DAFUSE_TEAM_PACING: expected adaptive, parallel or serial, found "
        "'Serial?[2J'");
}

TEST_CASE("a step the pacer keeps off the team runs every job on the caller, in no region") {
  host::team_pacer pacer(host::team_pacing::serial);
  int runs = 0;
  host::with_thread_team(true, &pacer, [&] {
    REQUIRE(host::thread_team::held() != nullptr);
    CHECK(host::thread_team::held()->size() == 1);
    CHECK(host::available_threads() == 1);
#if defined(_OPENMP)
    CHECK_FALSE(omp_in_parallel());
#endif
    host::run_on_team(2, [&](int me, int team, auto&& sync) {
      sync();
      CHECK(me == 0);
      CHECK(team == 1);
      ++runs;
    });
  });
  CHECK(runs == 1);
  CHECK(host::thread_team::held() == nullptr);
  // An exception leaves no team of one held.
  CHECK_THROWS_AS(host::with_thread_team(true, &pacer, [] { throw std::runtime_error("x"); }),
                  std::runtime_error);
  CHECK(host::thread_team::held() == nullptr);
}

TEST_CASE("a sleeping level still holds a team, and the held step is reported to the pacer") {
  if (max_threads() < 2) return;
  host::team_pacer pacer(host::team_pacing::adaptive);
  pacer.held_step(900, 200);  // lost: the next steps hold a team whose threads sleep at once
  REQUIRE(pacer.level() == host::team_level::sleeping);
  REQUIRE(pacer.steps_left() == host::team_pacer::first_backoff - 1);
  host::with_thread_team(true, &pacer, [&] {
    REQUIRE(host::thread_team::held() != nullptr);
    CHECK(host::thread_team::held()->size() >= 2);
    check_every_number_once(host::available_threads());
    check_barrier(host::available_threads(), 200);
  });
  // Reported: one step fewer to go, or (lost on a busy host) the caller's level for longer.
  const bool counted = pacer.steps_left() == host::team_pacer::first_backoff - 2;
  const bool lost_again = pacer.level() == host::team_level::caller &&
                          pacer.steps_left() == 2 * host::team_pacer::first_backoff - 1;
  CHECK((counted || lost_again));
}

}  // namespace backend_team_test
