// SPDX-License-Identifier: Apache-2.0
// Tests for data/prefetch.hpp: loader::prefetch hands out bitwise loader::sync's batches whatever
// its workers and ring depth, refuses bad inputs as the other loaders do, delivers a worker's
// exception to the fill that would have returned the failed batch, shuts down cleanly (also with
// workers asleep on a full ring), leaks no thread across many loaders, and reports its waits.
#include <dafuse/data/prefetch.hpp>
#include "../check.hpp"
#include "tagged_rows.hpp"

#include <dafuse/core/buffer.hpp>
#include <dafuse/core/error.hpp>
#include <dafuse/data/batcher.hpp>
#include <dafuse/data/dataset.hpp>
#include <dafuse/policy/loader.hpp>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace data_prefetch_test {

namespace {

using dafuse::buffer;
using dafuse::index_t;
using dafuse::data::batcher;
using dafuse::data::dataset;
using dafuse::data::domain;
using omp = dafuse::system::omp;
template <int W, int D>
using prefetch = dafuse::loader::prefetch<W, D>;

constexpr index_t width = 5;
constexpr index_t batch = 3;
constexpr std::uint64_t seed = 42;

dataset make_source(index_t rows = 7, index_t w = width, bool labelled = true) {
  return dafuse::test::tagged_source(rows, w, labelled);
}
dataset make_target(index_t rows = 5, index_t w = width) {
  return dafuse::test::tagged_target(rows, w);
}
using dafuse::test::elements;

//! One step's input and labels, filled by any loader.
template <class T = float>
struct batch_buffers {
  explicit batch_buffers(bool with_target)
      : cols((with_target ? 2 : 1) * batch), x(elements(width * cols)), y(elements(batch)) {}
  template <class B>
  void fill_from(B& b) {
    b.fill(x.matrix(width, cols), std::span(y.data(), y.size()));
  }
  bool operator==(const batch_buffers& o) const {
    return std::equal(x.data(), x.data() + x.size(), o.x.data()) &&
           std::equal(y.data(), y.data() + y.size(), o.y.data());
  }
  index_t cols;
  buffer<T> x;
  buffer<std::int32_t> y;
};

//! Threads of this process, from /proc/self/status (Linux).
int thread_count() {
  std::ifstream status("/proc/self/status");
  std::string key;
  while (status >> key) {
    if (key == "Threads:") {
      int n = 0;
      status >> n;
      return n;
    }
    status.ignore(1 << 20, '\n');
  }
  return -1;
}

//! The thread count once it has settled at `expected`, or the last one read after a second: a
//! joined thread may still be counted for a moment while the kernel finishes its exit.
int thread_count_settling_at(int expected) {
  int n = thread_count();
  for (int i = 0; i < 100 && n != expected; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    n = thread_count();
  }
  return n;
}

}  // namespace

TEST_CASE_TEMPLATE("prefetch fills bitwise loader::sync's batches over several epochs",
                   Loader,
                   prefetch<1, 2>,
                   prefetch<1, 5>,
                   prefetch<2, 2>,
                   prefetch<2, 5>,
                   prefetch<4, 2>,
                   prefetch<4, 5>) {
  const dataset source = make_source(), target = make_target();
  for (const bool with_target : {true, false}) {
    CAPTURE(with_target);
    batcher<dafuse::loader::sync, omp> sync(source, target, batch, seed, with_target);
    batcher<Loader, omp> pre(source, target, batch, seed, with_target);
    batch_buffers<float> a(with_target), b(with_target);
    // 60 fills × 3 rows: 25 epochs of the 7 source rows, 36 of the 5 target rows.
    for (int fill = 0; fill < 60; ++fill) {
      CAPTURE(fill);
      a.fill_from(sync);
      b.fill_from(pre);
      REQUIRE(a == b);
    }
  }
}

TEST_CASE("prefetch converts to the step's value type as loader::sync does") {
  const dataset source = make_source(), target = make_target();
  batcher<dafuse::loader::sync, omp> sync(source, target, batch, seed, true);
  batcher<prefetch<2, 3>, omp> pre(source, target, batch, seed, true);
  batch_buffers<double> a(true), b(true);
  for (int fill = 0; fill < 10; ++fill) {
    a.fill_from(sync);
    b.fill_from(pre);
    REQUIRE(a == b);
  }
}

TEST_CASE("a prefetch fill of the wrong shape is refused and takes no batch from the ring") {
  const dataset source = make_source(), target = make_target();
  batcher<dafuse::loader::sync, omp> sync(source, target, batch, seed, true);
  batcher<prefetch<2, 2>, omp> pre(source, target, batch, seed, true);
  buffer<float> wrong(elements((width + 1) * 2 * batch));
  buffer<std::int32_t> y(elements(batch + 1));
  CHECK_THROWS_WITH_AS(
      pre.fill(wrong.matrix(width + 1, 2 * batch), std::span(y.data(), std::size_t(batch))),
      doctest::Contains("batcher: step input: expected [5, 6] with 3 labels, "
                        "found [6, 6] with 3 labels"),
      dafuse::error);
  CHECK_THROWS_WITH_AS(pre.fill(wrong.matrix(width, 2 * batch), std::span(y.data(), y.size())),
                       doctest::Contains("found [5, 6] with 4 labels"), dafuse::error);
  batch_buffers<float> a(true), b(true);
  for (int fill = 0; fill < 4; ++fill) {
    a.fill_from(sync);
    b.fill_from(pre);
    REQUIRE(a == b);
  }
}

TEST_CASE("prefetch refuses a target of another width and an unlabelled source at construction") {
  const dataset source = make_source(), narrow = make_target(5, width - 1);
  using loader_batcher = batcher<prefetch<2, 4>, omp>;
  const int threads = thread_count();
  CHECK_THROWS_WITH_AS(loader_batcher(source, narrow, batch, seed, true),
                       doctest::Contains("target.npy: feature width: expected 5 (the source's, "
                                         "source.npy), found 4"),
                       dafuse::error);
  const dataset unlabelled = make_source(7, width, false), target = make_target();
  CHECK_THROWS_WITH_AS(loader_batcher(unlabelled, target, batch, seed, true),
                       doctest::Contains("source.npy: labels"), dafuse::error);
  CHECK_THROWS_WITH_AS(loader_batcher(source, target, 0, seed, true),
                       doctest::Contains("batcher: batch: expected at least 1"), dafuse::error);
  // The checks come before any worker starts.
  CHECK(thread_count_settling_at(threads) == threads);
  // Without target rows the target's width does not matter.
  loader_batcher source_only(source, narrow, batch, seed, false);
  batch_buffers<float> b(false);
  CHECK_NOTHROW(b.fill_from(source_only));
}

TEST_CASE_TEMPLATE("an exception in a worker reaches the fill that would return its batch",
                   Loader,
                   prefetch<1, 2>,
                   prefetch<2, 4>,
                   prefetch<4, 2>) {
  const dataset source = make_source(), target = make_target();
  batcher<dafuse::loader::sync, omp> sync(source, target, batch, seed, true);
  constexpr std::uint64_t bad = 6;
  batcher<Loader, omp> pre(source, target, batch, seed, true, 0, [](std::uint64_t n) {
    if (n == bad) dafuse::fail("test worker", "batch " + std::to_string(n), "no failure", "one");
  });
  batch_buffers<float> a(true), b(true);
  for (std::uint64_t fill = 0; fill < bad; ++fill) {
    CAPTURE(fill);
    a.fill_from(sync);
    REQUIRE_NOTHROW(b.fill_from(pre));
    REQUIRE(a == b);
  }
  const char* message = "test worker: batch 6: expected no failure, found one";
  CHECK_THROWS_WITH_AS(b.fill_from(pre), doctest::Contains(message), dafuse::error);
  // The batcher stays broken (never a later batch in place of the lost one) and destructible.
  CHECK_THROWS_WITH_AS(b.fill_from(pre), doctest::Contains(message), dafuse::error);
}

TEST_CASE("a non-dafuse exception in a worker keeps its type and message") {
  const dataset source = make_source(), target = make_target();
  batcher<prefetch<2, 2>, omp> pre(source, target, batch, seed, true, 0, [](std::uint64_t n) {
    if (n == 3) throw std::out_of_range("injected at batch 3");
  });
  batch_buffers<float> b(true);
  for (int fill = 0; fill < 3; ++fill) REQUIRE_NOTHROW(b.fill_from(pre));
  CHECK_THROWS_WITH_AS(b.fill_from(pre), "injected at batch 3", std::out_of_range);
}

TEST_CASE("a prefetch batcher is destroyed cleanly with its workers asleep on a full ring") {
  const dataset source = make_source(), target = make_target();
  const int threads = thread_count();
  {
    batcher<prefetch<4, 2>, omp> pre(source, target, batch, seed, true);
    batch_buffers<float> b(true);
    b.fill_from(pre);
    // The ring refills to Depth batches at once; then all four workers wait for space.
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    CHECK(thread_count() == threads + 4);
  }
  CHECK(thread_count_settling_at(threads) == threads);
  {
    // Destroyed at once: workers may be mid-draw or mid-gather.
    batcher<prefetch<4, 3>, omp> pre(source, target, batch, seed, true);
  }
  {
    // Destroyed with a failed batch and workers asleep after the failure.
    batcher<prefetch<2, 2>, omp> pre(source, target, batch, seed, true, 0, [](std::uint64_t n) {
      if (n >= 2) throw std::runtime_error("stop here");
    });
    batch_buffers<float> b(true);
    b.fill_from(pre);
    b.fill_from(pre);
    CHECK_THROWS_AS(b.fill_from(pre), std::runtime_error);
  }
  CHECK(thread_count_settling_at(threads) == threads);
}

TEST_CASE("200 prefetch batchers created and destroyed leave no thread behind") {
  const dataset source = make_source(), target = make_target();
  const int threads = thread_count();
  REQUIRE(threads > 0);
  batch_buffers<float> b(true);
  for (int i = 0; i < 200; ++i) {
    auto pre = std::make_unique<batcher<prefetch<3, 4>, omp>>(source, target, batch,
                                                              std::uint64_t(i), true);
    for (int fill = 0; fill < i % 4; ++fill) b.fill_from(*pre);  // some never filled
  }
  CHECK(thread_count_settling_at(threads) == threads);
}

TEST_CASE("every loader reports its wait for data, cumulative and of the last fill") {
  const dataset source = make_source(), target = make_target();
  batcher<dafuse::loader::sync, omp> sync(source, target, batch, seed, true);
  batcher<dafuse::loader::resident, omp> resident(source, target, batch, seed, true);
  batcher<prefetch<2, 4>, omp> pre(source, target, batch, seed, true);
  CHECK(sync.wait_seconds() == 0);
  CHECK(pre.wait_seconds() == 0);
  batch_buffers<float> b(true);
  double sum = 0;
  for (int fill = 0; fill < 8; ++fill) {
    b.fill_from(pre);
    CHECK(pre.last_wait_seconds() >= 0);
    sum += pre.last_wait_seconds();
    b.fill_from(sync);
    b.fill_from(resident);
  }
  CHECK(pre.wait_seconds() == doctest::Approx(sum));
  CHECK(pre.wait_seconds() >= 0);
  // For sync and resident the whole fill is waiting: some time always passes.
  CHECK(sync.wait_seconds() > 0);
  CHECK(sync.last_wait_seconds() <= sync.wait_seconds());
  CHECK(resident.wait_seconds() > 0);
}

TEST_CASE("prefetch's wait counts the time a fill is blocked on a slow worker") {
  const dataset source = make_source(), target = make_target();
  // Batches from 2 on take at least 20 ms each to assemble; the caller does nothing else.
  batcher<prefetch<1, 2>, omp> pre(source, target, batch, seed, true, 0, [](std::uint64_t n) {
    if (n >= 2) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  });
  batch_buffers<float> b(true);
  for (int fill = 0; fill < 2; ++fill) b.fill_from(pre);
  const double before = pre.wait_seconds();
  for (int fill = 0; fill < 3; ++fill) b.fill_from(pre);
  // Three slow batches, of which at most one (batch 2) was under way before the loop.
  CHECK(pre.wait_seconds() - before >= 0.030);
  CHECK(pre.last_wait_seconds() >= 0.010);
}

}  // namespace data_prefetch_test
