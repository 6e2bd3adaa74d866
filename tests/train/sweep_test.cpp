// sweep: the plan never asks for more threads than processors, bad grids are refused by field,
// the validator's choice and the oracle's are each the plain argmin/argmax of their means, at
// most P trainings run at once on T threads each, and a parallel sweep of real trainings gives
// the same numbers as a serial one and as plain fits.
#include <dafuse/head/dann.hpp>
#include <dafuse/train/sweep.hpp>

#include "../check.hpp"
#include "blobs.hpp"

#include <atomic>
#include <chrono>
#include <cmath>
#include <limits>
#include <span>
#include <stdexcept>
#include <thread>
#include <vector>

namespace train_sweep_test {

namespace df = dafuse;

namespace {
using net = df::nn::dann_net<df::nn::mlp<3, 16, df::nn::tanh>,
                             df::nn::linear<16, 2>,
                             df::nn::mlp<16, 8, 1, df::nn::relu>>;
using dann_step = df::train_step<net,
                                 df::loader::resident,
                                 df::precision::fp32,
                                 df::clip::global_norm,
                                 df::head::dann<df::schedule::ganin>,
                                 df::optim::sgd>;

// Two Gaussian blobs, class = sign of the first coordinate; the target is shifted by `shift`.
df::data::dataset blobs(df::data::domain side, float shift, df::index_t rows, std::uint32_t sub) {
  return df::test::blobs({.seed = 9, .spread = 0.8f, .class0_mean = -1.f, .class1_mean = 1.f}, side,
                         rows, 3, shift, "blobs", sub);
}

const double not_a_number = std::numeric_limits<double>::quiet_NaN();

// A synthetic training: the score and accuracies are functions of the arguments given.
struct synthetic {
  double operator()(const df::fit_args& a) const {
    return (a.lambda_max - 0.3) * (a.lambda_max - 0.3) + 100 * (a.lr - 0.02) * (a.lr - 0.02) +
           1e-3 * double(a.seed);
  }
};
}  // namespace

TEST_CASE("plan_sweep keeps P·T within the processors and uses as many as it may") {
  for (df::index_t runs = 1; runs <= 12; ++runs)
    for (int processors = 1; processors <= 16; ++processors)
      for (int threads = 0; threads <= 5; ++threads)
        for (int most = 0; most <= 4; ++most) {
          const df::sweep_plan p = df::plan_sweep(runs, processors, threads, most);
          const int t = threads > 0 ? threads : 1;
          CHECK(p.threads == t);
          CHECK(p.processors == processors);
          REQUIRE(p.concurrent >= 1);
          CHECK(p.concurrent <= runs);
          if (most > 0) CHECK(p.concurrent <= most);
          if (t <= processors) CHECK(p.concurrent * p.threads <= processors);
          // Maximal: one more training at once would break one of the three limits.
          const int more = p.concurrent + 1;
          CHECK((more > runs || more * t > processors || (most > 0 && more > most)));
        }
  CHECK_THROWS_WITH_AS(df::plan_sweep(0, 2),
                       "dafuse: plan_sweep: runs: expected at least 1, found 0", df::error);
  CHECK_THROWS_WITH_AS(df::plan_sweep(3, 0), doctest::Contains("processors: expected at least 1"),
                       df::error);
  CHECK_THROWS_WITH_AS(df::plan_sweep(3, 2, -1), doctest::Contains("threads_per_run"), df::error);
  CHECK(df::usable_processors() >= 1);
}

TEST_CASE("check_grid refuses empty, negative, non-finite and repeated values by field") {
  const df::sweep_grid good{{0.1f, 1.f}, {0.01f}, {1, 2}};
  CHECK_NOTHROW(df::check_grid(good));
  CHECK(good.configurations() == 2);
  CHECK(good.runs() == 4);
  auto g = good;
  g.lambda_max.clear();
  CHECK_THROWS_WITH_AS(df::check_grid(g),
                       "dafuse: sweep_grid: lambda_max: expected at least one value, found an "
                       "empty list",
                       df::error);
  g = good;
  g.lambda_max[1] = -0.5f;
  CHECK_THROWS_WITH_AS(
      df::check_grid(g),
      doctest::Contains("lambda_max: expected finite values >= 0, found -0.5 at position 1"),
      df::error);
  g = good;
  g.lr = {0.01f, 0.f};
  CHECK_THROWS_WITH_AS(df::check_grid(g), doctest::Contains("lr: expected finite values > 0"),
                       df::error);
  g.lr = {std::numeric_limits<float>::infinity()};
  CHECK_THROWS_WITH_AS(df::check_grid(g), doctest::Contains("lr: expected finite values > 0"),
                       df::error);
  g = good;
  g.lr = {0.01f, 0.01f};
  CHECK_THROWS_WITH_AS(
      df::check_grid(g),
      doctest::Contains("lr: expected distinct values, found 0.01 at positions 0 and 1"),
      df::error);
  g = good;
  g.seeds.clear();
  CHECK_THROWS_WITH_AS(df::check_grid(g), doctest::Contains("seeds: expected at least one seed"),
                       df::error);
  g.seeds = {3, 4, 3};
  CHECK_THROWS_WITH_AS(df::check_grid(g), doctest::Contains("seeds: expected distinct seeds"),
                       df::error);
  // run_sweep checks the grid before it trains anything.
  g = good;
  g.lr.clear();
  int calls = 0;
  CHECK_THROWS_AS(df::run_sweep({}, g, {},
                                [&](const df::fit_args&) {
                                  ++calls;
                                  return df::sweep_run{};
                                }),
                  df::error);
  CHECK(calls == 0);
}

TEST_CASE("the validator's choice and the oracle's are the plain arg-best of their means") {
  const df::sweep_grid g{{0.f, 0.3f, 1.f}, {0.01f, 0.02f, 0.05f}, {1, 2, 3}};
  const synthetic score{};
  // Accuracy peaks at (1, 0.01), away from the score's optimum (0.3, 0.02).
  const auto accuracy = [](const df::fit_args& a) {
    return 0.9 - 0.1 * std::abs(a.lambda_max - 1.0) - std::abs(a.lr - 0.01) + 1e-3 * double(a.seed);
  };
  const auto train = [&](const df::fit_args& a) {
    df::sweep_run r;
    r.score = score(a);
    r.target_accuracy = accuracy(a);
    return r;
  };
  for (const auto v :
       {df::select::validator::entropy, df::select::validator::information_maximization}) {
    CAPTURE(df::select::name(v));
    df::sweep_options o;
    o.selector = v;
    o.processors = 2;
    const df::sweep_result r = df::run_sweep({}, g, o, train);
    REQUIRE(r.configurations.size() == 9);
    REQUIRE(r.runs.size() == 27);
    // The plain reference: means by a loop over the grid, then the arg-min or arg-max.
    df::index_t best = -1, oracle = -1;
    double best_score = 0, best_accuracy = 0;
    for (std::size_t l = 0; l < 3; ++l)
      for (std::size_t k = 0; k < 3; ++k) {
        const auto c = df::index_t(l * 3 + k);
        double s = 0, a = 0;
        for (const std::uint64_t seed : g.seeds) {
          df::fit_args args;
          args.lambda_max = g.lambda_max[l];
          args.lr = g.lr[k];
          args.seed = seed;
          s += score(args) / 3;
          a += accuracy(args) / 3;
        }
        const auto& cr = r.configurations[std::size_t(c)];
        CHECK(cr.lambda_max == g.lambda_max[l]);
        CHECK(cr.lr == g.lr[k]);
        CHECK(cr.score == doctest::Approx(s).epsilon(1e-12));
        CHECK(cr.target_accuracy == doctest::Approx(a).epsilon(1e-12));
        CHECK(cr.target_accuracy_std == doctest::Approx(1e-3).epsilon(1e-6));
        CHECK(std::isnan(cr.test_accuracy));
        const bool higher = df::select::higher_is_better(v);
        if (best < 0 || (higher ? s > best_score : s < best_score)) {
          best = c;
          best_score = s;
        }
        if (oracle < 0 || a > best_accuracy) {
          oracle = c;
          best_accuracy = a;
        }
      }
    CHECK(r.selected == best);
    CHECK(r.oracle == oracle);
    CHECK(r.selected_by == v);
    // Known answers: entropy (lower is better) picks the score's minimum, (0.3, 0.02); IM the
    // maximum, (1, 0.05); the oracle (1, 0.01) either way.
    CHECK(r.selected == (v == df::select::validator::entropy ? 4 : 8));
    CHECK(r.oracle == 6);
    // The runs are in grid order, with their arguments.
    for (std::size_t i = 0; i < r.runs.size(); ++i) {
      CHECK(r.runs[i].configuration == df::index_t(i / 3));
      CHECK(r.runs[i].seed == g.seeds[i % 3]);
      CHECK(r.runs[i].lambda_max == g.lambda_max[i / 9]);
      CHECK(r.runs[i].lr == g.lr[(i / 3) % 3]);
    }
  }
}

TEST_CASE("each validator's mean over the seeds is kept, and best_by is its plain arg-best") {
  const df::sweep_grid g{{0.f, 0.3f, 1.f}, {0.01f, 0.02f}, {1, 2, 3}};
  using v = df::select::validator;
  // Entropy falls with λ_max, IM peaks at 0.3; SND is not computed (NaN); configuration (1,
  // 0.02) has a NaN IM on one seed (a diverged run).
  const auto im = [](const df::fit_args& a) {
    return 1 - std::abs(a.lambda_max - 0.3) + a.lr + 1e-3 * double(a.seed);
  };
  const auto entropy = [](const df::fit_args& a) {
    return 2 - a.lambda_max + 1e-3 * double(a.seed);
  };
  df::sweep_options o;
  o.processors = 2;
  const df::sweep_result r = df::run_sweep({}, g, o, [&](const df::fit_args& a) {
    df::sweep_run run;
    run.score = entropy(a);
    run.scores[std::size_t(v::entropy)] = entropy(a);
    run.scores[std::size_t(v::information_maximization)] =
        a.lambda_max == 1.f && a.lr == 0.02f && a.seed == 2 ? not_a_number : im(a);
    return run;
  });
  REQUIRE(r.configurations.size() == 6);
  for (const v which : {v::entropy, v::information_maximization, v::snd}) {
    CAPTURE(df::select::name(which));
    // The plain reference: the mean of each configuration's runs, then the arg-best by a loop
    // that skips NaN and keeps the first of equals.
    df::index_t best = -1;
    double best_score = 0;
    for (std::size_t c = 0; c < 6; ++c) {
      double mean = 0;
      for (std::size_t k = 0; k < 3; ++k) mean += r.runs[c * 3 + k].scores[std::size_t(which)] / 3;
      const double kept = r.configurations[c].scores[std::size_t(which)];
      if (std::isnan(mean)) {
        CHECK(std::isnan(kept));
        continue;
      }
      CHECK(kept == doctest::Approx(mean).epsilon(1e-12));
      const bool higher = df::select::higher_is_better(which);
      if (best < 0 || (higher ? mean > best_score : mean < best_score)) {
        best = df::index_t(c);
        best_score = mean;
      }
    }
    CHECK(df::best_by(r.configurations, which) == best);
  }
  // Known answers: entropy (lower is better) the largest λ_max, first lr: (1, 0.01); IM (higher)
  // λ_max 0.3 with the larger lr; SND nothing.
  CHECK(df::best_by(r.configurations, v::entropy) == 4);
  CHECK(r.selected == 4);  // the selector's own choice agrees
  CHECK(df::best_by(r.configurations, v::information_maximization) == 3);
  CHECK(std::isnan(r.configurations[5].scores[std::size_t(v::information_maximization)]));
  CHECK(df::best_by(r.configurations, v::snd) == -1);
  // The configurations of several sweeps judged together: a span over part of them.
  const std::span<const df::sweep_configuration> tail(r.configurations.data() + 4, 2);
  CHECK(df::best_by(tail, v::information_maximization) == 0);
  CHECK(df::best_by({}, v::entropy) == -1);
}

TEST_CASE("the oracle reads the test accuracy when there is one; NaN scores are never chosen") {
  const df::sweep_grid g{{0.f, 1.f}, {0.01f}, {1, 2}};
  df::sweep_options o;
  o.selector = df::select::validator::entropy;
  // Configuration 0 scores best but one of its seeds diverged; configuration 1 is chosen. The
  // target rows favour 0, the test set 1: the oracle follows the test set.
  const df::sweep_result r = df::run_sweep({}, g, o, [](const df::fit_args& a) {
    df::sweep_run run;
    const bool first = a.lambda_max == 0.f;
    run.score = first ? (a.seed == 2 ? not_a_number : 0.1) : 0.5;
    run.diverged = first && a.seed == 2;
    run.target_accuracy = first ? 0.8 : 0.7;
    run.test_accuracy = first ? 0.6 : 0.65;
    return run;
  });
  CHECK(std::isnan(r.configurations[0].score));
  CHECK(r.selected == 1);
  CHECK(r.oracle == 1);
  const df::sweep_result none = df::run_sweep({}, g, o, [](const df::fit_args&) {
    df::sweep_run run;  // every score NaN, no labels
    return run;
  });
  CHECK(none.selected == -1);
  CHECK(none.oracle == -1);
}

TEST_CASE("run_sweep runs at most P trainings at once, each on T threads, and uses all P") {
  const df::sweep_grid g{{0.f, 1.f}, {0.01f, 0.02f}, {1, 2}};
  for (const int processors : {1, 2, 3}) {
    CAPTURE(processors);
    df::sweep_options o;
    o.processors = processors;
    o.threads_per_run = processors == 3 ? 1 : 0;
    std::atomic<int> active{0}, most{0}, wrong_threads{0}, calls{0};
    const df::sweep_result r = df::run_sweep({}, g, o, [&](const df::fit_args&) {
      const int now = ++active;
      for (int m = most.load(); now > m && !most.compare_exchange_weak(m, now);) {
      }
#if defined(_OPENMP)
      if (omp_get_max_threads() != 1) ++wrong_threads;
#endif
      ++calls;
      std::this_thread::sleep_for(std::chrono::milliseconds(30));
      --active;
      return df::sweep_run{};
    });
    CHECK(calls == 8);
    CHECK(r.plan.concurrent == processors);
    CHECK(most.load() <= processors);
    CHECK(most.load() == processors);  // 30 ms sleeps overlap whenever there are P workers
    CHECK(wrong_threads == 0);
  }
#if defined(_OPENMP)
  // T threads per training: the worker's OpenMP setting, whatever the caller's.
  df::sweep_options o;
  o.processors = 4;
  o.threads_per_run = 2;
  std::atomic<int> wrong{0};
  const df::sweep_result r = df::run_sweep({}, g, o, [&](const df::fit_args&) {
    if (omp_get_max_threads() != 2) ++wrong;
    return df::sweep_run{};
  });
  CHECK(r.plan.concurrent == 2);
  CHECK(wrong == 0);
#endif
}

TEST_CASE("a training's exception stops the sweep and reaches the caller") {
  const df::sweep_grid g{{0.f, 1.f}, {0.01f, 0.02f, 0.03f}, {1, 2, 3, 4}};
  df::sweep_options o;
  o.processors = 2;
  std::atomic<int> calls{0};
  CHECK_THROWS_WITH_AS(df::run_sweep({}, g, o,
                                     [&](const df::fit_args& a) {
                                       ++calls;
                                       if (a.seed == 2) throw std::runtime_error("seed 2 failed");
                                       return df::sweep_run{};
                                     }),
                       "seed 2 failed", std::runtime_error);
  CHECK(calls < 24);  // no new training was handed out after the failure
}

TEST_CASE("a parallel sweep of real trainings equals a serial one and plain fits, bit for bit") {
  const auto s = blobs(df::data::domain::source, 0, 120, 0),
             t = blobs(df::data::domain::target, 0.6f, 90, 1),
             test = blobs(df::data::domain::target, 0.6f, 60, 2);
  const df::fit_args base{.steps = 120, .batch = 16, .lr = 0.05f, .momentum = 0.9f, .seed = 0};
  const df::sweep_grid g{{0.f, 0.5f}, {0.02f, 0.1f}, {1, 2}};
  df::sweep_options o;
  o.selector = df::select::validator::information_maximization;
  o.fit.validators = {df::select::validator::entropy};
  o.processors = 2;
  const df::sweep_result parallel = df::sweep<dann_step>(s, t, &test, base, g, o);
  o.max_concurrent = 1;
  const df::sweep_result serial = df::sweep<dann_step>(s, t, &test, base, g, o);
  CHECK(parallel.plan.concurrent == 2);
  CHECK(serial.plan.concurrent == 1);
  REQUIRE(parallel.runs.size() == 8);
  REQUIRE(serial.runs.size() == 8);
  const df::test::thread_count one(1);  // the sweep's trainings ran on one thread each
  for (std::size_t i = 0; i < 8; ++i) {
    CAPTURE(i);
    const df::sweep_run &a = parallel.runs[i], &b = serial.runs[i];
    CHECK(std::isfinite(a.score));
    CHECK(a.score == b.score);
    CHECK(a.target_accuracy == b.target_accuracy);
    CHECK(a.test_accuracy == b.test_accuracy);
    // The plain reference: fit with the run's arguments and one evaluation at the end.
    df::fit_args args = base;
    args.lambda_max = a.lambda_max;
    args.lr = a.lr;
    args.seed = a.seed;
    df::fit_options fo;
    fo.eval_every = base.steps;
    fo.selector = o.selector;
    fo.validators = {df::select::validator::entropy};
    dann_step step(args);
    const df::fit_result f = df::fit(step, s, t, fo);
    REQUIRE(f.evaluations.size() == 1);
    CHECK(a.score == f.evaluations.back().selection_score);
    // Every validator the fit computed is kept, and only those.
    using v = df::select::validator;
    CHECK(a.scores[std::size_t(v::information_maximization)] == a.score);
    CHECK(a.scores[std::size_t(v::entropy)] == f.evaluations.back().score(v::entropy));
    CHECK(std::isfinite(a.scores[std::size_t(v::entropy)]));
    CHECK(std::isnan(a.scores[std::size_t(v::snd)]));
    CHECK(a.target_accuracy == f.target_accuracy);
    CHECK(a.test_accuracy == df::accuracy(step, test));
  }
  CHECK(parallel.selected == serial.selected);
  CHECK(parallel.oracle == serial.oracle);
  CHECK(parallel.selected >= 0);
  // The runs differ from one another: the grid's values reach the trainings.
  CHECK(parallel.runs[0].score != parallel.runs[2].score);
  CHECK(parallel.runs[0].score != parallel.runs[4].score);
  CHECK(parallel.runs[0].score != parallel.runs[1].score);
}

TEST_CASE("a sweep whose validator needs held-out source rows it lacks says so") {
  const auto s = blobs(df::data::domain::source, 0, 60, 0),
             t = blobs(df::data::domain::target, 0.6f, 40, 1);
  const df::fit_args base{.steps = 10, .batch = 8, .lr = 0.05f, .seed = 0};
  df::sweep_options o;
  o.selector = df::select::validator::source_accuracy;
  CHECK_THROWS_WITH_AS(df::sweep<dann_step>(s, t, base, {{0.f}, {0.01f}, {1}}, o),
                       doctest::Contains("held-out source rows for source_accuracy"), df::error);
  o.fit.validation_fraction = 0.2;
  const df::sweep_result r = df::sweep<dann_step>(s, t, base, {{0.f}, {0.01f}, {1}}, o);
  CHECK(r.selected == 0);
  CHECK(std::isfinite(r.configurations[0].score));
}

}  // namespace train_sweep_test
