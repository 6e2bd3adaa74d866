// SPDX-License-Identifier: Apache-2.0
//! @file train/sweep.hpp
//! @brief Label-free hyperparameter selection: a grid of (λ_max, learning rate) × seeds trained
//! in parallel on the processors this process may use, one configuration chosen by a validator,
//! and the oracle choice (by target labels) reported apart.
//!
//! Each training of the grid is an ordinary `fit` whose only evaluation scores the model it ends
//! with (fit_options::eval_every = steps); a configuration's score is the mean of that score over
//! its seeds, and the validator's direction (select::higher_is_better) picks the best. A
//! configuration with a run whose score is NaN (it diverged, or its outputs were not finite) is
//! never picked. Ties go to the first configuration in grid order. Target labels, when the target
//! has them, are read only to report accuracies and the oracle choice, which is what a user with
//! target labels would pick: an upper bound on any selector, not a result without them.
//!
//! A sweep can keep each training's target predictions (sweep_options::keep_predictions): the
//! final model's softmax probabilities on the target rows its validators read, the same rows for
//! every training (fit_options::validator_rows). The validator ensv needs them: it scores the
//! set of trainings, not one model, so it is computed once every training has finished
//! (score_ensemble), each training's score being its agreement with the ensemble of all of them.
//!
//! Parallelism: P trainings at once, each on T OpenMP threads, with P·T at most the processors
//! this process may use (sweep_plan). Each training is the same computation whichever worker
//! runs it and whenever, so a sweep's results depend on T but not on P.
#pragma once
#include <dafuse/config.hpp>
#include <dafuse/core/buffer.hpp>
#include <dafuse/core/error.hpp>
#include <dafuse/select/validator.hpp>
#include <dafuse/select/validators.hpp>
#include <dafuse/train/fit.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <exception>
#include <functional>
#include <limits>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#if defined(_OPENMP)
#include <omp.h>
#endif
#if defined(__linux__)
#include <sched.h>
#endif

namespace dafuse {

//! The grid of a sweep: every (lambda_max, lr) pair is a configuration, trained once per seed.
struct sweep_grid {
  std::vector<float> lambda_max;     //!< fit_args::lambda_max values (the head's weight), ≥ 0
  std::vector<float> lr;             //!< fit_args::lr values, > 0
  std::vector<std::uint64_t> seeds;  //!< fit_args::seed of each configuration's trainings

  index_t configurations() const { return index_t(lambda_max.size() * lr.size()); }
  index_t runs() const { return configurations() * index_t(seeds.size()); }
};

namespace detail {
//! `v` in the fewest digits that read back as the same float ("0.01", not "0.010000").
inline std::string float_text(float v) {
  char buf[32];
  return std::string(buf, std::to_chars(buf, buf + sizeof buf, v).ptr);
}
}  // namespace detail

//! Checks `g`: each list non-empty and without repeats, λ_max finite and ≥ 0, lr finite and > 0.
//! The error names the field (`sweep_grid.lr`) and what was expected.
inline void check_grid(const sweep_grid& g) {
  constexpr std::string_view where = "sweep_grid";
  const auto check_values = [&](std::string_view field, const std::vector<float>& v,
                                bool positive) {
    if (v.empty()) fail(where, field, "at least one value", "an empty list");
    for (std::size_t i = 0; i < v.size(); ++i) {
      const bool ok = std::isfinite(v[i]) && (positive ? v[i] > 0 : v[i] >= 0);
      if (!ok)
        fail(where, field, positive ? "finite values > 0" : "finite values >= 0",
             detail::float_text(v[i]) + " at position " + std::to_string(i));
      for (std::size_t j = 0; j < i; ++j)
        if (v[j] == v[i])
          fail(where, field, "distinct values",
               detail::float_text(v[i]) + " at positions " + std::to_string(j) + " and " +
                   std::to_string(i));
    }
  };
  check_values("lambda_max", g.lambda_max, false);
  check_values("lr", g.lr, true);
  if (g.seeds.empty()) fail(where, "seeds", "at least one seed", "an empty list");
  for (std::size_t i = 0; i < g.seeds.size(); ++i)
    for (std::size_t j = 0; j < i; ++j)
      if (g.seeds[j] == g.seeds[i])
        fail(where, "seeds", "distinct seeds",
             std::to_string(g.seeds[i]) + " at positions " + std::to_string(j) + " and " +
                 std::to_string(i));
}

//! The processors this process may run on: the size of its affinity mask on Linux (what
//! `taskset` and container CPU sets restrict; a CPU quota is not read), else
//! std::thread::hardware_concurrency(); at least 1.
inline int usable_processors() {
#if defined(__linux__)
  cpu_set_t mask;
  CPU_ZERO(&mask);
  if (sched_getaffinity(0, sizeof mask, &mask) == 0) return std::max(1, CPU_COUNT(&mask));
#endif
  return std::max(1, int(std::thread::hardware_concurrency()));
}

//! How a sweep shares the processors: `concurrent` trainings at once (P), each on `threads`
//! OpenMP threads (T).
struct sweep_plan {
  int concurrent = 1;  //!< P
  int threads = 1;     //!< T
  int processors = 1;  //!< what the plan was made for (usable_processors())
};

//! P and T for `runs` trainings on `processors`. T is `threads_per_run`, 1 when 0: the networks
//! dafuse trains are small, and two trainings on one thread each finish sooner than the same two
//! one after the other on two threads (a step on two threads is well under twice as fast;
//! docs/heads.md, "Label-free selection"). P = min(runs, processors / T, max_concurrent when
//! > 0), at least 1; so P·T ≤ processors unless T alone exceeds them (P is then 1).
inline sweep_plan plan_sweep(index_t runs,
                             int processors,
                             int threads_per_run = 0,
                             int max_concurrent = 0) {
  if (runs < 1) fail("plan_sweep", "runs", "at least 1", std::to_string(runs));
  if (processors < 1) fail("plan_sweep", "processors", "at least 1", std::to_string(processors));
  if (threads_per_run < 0)
    fail("plan_sweep", "threads_per_run", "0 (one thread) or more",
         std::to_string(threads_per_run));
  if (max_concurrent < 0)
    fail("plan_sweep", "max_concurrent", "0 (no limit) or more", std::to_string(max_concurrent));
  sweep_plan p;
  p.processors = processors;
  p.threads = threads_per_run > 0 ? threads_per_run : 1;
  index_t at_once = std::max(1, processors / p.threads);
  if (max_concurrent > 0) at_once = std::min<index_t>(at_once, max_concurrent);
  p.concurrent = int(std::min(at_once, runs));
  return p;
}

//! What one training of the sweep measured.
struct sweep_run {
  index_t configuration = 0;  //!< index into sweep_result::configurations
  float lambda_max = 0, lr = 0;
  std::uint64_t seed = 0;
  //! The validator's score of the model the training ended with (NaN: diverged, or non-finite
  //! outputs).
  double score = std::numeric_limits<double>::quiet_NaN();
  //! Every validator's score of that model (indexed by select::validator): the selector's and
  //! those of fit_options::validators; NaN for the others.
  std::array<double, select::all_validators.size()> scores = nan_scores();
  //! Oracle figures (need target labels; NaN without): accuracy on the target rows trained on,
  //! and on the target test set when one is given.
  double target_accuracy = std::numeric_limits<double>::quiet_NaN();
  double test_accuracy = std::numeric_limits<double>::quiet_NaN();
  double seconds = 0;  //!< the training's wall time (fit_result::seconds)
  bool diverged = false;
  //! When the sweep keeps them (sweep_options::keep_predictions): the final model's softmax
  //! probabilities on the target rows its validators read, [classes, rows] floats, 4·classes·rows
  //! bytes. Empty otherwise, and for a training that diverged or whose outputs were not finite
  //! (those are left out of ensv's ensemble).
  class_probabilities target_probabilities;

  static constexpr std::array<double, select::all_validators.size()> nan_scores() {
    std::array<double, select::all_validators.size()> a{};
    a.fill(std::numeric_limits<double>::quiet_NaN());
    return a;
  }
};

//! One configuration's figures over its seeds: mean, and sample standard deviation (n − 1; 0 for
//! one seed). A mean over a NaN is NaN.
struct sweep_configuration {
  float lambda_max = 0, lr = 0;
  double score = std::numeric_limits<double>::quiet_NaN();  //!< mean validator score
  //! Each validator's mean score over the seeds (sweep_run::scores), NaN where a run's is.
  std::array<double, select::all_validators.size()> scores = sweep_run::nan_scores();
  double target_accuracy = std::numeric_limits<double>::quiet_NaN();  //!< oracle figure
  double target_accuracy_std = std::numeric_limits<double>::quiet_NaN();
  double test_accuracy = std::numeric_limits<double>::quiet_NaN();  //!< oracle figure
  double test_accuracy_std = std::numeric_limits<double>::quiet_NaN();
};

//! What a sweep returns.
struct sweep_result {
  select::validator selected_by = select::validator::entropy;  //!< the validator that chose
  sweep_plan plan;
  //! Every training, configuration-major then seed (the grid's order whatever ran when).
  std::vector<sweep_run> runs;
  //! λ_max-major, then lr: configuration c is (lambda_max[c / |lr|], lr[c % |lr|]).
  std::vector<sweep_configuration> configurations;
  //! The configuration the validator chose (label-free); -1 when every score is NaN.
  index_t selected = -1;
  //! The configuration with the best mean accuracy on the target test set, else on the target
  //! rows: the *oracle* choice, made with target labels; -1 without labels.
  index_t oracle = -1;
  double seconds = 0;  //!< the whole sweep's wall time
};

//! Settings of a sweep besides its grid.
struct sweep_options {
  select::validator selector = select::validator::entropy;  //!< chooses the configuration
  //! Each training's fit options (validation_fraction, validators, validator_rows, …). The sweep
  //! sets eval_every, selector and clears what cannot be shared between trainings at once
  //! (checkpoints, resume, callbacks, profiler, restore_best, patience).
  fit_options fit{};
  int threads_per_run = 0;  //!< T (0: 1)
  int max_concurrent = 0;   //!< an upper bound on P (0: none)
  int processors = 0;       //!< the processors to plan for (0: usable_processors())
  //! Keep every training's target predictions in sweep_run::target_probabilities: 4·classes·rows
  //! bytes a training, rows = min(fit.validator_rows, target rows), held until the result goes
  //! (docs/validators.md, "EnsV as a sweep's selector", has the figures). Turned on, whatever
  //! this says, when ensv is the selector or among fit.validators (keeps_predictions).
  bool keep_predictions = false;
  //! Called after each training, on the worker that ran it, one call at a time: `done` of
  //! `total` trainings have finished.
  std::function<void(const sweep_run&, index_t done, index_t total)> on_run{};
};

namespace detail {

//! Whether the sweep computes `v`: the selector, or one of fit.validators.
inline bool wants(const sweep_options& o, select::validator v) {
  return o.selector == v ||
         std::find(o.fit.validators.begin(), o.fit.validators.end(), v) != o.fit.validators.end();
}

//! Mean and sample standard deviation of `v` (NaN if any value is).
inline std::pair<double, double> mean_std(const std::vector<double>& v) {
  double mean = 0;
  for (const double x : v) mean += x;
  mean /= double(v.size());
  double var = 0;
  for (const double x : v) var += (x - mean) * (x - mean);
  return {mean, v.size() > 1 ? std::sqrt(var / double(v.size() - 1)) : 0.0 * mean};
}

//! Fills the configurations and the two choices from the runs.
inline void summarize_sweep(const sweep_grid& g, sweep_result& r) {
  const index_t seeds = index_t(g.seeds.size());
  r.configurations.assign(std::size_t(g.configurations()), {});
  bool any_test = false, any_target = false;
  for (index_t c = 0; c < g.configurations(); ++c) {
    sweep_configuration& s = r.configurations[std::size_t(c)];
    s.lambda_max = g.lambda_max[std::size_t(c) / g.lr.size()];
    s.lr = g.lr[std::size_t(c) % g.lr.size()];
    std::vector<double> score, target, test;
    std::array<std::vector<double>, select::all_validators.size()> scores;
    for (index_t k = 0; k < seeds; ++k) {
      const sweep_run& run = r.runs[std::size_t(c * seeds + k)];
      score.push_back(run.score);
      target.push_back(run.target_accuracy);
      test.push_back(run.test_accuracy);
      for (std::size_t v = 0; v < scores.size(); ++v) scores[v].push_back(run.scores[v]);
    }
    s.score = mean_std(score).first;
    for (std::size_t v = 0; v < scores.size(); ++v) s.scores[v] = mean_std(scores[v]).first;
    std::tie(s.target_accuracy, s.target_accuracy_std) = mean_std(target);
    std::tie(s.test_accuracy, s.test_accuracy_std) = mean_std(test);
    any_target = any_target || std::isfinite(s.target_accuracy);
    any_test = any_test || std::isfinite(s.test_accuracy);
  }
  for (index_t c = 0; c < g.configurations(); ++c) {
    const sweep_configuration& s = r.configurations[std::size_t(c)];
    if (improves(r.selected_by, s.score,
                 r.selected < 0 ? std::numeric_limits<double>::quiet_NaN()
                                : r.configurations[std::size_t(r.selected)].score))
      r.selected = c;
    const auto oracle_of = [&](const sweep_configuration& x) {
      return any_test ? x.test_accuracy : x.target_accuracy;
    };
    if ((any_test || any_target) && std::isfinite(oracle_of(s)) &&
        (r.oracle < 0 || oracle_of(s) > oracle_of(r.configurations[std::size_t(r.oracle)])))
      r.oracle = c;
  }
}

}  // namespace detail

//! Whether a sweep with options `o` keeps its trainings' target predictions: when asked to, or
//! when a validator that scores the set of trainings (ensv) is its selector or among
//! fit.validators.
inline bool keeps_predictions(const sweep_options& o) {
  if (o.keep_predictions) return true;
  for (const select::validator v : select::all_validators)
    if (select::scores_a_set(v) && detail::wants(o, v)) return true;
  return false;
}

//! Ensemble validation over a sweep's trainings: sets each run's scores[ensv] to
//! select::ensemble_validation over the kept predictions of every run that has them, in the
//! runs' order; NaN for a run left out: one that diverged, kept none, or kept a non-finite value.
//! Every run scored is scored against the same ensemble, so adding or removing a training
//! changes every score. Runs of several sweeps on one target (different heads), concatenated,
//! may be scored together. The kept predictions must all have one shape (the same rows: one
//! target and one validator_rows); a run's that differs is refused, naming it.
inline void score_ensemble(std::span<sweep_run> runs) {
  constexpr auto ensv = std::size_t(select::validator::ensv);
  const auto shape = [](const class_probabilities& p) {
    return std::to_string(p.classes) + " classes x " + std::to_string(p.rows) + " rows";
  };
  const auto field = [](std::size_t i) {
    return "runs[" + std::to_string(i) + "].target_probabilities";
  };
  std::vector<matrix_view<const float>> candidates;
  std::vector<std::size_t> scored;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    sweep_run& run = runs[i];
    run.scores[ensv] = std::numeric_limits<double>::quiet_NaN();
    const class_probabilities& p = run.target_probabilities;
    const bool finite =
        std::all_of(p.values.begin(), p.values.end(), [](float x) { return std::isfinite(x); });
    if (run.diverged || p.empty() || !finite) continue;
    if (p.classes < 1 || p.rows < 1 || p.values.size() != std::size_t(p.classes * p.rows))
      fail("score_ensemble", field(i), "classes x rows values, both at least 1",
           std::to_string(p.values.size()) + " values for " + shape(p));
    const class_probabilities& first = runs[scored.empty() ? i : scored[0]].target_probabilities;
    if (p.classes != first.classes || p.rows != first.rows)
      fail("score_ensemble", field(i),
           shape(first) + ", the shape of " + field(scored[0]) +
               " (every training's predictions on the same target rows)",
           shape(p));
    candidates.push_back(p.view());
    scored.push_back(i);
  }
  if (candidates.empty()) return;
  const std::vector<double> s = select::ensemble_validation(candidates);
  for (std::size_t k = 0; k < scored.size(); ++k) runs[scored[k]].scores[ensv] = s[k];
}

//! The configuration whose mean score under `v` (sweep_configuration::scores) is best for v's
//! direction; -1 when every one is NaN; ties go to the first. Lets one sweep (or the
//! configurations of several, concatenated: different heads on one task) be judged by each
//! validator it computed.
inline index_t best_by(std::span<const sweep_configuration> configurations, select::validator v) {
  index_t best = -1;
  for (std::size_t c = 0; c < configurations.size(); ++c)
    if (detail::improves(v, configurations[c].scores[std::size_t(v)],
                         best < 0 ? std::numeric_limits<double>::quiet_NaN()
                                  : configurations[std::size_t(best)].scores[std::size_t(v)]))
      best = index_t(c);
  return best;
}

//! Runs every training of grid `g` with `train(args)`, P at a time on T threads each
//! (plan_sweep), and chooses. `base` gives every fit_args field the grid does not set.
//! `train(const fit_args&) -> sweep_run` fills score (and scores, when it has them), the
//! accuracies, seconds and diverged; it is called from P threads at once, each with
//! omp_set_num_threads(T) done, and must be safe to call so. The first exception a training throws
//! stops the handing out of new ones and is rethrown once the running ones have finished.
//! Once every training has finished, a validator that scores the set of them (ensv), when it is
//! the selector or among o.fit.validators, is computed by score_ensemble from the predictions
//! the runs kept; as selector, it is each run's `score`.
template <class Train>
sweep_result run_sweep(const fit_args& base,
                       const sweep_grid& g,
                       const sweep_options& o,
                       Train&& train) {
  check_grid(g);
  const auto start = std::chrono::steady_clock::now();
  sweep_result r;
  r.selected_by = o.selector;
  r.plan = plan_sweep(g.runs(), o.processors > 0 ? o.processors : usable_processors(),
                      o.threads_per_run, o.max_concurrent);
  const index_t total = g.runs(), seeds = index_t(g.seeds.size());
  r.runs.assign(std::size_t(total), {});
  std::atomic<index_t> next{0};
  std::atomic<bool> failed{false};
  std::mutex report;  // guards `error`, `done` and on_run
  std::exception_ptr error;
  index_t done = 0;
  const auto worker = [&] {
#if defined(_OPENMP)
    // This thread's own OpenMP setting (an ICV of the thread that opens the regions).
    omp_set_num_threads(r.plan.threads);
#endif
    for (;;) {
      if (failed.load()) return;
      const index_t i = next.fetch_add(1);
      if (i >= total) return;
      const index_t c = i / seeds;
      fit_args args = base;
      args.lambda_max = g.lambda_max[std::size_t(c) / g.lr.size()];
      args.lr = g.lr[std::size_t(c) % g.lr.size()];
      args.seed = g.seeds[std::size_t(i % seeds)];
      try {
        sweep_run& run = r.runs[std::size_t(i)];  // this worker's alone
        run = train(static_cast<const fit_args&>(args));
        run.configuration = c;
        run.lambda_max = args.lambda_max;
        run.lr = args.lr;
        run.seed = args.seed;
        const std::lock_guard<std::mutex> lock(report);
        ++done;
        if (o.on_run) o.on_run(run, done, total);
      } catch (...) {
        const std::lock_guard<std::mutex> lock(report);
        if (!error) error = std::current_exception();
        failed.store(true);
        return;
      }
    }
  };
  std::vector<std::thread> workers;
  workers.reserve(std::size_t(r.plan.concurrent));
  try {
    for (int p = 0; p < r.plan.concurrent; ++p) workers.emplace_back(worker);
  } catch (...) {
    // No thread to be had (a thread limit): the started ones finish their training and stop.
    failed.store(true);
    for (std::thread& w : workers) w.join();
    throw;
  }
  for (std::thread& w : workers) w.join();
  if (error) std::rethrow_exception(error);
  if (detail::wants(o, select::validator::ensv)) score_ensemble(r.runs);
  if (select::scores_a_set(o.selector))
    for (sweep_run& run : r.runs) run.score = run.scores[std::size_t(o.selector)];
  detail::summarize_sweep(g, r);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

//! The fit options of each training of a sweep with options `options` and `steps` steps: one
//! evaluation, at the last step; nothing that trainings at once cannot share (checkpoints,
//! resume, callbacks, profiler) nor anything that changes the model a training ends with
//! (restore_best, patience). A validator that scores the set of trainings (ensv) is the sweep's
//! to compute, not fit's: it leaves fit's validators, and when it is the selector each training's
//! own evaluation selects by entropy (which needs nothing but the target rows; its score is not
//! reported unless asked for), keeping the target probabilities ensv reads.
inline fit_options sweep_fit_options(const sweep_options& options, index_t steps) {
  fit_options o = options.fit;
  o.eval_every = steps;
  o.selector =
      select::scores_a_set(options.selector) ? select::validator::entropy : options.selector;
  std::erase_if(o.validators, [](select::validator v) { return select::scores_a_set(v); });
  o.keep_target_probabilities = keeps_predictions(options);
  o.patience = 0;
  o.restore_best = false;
  o.checkpoint.clear();
  o.checkpoint_every = 0;
  o.best_checkpoint.clear();
  o.resume.clear();
  o.callbacks.clear();
  o.profile = nullptr;
  return o;
}

//! A sweep's record of one training that fit (with sweep_fit_options(options, steps)) returned
//! as `f`: divergence, wall time, target accuracy (when labelled), and, from its evaluation at
//! step `steps`, the scores the sweep asks for (the selector's is `score`; a set's, ensv, is NaN
//! until run_sweep computes it) and the kept predictions, moved out of `f`, when its outputs
//! were finite. Not the test accuracy: the caller scores its own test set.
inline sweep_run sweep_run_of(fit_result& f, const sweep_options& options, index_t steps) {
  sweep_run run;
  run.diverged = f.diverged;
  run.seconds = f.seconds;
  if (f.diverged) return run;
  run.target_accuracy = f.target_accuracy;
  if (f.evaluations.empty() || f.evaluations.back().step != steps) return run;
  const evaluation& e = f.evaluations.back();
  for (const select::validator v : select::all_validators)
    if (detail::wants(options, v) && !select::scores_a_set(v))
      run.scores[std::size_t(v)] = e.score(v);
  if (!select::scores_a_set(options.selector)) run.score = e.selection_score;
  if (keeps_predictions(options) && e.finite_outputs)
    run.target_probabilities = std::move(f.target_probabilities);
  return run;
}

//! Sweeps `Step` over grid `g` on `source` and `target` (and a labelled `target_test`, when not
//! null, scored with each training's final model, never trained on): each training is
//! `fit(Step(args), source, target, sweep_fit_options(options, base.steps))`, one evaluation
//! at its last step, whose selector score is the run's score. See run_sweep for the
//! parallelism and the choice.
template <class Step, class Data>
sweep_result sweep(const Data& source,
                   const Data& target,
                   const Data* target_test,
                   const fit_args& base,
                   const sweep_grid& g,
                   const sweep_options& options) {
  const fit_options o = sweep_fit_options(options, base.steps);
  return run_sweep(base, g, options, [&](const fit_args& args) {
    Step step(args);
    fit_result f = fit(step, source, target, o);
    sweep_run run = sweep_run_of(f, options, base.steps);
    if (!f.diverged && target_test) run.test_accuracy = accuracy(step, *target_test);
    return run;
  });
}

//! The same without a target test set.
template <class Step, class Data>
sweep_result sweep(const Data& source,
                   const Data& target,
                   const fit_args& base,
                   const sweep_grid& g,
                   const sweep_options& options) {
  return sweep<Step>(source, target, static_cast<const Data*>(nullptr), base, g, options);
}

}  // namespace dafuse
