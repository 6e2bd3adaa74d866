// SPDX-License-Identifier: Apache-2.0
// dafuse-train's run of one registry entry: load and check the data, preprocess, fit with the
// options of the command line, then report (progress, table, JSON, curves, trace). The templates
// only, those a step type decides; what none decides is compiled once in the prebuilt part
// (meson.build): the data (run_data.hpp), the progress (run_progress.hpp), the reports
// (run_report.hpp) and their numbers (run_text.hpp).
#pragma once
#include "config.hpp"
#include "registry.hpp"
#include "run_data.hpp"
#include "run_progress.hpp"
#include "run_report.hpp"
#include "run_text.hpp"
#include "signals.hpp"

#include <dafuse/dafuse.hpp>
#include <dafuse/train/reverse_validation.hpp>
#include <dafuse/train/svg_plot.hpp>
#include <dafuse/train/sweep.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace dafuse_train {

namespace df = dafuse;

//! The exit status of a run that diverged (fit_result::diverged): it trained, but not to a model.
inline constexpr int exit_diverged = 3;

//! The image a step's G_f reads: its first layer's input when G_f is a conv net (nn::conv_net),
//! else none.
template <class Step>
constexpr image_shape image_of() {
  using stack = typename Step::net_type::feature_stack;
  using first = typename stack::template layer<0>;
  if constexpr (df::nn::kind_of<first>() == df::nn::layer_kind::conv2d)
    return {first::in_height, first::in_width, first::in_channels};
  else if constexpr (df::nn::kind_of<first>() == df::nn::layer_kind::max_pool2d)
    return {first::in_height, first::in_width, first::channels};
  else
    return {};
}

//! A model that leaves the run (--save-model, --predictions) and is scored (--target-test).
template <class Net>
struct chosen_model {
  df::model<Net> model;
  bool selected = false;  //!< the validator's choice; false: the last step's (none selected)
  long step = -1;         //!< the training step its weights are from
  std::string what;       //!< for the output: "the selected model, step 500"
};

//! Keeps the model of the step at its best evaluation (the one the validator selected): what
//! --save-model and --predictions write and --target-test scores.
template <class Step>
class selected_model final : public df::fit_callback {
 public:
  explicit selected_model(const Step& step) : step_(step) {}

  void on_evaluation(const df::evaluation& e) override {
    if (!e.best) return;
    model_ = df::model_of(step_);
    step_index_ = long(e.step);
  }

  //! The selected model; when none was selected in this call (a resumed run whose best came
  //! before it), the step's own, which is the selected one if fit restored it (`r`).
  chosen_model<typename Step::net_type> get(const df::fit_result& r) const {
    if (model_)
      return {*model_, true, step_index_,
              "the selected model, step " + std::to_string(step_index_)};
    if (r.restored_best)
      return {df::model_of(step_), true, long(r.best_step),
              "the selected model, step " + std::to_string(r.best_step)};
    return {df::model_of(step_), false, long(step_.step_index()),
            "the last step's model, step " + std::to_string(step_.step_index()) +
                ": no model was selected in this call"};
  }

 private:
  const Step& step_;
  std::optional<df::model<typename Step::net_type>> model_;
  long step_index_ = -1;
};

//! The rows of `d`, for the report.
template <class Data>
data_rows rows_of(const run_data<Data>& d) {
  const auto rows = [](const Data& x) { return long(df::detail::row_count(x)); };
  return {.source = rows(d.source),
          .target = rows(d.target),
          .target_test = d.target_test ? rows(*d.target_test) : 0,
          .target_labelled = d.target.has_labels()};
}

//! df::sweep with each training's score its reverse validation (train/reverse_validation.hpp):
//! the final model's target predictions train the same network at λ_max 0 (its head's terms
//! weighted by 0: source-only training of G_f and G_y) with the training's other arguments, and
//! its accuracy on the source labels is the score. The reverse training goes through fit's
//! options code, which this program compiles for the forward one already.
template <class Step, class Data>
df::sweep_result reverse_sweep(const run_data<Data>& d,
                               const df::fit_args& base,
                               const df::sweep_grid& g,
                               const df::sweep_options& options) {
  const df::fit_options o = df::sweep_fit_options(options, base.steps);
  return df::run_sweep(base, g, options, [&](const df::fit_args& args) {
    Step step(args);
    df::fit_result f = df::fit(step, d.source, d.target, o);
    df::sweep_run run = df::sweep_run_of(f, options, base.steps);
    if (f.diverged) return run;
    if (d.target_test) run.test_accuracy = df::accuracy(step, *d.target_test);
    df::fit_args reverse = args;
    reverse.lambda_max = 0;
    run.score = df::reverse_validation<Step>(step, d.source, d.target, reverse, df::fit_options{});
    return run;
  });
}

//! Refuses (naming --batch) a batch whose step cannot fit in this machine's memory, before the
//! step allocates anything by it. The step's bytes are convex in the batch B (buffers of rows,
//! MMD's rows², the larger of the training and evaluation scratch), so the line through steps
//! of B = 2 and 3 (evaluated one row at a time, sparse batches with the least room) is below them
//! for every larger B: what it says cannot fit never could, and a batch it lets through is left
//! to the allocation, whose failure train_step names too.
template <class Step>
void check_batch_memory(const df::fit_args& args, int trainings_at_once = 1) {
  if (args.batch <= 3) return;
  df::fit_args probe = args;
  probe.eval_chunk = 1;
  if (probe.sparse_nonzeros > 0) probe.sparse_nonzeros = 1;
  const auto bytes_at = [&](df::index_t batch) {
    probe.batch = batch;
    return double(Step(probe).memory_bytes());
  };
  const double at2 = bytes_at(2), at3 = bytes_at(3), per_row = std::max(at3 - at2, 1.0);
  const double copies = std::max(trainings_at_once, 1);
  const double needed = copies * (at3 + per_row * double(args.batch - 3));
  const double memory = double(df::detail::physical_memory_bytes());
  if (needed <= memory) return;
  const auto most = long(std::max(3.0, 3 + std::floor((memory / copies - at3) / per_row)));
  const std::string steps =
      copies > 1 ? std::to_string(trainings_at_once) + " steps at once (--sweep-parallel)"
                 : "a step";
  throw usage_error(
      "--batch: expected at most about " + std::to_string(most) + " rows a domain (" + steps +
      " of --batch " + std::to_string(args.batch) + (copies > 1 ? " need" : " needs") +
      " at least " + std::to_string(std::uint64_t(needed)) + " bytes, this machine has " +
      std::to_string(std::uint64_t(memory)) + "), found " + std::to_string(args.batch));
}

//! --sweep: trains the grid in parallel (train/sweep.hpp) and reports every configuration, the
//! validator's choice and, apart and labelled, the oracle's.
template <class Step, class Data>
int run_sweep_model(const config& c,
                    const model_entry& m,
                    const run_data<Data>& d,
                    const df::fit_args& args) {
  df::sweep_grid g;
  for (const double x : c.sweep.lambda_max) g.lambda_max.push_back(float(x));
  for (const double x : c.sweep.lr) g.lr.push_back(float(x));
  g.seeds = c.sweep.seeds;
  if (g.lambda_max.empty()) g.lambda_max = {args.lambda_max};
  if (g.lr.empty()) g.lr = {args.lr};
  if (g.seeds.empty()) g.seeds = {args.seed};
  // Every configuration's arguments are checked before anything trains.
  for (const float lambda : g.lambda_max)
    for (const float lr : g.lr) {
      df::fit_args a = args;
      a.lambda_max = lambda;
      a.lr = lr;
      if (const df::status s = Step::can_implement(a); !s)
        throw usage_error("--sweep: " + s.message);
    }
  df::sweep_options o;
  o.selector = c.selector;
  // Reverse validation rises with quality, as IM does: IM is the fit's own selector in each
  // training (it needs no held-out rows) and carries the direction the sweep chooses by.
  if (c.reverse_validation) o.selector = df::select::validator::information_maximization;
  const std::string chosen_by(c.reverse_validation ? "reverse" : df::select::name(c.selector));
  o.fit.validation_fraction = c.validation_fraction;
  if (!c.validators.empty()) o.fit.validators = c.validators;
  o.fit.validator_rows = c.validator_rows;
  o.threads_per_run = int(c.threads);
  o.max_concurrent = int(c.sweep.parallel);
  const df::sweep_plan plan =
      df::plan_sweep(g.runs(), df::usable_processors(), o.threads_per_run, o.max_concurrent);
  check_batch_memory<Step>(args, plan.concurrent);  // P steps live at once
  const bool labelled = d.target.has_labels() || d.target_test.has_value();
  if (!c.quiet) {
    std::fprintf(stderr,
                 "%s: sweep of %ld configuration(s) (lambda_max %s x lr %s) x %zu seed(s) = %ld "
                 "trainings of %ld steps, %d at a time on %d thread(s) each (%d processor(s) this "
                 "process may use); chosen by %s (label-free)\n",
                 std::string(m.name).c_str(), long(g.configurations()),
                 value_list(g.lambda_max).c_str(), value_list(g.lr).c_str(), g.seeds.size(),
                 long(g.runs()), long(args.steps), plan.concurrent, plan.threads, plan.processors,
                 chosen_by.c_str());
    if (plan.threads > plan.processors)
      std::fprintf(stderr,
                   "dafuse-train: --threads %d is more than the %d processor(s) this "
                   "process may use: the trainings run one at a time, oversubscribed\n",
                   plan.threads, plan.processors);
    if (df::keeps_predictions(o)) {
      const long rows = std::min(c.validator_rows, long(df::detail::row_count(d.target)));
      const long bytes = 4 * long(m.classes) * rows;
      std::fprintf(stderr,
                   "ensv: each training keeps its softmax outputs on %ld target rows (%ld "
                   "bytes; %ld for the %ld trainings), scored against their ensemble once every "
                   "training has finished\n",
                   rows, bytes, bytes * long(g.runs()), long(g.runs()));
    }
    // EnsV's score is known only once every training has finished.
    const bool score_later = !c.reverse_validation && df::select::scores_a_set(o.selector);
    o.on_run = [&, score_later](const df::sweep_run& r, df::index_t done, df::index_t total) {
      std::fprintf(stderr,
                   "training %ld/%ld: lambda_max %s, lr %s, seed %llu: %s %s%s%s (%.2f s)\n",
                   long(done), long(total), number(r.lambda_max).c_str(), number(r.lr).c_str(),
                   static_cast<unsigned long long>(r.seed), chosen_by.c_str(),
                   score_later ? "after the last training" : number(r.score).c_str(),
                   r.diverged ? ", diverged" : "",
                   std::isfinite(r.target_accuracy)
                       ? (", target acc (oracle) " + percent(r.target_accuracy)).c_str()
                       : "",
                   r.seconds);
    };
  }
  activity() = "training the sweep";
  const df::sweep_result r = c.reverse_validation ? reverse_sweep<Step>(d, args, g, o)
                             : d.target_test
                                 ? df::sweep<Step>(d.source, d.target, &*d.target_test, args, g, o)
                                 : df::sweep<Step>(d.source, d.target, args, g, o);
  const std::string& v = chosen_by;
  std::printf("sweep of model %s: %ld trainings in %.3f s, %d at a time on %d thread(s) each\n",
              std::string(m.name).c_str(), long(r.runs.size()), r.seconds, r.plan.concurrent,
              r.plan.threads);
  if (df::keeps_predictions(o)) {
    const kept_predictions kept = kept_of(r);
    std::printf(
        "ensv: the ensemble of %ld training(s)' predictions on %ld target rows (%llu bytes "
        "kept); %ld left out (diverged or not finite)\n",
        kept.trainings, kept.rows, static_cast<unsigned long long>(kept.bytes),
        long(r.runs.size()) - kept.trainings);
  }
  std::printf(
      "| lambda_max | lr | %s (label-free, mean of %zu seed(s)) | target accuracy (oracle) |%s\n",
      v.c_str(), g.seeds.size(), d.target_test ? " target test accuracy (oracle) |" : "");
  std::printf("| --- | --- | --- | --- |%s\n", d.target_test ? " --- |" : "");
  for (std::size_t i = 0; i < r.configurations.size(); ++i) {
    const df::sweep_configuration& x = r.configurations[i];
    std::printf(
        "| %s | %s | %s | %s |%s%s\n", number(x.lambda_max).c_str(), number(x.lr).c_str(),
        number(x.score).c_str(), percent_std(x.target_accuracy, x.target_accuracy_std).c_str(),
        d.target_test ? (" " + percent_std(x.test_accuracy, x.test_accuracy_std) + " |").c_str()
                      : "",
        df::index_t(i) == r.selected ? "  <- selected" : "");
  }
  const auto accuracy_text = [&](df::index_t at) {
    const df::sweep_configuration& x = r.configurations[std::size_t(at)];
    return d.target_test
               ? "target test accuracy " + percent_std(x.test_accuracy, x.test_accuracy_std)
               : "target accuracy " + percent_std(x.target_accuracy, x.target_accuracy_std);
  };
  if (r.selected >= 0) {
    const df::sweep_configuration& x = r.configurations[std::size_t(r.selected)];
    std::printf("selected by %s (label-free): lambda_max %s, lr %s, score %s%s\n", v.c_str(),
                number(x.lambda_max).c_str(), number(x.lr).c_str(), number(x.score).c_str(),
                labelled ? ("; its " + accuracy_text(r.selected) +
                            " (target labels read only to report it)")
                               .c_str()
                         : "");
  } else {
    std::printf(
        "selected by %s (label-free): none: every configuration had a training whose "
        "score is not finite (diverged)\n",
        v.c_str());
  }
  if (r.oracle >= 0) {
    const df::sweep_configuration& x = r.configurations[std::size_t(r.oracle)];
    std::printf(
        "oracle (chosen with target labels, which adaptation does not have): lambda_max "
        "%s, lr %s, %s\n",
        number(x.lambda_max).c_str(), number(x.lr).c_str(), accuracy_text(r.oracle).c_str());
  } else if (labelled) {
    std::printf(
        "oracle: none (every configuration diverged: no finite target accuracy to choose by)\n");
  } else {
    std::printf("oracle: none (no target labels)\n");
  }
  activity() = "writing the outputs";
  if (!c.json.empty())
    write_sweep_json(c.json, c, m, args, g, r, d.target_test.has_value(), chosen_by);
  return r.selected >= 0 ? 0 : exit_diverged;
}

//! Loads, trains and reports one model of the registry: `Step` is its step type.
template <class Step>
int run_model(const config& c, const model_entry& m) {
  using Data = std::conditional_t<Step::sparse_input, df::data::sparse_dataset, df::data::dataset>;
  if (c.source_labels.empty() && !Step::sparse_input)
    throw usage_error("--source-labels: expected the source labels (an int32 NPY file)");
#if defined(_OPENMP)
  if (c.threads > 0) omp_set_num_threads(int(c.threads));
#endif
  run_data<Data> d;
  activity() = "loading the data";
  if constexpr (Step::sparse_input) {
    d.source =
        load_sparse(c.source, c.source_labels, df::data::domain::source, m.input_width, true);
    d.target =
        load_sparse(c.target, c.target_labels, df::data::domain::target, m.input_width, false);
  } else {
    if constexpr (image_of<Step>().given())
      for (const std::string* f : {&c.source, &c.target, &c.target_test})
        if (!f->empty()) check_image_file(*f, image_of<Step>(), m.name);
    d.source = load_dense(c.source, c.source_labels, df::data::domain::source);
    d.target = load_dense(c.target, c.target_labels, df::data::domain::target);
  }
  if (!c.target_test.empty()) {
    if constexpr (Step::sparse_input) {
      d.target_test = load_sparse(c.target_test, c.target_test_labels, df::data::domain::target,
                                  m.input_width, true);
    } else {
      if (c.target_test_labels.empty())
        throw usage_error(
            "--target-test-labels: expected the test set's labels (an int32 NPY "
            "file): a test set is there to be scored");
      d.target_test = load_dense(c.target_test, c.target_test_labels, df::data::domain::target);
    }
    df::data::check_width(*d.target_test, Step::input_width);
    df::data::check_labels(*d.target_test, Step::class_count);
  }
  note_conversions(c, Step::sparse_input);
  activity() = "preprocessing the data (--preprocess)";
  const df::data::preprocessing fitted = preprocess(c.preprocess, d);

  df::fit_args args;
  args.steps = c.steps > 0 ? c.steps : m.defaults.steps;
  args.batch = c.batch > 0 ? c.batch : m.defaults.batch;
  args.lr = float(c.lr.value_or(m.defaults.lr));
  args.momentum = float(c.momentum.value_or(m.defaults.momentum));
  args.lambda_max = float(c.lambda_max.value_or(m.defaults.lambda_max));
  args.weight_decay = float(c.weight_decay);
  args.max_grad_norm = float(c.max_grad_norm);
  args.seed = c.seed;
  args.init = df::nn::weight_init::torch_default;
  if (const df::status s = Step::can_implement(args); !s) throw df::error(s.message);
  activity() = "estimating the step's memory for --batch " + std::to_string(args.batch);
  if (c.sweep.given) return run_sweep_model<Step>(c, m, d, args);  // checks its P steps' memory
  check_batch_memory<Step>(args);

  df::profiler prof;
  df::fit_options o;
  o.eval_every = c.eval_every > 0 ? c.eval_every : args.steps;
  o.validation_fraction = c.validation_fraction;
  o.selector = c.selector;
  if (!c.validators.empty()) o.validators = c.validators;
  o.validator_rows = c.validator_rows;
  o.patience = c.patience;
  o.restore_best = c.restore_best;
  o.checkpoint = c.checkpoint;
  o.checkpoint_every = c.checkpoint_every;
  o.best_checkpoint = c.best_checkpoint;
  o.resume = c.resume;
  // The preprocessing changes the data fit sees, and so its fingerprint; naming it first says
  // why a resume with other --preprocess is refused.
  std::string steps_text;
  for (const std::string& p : c.preprocess)
    if (!p.empty() && p != "none") steps_text.append(steps_text.empty() ? "" : ",").append(p);
  o.run_settings = {{"--preprocess", steps_text.empty() ? "none" : steps_text}};
  o.profile = &prof;
  if (!c.curves.empty()) {
    // Each kept row costs its values and a vector's bookkeeping: refuse a plan that cannot fit
    // in half the machine's memory instead of failing hours into the run.
    const long rows = reporter::planned_curve_rows(c, long(args.steps), long(o.eval_every));
    const double row_bytes = double(curve_columns().size()) * 8 + 64;
    const auto most = long(double(df::detail::physical_memory_bytes()) / 2 / row_bytes);
    if (rows > most)
      throw usage_error("--curve-every: expected at most " + std::to_string(most) +
                        " curve rows (half this machine's memory), found " + std::to_string(rows) +
                        " for --steps " + std::to_string(args.steps) + ": raise --curve-every");
  }
  reporter report(c, long(args.steps), long(o.eval_every));
  o.callbacks = {&report};

  run_outcome outcome;
  outcome.clipped = !std::is_same_v<typename Step::clip_type, df::clip::none>;
  const long source_rows = long(df::detail::row_count(d.source));
  const long held_out =
      o.validation_fraction > 0
          ? long(df::data::validation_row_count(source_rows, o.validation_fraction))
          : 0;
  outcome.trained_source_rows = source_rows - held_out;
  if (!c.quiet) {
    std::fprintf(stderr, "%s: %ld source rows (%ld trained on, %ld held out for validation), ",
                 std::string(m.name).c_str(), source_rows, outcome.trained_source_rows, held_out);
    std::fprintf(stderr, "%ld target rows%s%s, %ld steps of %ld + %ld rows on %d thread(s)\n",
                 long(df::detail::row_count(d.target)),
                 d.target.has_labels() ? " (labelled: oracle accuracy reported)" : "",
                 d.target_test ? (", " + std::to_string(df::detail::row_count(*d.target_test)) +
                                  " target test rows")
                                     .c_str()
                               : "",
                 long(args.steps), long(args.batch), long(args.batch), threads_in_use());
    if (c.validation_fraction == 0 && !c.selector_given)
      std::fprintf(stderr, "no source rows held out: selecting by entropy (--validator)\n");
  }
  activity() = "allocating the step for --batch " + std::to_string(args.batch);
  Step step(args);
  selected_model<Step> selected(step);
  const bool writes_model = !c.save_model.empty() || !c.predictions.empty();
  if (writes_model || d.target_test) o.callbacks.push_back(&selected);
  activity() = "training";
  // From here to the outputs' end, a stop signal ends the training after its step and the run
  // then writes what --stop-after would.
  const stop_signal_catcher signals;
  const df::fit_result r = df::fit(step, d.source, d.target, o);
  report.finish();
  outcome.interrupted_by = report.interrupted_by();
  outcome.interrupted_at = report.interrupted_at();

  std::printf("model %s: %ld steps in %.3f s (%.0f steps/s, data wait %.3f s), %ld skipped\n",
              std::string(m.name).c_str(), long(r.steps), r.seconds,
              double(r.steps) / std::max(r.seconds, 1e-12), r.data_wait_seconds,
              long(r.skipped_steps));
  if (r.diverged)
    std::fprintf(stderr, "dafuse-train: %s; the weights are those of the last update made%s\n",
                 r.divergence.c_str(),
                 o.checkpoint.empty() ? "" : (", saved in " + o.checkpoint).c_str());
  std::printf("selected by %s (label-free): step %ld, score %s\n",
              std::string(df::select::name(r.selected_by)).c_str(), long(r.best_step),
              number(r.best_score).c_str());
  if (d.target.has_labels() && r.evaluations.empty() && r.best_step < 0)
    std::printf("target accuracy: last step %s (no evaluation in this call)\n",
                percent(r.target_accuracy).c_str());
  else if (d.target.has_labels())
    std::printf(
        "target accuracy: selected model %s, last step %s, oracle best %s "
        "(oracle: chosen with target labels)\n",
        percent(r.selected_target_accuracy).c_str(), percent(r.target_accuracy).c_str(),
        percent(r.oracle_target_accuracy).c_str());
  // Every accuracy below is a df::model's, the class that --save-model writes and --predictions
  // runs: the figure printed beside a saved model is that model's, to the row.
  std::optional<chosen_model<typename Step::net_type>> chosen;
  if (writes_model || d.target_test) chosen = selected.get(r);
  double chosen_accuracy = run_outcome::none;  // on the target test set
  if (d.target_test) {
    const long rows = long(df::detail::row_count(*d.target_test));
    chosen_accuracy = df::accuracy(chosen->model, *d.target_test);
    if (chosen->selected) outcome.selected_target_test_accuracy = chosen_accuracy;
    // The step holds other weights than the chosen model's unless fit restored them or the
    // selected evaluation was the last step.
    if (r.restored_best || chosen->step == long(step.step_index())) {
      outcome.target_test_accuracy = chosen_accuracy;
      std::printf("target test accuracy: %.2f %% on %ld rows (%s%s)\n", 100 * chosen_accuracy, rows,
                  chosen->what.c_str(),
                  r.restored_best    ? ", restored by --restore-best"
                  : chosen->selected ? ", the last step"
                                     : "");
    } else {
      df::model<typename Step::net_type> last = df::model_of(step);
      outcome.target_test_accuracy = df::accuracy(last, *d.target_test);
      std::printf(
          "target test accuracy: selected model %s (step %ld), last step %s (step %ld), "
          "on %ld rows\n",
          percent(chosen_accuracy).c_str(), chosen->step,
          percent(outcome.target_test_accuracy).c_str(), long(step.step_index()), rows);
    }
  }
  if (r.stopped_early) std::printf("stopped early at step %ld\n", long(step.step_index()));
  if (writes_model) {
    const df::model<typename Step::net_type>& m = chosen->model;
    outcome.saved = true;
    outcome.saved_selected = chosen->selected;
    outcome.saved_step = chosen->step;
    outcome.saved_target_test_accuracy = chosen_accuracy;
    if (d.target.has_labels())
      outcome.saved_target_accuracy = df::accuracy(chosen->model, d.target);
    if (!c.save_model.empty()) {
      // The file's model reads raw rows: the fitted --preprocess travels with the weights.
      df::model<typename Step::net_type> saved = m;
      saved.set_preprocessing(fitted);
      df::save_model(c.save_model, saved);
      std::string steps;
      for (const auto& s : fitted.steps())
        steps.append(steps.empty() ? "" : ", ").append(df::data::name(s.kind));
      std::printf("model file: %s (%s%s)\n", c.save_model.c_str(), chosen->what.c_str(),
                  steps.empty() ? "" : ("; it applies " + steps + " to raw rows").c_str());
    }
    if (!c.predictions.empty()) {
      const Data& rows = d.target_test ? *d.target_test : d.target;
      std::vector<std::int32_t> classes(std::size_t(df::detail::row_count(rows)));
      if constexpr (Step::sparse_input)
        m.predict(df::data::sparse_columns(rows.features), classes.data());
      else
        m.predict(rows.features.data(), rows.rows, classes.data());
      df::data::save_npy<std::int32_t>(c.predictions, {classes.size()},
                                       std::span<const std::int32_t>(classes));
      // The file's own score on the rows' labels, when they have them.
      const double scored =
          d.target_test ? outcome.saved_target_test_accuracy : outcome.saved_target_accuracy;
      std::printf(
          "predictions: %s (%zu %s rows, %s%s)\n", c.predictions.c_str(), classes.size(),
          d.target_test ? "target test" : "target", chosen->what.c_str(),
          std::isfinite(scored)
              ? ("; " + percent(scored) + " correct" + (d.target_test ? "" : " (oracle)")).c_str()
              : "");
    }
  }
  if (c.profile) std::printf("%s", prof.summary().c_str());
  activity() = "writing the outputs";
  if (!c.trace.empty()) prof.write_chrome_trace(c.trace);
  if (!c.curves.empty()) {
    const df::training_curves& curves = report.curves();
    curves.write_csv(c.curves + ".csv");
    std::vector<df::svg_panel> panels{
        {"losses (mean over each interval)", {"label_loss", "domain_loss"}},
        {"accuracy", {"source_accuracy", "target_accuracy (oracle)", "domain_accuracy"}},
        {"reversal weight λ", {"lambda"}},
        {"learning rate", {"lr"}}};
    // One panel per validator computed (their scales differ), source accuracy aside.
    for (const auto v : df::select::all_validators) {
      const bool computed = v == o.selector || std::find(o.validators.begin(), o.validators.end(),
                                                         v) != o.validators.end();
      if (computed && v != df::select::validator::source_accuracy)
        panels.push_back({"validator: " + std::string(df::select::name(v)),
                          {"validator " + std::string(df::select::name(v))}});
    }
    std::vector<df::svg_marker> markers;
    if (!r.evaluations.empty())
      markers.push_back({.step = double(r.best_step),
                         .label = "selected by " + std::string(df::select::name(r.selected_by)) +
                                  ": step " + std::to_string(r.best_step)});
    df::write_svg(
        curves, c.curves + ".svg",
        // A registry model's name says its network and head; a network of the command line's is
        // "custom", so its title is its description.
        {.title = "dafuse-train " + std::string(m.name == "custom" ? m.description : m.name),
         .panels = panels,
         .markers = markers});
  }
  if (!c.json.empty()) write_json(c.json, c, m, args, o, rows_of(d), r, outcome, prof);
  if (const int sig = signals.caught(); sig != 0) {
    std::fflush(stdout);  // the summary before this last line, where both go to one file
    if (outcome.interrupted_by != 0)
      std::fprintf(stderr, "dafuse-train: interrupted by %s after step %ld of %ld%s\n",
                   signal_name(sig), outcome.interrupted_at, long(args.steps),
                   o.checkpoint.empty() ? " (no --checkpoint: it cannot be resumed)"
                                        : ("; --resume " + o.checkpoint + " continues it").c_str());
    else
      std::fprintf(stderr, "dafuse-train: %s after the training: its outputs are written\n",
                   signal_name(sig));
    return 128 + sig;  // a shell's status for a process a signal ended
  }
  return r.diverged ? exit_diverged : 0;
}

}  // namespace dafuse_train
