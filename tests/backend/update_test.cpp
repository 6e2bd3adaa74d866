// SPDX-License-Identifier: Apache-2.0
// Tests for backend/host/update.hpp: the update pass against a plain per-parameter loop of
// PyTorch's SGD formula (clamped and not, several modules with their own scale and learning
// rate), and the same bits however it is split: one thread, equal slices, the splits of the
// weight gradients' products (by rows, by columns, on one thread, biases between), with a team
// smaller or larger than those splits, in an OpenMP region of its own or on a held team
// (team.hpp); Adam's two state values likewise. Also partition.hpp's
// split_for, which those splits come from.
#include <dafuse/backend/host/update.hpp>
#include "../check.hpp"

#include <dafuse/core/rng.hpp>
#include <dafuse/policy/optim.hpp>

#if defined(_OPENMP)
#include <omp.h>
#endif

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

namespace backend_update_test {

namespace {

namespace host = dafuse::backend::host;
using dafuse::index_t;
using host::detail::product_split;

//! The network's layout: W1 [256, 300], b1, W2 [300, 200] (taller than wide), b2, W3 [3, 40]:
//! more than update_parallel_min parameters, so a split update runs on every thread.
struct layout {
  static constexpr index_t w1 = 0, b1 = w1 + 256 * 300, w2 = b1 + 256, b2 = w2 + 300 * 200,
                           w3 = b2 + 300, end = w3 + 3 * 40;
};
static_assert(layout::end >= host::update_parallel_min);

//! Values in (−1, 1) from `seed`.
std::vector<float> random_values(index_t n, std::uint64_t seed) {
  dafuse::counter_rng rng(seed, dafuse::rng_stream::user);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (float& x : v) x = rng.uniform(-1.0f, 1.0f);
  return v;
}

using dafuse::test::thread_count;

//! The weight blocks of `layout` split as a product over `threads` threads in tiles of 32 rows or
//! 12 columns (W3's is below gemm_parallel_flops: one thread).
std::array<host::weight_block, 3> blocks_for(int threads) {
  const auto block = [&](index_t begin, index_t rows, index_t cols) {
    return host::weight_block{begin, rows, cols,
                              host::detail::split_for(rows, cols, 4096, threads, 32, 12)};
  };
  return {block(layout::w1, 256, 300), block(layout::w2, 300, 200), block(layout::w3, 3, 40)};
}

//! The same, but W1's 300 columns dealt among `parts` in blocks of 32, as a sparse first layer's
//! gradient is written (backend/host/sparse.hpp).
std::array<host::weight_block, 3> dealt_blocks_for(int parts) {
  std::array<host::weight_block, 3> blocks = blocks_for(1);
  blocks[0].split = host::detail::product_split{host::split_along::columns, parts, 300, 0};
  blocks[0].dealt_columns = 32;
  return blocks;
}

//! Two modules: [0, b2 + 300) at scale 0.5, lr 0.1, and W3 at scale 2, lr 0.01.
template <class Optim>
std::array<host::update_region<Optim, float>, 2> two_modules(
    const typename Optim::template coefficients<float>& first,
    const typename Optim::template coefficients<float>& second) {
  return {host::update_region<Optim, float>{0, layout::w3, 0.5f, first},
          host::update_region<Optim, float>{layout::w3, layout::end, 2.0f, second}};
}

using sgd_coefficients = dafuse::optim::sgd::coefficients<float>;
constexpr sgd_coefficients sgd_task{0.1f, 0.9f, 0.0f, 1e-3f, false, false};
constexpr sgd_coefficients sgd_head{0.01f, 0.5f, 0.1f, 0.0f, false, false};

//! Parameters and momentum after one SGD update (limit: the clamp, ∞ for none) with `threads`,
//! `split` and `weights` as given; with `held`, on a team held as a step holds it
//! (backend/host/team.hpp) instead of an OpenMP region of its own.
struct sgd_result {
  std::vector<float> params, state;
};
sgd_result sgd_update(int threads,
                      bool split,
                      std::span<const host::weight_block> weights,
                      double limit,
                      bool held = false) {
  thread_count scope(threads);
  sgd_result r{random_values(layout::end, 1), random_values(layout::end, 3)};
  const std::vector<float> grads = random_values(layout::end, 2);
  host::with_thread_team(held, [&] {
    host::update_parameters<dafuse::optim::sgd, dafuse::system::omp>(
        r.params.data(), grads.data(), r.state.data(), layout::end,
        two_modules<dafuse::optim::sgd>(sgd_task, sgd_head), limit, split, weights);
  });
  return r;
}

//! The same update as a plain loop of PyTorch's SGD: g = clamp(scale·g) + wd·θ,
//! b = μ·b + (1 − dampening)·g, θ = θ − lr·b.
sgd_result sgd_reference(double limit) {
  sgd_result r{random_values(layout::end, 1), random_values(layout::end, 3)};
  const std::vector<float> grads = random_values(layout::end, 2);
  for (index_t i = 0; i < layout::end; ++i) {
    const bool head = i >= layout::w3;
    const sgd_coefficients& c = head ? sgd_head : sgd_task;
    const auto k = static_cast<std::size_t>(i);
    float g = grads[k] * (head ? 2.0f : 0.5f);
    if (std::isfinite(limit)) g = std::fmin(std::fmax(g, -float(limit)), float(limit));
    g += c.weight_decay * r.params[k];
    r.state[k] = c.momentum * r.state[k] + (1.0f - c.dampening) * g;
    r.params[k] -= c.lr * r.state[k];
  }
  return r;
}

}  // namespace

TEST_CASE("split_for covers C in whole tiles along its longer side, one thread below the bound") {
  // Plain variables, not structured bindings: clang before 16 cannot capture those (CAPTURE).
  for (const auto& shape : {std::array<index_t, 3>{256, 300, 4096},
                            {300, 200, 4096},
                            {1024, 64, 1024},
                            {33, 1000, 2048},
                            {3, 40, 4096}}) {
    const index_t m = shape[0], n = shape[1], k = shape[2];
    CAPTURE(m);
    CAPTURE(n);
    for (int threads : {1, 2, 3}) {
      const product_split s = host::detail::split_for(m, n, k, threads, 32, 12);
      CHECK((s.along == host::split_along::rows) == (m > n));
      CHECK(s.side == (m > n ? m : n));
      const bool small = 2.0 * double(m) * double(n) * double(k) < host::gemm_parallel_flops;
      const index_t tile = s.along == host::split_along::rows ? 32 : 12;
      CHECK(s.threads == (small ? 1 : std::min<int>(threads, int((s.side + tile - 1) / tile))));
      index_t next = 0;
      for (int t = 0; t < s.threads; ++t) {
        const auto [first, end] = s.range(t);
        CHECK(first == next);
        CHECK(end >= first);
        if (t + 1 < s.threads) CHECK((end - first) % tile == 0);
        next = end;
      }
      CHECK(next == s.side);
      CHECK(s.range(s.threads).first == s.range(s.threads).second);
    }
  }
  const product_split one = product_split::one_thread(7, 5);
  CHECK(one.threads == 1);
  CHECK(one.range(0) == std::pair<index_t, index_t>{0, 7});
}

TEST_CASE("the SGD update matches a plain loop and gives the same bits however it is split") {
  for (double limit : {std::numeric_limits<double>::infinity(), 0.3}) {
    CAPTURE(limit);
    const sgd_result reference = sgd_reference(limit);
    const sgd_result serial = sgd_update(1, false, {}, limit);
    // To rounding: the compiler may contract the loop's multiply-adds either way.
    CHECK(dafuse::test::max_relative_error(std::span(serial.params), std::span(reference.params)) <
          1e-6);
    CHECK(dafuse::test::max_relative_error(std::span(serial.state), std::span(reference.state)) <
          1e-6);
    // Every split: equal slices, and the products' splits for 1-3 threads run by teams of 1-3.
    for (int team : {1, 2, 3}) {
      CAPTURE(team);
      const sgd_result slices = sgd_update(team, true, {}, limit);
      CHECK(slices.params == serial.params);
      CHECK(slices.state == serial.state);
      for (int built_for : {1, 2, 3}) {
        CAPTURE(built_for);
        const auto blocks = blocks_for(built_for);
        const sgd_result owned = sgd_update(team, true, blocks, limit);
        CHECK(owned.params == serial.params);
        CHECK(owned.state == serial.state);
        const sgd_result on_held_team = sgd_update(team, true, blocks, limit, true);
        CHECK(on_held_team.params == serial.params);
        CHECK(on_held_team.state == serial.state);
        const auto dealt = dealt_blocks_for(built_for);
        for (bool held : {false, true}) {
          const sgd_result dealt_result = sgd_update(team, true, dealt, limit, held);
          CHECK(dealt_result.params == serial.params);
          CHECK(dealt_result.state == serial.state);
        }
      }
    }
  }
}

TEST_CASE("the threads of a team own every parameter once: dealt blocks back and forth") {
  for (int parts : {1, 2, 3, 4}) {
    const auto blocks = dealt_blocks_for(parts);
    for (int team = 1; team <= 4; ++team) {
      CAPTURE(parts);
      CAPTURE(team);
      std::vector<int> owner(static_cast<std::size_t>(layout::end), -1), visits(owner.size(), 0);
      for (int t = 0; t < team; ++t)
        host::for_each_owned_run(blocks, 0, layout::end, t, team, [&](index_t b, index_t e) {
          for (index_t i = b; i < e; ++i) {
            ++visits[static_cast<std::size_t>(i)];
            owner[static_cast<std::size_t>(i)] = t;
          }
        });
      CHECK(std::all_of(visits.begin(), visits.end(), [](int n) { return n == 1; }));
      // W1's column c is in block c / 32, of part dealt_owner(c / 32, parts), which thread
      // part mod team runs; everything outside the weight matrices is thread 0's.
      for (index_t c = 0; c < 300; ++c)
        CHECK(owner[static_cast<std::size_t>(layout::w1 + c * 256)] ==
              host::dealt_owner(c / 32, parts) % team);
      CHECK(owner[static_cast<std::size_t>(layout::w1 + 300 * 256)] == 0);  // b1
    }
  }
}

TEST_CASE("the update refuses a weight block split along the terms") {
  // A weight block follows its gradient's product (rows or columns of ∂L/∂W); a forward product's
  // split along k says nothing about who wrote which part of it.
  std::array<host::weight_block, 3> blocks = blocks_for(2);
  blocks[1].split = host::detail::product_split::even(host::split_along::depth, 200, 2, 32);
  const std::string message =
      dafuse::test::error_message([&] { sgd_update(2, true, blocks, 1.0); });
  CHECK(message.find("weight block split") != std::string::npos);
  CHECK(message.find("one along the terms") != std::string::npos);
}

TEST_CASE("Adam's update gives the same bits with its two state values however it is split") {
  using adam = dafuse::optim::adam;
  const adam::coefficients<float> c =
      adam::make<float>(dafuse::fit_args{.lr = 0.01f, .weight_decay = 1e-4f}, 0.01, 3);
  const auto run = [&](int threads, bool split, std::span<const host::weight_block> weights) {
    thread_count scope(threads);
    std::vector<float> params = random_values(layout::end, 1);
    std::vector<float> state = random_values(2 * layout::end, 3);
    for (std::size_t i = layout::end; i < state.size(); ++i) state[i] = std::fabs(state[i]);
    const std::vector<float> grads = random_values(layout::end, 2);
    host::update_parameters<adam, dafuse::system::omp>(
        params.data(), grads.data(), state.data(), layout::end, two_modules<adam>(c, c),
        std::numeric_limits<double>::infinity(), split, weights);
    params.insert(params.end(), state.begin(), state.end());
    return params;
  };
  const std::vector<float> serial = run(1, false, {});
  const auto blocks = blocks_for(2);
  CHECK(run(2, true, {}) == serial);
  CHECK(run(2, true, blocks) == serial);
  CHECK(run(3, true, blocks) == serial);
  CHECK(run(1, true, blocks) == serial);
}

TEST_CASE("for_each_owned_slice covers a range once: whole-line slices, or each thread its runs") {
  const auto blocks = blocks_for(2);
  for (const auto& run : {std::pair{1, false}, {2, false}, {3, false}, {2, true}, {3, true}}) {
    const int threads = run.first;
    const bool held = run.second;
    CAPTURE(threads);
    CAPTURE(held);  // in a held team (team.hpp) or an OpenMP region of its own
    thread_count scope(threads);
    for (index_t n : {index_t(0), index_t(100), host::update_parallel_min + 37}) {
      CAPTURE(n);
      std::vector<int> visits(static_cast<std::size_t>(n + 10), 0);
      std::vector<std::pair<index_t, index_t>> slices(8, {-1, -1});
      host::with_thread_team(held, [&] {
        host::for_each_owned_slice<dafuse::system::omp, float>(
            {}, 5, 5 + n, [&](index_t b, index_t e) {
#if defined(_OPENMP)
              slices[static_cast<std::size_t>(omp_get_thread_num())] = {b, e};
#else
              slices[0] = {b, e};
#endif
              for (index_t i = b; i < e; ++i) ++visits[static_cast<std::size_t>(i)];
            });
      });
      std::vector<int> once(visits.size(), 0);
      std::fill_n(once.begin() + 5, n, 1);
      CHECK(visits == once);
      // Every slice but the last starts a whole number of 16-float lines after the first.
      for (const auto& [b, e] : slices)
        if (b >= 0 && e < 5 + n) CHECK((e - b) % 16 == 0);
    }
    // With weight blocks, the runs each thread owns (for_each_owned_run), every value once: the
    // same owners as the update's.
    std::vector<int> owner(static_cast<std::size_t>(layout::end), -1);
    std::vector<int> visits(owner.size(), 0);
    host::with_thread_team(held, [&] {
      host::for_each_owned_slice<dafuse::system::omp, float>(
          blocks, 0, layout::end, [&](index_t b, index_t e) {
#if defined(_OPENMP)
            const int me = omp_get_thread_num();
#else
            const int me = 0;
#endif
            for (index_t i = b; i < e; ++i) {
              owner[static_cast<std::size_t>(i)] = me;
              ++visits[static_cast<std::size_t>(i)];
            }
          });
    });
    CHECK(std::all_of(visits.begin(), visits.end(), [](int v) { return v == 1; }));
    std::vector<int> expected(owner.size(), -1);
    for (int t = 0; t < threads; ++t)
      host::for_each_owned_run(blocks, 0, layout::end, t, threads, [&](index_t b, index_t e) {
        std::fill(expected.begin() + b, expected.begin() + e, t);
      });
    CHECK(owner == expected);
  }
}

}  // namespace backend_update_test
