// sweep: the plan never asks for more threads than processors, bad grids are refused by field,
// the validator's choice and the oracle's are each the plain argmin/argmax of their means, at
// most P trainings run at once on T threads each, and a parallel sweep of real trainings gives
// the same numbers as a serial one and as plain fits. Kept predictions are each final model's on
// the rows the validators read, the same rows for every training; EnsV as the selector is
// select::ensemble_validation over them, leaving out diverged trainings; fit refuses it.
#include <dafuse/data/split.hpp>
#include <dafuse/head/dann.hpp>
#include <dafuse/select/validators.hpp>
#include <dafuse/train/sweep.hpp>

#include "../check.hpp"
#include "blobs.hpp"

#include <algorithm>
#include <atomic>
#include <cfloat>
#include <chrono>
#include <cmath>
#include <cstdint>
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
// The fit_args the sweep gave one of its trainings: `base` with the run's λ_max, lr and seed.
df::fit_args args_of(const df::fit_args& base, const df::sweep_run& run) {
  df::fit_args args = base;
  args.lambda_max = run.lambda_max;
  args.lr = run.lr;
  args.seed = run.seed;
  return args;
}
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
    const df::fit_args args = args_of(base, a);
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

TEST_CASE("a sweep keeps each final model's predictions on the rows its validators read") {
  const auto s = blobs(df::data::domain::source, 0, 120, 0),
             t = blobs(df::data::domain::target, 0.6f, 90, 1);
  const df::fit_args base{.steps = 60, .batch = 16, .lr = 0.05f, .momentum = 0.9f, .seed = 0};
  const df::sweep_grid g{{0.f, 0.5f}, {0.05f}, {1, 2}};
  using v = df::select::validator;
  df::sweep_options o;
  o.selector = v::information_maximization;
  o.fit.validators = {};
  o.fit.validator_rows = 40;  // fewer than the target's 90 rows: the validators read a sample
  o.processors = 2;
  CHECK_FALSE(df::keeps_predictions(o));
  const df::sweep_result plain = df::sweep<dann_step>(s, t, base, g, o);
  o.keep_predictions = true;
  CHECK(df::keeps_predictions(o));
  const df::sweep_result kept = df::sweep<dann_step>(s, t, base, g, o);
  // The validators' rows: data::sample_rows, evenly spaced and drawn from nothing (it takes no
  // seed), so every training of the grid reads the same ones.
  const df::data::dataset rows = df::data::sample_rows(t, 40);
  REQUIRE(rows.rows == 40);
  for (df::index_t i = 0; i < 40; ++i)
    for (df::index_t k = 0; k < 3; ++k)
      CHECK(rows.features[std::size_t(i * 3 + k)] == t.features[std::size_t(i * 90 / 40 * 3 + k)]);
  REQUIRE(kept.runs.size() == 4);
  const df::test::thread_count one(1);  // the sweep's trainings ran on one thread each
  for (std::size_t i = 0; i < kept.runs.size(); ++i) {
    CAPTURE(i);
    const df::sweep_run& run = kept.runs[i];
    CHECK(plain.runs[i].target_probabilities.empty());  // kept only when asked
    CHECK(run.score == plain.runs[i].score);  // keeping changes nothing a training computes
    const df::class_probabilities& p = run.target_probabilities;
    CHECK(p.classes == 2);
    CHECK(p.rows == 40);
    CHECK(p.bytes() == 4 * 2 * 40);
    // The plain reference: the run's training by hand, then its final model's inference on
    // those rows. Bitwise: the same weights (one thread, as in the sweep), the same rows, and
    // the host executor's infer_chunk, which writes each column's softmax from the same logits,
    // chunk by chunk of eval_chunk rows, whatever else the inference asks for (the evaluation
    // also asks for the features).
    const df::fit_args args = args_of(base, run);
    df::fit_options fo;
    fo.eval_every = base.steps;
    fo.selector = o.selector;
    fo.validators = {};
    fo.validator_rows = 40;
    dann_step step(args);
    const df::fit_result f = df::fit(step, s, t, fo);
    CHECK(f.target_probabilities.empty());  // fit keeps none unless asked
    std::vector<float> expected(2 * 40);
    step.infer(rows.features.data(), rows.rows, {.probabilities = expected.data()});
    CHECK(p.values == expected);
    fo.keep_target_probabilities = true;
    dann_step again(args);
    const df::fit_result k = df::fit(again, s, t, fo);
    CHECK(k.target_probabilities.values == expected);
    CHECK(k.target_probabilities.classes == 2);
    CHECK(k.target_probabilities.rows == 40);
  }
  CHECK(kept.runs[0].target_probabilities.values != kept.runs[2].target_probabilities.values);
}

TEST_CASE("EnsV chooses by select::ensemble_validation over the kept predictions, seeds averaged") {
  const auto s = blobs(df::data::domain::source, 0, 120, 0),
             t = blobs(df::data::domain::target, 0.6f, 90, 1);
  const df::fit_args base{.steps = 60, .batch = 16, .lr = 0.05f, .momentum = 0.9f, .seed = 0};
  const df::sweep_grid g{{0.f, 0.5f, 2.f}, {0.02f, 0.1f}, {1, 2}};
  using v = df::select::validator;
  df::sweep_options o;
  o.selector = v::ensv;
  o.fit.validators = {v::information_maximization};
  o.fit.validator_rows = 40;
  o.processors = 2;
  CHECK(df::keeps_predictions(o));  // on for the selector that needs them
  const df::sweep_result r = df::sweep<dann_step>(s, t, base, g, o);
  CHECK(r.selected_by == v::ensv);
  REQUIRE(r.runs.size() == 12);
  std::vector<df::matrix_view<const float>> views;
  for (const df::sweep_run& run : r.runs) {
    REQUIRE(run.target_probabilities.rows == 40);
    views.push_back(run.target_probabilities.view());
  }
  // The plain reference: ensemble_validation over every training's kept predictions in grid
  // order, and the same agreement counted by hand from the ensemble's pseudo-labels. Bitwise:
  // run_sweep calls the same function on the same views in the same order, and the count by
  // hand divides the same integers.
  const std::vector<double> expected = df::select::ensemble_validation(views);
  const std::vector<std::int32_t> labels = df::select::ensemble_pseudo_labels(views);
  for (std::size_t i = 0; i < r.runs.size(); ++i) {
    CAPTURE(i);
    const df::sweep_run& run = r.runs[i];
    CHECK(run.scores[std::size_t(v::ensv)] == expected[i]);
    CHECK(run.score == expected[i]);
    std::size_t agree = 0;
    for (df::index_t j = 0; j < 40; ++j) {
      const float* p = views[i].data + j * 2;
      agree += std::int32_t(std::max_element(p, p + 2) - p) == labels[std::size_t(j)];
    }
    CHECK(expected[i] == double(agree) / 40.0);
    CHECK(std::isfinite(run.scores[std::size_t(v::information_maximization)]));
    // Each training's own evaluation selects by entropy, which is not reported unasked.
    CHECK(std::isnan(run.scores[std::size_t(v::entropy)]));
  }
  // A configuration's score is the mean over its seeds: a sum of 2 terms then one division, so
  // within 2·ε relative of the mean by hand; the highest mean is chosen, the first on ties.
  df::index_t best = -1;
  double best_mean = 0;
  for (std::size_t c = 0; c < r.configurations.size(); ++c) {
    const double mean = (expected[2 * c] + expected[2 * c + 1]) / 2;
    CHECK(r.configurations[c].score == doctest::Approx(mean).epsilon(2 * DBL_EPSILON));
    CHECK(r.configurations[c].scores[std::size_t(v::ensv)] == r.configurations[c].score);
    if (best < 0 || mean > best_mean) {
      best = df::index_t(c);
      best_mean = mean;
    }
  }
  CHECK(r.selected == best);
  CHECK(df::best_by(r.configurations, v::ensv) == best);
  // As one of the validators besides another selector, the same scores.
  o.selector = v::information_maximization;
  o.fit.validators = {v::ensv};
  const df::sweep_result beside = df::sweep<dann_step>(s, t, base, g, o);
  for (std::size_t i = 0; i < r.runs.size(); ++i)
    CHECK(beside.runs[i].scores[std::size_t(v::ensv)] == expected[i]);
  CHECK(df::best_by(beside.configurations, v::ensv) == best);
}

namespace {
// Predictions [3 classes, 6 rows]: `confidence` on each row's label, the rest shared.
df::class_probabilities confident(const std::vector<std::int32_t>& labels, float confidence) {
  df::class_probabilities p{3, 6, std::vector<float>(18, (1 - confidence) / 2)};
  for (std::size_t j = 0; j < 6; ++j) p.values[j * 3 + std::size_t(labels[j])] = confidence;
  return p;
}
}  // namespace

TEST_CASE("EnsV leaves diverged trainings and non-finite predictions out of the ensemble") {
  using v = df::select::validator;
  const std::vector<std::int32_t> a{0, 0, 1, 1, 2, 2}, b{0, 1, 1, 1, 2, 0}, d{2, 2, 2, 2, 2, 2};
  // Configuration λ 0: seed 2 diverged (its predictions, one class everywhere, must not count);
  // λ 2: seed 1's predictions are NaN; λ 1 and 3 are whole.
  const df::sweep_grid g{{0.f, 1.f, 2.f, 3.f}, {0.01f}, {1, 2}};
  const auto train = [&](const df::fit_args& x) {
    df::sweep_run run;
    const bool second = x.seed == 2;
    if (x.lambda_max == 0.f) {
      run.target_probabilities = second ? confident(d, 1.f) : confident(a, 0.8f);
      run.diverged = second;
    } else if (x.lambda_max == 1.f) {
      run.target_probabilities = second ? confident(b, 0.9f) : confident(a, 0.8f);
    } else if (x.lambda_max == 2.f) {
      run.target_probabilities = confident(a, 0.8f);
      if (!second) run.target_probabilities.values[4] = std::numeric_limits<float>::quiet_NaN();
    } else {
      run.target_probabilities = confident(b, 0.9f);
    }
    return run;
  };
  df::sweep_options o;
  o.selector = v::ensv;
  o.processors = 2;
  const df::sweep_result r = df::run_sweep({}, g, o, train);
  // The reference: ensemble_validation over the six runs left in (0, 2, 3, 5, 6, 7).
  std::vector<df::class_probabilities> in;
  for (const std::size_t i : {0, 2, 3, 5, 6, 7}) in.push_back(r.runs[i].target_probabilities);
  std::vector<df::matrix_view<const float>> views;
  for (const auto& p : in) views.push_back(p.view());
  const std::vector<double> expected = df::select::ensemble_validation(views);
  const std::size_t left_in[] = {0, 2, 3, 5, 6, 7};
  for (std::size_t k = 0; k < 6; ++k) CHECK(r.runs[left_in[k]].score == expected[k]);
  CHECK(std::isnan(r.runs[1].score));  // diverged
  CHECK(std::isnan(r.runs[4].score));  // NaN predictions
  // B's rows are the more confident: the ensemble follows B, so B scores 1 and A 4/6.
  CHECK(expected == std::vector<double>{4 / 6.0, 4 / 6.0, 1, 4 / 6.0, 1, 1});
  // Counted in, the diverged run's one-class predictions would change the pseudo-labels.
  views.insert(views.begin() + 1, r.runs[1].target_probabilities.view());
  CHECK(df::select::ensemble_pseudo_labels(views) != std::vector<std::int32_t>(b));
  // A configuration with a left-out run scores NaN and is never chosen: λ 3 (1) beats λ 1 (5/6).
  CHECK(std::isnan(r.configurations[0].score));
  CHECK(std::isnan(r.configurations[2].score));
  CHECK(r.selected == 3);
  // Nothing kept at all: every score NaN, nothing chosen.
  const df::sweep_result none =
      df::run_sweep({}, g, o, [](const df::fit_args&) { return df::sweep_run{}; });
  CHECK(none.selected == -1);
  // Predictions of another shape (other rows) are refused, naming the run.
  std::vector<df::sweep_run> runs(2);
  runs[0].target_probabilities = confident(a, 0.8f);
  runs[1].target_probabilities = {3, 5, std::vector<float>(15, 1.f / 3)};
  CHECK_THROWS_WITH_AS(df::score_ensemble(runs),
                       "dafuse: score_ensemble: runs[1].target_probabilities: expected 3 classes x "
                       "6 rows, the shape of runs[0].target_probabilities (every training's "
                       "predictions on the same target rows), found 3 classes x 5 rows",
                       df::error);
}

TEST_CASE("EnsV outside a sweep is refused, naming the field and what was expected") {
  const auto s = blobs(df::data::domain::source, 0, 60, 0),
             t = blobs(df::data::domain::target, 0.6f, 40, 1);
  const df::fit_args base{.steps = 10, .batch = 8, .lr = 0.05f, .seed = 0};
  using v = df::select::validator;
  df::fit_options o;
  o.eval_every = 5;
  o.selector = v::ensv;
  dann_step step(base);
  CHECK_THROWS_WITH_AS(df::fit(step, s, t, o),
                       "dafuse: fit_options: selector: expected a validator that scores one "
                       "model (ensv scores a sweep's trainings against their ensemble once all "
                       "have finished: choose by it with dafuse::sweep and "
                       "sweep_options::selector), found ensv",
                       df::error);
  o.eval_every = 0;  // without evaluations too: nothing fit does could honour it
  CHECK_THROWS_WITH_AS(df::fit(step, s, t, o), doctest::Contains("selector: expected a validator"),
                       df::error);
  o.selector = v::entropy;
  o.eval_every = 5;
  o.validators = {v::entropy, v::ensv};
  CHECK_THROWS_WITH_AS(df::fit(step, s, t, o),
                       doctest::Contains("fit_options: validators: expected a validator that "
                                         "scores one model (ensv scores"),
                       df::error);
  CHECK(step.step_index() == 0);  // refused before the first step
  // A sweep's trainings get fit options without it, and keep the predictions it reads.
  df::sweep_options so;
  so.selector = v::ensv;
  so.fit.validators = {v::ensv, v::bnm};
  const df::fit_options f = df::sweep_fit_options(so, 10);
  CHECK(f.selector == v::entropy);
  CHECK(f.validators == std::vector<v>{v::bnm});
  CHECK(f.keep_target_probabilities);
  CHECK(f.eval_every == 10);
}

}  // namespace train_sweep_test
