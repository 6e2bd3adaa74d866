// SPDX-License-Identifier: Apache-2.0
// Tests for backend/host/team.hpp: run_on_team gives every thread number in [0, team) once
// per job, with or without a held team; sync() is a barrier (what each thread wrote before it
// is seen by all after it, over many rounds); jobs posted one after another on a held team see
// each other's writes; a job posted from inside a job runs on its caller; with_thread_team runs
// its body plainly when not wanted, nested, or inside another parallel region; and an exception
// from the body reaches the caller with the team released, so the next team starts cleanly.
#include <dafuse/backend/host/team.hpp>
#include "../check.hpp"

#if defined(_OPENMP)
#include <omp.h>
#endif

#include <atomic>
#include <stdexcept>
#include <vector>

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
  std::vector<std::atomic<int>> runs(std::size_t(host::thread_team::max_threads));
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
