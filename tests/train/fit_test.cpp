// fit: determinism, accuracy reporting, clear errors for data that does not fit the network, and
// runs that diverge (a non-finite loss, skipped steps in a row; NaN outputs never selected).
#include <dafuse/head/dann.hpp>
#include <dafuse/head/source_only.hpp>
#include <dafuse/train/fit.hpp>

#include "../check.hpp"
#include "blobs.hpp"

#include <dafuse/core/profiler.hpp>
#include <dafuse/train/checkpoint.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <type_traits>
#include <vector>

namespace train_fit_test {

namespace df = dafuse;

namespace {
using net = df::nn::dann_net<df::nn::mlp<3, 16, df::nn::tanh>,
                             df::nn::linear<16, 2>,
                             df::nn::mlp<16, 8, 1, df::nn::relu>>;
template <class Head, class Loader = df::loader::resident>
using step_t =
    df::train_step<net, Loader, df::precision::fp32, df::clip::global_norm, Head, df::optim::sgd>;
using dann_step = step_t<df::head::dann<df::schedule::ganin>>;

// Two Gaussian blobs, class = sign of the first coordinate; the target is shifted by `shift`.
df::data::dataset blobs(df::data::domain side,
                        float shift,
                        df::index_t rows,
                        df::index_t width = 3) {
  const bool source = side == df::data::domain::source;
  return df::test::blobs({.seed = 9, .spread = 0.5f, .class0_mean = -1.5f, .class1_mean = 1.5f},
                         side, rows, width, shift, source ? "blobs source" : "blobs target",
                         std::uint32_t(side));
}

const df::fit_args args{.steps = 150, .batch = 16, .lr = 0.05f, .momentum = 0.9f, .seed = 21};
}  // namespace

TEST_CASE("two fits with one seed give bitwise identical weights") {
  const auto s = blobs(df::data::domain::source, 0, 120),
             t = blobs(df::data::domain::target, 0.3f, 90);
  const df::fit_result a = df::fit<dann_step>(s, t, args);
  const df::fit_result b = df::fit<dann_step>(s, t, args);
  REQUIRE(a.parameters.size() == std::size_t(net::param_count));
  CHECK(a.parameters == b.parameters);
  CHECK(a.target_accuracy == b.target_accuracy);
  df::fit_args other = args;
  other.seed = 22;
  CHECK(df::fit<dann_step>(s, t, other).parameters != a.parameters);
}

TEST_CASE("fit without options trains what fit with default options does, bit for bit") {
  // fit(step, source, target) runs the loop without compiling the options' code (train_loop).
  const auto s = blobs(df::data::domain::source, 0, 120),
             t = blobs(df::data::domain::target, 0.3f, 90);
  const df::fit_result plain = df::fit<dann_step>(s, t, args);
  const df::fit_result with_options = df::fit<dann_step>(s, t, args, df::fit_options{});
  CHECK(plain.parameters == with_options.parameters);
  CHECK(plain.steps == with_options.steps);
  CHECK(plain.source_accuracy == with_options.source_accuracy);
  CHECK(plain.target_accuracy == with_options.target_accuracy);
  CHECK(plain.evaluations.empty());
  CHECK(plain.best_step == with_options.best_step);
}

TEST_CASE("fit learns a separable problem and reports accuracy, steps and time") {
  const auto s = blobs(df::data::domain::source, 0, 120),
             t = blobs(df::data::domain::target, 0.2f, 90);
  const df::fit_result r = df::fit<dann_step>(s, t, args);
  CHECK(r.steps == 150);
  CHECK(r.seconds > 0);
  CHECK(r.source_accuracy > 0.95);
  CHECK(r.target_accuracy > 0.9);
  CHECK(std::isfinite(r.last.label_loss));
  CHECK(r.last.domain_loss > 0);
}

TEST_CASE("an unlabelled target trains and reports NaN target accuracy") {
  const auto s = blobs(df::data::domain::source, 0, 60);
  auto t = blobs(df::data::domain::target, 0.2f, 40);
  t.labels.clear();
  const df::fit_result r = df::fit<dann_step>(s, t, args);
  CHECK(std::isnan(r.target_accuracy));
}

TEST_CASE("fit rejects data that does not match the network, naming the file and field") {
  const auto s = blobs(df::data::domain::source, 0, 60);
  const auto wide = blobs(df::data::domain::target, 0, 40, 4);
  CHECK_THROWS_WITH_AS(df::fit<dann_step>(s, wide, args),
                       doctest::Contains("blobs target: feature width: expected 3"), df::error);
  const auto t = blobs(df::data::domain::target, 0.5f, 40);
  auto bad_labels = blobs(df::data::domain::source, 0, 60);
  bad_labels.labels[5] = 7;
  CHECK_THROWS_WITH_AS(df::fit<dann_step>(bad_labels, t, args),
                       doctest::Contains("blobs source: labels[5]: expected a class in [0, 2)"),
                       df::error);
  // With rows held out for validation, the bad label is still named by its row in the set
  // passed in (the split parts number their rows anew).
  bad_labels.labels[5] = 1;
  bad_labels.labels[50] = -3;
  {
    dann_step step(args);
    df::fit_options o;
    o.validation_fraction = 0.2;
    CHECK_THROWS_WITH_AS(df::fit(step, bad_labels, t, o),
                         "dafuse: blobs source: labels[50]: expected a class in [0, 2), found -3",
                         df::error);
  }
  auto unlabelled = blobs(df::data::domain::source, 0, 60);
  unlabelled.labels.clear();
  CHECK_THROWS_WITH_AS(df::fit<dann_step>(unlabelled, t, args),
                       doctest::Contains("blobs source: labels"), df::error);
}

TEST_CASE("fit refuses a source and target of the wrong domains, so target labels never train") {
  const auto s = blobs(df::data::domain::source, 0, 60);
  const auto t = blobs(df::data::domain::target, 0.5f, 40);
  dann_step step(args);
  const std::vector<float> before(step.parameters().begin(), step.parameters().end());
  CHECK_THROWS_WITH_AS(df::fit(step, t, s),
                       doctest::Contains("dafuse: fit: source: expected a source-domain data set "
                                         "(fit<Step>(source, target, ...)), found 'blobs target', "
                                         "of the target domain: are source and target swapped?"),
                       df::error);
  CHECK_THROWS_WITH_AS(df::fit(step, s, s),
                       doctest::Contains("fit: target: expected a target-domain data set"),
                       df::error);
  CHECK_THROWS_WITH_AS(df::fit(step, s, t, t, df::fit_options{}),
                       doctest::Contains("fit: validation: expected a source-domain data set"),
                       df::error);
  // Nothing trained: the refusals come before the first step.
  CHECK(step.step_index() == 0);
  CHECK(std::equal(before.begin(), before.end(), step.parameters().begin()));
  // Source-only heads read no target rows, but the target is still checked: it is evaluated.
  CHECK_THROWS_AS(df::fit<step_t<df::head::source_only<>>>(t, t, args), df::error);
}

TEST_CASE("loader::sync and loader::resident fits agree bitwise") {
  const auto s = blobs(df::data::domain::source, 0, 50),
             t = blobs(df::data::domain::target, 0.2f, 30);
  const auto a = df::fit<step_t<df::head::dann<>, df::loader::sync>>(s, t, args);
  const auto b = df::fit<step_t<df::head::dann<>, df::loader::resident>>(s, t, args);
  CHECK(a.parameters == b.parameters);
}

TEST_CASE_TEMPLATE("loader::prefetch fits agree bitwise with loader::sync, whatever the workers",
                   Loader,
                   df::loader::prefetch<1, 2>,
                   df::loader::prefetch<2, 4>,
                   df::loader::prefetch<4, 5>) {
  const auto s = blobs(df::data::domain::source, 0, 50),
             t = blobs(df::data::domain::target, 0.2f, 30);
  const auto a = df::fit<step_t<df::head::dann<>, df::loader::sync>>(s, t, args);
  const auto b = df::fit<step_t<df::head::dann<>, Loader>>(s, t, args);
  CHECK(a.parameters == b.parameters);
  const auto c = df::fit<step_t<df::head::source_only<>, df::loader::sync>>(s, t, args);
  const auto d = df::fit<step_t<df::head::source_only<>, Loader>>(s, t, args);
  CHECK(c.parameters == d.parameters);
}

TEST_CASE_TEMPLATE("fit reports the time spent waiting for data, within the loop's time",
                   Loader,
                   df::loader::sync,
                   df::loader::resident,
                   df::loader::prefetch<>) {
  const auto s = blobs(df::data::domain::source, 0, 50),
             t = blobs(df::data::domain::target, 0.2f, 30);
  const df::fit_result r = df::fit<step_t<df::head::dann<>, Loader>>(s, t, args);
  CHECK(r.data_wait_seconds >= 0);
  CHECK(r.data_wait_seconds <= r.seconds);
  // sync and resident wait for the whole of every fill, which always takes some time.
  if (!std::is_same_v<Loader, df::loader::prefetch<>>) CHECK(r.data_wait_seconds > 0);
}

namespace {
//! Records what the loop tells it, and stops the run after `stop_at` steps when asked to.
struct recorder : df::fit_callback {
  df::index_t stop_at = -1;
  std::vector<df::index_t> steps;
  std::vector<df::step_report> reports;
  std::vector<df::evaluation> evaluations;
  void on_step(df::index_t step, const df::step_report& r) override {
    steps.push_back(step);
    reports.push_back(r);
  }
  void on_evaluation(const df::evaluation& e) override { evaluations.push_back(e); }
  bool should_stop() override { return stop_at > 0 && steps.back() >= stop_at; }
};

const df::fit_options evaluated{.eval_every = 40, .validation_fraction = 0.2};

std::vector<char> file_bytes(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}
}  // namespace

TEST_CASE("fit evaluates every K steps and after the last, and calls the callbacks") {
  const auto s = blobs(df::data::domain::source, 0, 120),
             t = blobs(df::data::domain::target, 0.3f, 90);
  recorder log;
  df::fit_options o = evaluated;
  o.callbacks = {&log};
  dann_step step(args);
  const df::fit_result r = df::fit(step, s, t, o);
  REQUIRE(r.evaluations.size() == 4);  // 40, 80, 120 and the last step, 150
  CHECK(r.evaluations[0].step == 40);
  CHECK(r.evaluations[3].step == 150);
  CHECK(log.steps.size() == 150);
  CHECK(log.steps.front() == 1);
  CHECK(log.steps.back() == 150);
  CHECK(log.evaluations.size() == 4);
  for (const df::evaluation& e : r.evaluations) {
    CHECK(e.source_accuracy >= 0);
    CHECK(e.source_accuracy <= 1);
    CHECK(e.score(df::select::validator::source_accuracy) == e.source_accuracy);
    CHECK(e.selection_score == e.source_accuracy);
    CHECK(std::isfinite(e.target_accuracy));
    CHECK(std::isfinite(e.score(df::select::validator::entropy)));
    CHECK(std::isfinite(e.score(df::select::validator::information_maximization)));
    CHECK(std::isnan(e.score(df::select::validator::snd)));  // not asked for
  }
  // Health figures of every step, from the passes the step runs anyway.
  for (const df::step_report& rep : log.reports) {
    CHECK(rep.domain_accuracy >= 0);
    CHECK(rep.domain_accuracy <= 1);
    CHECK(rep.lr > 0);
    CHECK(std::isfinite(rep.grad_norm));
  }
  CHECK(log.reports.front().lambda < log.reports.back().lambda);  // Ganin's λ rises
  // The figures a label-free selection reports, and the oracle one kept apart.
  double oracle = 0;
  for (const df::evaluation& e : r.evaluations) oracle = std::max(oracle, e.target_accuracy);
  CHECK(r.oracle_target_accuracy == oracle);
  const auto best = std::find_if(r.evaluations.rbegin(), r.evaluations.rend(),
                                 [](const df::evaluation& e) { return e.best; });
  REQUIRE(best != r.evaluations.rend());
  CHECK(r.best_step == best->step);
  CHECK(r.best_score == best->selection_score);
  CHECK(r.selected_target_accuracy == best->target_accuracy);
  CHECK(r.selected_by == df::select::validator::source_accuracy);
}

TEST_CASE("every validator can select, and the ones needing source rows say so without them") {
  const auto s = blobs(df::data::domain::source, 0, 120),
             t = blobs(df::data::domain::target, 0.3f, 90);
  for (const df::select::validator v : df::select::all_validators) {
    CAPTURE(df::select::name(v));
    if (df::select::scores_a_set(v)) continue;  // ensv: a sweep's (train/sweep_test.cpp)
    df::fit_options o = evaluated;
    o.selector = v;
    dann_step step(args);
    const df::fit_result r = df::fit(step, s, t, o);
    REQUIRE(!r.evaluations.empty());
    CHECK(std::isfinite(r.evaluations.back().score(v)));
    CHECK(std::isfinite(r.best_score));
  }
  df::fit_options o{.eval_every = 50};
  dann_step step(args);
  CHECK_THROWS_WITH_AS(df::fit(step, s, t, o),
                       doctest::Contains("fit_options: selector: expected held-out source rows "
                                         "for source_accuracy"),
                       df::error);
  o.selector = df::select::validator::entropy;  // label-free on the target alone: fine
  CHECK(df::fit(step, s, t, o).evaluations.size() == 3);
}

TEST_CASE("a callback or patience stops the run early, after the evaluation that decided it") {
  const auto s = blobs(df::data::domain::source, 0, 120),
             t = blobs(df::data::domain::target, 0.3f, 90);
  recorder log;
  log.stop_at = 57;
  df::fit_options o = evaluated;
  o.callbacks = {&log};
  dann_step step(args);
  const df::fit_result r = df::fit(step, s, t, o);
  CHECK(r.stopped_early);
  CHECK(r.steps == 57);
  CHECK(step.step_index() == 57);
  CHECK(r.evaluations.back().step == 57);  // the run's end is evaluated, for the report only
  CHECK_FALSE(r.evaluations.back().scheduled);
  CHECK_FALSE(r.evaluations.back().best);
  CHECK(r.best_step == 40);

  // Patience p: the run ends at the first evaluation that is the p-th without improvement.
  df::fit_options patient = evaluated;
  patient.eval_every = 5;
  patient.patience = 2;
  patient.selector = df::select::validator::entropy;
  dann_step other(args);
  const df::fit_result p = df::fit(other, s, t, patient);
  int since_best = 0;
  for (std::size_t i = 0; i < p.evaluations.size(); ++i) {
    since_best = p.evaluations[i].best ? 0 : since_best + 1;
    if (i + 1 < p.evaluations.size()) CHECK(since_best < 2);
  }
  CHECK(p.stopped_early == (since_best == 2));
}

TEST_CASE("restore_best leaves the selected model in the step, bitwise") {
  const auto s = blobs(df::data::domain::source, 0, 120),
             t = blobs(df::data::domain::target, 0.3f, 90);
  df::test::temp_dir dir("fit_restore_best");
  df::fit_options o = evaluated;
  o.eval_every = 10;
  o.selector = df::select::validator::entropy;
  o.restore_best = true;
  o.best_checkpoint = (dir / "best.ckpt").string();
  dann_step step(args);
  const df::fit_result r = df::fit(step, s, t, o);
  REQUIRE(r.best_step > 0);
  // The same run stopped at the best step holds the same weights.
  recorder stopper;
  stopper.stop_at = r.best_step;
  // Same training rows: the same validation fraction, but no evaluations.
  df::fit_options plain{.validation_fraction = 0.2, .callbacks = {&stopper}};
  dann_step again(args);
  df::fit(again, s, t, plain);
  CHECK(r.parameters == std::vector<double>(again.parameters().begin(), again.parameters().end()));
  CHECK(r.restored_best == (r.best_step != args.steps));
  // And so does the best checkpoint.
  dann_step loaded(args);
  df::load_checkpoint(o.best_checkpoint, loaded);
  CHECK(loaded.step_index() == r.best_step);
  CHECK(r.parameters ==
        std::vector<double>(loaded.parameters().begin(), loaded.parameters().end()));
}

TEST_CASE_TEMPLATE("a run resumed from its checkpoint ends bitwise where an uninterrupted one does",
                   Loader,
                   df::loader::sync,
                   df::loader::prefetch<2, 3>) {
  using step_type = step_t<df::head::dann<df::schedule::ganin>, Loader>;
  const auto s = blobs(df::data::domain::source, 0, 120),
             t = blobs(df::data::domain::target, 0.3f, 90);
  df::test::temp_dir dir("fit_resume");
  df::fit_options o = evaluated;
  o.checkpoint = (dir / "run.ckpt").string();
  o.checkpoint_every = 25;
  step_type straight(args);
  const df::fit_result whole = df::fit(straight, s, t, o);

  recorder crash;  // the first run "dies" after step 63: its last checkpoint is from step 50
  crash.stop_at = 63;
  step_type a(args);
  {
    df::fit_options saving = o;
    saving.callbacks = {&crash};
    saving.checkpoint = (dir / "crashed.ckpt").string();
    df::fit(a, s, t, saving);  // saves at 25, 50 and at the stop, 63
  }
  df::fit_options resumed = o;
  resumed.resume = (dir / "crashed.ckpt").string();
  step_type b(args);
  const df::fit_result rest = df::fit(b, s, t, resumed);
  CHECK(rest.steps == args.steps - 63);
  CHECK(rest.parameters == whole.parameters);
  CHECK(rest.best_step == whole.best_step);
  CHECK(rest.best_score == whole.best_score);
}

TEST_CASE("a run stopped off the evaluation schedule and resumed ends as an uninterrupted one") {
  // The stop's own evaluation is reported, never a candidate: were it one, a run stopped at a
  // step that scores well would keep it as its best, and an uninterrupted run never sees it.
  const auto s = blobs(df::data::domain::source, 0, 120),
             t = blobs(df::data::domain::target, 0.3f, 90);
  df::test::temp_dir dir("fit_stop_off_schedule");
  df::fit_options o = evaluated;
  o.eval_every = 20;
  o.checkpoint = (dir / "whole.ckpt").string();
  o.best_checkpoint = (dir / "whole_best.ckpt").string();
  dann_step straight(args);
  const df::fit_result whole = df::fit(straight, s, t, o);
  REQUIRE(whole.best_step > 0);
  for (const df::index_t stop : {1, 7, 13, 27, 57, 63, 99, 121, 149}) {
    CAPTURE(stop);
    recorder stopper;
    stopper.stop_at = stop;
    df::fit_options first = o;
    first.callbacks = {&stopper};
    first.checkpoint = (dir / "part.ckpt").string();
    first.best_checkpoint = (dir / "part_best.ckpt").string();
    dann_step a(args);
    const df::fit_result part = df::fit(a, s, t, first);
    REQUIRE(part.evaluations.size() == std::size_t(stop / 20 + 1));
    CHECK(part.evaluations.back().step == stop);
    CHECK_FALSE(part.evaluations.back().scheduled);
    CHECK_FALSE(part.evaluations.back().best);
    CHECK(part.best_step < stop);
    df::fit_options rest = first;
    rest.callbacks.clear();
    rest.resume = first.checkpoint;
    dann_step b(args);
    const df::fit_result r = df::fit(b, s, t, rest);
    CHECK(r.parameters == whole.parameters);
    CHECK(r.best_step == whole.best_step);
    CHECK(r.best_score == whole.best_score);
    CHECK(r.selected_target_accuracy == whole.selected_target_accuracy);
    CHECK(r.oracle_target_accuracy == whole.oracle_target_accuracy);
    CHECK(file_bytes(first.checkpoint) == file_bytes(o.checkpoint));
    CHECK(file_bytes(first.best_checkpoint) == file_bytes(o.best_checkpoint));
  }
}

TEST_CASE("resuming onto other data or with conflicting options is refused clearly") {
  const auto s = blobs(df::data::domain::source, 0, 120),
             t = blobs(df::data::domain::target, 0.3f, 90);
  df::test::temp_dir dir("fit_resume_errors");
  df::fit_options o{.checkpoint = (dir / "c.ckpt").string()};
  dann_step a(args);
  df::fit(a, s, t, o);
  const auto fewer = blobs(df::data::domain::source, 0, 100);
  df::fit_options r{.resume = o.checkpoint};
  dann_step b(args);
  CHECK_THROWS_WITH_AS(df::fit(b, fewer, t, r),
                       doctest::Contains("source data: expected 100 rows x 3, labelled, CRC-32 "),
                       df::error);
  CHECK_THROWS_WITH_AS(df::fit(b, fewer, t, r),
                       doctest::Contains("(this run's), found 120 rows x 3, labelled, CRC-32 "),
                       df::error);
  CHECK_THROWS_WITH_AS(df::fit(b, s, t, df::fit_options{.patience = 3}),
                       doctest::Contains("fit_options: eval_every: expected a step count > 0"),
                       df::error);
  CHECK_THROWS_WITH_AS(df::fit(b, s, t, df::fit_options{.validation_fraction = 1.5}),
                       doctest::Contains("validation fraction: expected a fraction in (0, 1)"),
                       df::error);
  CHECK_THROWS_WITH_AS(df::fit(b, s, t, fewer, df::fit_options{.validation_fraction = 0.1}),
                       doctest::Contains("validation_fraction: expected 0 when a validation set"),
                       df::error);
}

TEST_CASE("a resume is refused for other data of the same shape, other arguments or settings") {
  const auto s = blobs(df::data::domain::source, 0, 120),
             t = blobs(df::data::domain::target, 0.3f, 90);
  df::test::temp_dir dir("fit_resume_other_run");
  df::fit_options o{.checkpoint = (dir / "c.ckpt").string(),
                    .run_settings = {{"--preprocess", "none"}}};
  df::fit_args short_args = args;
  short_args.steps = 20;
  dann_step a(short_args);
  df::fit(a, s, t, o);
  df::fit_options r = o;
  r.checkpoint.clear();
  r.resume = o.checkpoint;
  dann_step b(short_args);
  const std::vector<double> before(b.parameters().begin(), b.parameters().end());
  const auto refused = [&](const df::data::dataset& source, const df::data::dataset& target,
                           const df::fit_options& options, dann_step& step,
                           const std::string& message) {
    CAPTURE(message);
    CHECK_THROWS_WITH_AS(df::fit(step, source, target, options), doctest::Contains(message.c_str()),
                         df::error);
    CHECK(std::vector<double>(step.parameters().begin(), step.parameters().end()) ==
          std::vector<double>(before.begin(), before.end()));
    CHECK(step.step_index() == 0);
  };
  // Same shapes, other values: the fingerprints differ.
  const auto shifted_source = blobs(df::data::domain::source, 0.01f, 120);
  refused(shifted_source, t, r, b, r.resume + ": source data: expected 120 rows x 3, labelled");
  const auto shifted_target = blobs(df::data::domain::target, 0.31f, 90);
  refused(s, shifted_target, r, b, r.resume + ": target data: expected 90 rows x 3, labelled");
  auto relabelled = s;
  relabelled.labels[7] = 1 - relabelled.labels[7];
  refused(relabelled, t, r, b, "source data: expected 120 rows x 3");
  // Every fit_args field that changes the maths, named with both values.
  df::fit_args other = short_args;
  other.lr = 0.06f;
  dann_step c(other);
  CHECK_THROWS_WITH_AS(
      df::fit(c, s, t, r),
      doctest::Contains((r.resume + ": fit_args.lr: expected 0.06 (this step's fit_args), "
                                    "found 0.05 (the checkpoint's)")
                            .c_str()),
      df::error);
  other = short_args;
  other.momentum = 0.5f;
  dann_step d(other);
  CHECK_THROWS_WITH_AS(df::fit(d, s, t, r), doctest::Contains("fit_args.momentum: expected 0.5"),
                       df::error);
  other = short_args;
  other.lambda_max = 0.25f;
  dann_step e(other);
  CHECK_THROWS_WITH_AS(df::fit(e, s, t, r), doctest::Contains("fit_args.lambda_max"), df::error);
  // The caller's settings and fit's own options.
  df::fit_options preprocessed = r;
  preprocessed.run_settings = {{"--preprocess", "standardize"}};
  refused(s, t, preprocessed, b,
          "--preprocess: expected standardize (this run's), found none (the checkpoint's)");
  df::fit_options split = r;
  split.validation_fraction = 0.1;
  refused(s, t, split, b, "fit_options.validation_fraction: expected 0.1 (this run's), found 0");
  df::fit_options extra = r;
  extra.run_settings.push_back({"--augment", "flip"});
  refused(s, t, extra, b, "--augment: expected flip (this run's), found no such setting");
  // The same run resumes.
  const df::fit_result rest = df::fit(b, s, t, r);
  CHECK(rest.steps == 0);
  CHECK(b.step_index() == short_args.steps);
}

TEST_CASE("a resumed run whose best model came before it reports that model's target accuracy") {
  const auto s = blobs(df::data::domain::source, 0, 120),
             t = blobs(df::data::domain::target, 0.3f, 90);
  df::test::temp_dir dir("fit_resume_selected");
  df::fit_options o = evaluated;
  o.eval_every = 50;
  o.checkpoint = (dir / "run.ckpt").string();
  dann_step whole_step(args);
  const df::fit_result whole = df::fit(whole_step, s, t, o);
  REQUIRE(std::isfinite(whole.selected_target_accuracy));
  // Stopped right after the best evaluation, then resumed with no evaluation improving on it:
  // fit has the selected model's accuracy from the checkpoint, not NaN.
  recorder stopper;
  stopper.stop_at = whole.best_step;
  df::fit_options first = o;
  first.callbacks = {&stopper};
  dann_step part(args);
  df::fit(part, s, t, first);
  df::fit_options rest = o;
  rest.resume = o.checkpoint;
  dann_step resumed(args);
  const df::fit_result r = df::fit(resumed, s, t, rest);
  CHECK(r.best_step == whole.best_step);
  CHECK(r.selected_target_accuracy == whole.selected_target_accuracy);
  CHECK(r.oracle_target_accuracy == whole.oracle_target_accuracy);
  CHECK(r.parameters == whole.parameters);
}

TEST_CASE("the profiler sees every phase of every step once") {
  const auto s = blobs(df::data::domain::source, 0, 120),
             t = blobs(df::data::domain::target, 0.3f, 90);
  df::profiler prof;
  df::fit_options o = evaluated;
  o.profile = &prof;
  dann_step step(args);
  const df::fit_result r = df::fit(step, s, t, o);
  for (const df::phase p :
       {df::phase::data_wait, df::phase::forward, df::phase::backward, df::phase::update})
    CHECK(prof.calls(p) == std::size_t(args.steps));
  CHECK(prof.calls(df::phase::evaluation) == r.evaluations.size());
  CHECK(prof.calls(df::phase::checkpoint) == 0);
  CHECK(prof.total_seconds(df::phase::forward) > 0);
  CHECK(prof.total_seconds(df::phase::data_wait) <= r.seconds);
  // fit leaves the step without a profiler: later runs are not recorded.
  df::fit(step, s, t, evaluated);
  CHECK(prof.calls(df::phase::forward) == std::size_t(args.steps));
}

TEST_CASE("the last evaluation's target accuracy is fit's, whether validators sample or not") {
  const auto s = blobs(df::data::domain::source, 0, 120),
             t = blobs(df::data::domain::target, 0.3f, 90);
  for (const df::index_t rows : {df::index_t(2000), df::index_t(30)}) {  // all 90 rows, a sample
    CAPTURE(rows);
    df::fit_options o = evaluated;
    o.validator_rows = rows;
    o.validators = {df::select::validator::entropy, df::select::validator::snd};
    dann_step step(args);
    const df::fit_result r = df::fit(step, s, t, o);
    REQUIRE(!r.evaluations.empty());
    CHECK(r.evaluations.back().target_accuracy == r.target_accuracy);
    CHECK(std::isfinite(r.evaluations.back().score(df::select::validator::snd)));
  }
}

// ---- Divergence -------------------------------------------------------------------------------

namespace {
using relu_net = df::nn::dann_net<df::nn::mlp<3, 16, df::nn::relu>,
                                  df::nn::linear<16, 2>,
                                  df::nn::mlp<16, 8, 1, df::nn::relu>>;
using relu_step = df::train_step<relu_net,
                                 df::loader::resident,
                                 df::precision::fp32,
                                 df::clip::global_norm,
                                 df::head::dann<df::schedule::ganin>,
                                 df::optim::sgd>;
}  // namespace

TEST_CASE("a step whose loss is not finite ends the run as diverged, before any evaluation") {
  const auto s = blobs(df::data::domain::source, 0, 120),
             t = blobs(df::data::domain::target, 0.3f, 90);
  dann_step step(args);
  step.parameters()[0] = std::numeric_limits<float>::quiet_NaN();
  const df::fit_result r =
      df::fit(step, s, t, df::fit_options{.eval_every = 1, .validation_fraction = 0.2});
  CHECK(r.diverged);
  CHECK(r.diverged_at == 1);
  CHECK(r.steps == 1);
  CHECK(r.divergence == "training diverged at step 1 (non-finite loss)");
  CHECK(r.evaluations.empty());
  CHECK_FALSE(r.stopped_early);
}

TEST_CASE("skipped steps in a row end the run as diverged, with the last weights saved") {
  // Inputs of 1e30 through ReLU layers: the losses are finite, the gradients overflow, and
  // every update is skipped (the "data scaled by 1e30").
  auto s = blobs(df::data::domain::source, 0, 120);
  auto t = blobs(df::data::domain::target, 0.3f, 90);
  for (float& v : s.features) v *= 1e30f;
  for (float& v : t.features) v *= 1e30f;
  df::test::temp_dir dir("fit_diverged");
  relu_step step(args);
  const std::vector<float> initial(step.parameters().begin(), step.parameters().end());
  df::fit_options o{.checkpoint = (dir / "c.ckpt").string(), .max_skipped_in_a_row = 5};
  const df::fit_result r = df::fit(step, s, t, o);
  CHECK(r.diverged);
  CHECK(r.diverged_at == 5);
  CHECK(r.skipped_steps == 5);
  CHECK(r.divergence ==
        "training diverged at step 5 (5 steps in a row skipped for non-finite gradients)");
  CHECK(std::isfinite(r.last.label_loss));
  CHECK(std::equal(initial.begin(), initial.end(), step.parameters().begin()));
  // What was saved is the run as it stopped: it loads, at step 5, with the initial weights.
  relu_step loaded(args);
  df::load_checkpoint(o.checkpoint, loaded);
  CHECK(loaded.step_index() == 5);
  CHECK(std::equal(initial.begin(), initial.end(), loaded.parameters().begin()));
  // With skips allowed the run goes on to its last step.
  relu_step patient(args);
  const df::fit_result all = df::fit(patient, s, t, df::fit_options{.max_skipped_in_a_row = 0});
  CHECK_FALSE(all.diverged);
  CHECK(all.divergence.empty());
  CHECK(all.steps == args.steps);
  CHECK(all.skipped_steps == args.steps);
  CHECK_THROWS_WITH_AS(df::fit(patient, s, t, df::fit_options{.max_skipped_in_a_row = -1}),
                       doctest::Contains("fit_options: max_skipped_in_a_row: expected a step "
                                         "count >= 0, found -1"),
                       df::error);
}

TEST_CASE("steps skipped in a row are counted across a resume") {
  // Every update is skipped (inputs of 1e30, as above): stopped after 3 steps and resumed, the
  // run diverges at step 5 as the uninterrupted one does, not 5 steps after the resume.
  auto s = blobs(df::data::domain::source, 0, 120);
  auto t = blobs(df::data::domain::target, 0.3f, 90);
  for (float& v : s.features) v *= 1e30f;
  for (float& v : t.features) v *= 1e30f;
  df::test::temp_dir dir("fit_skipped_resumed");
  df::fit_options o{.checkpoint = (dir / "whole.ckpt").string(), .max_skipped_in_a_row = 5};
  relu_step straight(args);
  REQUIRE(df::fit(straight, s, t, o).diverged_at == 5);
  recorder stopper;
  stopper.stop_at = 3;
  df::fit_options first = o;
  first.checkpoint = (dir / "part.ckpt").string();
  first.callbacks = {&stopper};
  relu_step a(args);
  CHECK_FALSE(df::fit(a, s, t, first).diverged);
  relu_step loaded(args);
  CHECK(df::load_checkpoint(first.checkpoint, loaded).skipped_in_a_row == 3);
  df::fit_options rest = first;
  rest.callbacks.clear();
  rest.resume = first.checkpoint;
  relu_step b(args);
  const df::fit_result r = df::fit(b, s, t, rest);
  CHECK(r.diverged);
  CHECK(r.diverged_at == 5);
  CHECK(r.steps == 2);
  CHECK(file_bytes(first.checkpoint) == file_bytes(o.checkpoint));
}

TEST_CASE("a model whose outputs are not finite scores NaN on every validator, never selected") {
  const auto s = blobs(df::data::domain::source, 0, 120),
             t = blobs(df::data::domain::target, 0.3f, 90);
  const auto v = blobs(df::data::domain::source, 0, 40);
  df::fit_options o{
      .eval_every = 1,
      .validators = {df::select::validator::entropy,
                     df::select::validator::information_maximization, df::select::validator::snd,
                     df::select::validator::dev, df::select::validator::pad}};
  df::detail::evaluator<dann_step, df::data::dataset> scorer(&v, t, o);
  dann_step step(args);
  const df::evaluation fine = scorer.evaluate(step, 0);
  CHECK(fine.finite_outputs);
  CHECK(std::isfinite(fine.selection_score));
  // NaN weights: every probability and every feature is NaN.
  std::fill(step.parameters().begin(), step.parameters().end(),
            std::numeric_limits<float>::quiet_NaN());
  const df::evaluation broken = scorer.evaluate(step, 1);
  CHECK_FALSE(broken.finite_outputs);
  for (double score : broken.scores) CHECK(std::isnan(score));
  CHECK(std::isnan(broken.selection_score));
  CHECK_FALSE(df::detail::improves(o.selector, broken.selection_score, fine.selection_score));
  CHECK_FALSE(df::detail::improves(o.selector, broken.selection_score, std::nan("")));
}

}  // namespace train_fit_test
