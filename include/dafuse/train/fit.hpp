// SPDX-License-Identifier: Apache-2.0
//! @file train/fit.hpp
//! @brief `fit`: the training loop around a step: evaluation, label-free model selection, early
//! stopping, checkpoints, callbacks and profiling.
#pragma once
#include <dafuse/config.hpp>
#include <dafuse/core/buffer.hpp>
#include <dafuse/core/crc32.hpp>
#include <dafuse/core/error.hpp>
#include <dafuse/core/profiler.hpp>
#include <dafuse/data/batcher.hpp>
#include <dafuse/data/csr.hpp>
#include <dafuse/data/dataset.hpp>
#include <dafuse/data/sparse_batcher.hpp>
#include <dafuse/data/split.hpp>
#include <dafuse/policy/arguments.hpp>
#include <dafuse/select/validators.hpp>
#include <dafuse/step/train_step.hpp>
#include <dafuse/train/checkpoint.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace dafuse {

//! One evaluation of the model during fit (every fit_options::eval_every steps).
struct evaluation {
  index_t step = 0;  //!< steps taken when it was measured
  //! Accuracy on the held-out source rows (NaN without them): label-free w.r.t. the target.
  double source_accuracy = std::numeric_limits<double>::quiet_NaN();
  //! Accuracy on the target rows, only when the target has labels: an oracle figure, reported
  //! and never used for selection.
  double target_accuracy = std::numeric_limits<double>::quiet_NaN();
  //! Each validator's score (indexed by select::validator), NaN for those not computed.
  std::array<double, select::all_validators.size()> scores;
  double selection_score = std::numeric_limits<double>::quiet_NaN();  //!< the selector's score
  bool best = false;  //!< the best selection score so far (at this evaluation)
  //! On the schedule (every fit_options::eval_every steps, or the last step), and so a candidate
  //! for selection and the oracle. False for the evaluation where a callback stopped the run off
  //! the schedule: reported only, so that a run stopped there and resumed selects what an
  //! uninterrupted one does.
  bool scheduled = true;
  //! The model's probabilities and features were finite; if not, every score is NaN.
  bool finite_outputs = true;

  evaluation() { scores.fill(std::numeric_limits<double>::quiet_NaN()); }
  double score(select::validator v) const { return scores[std::size_t(v)]; }
};

//! A model's softmax probabilities on some target rows, column-major [classes, rows] (one row's
//! distribution per contiguous column, the layout of the validators' inputs): what
//! fit_options::keep_target_probabilities keeps, 4·classes·rows bytes.
struct class_probabilities {
  index_t classes = 0, rows = 0;
  std::vector<float> values;  //!< [classes, rows]

  bool empty() const { return values.empty(); }
  std::size_t bytes() const { return values.size() * sizeof(float); }
  matrix_view<const float> view() const { return {values.data(), classes, rows}; }
};

//! What `fit` returns.
struct fit_result {
  double target_accuracy = std::numeric_limits<double>::quiet_NaN();  //!< NaN without labels
  double source_accuracy = 0;  //!< on the source training rows
  //! Wall time of the loop: steps, and the evaluations and checkpoints it ran (a profiler
  //! splits them); not the final accuracies.
  double seconds = 0;
  double data_wait_seconds = 0;    //!< of `seconds`, waiting for data (see fit())
  index_t steps = 0;               //!< steps taken (this call; a resumed run counts from there)
  index_t skipped_steps = 0;       //!< steps whose update was skipped for non-finite gradients
  step_report last;                //!< the last step's report
  std::vector<double> parameters;  //!< trained parameters (the step's flat layout)

  // Evaluation and selection (fit_options::eval_every > 0).
  std::vector<evaluation> evaluations;                                 //!< in step order
  select::validator selected_by = select::validator::source_accuracy;  //!< the selector
  index_t best_step = -1;  //!< step of the best selection score (-1: no evaluation)
  double best_score = std::numeric_limits<double>::quiet_NaN();  //!< that score
  //! Target accuracy of the model the label-free selector picked (target labels only read for
  //! this report; NaN without them).
  double selected_target_accuracy = std::numeric_limits<double>::quiet_NaN();
  //! The best target accuracy over all evaluations: the *oracle* choice, which needs target
  //! labels and is an upper bound on any selector, not a result a user could have obtained.
  double oracle_target_accuracy = std::numeric_limits<double>::quiet_NaN();
  bool stopped_early = false;  //!< early stopping (patience) or a callback ended the run
  bool restored_best = false;  //!< the step holds the best model's weights, not the last ones
  //! Training diverged (see fit_options::max_skipped_in_a_row): the run stopped at step
  //! `diverged_at` with the weights of the last update that was made, and `divergence` says why.
  bool diverged = false;
  index_t diverged_at = -1;
  std::string divergence;  //!< "training diverged at step k (…)"; empty when it did not
  //! With fit_options::keep_target_probabilities, the last evaluation's target probabilities:
  //! those its validators read, on the rows fit_options::validator_rows picks (see there), finite
  //! or not (evaluation::finite_outputs says). Empty without the option or an evaluation.
  class_probabilities target_probabilities;
};

//! Hooks into the loop for users' own logging and control; every member has a no-op default.
//! Called on the loop's thread.
class fit_callback {
 public:
  virtual ~fit_callback() = default;
  //! After each step; `step` counts the steps taken so far (1 after the first).
  virtual void on_step(index_t step, const step_report& report) {
    (void)step;
    (void)report;
  }
  //! After each evaluation.
  virtual void on_evaluation(const evaluation& e) { (void)e; }
  //! Asked after each step: true ends the run there (fit_result::stopped_early).
  virtual bool should_stop() { return false; }
};

//! How `fit` evaluates, selects, stops, saves and measures. The defaults train for
//! fit_args::steps steps with no evaluation, as the three-argument fit does.
struct fit_options {
  //! Evaluate every K steps and after the last one (0: no evaluations).
  index_t eval_every = 0;
  //! Fraction of the source rows held out for validation (0: none, or pass a validation set).
  //! The rows are chosen by a permutation of fit_args::seed (data::split_validation).
  double validation_fraction = 0;
  //! What picks the best model and drives early stopping. It never reads target labels.
  select::validator selector = select::validator::source_accuracy;
  //! Validators computed at each evaluation besides the selector (source_accuracy needs held-out
  //! rows and is skipped without them).
  std::vector<select::validator> validators{select::validator::source_accuracy,
                                            select::validator::entropy,
                                            select::validator::information_maximization};
  //! Target rows the validators read at most, evenly spaced (SND is quadratic in them; the
  //! target accuracy always uses every row): data::sample_rows(target, validator_rows), which
  //! draws nothing at random, so every fit on one target with one validator_rows reads the same
  //! rows, whatever its seed.
  index_t validator_rows = 2000;
  //! Keep the target probabilities each evaluation's validators read; the last evaluation's are
  //! returned in fit_result::target_probabilities (4·classes·min(validator_rows, target rows)
  //! bytes). What a sweep's ensemble validation reads (sweep_options::keep_predictions).
  bool keep_target_probabilities = false;
  //! Stop after this many evaluations without a better selection score (0: never).
  index_t patience = 0;
  //! When the run ends, put the best evaluated model's weights into the step.
  bool restore_best = false;
  std::string checkpoint{};       //!< save here every checkpoint_every steps and at the end
  index_t checkpoint_every = 0;   //!< 0: only at the end (when `checkpoint` is set)
  std::string best_checkpoint{};  //!< save the best model here whenever it improves
  std::string resume{};           //!< continue from this checkpoint (train/checkpoint.hpp)
  //! The caller's own settings that change the maths without reaching fit_args or the data (a
  //! program's preprocessing, say): stored in checkpoints with fit's, and a resumed run must
  //! give the same ones (the first that differs is named).
  std::vector<run_setting> run_settings{};
  //! The run has diverged, and stops, at a step whose loss is not finite, or after this many
  //! steps in a row whose update was skipped for non-finite gradients (0: skips never stop it).
  //! An fp16 loss scale skips a few steps while it backs off; a hundred in a row is a run whose
  //! gradients overflow at every scale.
  index_t max_skipped_in_a_row = 100;
  profiler* profile = nullptr;             //!< time the phases into this profiler (not owned)
  std::vector<fit_callback*> callbacks{};  //!< not owned
};

namespace detail {
//! Fraction of the data set's rows whose class `predict(classes)` gives equals their label.
template <class Step, class Data, class Predict>
double fraction_correct(const Data& d, Predict predict) {
  if (!d.has_labels())
    fail(d.origin, "labels", "labels to measure accuracy", "an unlabelled data set");
  data::check_width(d, Step::input_width);
  std::vector<std::int32_t> predicted(d.labels.size());
  predict(predicted.data());
  std::size_t correct = 0;
  for (std::size_t i = 0; i < predicted.size(); ++i) correct += predicted[i] == d.labels[i];
  return double(correct) / double(predicted.size());
}

//! Rows of a dense or sparse data set.
inline index_t row_count(const data::dataset& d) {
  return d.rows;
}
inline index_t row_count(const data::sparse_dataset& d) {
  return d.rows();
}

//! Runs the step's inference on every row of `d`, writing what `out` asks for.
template <class Step>
void infer_rows(Step& step, const data::dataset& d, typename Step::inference out) {
  step.infer(d.features.data(), d.rows, out);
}
template <class Step>
void infer_rows(Step& step, const data::sparse_dataset& d, typename Step::inference out) {
  step.infer(data::sparse_columns(d.features), out);
}
}  // namespace detail

//! Fraction of rows of `d` whose predicted class equals its label (needs labels).
template <class Step>
double accuracy(Step& step, const data::dataset& d) {
  return detail::fraction_correct<Step>(
      d, [&](std::int32_t* classes) { step.predict(d.features.data(), d.rows, classes); });
}

//! The same for a sparse data set, through the step's sparse first layer (nn::sparse_input).
template <class Step>
double accuracy(Step& step, const data::sparse_dataset& d) {
  return detail::fraction_correct<Step>(
      d, [&](std::int32_t* classes) { step.predict(data::sparse_columns(d.features), classes); });
}

namespace detail {

//! Scores a model at one evaluation: source accuracy and per-sample losses on the held-out
//! rows, target predictions and features for the validators, target accuracy when labelled.
//! Sized once per fit; each evaluate() reuses the arrays.
template <class Step, class Data>
class evaluator {
 public:
  evaluator(const Data* validation, const Data& target, const fit_options& o)
      : validation_(validation), target_(target), options_(o) {
    if (o.validator_rows < 2)
      fail("fit_options", "validator_rows", "at least 2", std::to_string(o.validator_rows));
    // The validators read at most validator_rows target rows: a sample of a larger target, else
    // the target itself (no copy, and one pass gives classes, probabilities and features).
    if (row_count(target) > o.validator_rows)
      sampled_.emplace(data::sample_rows(target, o.validator_rows));
    target_sample_ = sampled_ ? &*sampled_ : &target;
    for (const select::validator v : o.validators) wanted_[std::size_t(v)] = true;
    wanted_[std::size_t(o.selector)] = true;
    const bool needs_validation =
        o.selector == select::validator::source_accuracy || o.selector == select::validator::dev;
    if (needs_validation && !validation)
      fail("fit_options", "selector",
           "held-out source rows for " + std::string(select::name(o.selector)) +
               " (set validation_fraction or pass a validation set)",
           "no validation rows");
    if (!validation) {
      wanted_[std::size_t(select::validator::source_accuracy)] = false;
      wanted_[std::size_t(select::validator::dev)] = false;
      wanted_[std::size_t(select::validator::pad)] = false;
    }
    const index_t n_sample = row_count(*target_sample_);
    target_probabilities_.resize(std::size_t(n_sample * Step::class_count));
    target_features_.resize(std::size_t(n_sample * Step::feature_width));
    target_classes_.resize(std::size_t(row_count(target)));
    if (validation) {
      const index_t n = row_count(*validation);
      validation_probabilities_.resize(std::size_t(n * Step::class_count));
      validation_features_.resize(std::size_t(n * Step::feature_width));
      validation_losses_.resize(std::size_t(n));
    }
  }

  //! The target probabilities of the last evaluate() (zeros before the first).
  class_probabilities target_probabilities() const {
    return {Step::class_count, row_count(*target_sample_), target_probabilities_};
  }

  evaluation evaluate(Step& step, index_t at) {
    using select::validator;
    evaluation e;
    e.step = at;
    const auto want = [&](validator v) { return wanted_[std::size_t(v)]; };
    const matrix_view<const float> target_p{target_probabilities_.data(), Step::class_count,
                                            row_count(*target_sample_)};
    const matrix_view<const float> target_h{target_features_.data(), Step::feature_width,
                                            row_count(*target_sample_)};
    const bool labelled = target_.has_labels();
    std::int32_t* classes = labelled && !sampled_ ? target_classes_.data() : nullptr;
    infer_rows(step, *target_sample_,
               {.classes = classes,
                .probabilities = target_probabilities_.data(),
                .features = target_features_.data()});
    if (labelled) {
      if (sampled_) infer_rows(step, target_, {.classes = target_classes_.data()});
      e.target_accuracy = matching_fraction(target_classes_, target_.labels);
    }
    // A model whose outputs are not finite scores NaN everywhere, which is never selected.
    e.finite_outputs = all_finite(target_probabilities_) && all_finite(target_features_);
    if (validation_) {
      infer_rows(step, *validation_,
                 {.probabilities = validation_probabilities_.data(),
                  .features = validation_features_.data()});
      e.finite_outputs = e.finite_outputs && all_finite(validation_probabilities_) &&
                         all_finite(validation_features_);
    }
    if (!e.finite_outputs) return e;
    if (validation_) {
      const index_t n = row_count(*validation_);
      // Per-sample cross-entropy −log p_y (DEV's losses) and accuracy, from the probabilities.
      std::size_t correct = 0;
      for (index_t i = 0; i < n; ++i) {
        const float* p = validation_probabilities_.data() + i * Step::class_count;
        const std::int32_t y = validation_->labels[std::size_t(i)];
        validation_losses_[std::size_t(i)] = -std::log(std::max(double(p[y]), 1e-30));
        correct += nn::argmax(p, Step::class_count) == y;
      }
      e.source_accuracy = double(correct) / double(n);
      if (want(validator::source_accuracy)) e.scores[0] = e.source_accuracy;
      const matrix_view<const float> validation_h{validation_features_.data(), Step::feature_width,
                                                  n};
      if (want(validator::dev))
        e.scores[std::size_t(validator::dev)] =
            select::deep_embedded_validation(validation_h, validation_losses_, target_h);
      if (want(validator::pad))
        e.scores[std::size_t(validator::pad)] = select::proxy_a_distance(validation_h, target_h);
    }
    if (want(validator::entropy))
      e.scores[std::size_t(validator::entropy)] = select::mean_entropy(target_p);
    if (want(validator::information_maximization))
      e.scores[std::size_t(validator::information_maximization)] =
          select::information_maximization(target_p);
    if (want(validator::snd))
      e.scores[std::size_t(validator::snd)] = select::soft_neighborhood_density(target_p);
    if (want(validator::bnm))
      e.scores[std::size_t(validator::bnm)] = select::batch_nuclear_norm(target_p);
    if (want(validator::mano)) e.scores[std::size_t(validator::mano)] = select::mano(target_p);
    e.selection_score = e.score(options_.selector);
    return e;
  }

 private:
  static bool all_finite(const std::vector<float>& v) {
    return std::all_of(v.begin(), v.end(), [](float x) { return std::isfinite(x); });
  }
  static double matching_fraction(const std::vector<std::int32_t>& a,
                                  const std::vector<std::int32_t>& b) {
    std::size_t same = 0;
    for (std::size_t i = 0; i < a.size(); ++i) same += a[i] == b[i];
    return double(same) / double(a.size());
  }

  const Data* validation_;
  const Data& target_;
  const fit_options& options_;
  std::optional<Data> sampled_;  // the evenly spaced sample, when the target is larger
  const Data* target_sample_;    // the rows the validators read: *sampled_ or the target
  std::array<bool, select::all_validators.size()> wanted_{};
  std::vector<float> target_probabilities_, target_features_;
  std::vector<std::int32_t> target_classes_;
  std::vector<float> validation_probabilities_, validation_features_;
  std::vector<double> validation_losses_;
};

//! Whether `score` beats `best` for the selector's direction (any finite score beats NaN).
inline bool improves(select::validator v, double score, double best) {
  if (!std::isfinite(score)) return false;
  if (std::isnan(best)) return true;
  return select::higher_is_better(v) ? score > best : score < best;
}

//! A step whose executor queues steps on a device (train_step::device_queue).
template <class Step>
inline constexpr bool queued_step = requires {
  requires Step::device_queue;
};

//! A device step reads its report every this many steps at least (besides evaluations,
//! checkpoints, callbacks and the last step), so that a diverging run stops within as many steps.
inline constexpr index_t device_report_every = 100;

//! loader::resident on a device step: the data went into the step (load_resident), which draws
//! each batch itself: nothing to fill, no wait.
struct loaded_into_step {
  double wait_seconds() const { return 0; }
};

//! The loop `fit` runs for any data set kind: `make_batcher(first_batch)` builds the loader at
//! the run's position, `fill(batcher)` fills the step's batch. Without `Options` (a fit called
//! without fit_options, `o` then the defaults) the evaluation, checkpoint and resume code is not
//! compiled: it would never run, and it is most of what a translation unit with one step and fit
//! compiles (the validators, the checkpoint format, the validation split; docs/benchmarks.md,
//! "Compile time").
template <bool Options, class Step, class Data, class MakeBatcher, class Fill>
fit_result train_loop(Step& step,
                      const Data& source,
                      const Data& target,
                      const Data* validation,
                      const fit_options& o,
                      std::span<const run_setting> settings,
                      MakeBatcher make_batcher,
                      Fill fill) {
  const fit_args& args = step.args();
  if (o.eval_every < 0)
    fail("fit_options", "eval_every", "a step count >= 0", std::to_string(o.eval_every));
  if (o.checkpoint_every < 0)
    fail("fit_options", "checkpoint_every", "a step count >= 0",
         std::to_string(o.checkpoint_every));
  if (o.patience < 0) fail("fit_options", "patience", "a count >= 0", std::to_string(o.patience));
  if (o.max_skipped_in_a_row < 0)
    fail("fit_options", "max_skipped_in_a_row", "a step count >= 0",
         std::to_string(o.max_skipped_in_a_row));
  // EnsV ranks a set of candidates by their agreement with the set's ensemble: one run's
  // checkpoints, evaluated one at a time as the run goes, are not such a set.
  const auto refuse_set_validator = [](std::string_view field, select::validator v) {
    if (select::scores_a_set(v))
      fail("fit_options", field,
           "a validator that scores one model (" + std::string(select::name(v)) +
               " scores a sweep's trainings against their ensemble once all have finished: "
               "choose by it with dafuse::sweep and sweep_options::selector)",
           std::string(select::name(v)));
  };
  refuse_set_validator("selector", o.selector);
  for (const select::validator v : o.validators) refuse_set_validator("validators", v);
  if ((o.patience > 0 || o.restore_best || !o.best_checkpoint.empty()) && o.eval_every == 0)
    fail("fit_options", "eval_every",
         "a step count > 0 (patience, restore_best and best_checkpoint need evaluations)", "0");

  run_position position{std::uint64_t(row_count(source)), std::uint64_t(row_count(target))};
  if constexpr (Options)
    if (!o.resume.empty()) {
      const run_position stored = load_checkpoint(o.resume, step, settings);
      if (stored.source_rows != position.source_rows)
        fail(o.resume, "source rows", std::to_string(position.source_rows) + " (this run's source)",
             std::to_string(stored.source_rows));
      if (stored.target_rows != position.target_rows)
        fail(o.resume, "target rows", std::to_string(position.target_rows) + " (this run's target)",
             std::to_string(stored.target_rows));
      position = stored;
    }
  const index_t first = step.step_index();

  fit_result r;
  r.selected_by = o.selector;
  r.best_step = index_t(position.best_step);
  r.best_score = position.best_score;
  r.selected_target_accuracy = position.selected_target_accuracy;
  r.oracle_target_accuracy = position.oracle_target_accuracy;
  std::optional<std::conditional_t<Options, evaluator<Step, Data>, bool>> scorer;
  if constexpr (Options)
    if (o.eval_every > 0) scorer.emplace(validation, target, o);
  std::vector<typename Step::value_type> best_parameters;
  if (o.restore_best) best_parameters.reserve(static_cast<std::size_t>(Step::parameter_count()));

  auto batches = make_batcher(std::uint64_t(first));
  // Steps skipped in a row before this call (a resumed run's), continued by this call's.
  const index_t skipped_carried = index_t(position.skipped_in_a_row);
  index_t skipped_in_a_row = skipped_carried;
  const index_t skipped_before = step.tallies().skipped;  // the step's skipped steps before
  step.set_profiler(o.profile);
  const auto start = std::chrono::steady_clock::now();
  for (index_t t = first; t < args.steps;) {
    {
      profile_scope waiting(o.profile, phase::data_wait);
      fill(batches);
    }
    // The step (counted from 1) whose loss was not finite, or -1.
    index_t nonfinite_at = -1;
    // The step is queued (on a device; a host step runs at once); its report and tallies are
    // read where the loop needs them: every step on a host, whose report is in host memory.
    step.enqueue();
    const index_t next = t + 1;
    const bool look =
        !queued_step<Step> || !o.callbacks.empty() || next == args.steps ||
        next % device_report_every == 0 || (o.eval_every > 0 && next % o.eval_every == 0) ||
        (!o.checkpoint.empty() && o.checkpoint_every > 0 && next % o.checkpoint_every == 0);
    if (look) {
      r.last = step.last_report();
      const auto tally = step.tallies();
      r.skipped_steps = tally.skipped - skipped_before;
      // The step counts from its creation: a streak as long as this call continues the one
      // carried in.
      skipped_in_a_row =
          tally.skipped_in_a_row + (tally.skipped_in_a_row >= t + 1 - first ? skipped_carried : 0);
      if (tally.first_nonfinite > first) nonfinite_at = tally.first_nonfinite;
    }
    ++r.steps;
    ++t;
    position.skipped_in_a_row = skipped_in_a_row;
    bool stop = false;
    if (nonfinite_at >= 0) {
      r.divergence =
          "training diverged at step " + std::to_string(nonfinite_at) + " (non-finite loss)";
    } else if (o.max_skipped_in_a_row > 0 && skipped_in_a_row >= o.max_skipped_in_a_row) {
      r.divergence = "training diverged at step " + std::to_string(t) + " (" +
                     std::to_string(skipped_in_a_row) +
                     " steps in a row skipped for non-finite gradients)";
    }
    if (!r.divergence.empty()) {
      // Every update that was made is finite: save them, evaluate nothing more.
      r.diverged = true;
      r.diverged_at = nonfinite_at >= 0 ? nonfinite_at : t;
      if constexpr (Options)
        if (!o.checkpoint.empty()) {
          profile_scope saving(o.profile, phase::checkpoint);
          save_checkpoint(o.checkpoint, step, position, settings);
        }
      break;
    }
    for (fit_callback* c : o.callbacks) {
      c->on_step(t, r.last);
      stop = c->should_stop() || stop;
    }
    const bool last = t == args.steps;
    if constexpr (Options) {
      // Selection (and the oracle, and patience) reads the scheduled evaluations only: a stop
      // elsewhere is evaluated below, after its checkpoint, for the report.
      const bool scheduled = o.eval_every > 0 && (t % o.eval_every == 0 || last);
      if (scheduled) {
        profile_scope timing(o.profile, phase::evaluation);
        evaluation e = scorer->evaluate(step, t);
        if (std::isfinite(e.target_accuracy) && !(e.target_accuracy <= r.oracle_target_accuracy))
          r.oracle_target_accuracy = position.oracle_target_accuracy = e.target_accuracy;
        if (improves(o.selector, e.selection_score, position.best_score)) {
          e.best = true;
          position.best_score = e.selection_score;
          position.best_step = t;
          position.evaluations_since_best = 0;
          r.selected_target_accuracy = e.target_accuracy;
          position.selected_target_accuracy = e.target_accuracy;
          if (o.restore_best) {
            best_parameters.resize(static_cast<std::size_t>(Step::parameter_count()));
            step.read_parameters(best_parameters);
          }
          if (!o.best_checkpoint.empty()) {
            timing.stop();
            profile_scope saving(o.profile, phase::checkpoint);
            save_checkpoint(o.best_checkpoint, step, position, settings);
          }
        } else {
          ++position.evaluations_since_best;
        }
        r.evaluations.push_back(e);
        for (fit_callback* c : o.callbacks) c->on_evaluation(r.evaluations.back());
        if (o.patience > 0 && position.evaluations_since_best >= o.patience) stop = true;
      }
      if (!o.checkpoint.empty() &&
          ((o.checkpoint_every > 0 && t % o.checkpoint_every == 0) || last || stop)) {
        profile_scope saving(o.profile, phase::checkpoint);
        save_checkpoint(o.checkpoint, step, position, settings);
      }
      if (stop && !scheduled && o.eval_every > 0) {
        profile_scope timing(o.profile, phase::evaluation);
        evaluation e = scorer->evaluate(step, t);
        e.scheduled = false;
        r.evaluations.push_back(e);
        for (fit_callback* c : o.callbacks) c->on_evaluation(r.evaluations.back());
      }
    }
    if (stop) {
      r.stopped_early = !last;
      break;
    }
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if constexpr (Options)
    if (o.keep_target_probabilities && !r.evaluations.empty())
      r.target_probabilities = scorer->target_probabilities();
  step.set_profiler(nullptr);
  r.data_wait_seconds = batches.wait_seconds();
  r.best_step = index_t(position.best_step);
  r.best_score = position.best_score;
  if constexpr (Options)
    if (o.restore_best && r.best_step >= 0 && r.best_step != step.step_index()) {
      if (!best_parameters.empty()) {
        step.write_parameters(best_parameters);
        r.restored_best = true;
      } else if (!o.best_checkpoint.empty()) {
        // The best model predates this call (a resumed run): it is in the best checkpoint.
        load_checkpoint(o.best_checkpoint, step, settings);
        r.restored_best = true;
      }
    }
  r.source_accuracy = accuracy(step, source);
  if (target.has_labels()) r.target_accuracy = accuracy(step, target);
  std::vector<typename Step::value_type> trained(static_cast<std::size_t>(Step::parameter_count()));
  step.read_parameters(trained);
  r.parameters.assign(trained.begin(), trained.end());
  return r;
}

//! CRC-32 of the bytes of `v`, continuing from `crc`.
template <class T>
std::uint32_t crc_of(const std::vector<T>& v, std::uint32_t crc) {
  return crc32(reinterpret_cast<const unsigned char*>(v.data()), v.size() * sizeof(T), crc);
}

//! "2000 rows x 256, labelled, CRC-32 1a2b3c4d": a data set's shape and a checksum of its values
//! and labels, which another data set of the same shape matches by chance with odds of 2^-32.
inline std::string data_fingerprint(const data::dataset& d) {
  const std::uint32_t crc = crc_of(d.labels, crc_of(d.features, 0));
  char hex[16];
  std::snprintf(hex, sizeof hex, "%08x", unsigned(crc));
  return std::to_string(d.rows) + " rows x " + std::to_string(d.width) +
         (d.has_labels() ? ", labelled" : ", unlabelled") + ", CRC-32 " + hex;
}
inline std::string data_fingerprint(const data::sparse_dataset& d) {
  const data::csr_matrix& m = d.features;
  const std::uint32_t crc =
      crc_of(d.labels, crc_of(m.values, crc_of(m.indices, crc_of(m.indptr, 0))));
  char hex[16];
  std::snprintf(hex, sizeof hex, "%08x", unsigned(crc));
  return std::to_string(m.rows) + " rows x " + std::to_string(m.cols) + " (CSR, " +
         std::to_string(m.nnz()) + " non-zeros)" +
         (d.has_labels() ? ", labelled" : ", unlabelled") + ", CRC-32 " + hex;
}

//! Refuses a data set of the other domain in `role` ("source", "target", "validation"): swapped
//! arguments would train on the target's labels, which adaptation must never read.
template <class Data>
void check_domain(const Data& d, data::domain expected, std::string_view role) {
  if (d.side == expected) return;
  const bool source = expected == data::domain::source;
  fail("fit", role,
       std::string(source ? "a source" : "a target") +
           "-domain data set (fit<Step>(source, target, ...))",
       "'" + d.origin + "', of the " + (source ? "target" : "source") +
           " domain: are source and target swapped?");
}

//! What every fit checks of its data before training: domains, widths and label ranges.
template <class Step, class Data>
void check_fit_data(const Data& source, const Data& target, const Data* validation) {
  check_domain(source, data::domain::source, "source");
  check_domain(target, data::domain::target, "target");
  if (validation) check_domain(*validation, data::domain::source, "validation");
  data::check_width(source, Step::input_width);
  data::check_labels(source, Step::class_count);
  if (Step::draws_target_rows) data::check_width(target, Step::input_width);
  if (target.has_labels()) data::check_labels(target, Step::class_count);
  if (validation) {
    data::check_width(*validation, Step::input_width);
    data::check_labels(*validation, Step::class_count);
  }
}

//! What a resumed run must share with the checkpoint's besides fit_args (train/checkpoint.hpp):
//! the caller's settings, the options that decide which rows train and how models are scored,
//! and a fingerprint of each data set (its shape and a CRC-32 of its values and labels, as
//! passed in, before any split). Only computed when checkpoints are written or read.
template <class Data>
std::vector<run_setting> run_settings(const fit_options& o,
                                      const Data& source,
                                      const Data& target,
                                      const Data* validation) {
  if (o.checkpoint.empty() && o.best_checkpoint.empty() && o.resume.empty()) return {};
  std::vector<run_setting> s = o.run_settings;
  s.push_back({"fit_options.validation_fraction", exact_text(o.validation_fraction)});
  s.push_back({"fit_options.selector", std::string(select::name(o.selector))});
  s.push_back({"fit_options.validator_rows", std::to_string(o.validator_rows)});
  s.push_back({"source data", data_fingerprint(source)});
  s.push_back({"target data", data_fingerprint(target)});
  if (validation) s.push_back({"validation data", data_fingerprint(*validation)});
  return s;
}

//! fit on dense or sparse data, with the validation rows given or split off by the options
//! (Options: see train_loop).
template <bool Options, class Step, class Data>
fit_result fit_on(Step& step,
                  const Data& source,
                  const Data& target,
                  const Data* validation,
                  const fit_options& o) {
  const fit_args& args = step.args();
  // Before the split, so that a bad label is reported at its row of the set passed in (a split
  // part's rows are numbered anew).
  check_domain(source, data::domain::source, "source");
  check_domain(target, data::domain::target, "target");
  data::check_width(source, Step::input_width);
  data::check_labels(source, Step::class_count);
  std::vector<run_setting> settings;
  if constexpr (Options) settings = run_settings(o, source, target, validation);
  std::optional<data::split_sets<Data>> split;
  const Data* train = &source;
  if constexpr (Options)
    if (o.validation_fraction != 0) {
      if (validation)
        fail("fit_options", "validation_fraction", "0 when a validation set is passed",
             std::to_string(o.validation_fraction));
      split.emplace(data::split_validation(source, o.validation_fraction, args.seed));
      train = &split->train;
      validation = &split->validation;
    }
  check_fit_data<Step>(*train, target, validation);
  if constexpr (std::is_same_v<Data, data::sparse_dataset>) {
    // Refused before the first step rather than at the first batch that does not fit.
    const index_t densest =
        data::densest_batch_nonzeros(*train, target, args.batch, Step::draws_target_rows);
    if (const std::size_t room = step.sparse_batch().values.size(); std::size_t(densest) > room)
      fail("fit", "fit_args.sparse_nonzeros",
           "room for the densest batch these data can draw, " + std::to_string(densest) +
               " non-zeros (data::densest_batch_nonzeros; 0 for the densest possible)",
           std::to_string(room));
    return train_loop<Options>(
        step, *train, target, validation, o, settings,
        [&](std::uint64_t first) {
          return data::sparse_batcher(*train, target, args.batch, args.seed,
                                      Step::draws_target_rows, first);
        },
        [&](data::sparse_batcher& b) { b.fill(step.sparse_batch(), step.source_labels()); });
  } else if constexpr (queued_step<Step> &&
                       std::is_same_v<typename Step::loader_type, loader::resident>) {
    // The data go into the step's device memory once; each queued step draws its batch there.
    return train_loop<Options>(
        step, *train, target, validation, o, settings,
        [&](std::uint64_t first) {
          step.load_resident(*train, target, first);
          return loaded_into_step{};
        },
        [](loaded_into_step&) {});
  } else {
    using batcher_type = data::batcher<typename Step::loader_type, typename Step::system_type>;
    return train_loop<Options>(
        step, *train, target, validation, o, settings,
        [&](std::uint64_t first) -> batcher_type {
          return batcher_type(*train, target, args.batch, args.seed, Step::draws_target_rows,
                              first);
        },
        [&](batcher_type& b) { b.fill(step.input(), step.source_labels()); });
  }
}
}  // namespace detail

//! Trains `step` in place on batches its loader draws from `source` (labelled) and `target`
//! (labels, if any, are never used for training: only reported), as `options` says: evaluation
//! every K steps with label-free validators, selection, early stopping, checkpoints, resume,
//! callbacks and profiling (see fit_options). Returns timings, accuracies and the evaluations;
//! the step keeps the trained (or, with restore_best, the selected) parameters. The sets' `side`s
//! must be domain::source and domain::target (a validation set's domain::source): fit refuses
//! swapped or mismatched sets before the first step.
//!
//! fit_result::data_wait_seconds sums the loader's waits over the fills (its wait_seconds()): the
//! whole fill for loader::sync and loader::resident, only the time blocked on a batch the workers
//! have not finished for loader::prefetch (its copy into the step's input is not counted).
//!
//! Sparse data sets (data::sparse_dataset) need a step whose G_f reads sparse input; their
//! batches are gathered on the host by data::sparse_batcher whatever the loader slot says.
template <class Step, class Data>
fit_result fit(Step& step, const Data& source, const Data& target, const fit_options& options) {
  static_assert(std::is_same_v<Data, data::dataset> || std::is_same_v<Data, data::sparse_dataset>,
                "dafuse: fit takes data::dataset or data::sparse_dataset");
  static_assert(!std::is_same_v<Data, data::sparse_dataset> || Step::sparse_input,
                "dafuse: sparse data sets need a network whose feature extractor reads sparse "
                "input: nn::sparse_input<nn::mlp<...>>");
  return detail::fit_on<true>(step, source, target, static_cast<const Data*>(nullptr), options);
}

//! The same with held-out labelled source rows `validation` (fit_options::validation_fraction
//! must then be 0).
template <class Step, class Data>
fit_result fit(Step& step,
               const Data& source,
               const Data& target,
               const Data& validation,
               const fit_options& options) {
  static_assert(!std::is_same_v<Data, data::sparse_dataset> || Step::sparse_input,
                "dafuse: sparse data sets need a network whose feature extractor reads sparse "
                "input: nn::sparse_input<nn::mlp<...>>");
  return detail::fit_on<true>(step, source, target, &validation, options);
}

//! Trains for fit_args::steps steps with no evaluation: what fit(step, source, target, {}) does,
//! without compiling the options' code (train_loop).
template <class Step, class Data>
fit_result fit(Step& step, const Data& source, const Data& target) {
  static_assert(std::is_same_v<Data, data::dataset> || std::is_same_v<Data, data::sparse_dataset>,
                "dafuse: fit takes data::dataset or data::sparse_dataset");
  static_assert(!std::is_same_v<Data, data::sparse_dataset> || Step::sparse_input,
                "dafuse: sparse data sets need a network whose feature extractor reads sparse "
                "input: nn::sparse_input<nn::mlp<...>>");
  return detail::fit_on<false>(step, source, target, static_cast<const Data*>(nullptr),
                               fit_options{});
}

namespace detail {
//! The arguments fit builds a step with: for sparse data, fit_args::sparse_nonzeros = 0 becomes
//! the room the data's densest batch needs, not the densest batch possible.
template <class Step, class Data>
fit_args sized_for(const Data& source, const Data& target, fit_args args) {
  if constexpr (std::is_same_v<Data, data::sparse_dataset>)
    if (args.sparse_nonzeros == 0)
      args.sparse_nonzeros =
          data::densest_batch_nonzeros(source, target, args.batch, Step::draws_target_rows);
  return args;
}
}  // namespace detail

//! Builds a `Step` from `args` (initialised from args.seed) and trains it: see the overloads
//! above. On sparse data sets the step's batch holds room for the data's densest batch when
//! args.sparse_nonzeros is 0.
template <class Step, class Data>
fit_result fit(const Data& source,
               const Data& target,
               const fit_args& args,
               const fit_options& options) {
  Step step(detail::sized_for<Step>(source, target, args));
  return fit(step, source, target, options);
}

//! The same without options.
template <class Step, class Data>
fit_result fit(const Data& source, const Data& target, const fit_args& args) {
  Step step(detail::sized_for<Step>(source, target, args));
  return fit(step, source, target);
}

}  // namespace dafuse
