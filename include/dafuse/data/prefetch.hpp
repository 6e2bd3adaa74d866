// SPDX-License-Identifier: Apache-2.0
//! @file data/prefetch.hpp
//! @brief loader::prefetch's batcher: worker threads assemble batches into a ring ahead of fill().
//!
//! Batches are numbered 0, 1, 2, ... and batch n lives in ring slot n mod Depth. A worker claims
//! the next number and draws its indices under one lock, so the draws happen in batch order and
//! the index sequence is exactly loader::sync's; it then gathers the rows and labels into the
//! slot without the lock, in parallel with the other workers, and marks the slot ready. fill()
//! takes batch `taken` once it is ready, copies it into the step's input and frees the slot; a
//! worker may claim batch n only while n < taken + Depth. So the same seed gives bitwise the same
//! batches as loader::sync, whatever Workers and Depth.
//!
//! Nobody spins: workers sleep on one condition variable while the ring is full, fill() on
//! another while its batch is not ready. The destructor stops and joins every worker, including
//! workers asleep on a full ring. An exception thrown while assembling batch n (a dafuse::error,
//! say) is kept and rethrown by the fill() that would have returned batch n, and by every fill()
//! after it; batches before n are still delivered, and the batcher stays destructible.
#pragma once
#include <dafuse/config.hpp>
#include <dafuse/core/meta.hpp>
#include <dafuse/data/batch_draws.hpp>
#include <dafuse/data/dataset.hpp>
#include <dafuse/policy/loader.hpp>

#include <algorithm>
#include <array>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <limits>
#include <mutex>
#include <span>
#include <thread>
#include <utility>
#include <vector>

namespace dafuse::data {

//! loader::prefetch<Workers, Depth>: Workers persistent threads fill a ring of Depth host staging
//! batches; fill() copies the next one into the step's input. Every buffer is allocated by the
//! constructor: neither fill() nor the workers allocate. `source` and `target` must outlive the
//! batcher; fill() is called from one thread at a time.
template <int Workers, int Depth, class System>
class batcher<loader::prefetch<Workers, Depth>, System> {
  static_assert(System::host_accessible,
                "dafuse: loader::prefetch copies each batch from host memory into the step's "
                "input; a step on a device system (system::cuda) takes loader::resident, which "
                "keeps the data in device memory");

 public:
  //! The first six arguments are every batcher's. `assembly_hook`, for tests and fault
  //! injection, runs in a worker as hook(n) after batch n's indices are drawn (n counts from 0,
  //! the first batch this batcher hands out, whatever first_batch is)
  //! and before its rows are gathered, outside the lock; whatever it throws reaches the fill()
  //! that would have returned batch n. It must be safe to call from several workers at once.
  batcher(const dataset& source,
          const dataset& target,
          index_t batch,
          std::uint64_t seed,
          bool with_target,
          std::uint64_t first_batch = 0,
          std::function<void(std::uint64_t)> assembly_hook = {})
      : source_(source),
        target_(target),
        draws_(source, target, batch, seed, with_target, first_batch),
        hook_(std::move(assembly_hook)) {
    const std::size_t rows = std::size_t(draws_.rows());
    for (slot& s : ring_) {
      s.features.resize(rows * std::size_t(source.width));
      s.labels.resize(std::size_t(batch));
      s.indices.resize(rows);
    }
    workers_.reserve(Workers);
    try {
      for (int i = 0; i < Workers; ++i) workers_.emplace_back([this] { work(); });
    } catch (...) {
      shut_down();  // the threads already started must not outlive a failed constructor
      throw;
    }
  }
  batcher(const batcher&) = delete;  // the workers hold `this`
  batcher& operator=(const batcher&) = delete;
  ~batcher() { shut_down(); }

  //! Copies the next batch into x: [width, 2B or B] and its B source labels into `labels`,
  //! waiting (asleep) until a worker has it ready. A wrong shape is refused before anything is
  //! taken from the ring.
  template <class T>
  void fill(matrix_view<T> x, std::span<std::int32_t> labels) {
    draws_.check(x, labels);  // reads only the shape, which no worker changes
    const auto start = detail::wait_meter::clock::now();
    std::unique_lock lock(mutex_);
    const std::uint64_t n = taken_;
    slot& s = ring_[n % Depth];
    ready_.wait(lock, [&] { return s.ready || failed_at_ <= n; });
    wait_.stop(start);
    if (!s.ready) std::rethrow_exception(error_);  // batch n failed: it never becomes ready
    lock.unlock();
    // No worker touches slot n mod Depth until taken_ passes n, so it is read without the lock.
    std::copy(s.features.begin(), s.features.end(), x.data);
    std::copy(s.labels.begin(), s.labels.end(), labels.begin());
    lock.lock();
    s.ready = false;
    ++taken_;
    lock.unlock();
    space_.notify_one();  // one slot freed: one worker can claim a batch
  }

  //! Seconds fill() spent blocked waiting for a ready batch, over all fills (0 when the workers
  //! keep ahead); the copy into the step's input is not counted.
  double wait_seconds() const { return wait_.total(); }
  //! The same for the last fill().
  double last_wait_seconds() const { return wait_.last(); }

 private:
  static constexpr std::uint64_t no_failure = std::numeric_limits<std::uint64_t>::max();

  //! One staging batch: features [rows, width] row-major (the step input's layout), B labels,
  //! and the indices drawn for it.
  struct slot {
    std::vector<float> features;
    std::vector<std::int32_t> labels;
    std::vector<index_t> indices;
    bool ready = false;  //!< holds batch `taken_ + k` for some k, not yet taken (under mutex_)
  };

  void work() {
    std::unique_lock lock(mutex_);
    for (;;) {
      space_.wait(lock, [&] {
        return stop_ || (failed_at_ == no_failure && claimed_ < taken_ + std::uint64_t(Depth));
      });
      if (stop_) return;
      const std::uint64_t n = claimed_++;
      slot& s = ring_[n % Depth];
      try {
        draws_.draw(s.indices);  // under the lock: draws happen in batch order
      } catch (...) {
        record_failure(n);
        continue;
      }
      lock.unlock();
      try {
        if (hook_) hook_(n);
        detail::gather_on_host(source_, target_, s.indices, s.features, s.labels);
      } catch (...) {
        lock.lock();
        record_failure(n);
        continue;
      }
      lock.lock();
      s.ready = true;
      ready_.notify_one();
    }
  }

  //! Keeps the first error (by batch number) for fill(); no batch after it is claimed.
  void record_failure(std::uint64_t n) {
    if (n < failed_at_) {
      failed_at_ = n;
      error_ = std::current_exception();
    }
    ready_.notify_one();
  }

  void shut_down() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    space_.notify_all();
    for (std::thread& t : workers_)
      if (t.joinable()) t.join();
  }

  const dataset& source_;
  const dataset& target_;
  detail::batch_indices draws_;  // drawn from only under mutex_
  std::array<slot, Depth> ring_;
  std::mutex mutex_;
  std::condition_variable space_;  // workers: a slot was freed, or stop
  std::condition_variable ready_;  // fill(): a batch became ready, or failed
  std::uint64_t claimed_ = 0;      // next batch number a worker will draw
  std::uint64_t taken_ = 0;        // next batch number fill() will return
  std::uint64_t failed_at_ = no_failure;
  std::exception_ptr error_;
  const std::function<void(std::uint64_t)> hook_;  // set before the workers start, then read-only
  bool stop_ = false;
  detail::wait_meter wait_;
  std::vector<std::thread> workers_;  // last: started after everything they read exists
};

}  // namespace dafuse::data
