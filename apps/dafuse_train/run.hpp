// SPDX-License-Identifier: Apache-2.0
// dafuse-train's run of one registry entry: load and check the data, preprocess, fit with the
// options of the command line, then report (progress, table, JSON, curves, trace).
#pragma once
#include "config.hpp"
#include "registry.hpp"
#include "signals.hpp"

#include <dafuse/dafuse.hpp>
#include <dafuse/train/reverse_validation.hpp>
#include <dafuse/train/svg_plot.hpp>
#include <dafuse/train/sweep.hpp>

#include <unistd.h>

#include <algorithm>
#include <array>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace dafuse_train {

namespace df = dafuse;

//! The exit status of a run that diverged (fit_result::diverged): it trained, but not to a model.
inline constexpr int exit_diverged = 3;

//! Data of one run, dense or sparse.
template <class Data>
struct run_data {
  Data source, target;
  std::optional<Data> target_test;  //!< --target-test: reported on, never trained on
};

inline bool is_npy_file(const std::string& path) {
  return path.size() > 4 && path.compare(path.size() - 4, 4, ".npy") == 0;
}

//! Dense rows from an NPY file (images [N, H, W] are flattened; uint8 pixels scaled by 1/255).
inline df::data::dataset load_dense(const std::string& features,
                                    const std::string& labels,
                                    df::data::domain side) {
  if (!is_npy_file(features))
    throw df::error(features +
                    ": features: expected an NPY file (this model reads dense rows), "
                    "found another path");
  // Only the header is read here (however long it is): uint8 images are scaled by 1/255.
  const df::data::npy_header h = [&] {
    try {
      return df::data::read_npy_header(features);
    } catch (const df::error&) {
      return df::data::npy_header{};  // load_dataset reports it
    }
  }();
  if (h.type == df::data::dtype::uint8 && (h.shape.size() == 3 || h.shape.size() == 4))
    return df::data::load_image_dataset(features, labels, side);
  return df::data::load_dataset(features, labels, side);
}

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

//! "(N, 16, 16) or (N, 16, 16, 1)": the NPY shapes that hold images of `image`.
inline std::string image_shapes_text(const image_shape& image) {
  const std::string hw = std::to_string(image.height) + ", " + std::to_string(image.width);
  const std::string hwc = "(N, " + hw + ", " + std::to_string(image.channels) + ")";
  return image.channels == 1 ? "(N, " + hw + ") or " + hwc : hwc;
}

//! A conv net reads images of one shape: refuses an NPY file `features` of another before it is
//! loaded (rows of H·W·C features would have the width, but not necessarily the layout). Other
//! faults of the file are left to the loader, which names them.
inline void check_image_file(const std::string& features,
                             const image_shape& image,
                             std::string_view model) {
  if (!is_npy_file(features)) return;
  df::data::npy_header h;
  try {
    h = df::data::read_npy_header(features);
  } catch (const df::error&) {
    return;
  }
  const std::vector<std::size_t>& s = h.shape;
  const auto is = [&](std::size_t d, long v) { return s.size() > d && s[d] == std::size_t(v); };
  const bool grey = s.size() == 3 && image.channels == 1;
  const bool channels_last = s.size() == 4 && is(3, image.channels);
  if (!((grey || channels_last) && is(1, image.height) && is(2, image.width)))
    throw df::error(features + ": shape: expected images " + image_shapes_text(image) + " (model " +
                    std::string(model) + " reads " + std::to_string(image.height) + " x " +
                    std::to_string(image.width) + " x " + std::to_string(image.channels) +
                    " images, channels last), found " + df::data::detail::shape_text(s));
}

//! CSR rows from a prefix P (P_indptr.npy, P_indices.npy, P_data.npy), labels P_labels.npy unless
//! given.
inline df::data::sparse_dataset load_sparse(const std::string& prefix,
                                            std::string labels,
                                            df::data::domain side,
                                            long width,
                                            bool labels_required) {
  if (is_npy_file(prefix))
    throw df::error(prefix +
                    ": features: expected a CSR prefix P with P_indptr.npy, "
                    "P_indices.npy and P_data.npy (this model reads sparse rows), found "
                    "an NPY file");
  if (labels.empty() && (labels_required || std::filesystem::exists(prefix + "_labels.npy")))
    labels = prefix + "_labels.npy";
  return df::data::load_sparse_dataset(prefix, labels, side, df::index_t(width));
}

//! Says on stderr that the NPY file `path` was converted on load, when its dtype is not the one
//! trained on (`as`): "X.npy: float64 converted to float32". uint8 features are left unsaid
//! (read as before: images scaled by 1/255), and so is a file whose header cannot be read.
inline void note_conversion(const std::string& path, df::data::dtype as) {
  df::data::npy_header h;
  try {
    h = df::data::read_npy_header(path);
  } catch (const df::error&) {
    return;
  }
  const bool big = h.byte_order != std::endian::little;
  if ((h.type == as && !big) ||
      (as == df::data::dtype::float32 && h.type == df::data::dtype::uint8))
    return;
  std::fprintf(stderr, "%s: %s%s converted to %s\n", path.c_str(),
               std::string(df::data::name_of(h.type)).c_str(), big ? " (big-endian)" : "",
               std::string(df::data::name_of(as)).c_str());
}

//! note_conversion for every data file of the run: features as float32, labels and CSR offsets
//! and columns as int32 (numpy saves float64 and int64 by default).
template <bool Sparse>
void note_conversions(const config& c) {
  using df::data::dtype;
  for (const auto& [x, y] : {std::pair{c.source, c.source_labels},
                             {c.target, c.target_labels},
                             {c.target_test, c.target_test_labels}}) {
    if (x.empty()) continue;
    if constexpr (Sparse) {
      note_conversion(x + "_data.npy", dtype::float32);
      note_conversion(x + "_indptr.npy", dtype::int32);
      note_conversion(x + "_indices.npy", dtype::int32);
      const std::string labels = y.empty() ? x + "_labels.npy" : y;
      if (std::filesystem::exists(labels)) note_conversion(labels, dtype::int32);
    } else {
      note_conversion(x, dtype::float32);
      if (!y.empty()) note_conversion(y, dtype::int32);
    }
  }
}

//! Applies --preprocess to both domains and the target test set, if any (dense): each transform
//! fitted on the training data only. Returns what was fitted, for the model file.
inline df::data::preprocessing preprocess(const std::vector<std::string>& steps,
                                          run_data<df::data::dataset>& d) {
  using df::data::preprocess_kind;
  df::data::preprocessing fitted;
  std::vector<df::data::dataset*> all{&d.source, &d.target};
  if (d.target_test) all.push_back(&*d.target_test);
  for (const std::string& s : steps) {
    if (s == "none" || s.empty()) continue;
    if (s == "standardize") {
      df::data::standardize t;
      t.fit(d.source, d.target);
      for (df::data::dataset* x : all) t.apply(*x);
      fitted.add_standardize(t.statistics(df::data::domain::target));
    } else if (s == "l2") {
      for (df::data::dataset* x : all) df::data::l2_normalize_rows(*x);
      fitted.add(preprocess_kind::l2);
    } else if (s == "log1p") {
      df::data::log1p t;
      for (df::data::dataset* x : all) t.apply(*x);
      fitted.add(preprocess_kind::log1p);
    } else if (s == "binarize") {
      df::data::binarize t;
      for (df::data::dataset* x : all) t.apply(*x);
      fitted.add(preprocess_kind::binarize, t.threshold);
    } else {
      throw usage_error("--preprocess: expected none, standardize, l2, log1p or binarize, found '" +
                        s + "'");
    }
  }
  return fitted;
}

//! The same for CSR rows (transforms that keep zeros zero).
inline df::data::preprocessing preprocess(const std::vector<std::string>& steps,
                                          run_data<df::data::sparse_dataset>& d) {
  using df::data::preprocess_kind;
  df::data::preprocessing fitted;
  std::vector<df::data::sparse_dataset*> all{&d.source, &d.target};
  if (d.target_test) all.push_back(&*d.target_test);
  for (const std::string& s : steps) {
    if (s == "none" || s.empty()) continue;
    for (df::data::sparse_dataset* x : all) {
      if (s == "l2")
        df::data::l2_normalize_rows(*x);
      else if (s == "log1p")
        df::data::log1p_values(*x);
      else if (s == "binarize")
        df::data::binarize_values(*x);
      else
        throw usage_error(
            "--preprocess: expected none, l2, log1p or binarize for CSR data, found '" + s + "'");
    }
    fitted.add(s == "l2"      ? preprocess_kind::l2
               : s == "log1p" ? preprocess_kind::log1p
                              : preprocess_kind::binarize_nonzero);
  }
  return fitted;
}

//! JSON string literal of `s`.
inline std::string json_string(std::string_view s) {
  std::string out = "\"";
  for (const char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

//! A JSON number, or null for NaN and infinities (JSON has neither).
inline std::string number(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.10g", v);
  return buf;
}

//! A float (a fit_args field) in the fewest digits that read back as the same float: 0.03, not
//! the double 0.029999999329447746.
inline std::string number(float v) {
  if (!std::isfinite(v)) return "null";
  char buf[32];
  for (int digits = 6; digits <= 9; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*g", digits, double(v));
    if (std::strtof(buf, nullptr) == v) break;
  }
  return buf;
}

//! A duration for the progress output: 42 s, 3 min 05 s, 1 h 02 min.
inline std::string duration(double seconds) {
  char buf[32];
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const long s = std::lround(seconds);
  if (s < 60)
    std::snprintf(buf, sizeof buf, "%ld s", s);
  else if (s < 3600)
    std::snprintf(buf, sizeof buf, "%ld min %02ld s", s / 60, s % 60);
  else
    std::snprintf(buf, sizeof buf, "%ld h %02ld min", s / 3600, (s % 3600) / 60);
  return buf;
}

//! OpenMP threads a run uses (1 without OpenMP).
inline int threads_in_use() {
#if defined(_OPENMP)
  return omp_get_max_threads();
#else
  return 1;
#endif
}

//! The curves' columns: per-step figures (averaged over each curve interval) then evaluations.
inline std::vector<std::string> curve_columns() {
  std::vector<std::string> c{
      "step", "label_loss", "domain_loss", "domain_accuracy", "lambda",
      "lr",   "grad_norm",  "loss_scale",  "source_accuracy", "target_accuracy (oracle)"};
  // A validator that scores a set of trainings (ensv) has no value at one run's evaluation.
  for (const auto v : df::select::all_validators)
    if (v != df::select::validator::source_accuracy && !df::select::scores_a_set(v))
      c.push_back("validator " + std::string(df::select::name(v)));
  return c;
}

//! A fraction as a percentage, "n/a" when not measured (NaN).
inline std::string percent(double v) {
  if (!std::isfinite(v)) return "n/a";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f %%", 100 * v);
  return buf;
}

//! Progress output, curve rows and evaluation lines: the run's fit_callback.
class reporter final : public df::fit_callback {
 public:
  reporter(const config& c, long steps, long eval_every)
      : config_(c),
        steps_(steps),
        curve_every_(c.curve_every > 0 ? c.curve_every : std::max(1L, steps / 500)),
        eval_every_(eval_every),
        terminal_(!c.quiet && ::isatty(STDERR_FILENO)),
        keep_rows_(!c.curves.empty()),
        curves_(curve_columns()),
        start_(std::chrono::steady_clock::now()) {
    // run_model has checked the planned rows fit in memory; the table grows past this.
    if (keep_rows_)
      rows_.reserve(std::size_t(std::min(planned_curve_rows(c, steps, eval_every), 1L << 16)));
  }

  //! Rows the curves will hold: one per curve interval and per evaluation, and the last step.
  static long planned_curve_rows(const config& c, long steps, long eval_every) {
    const long every = c.curve_every > 0 ? c.curve_every : std::max(1L, steps / 500);
    return steps / every + steps / std::max(1L, eval_every) + 2;
  }

  void on_step(df::index_t step, const df::step_report& r) override {
    if (first_step_ < 0) first_step_ = long(step) - 1;
    rows_step_ = long(step);
    sums_[0] += r.label_loss;
    sums_[1] += r.domain_loss;
    sums_[2] += r.domain_accuracy;
    ++count_;
    last_ = r;
    if (keep_rows_ && (step % curve_every_ == 0 || step == steps_ ||
                       (eval_every_ > 0 && step % eval_every_ == 0)))
      add_row(step);
    progress(step);
  }

  //! --stop-after N, or a stop signal (signals.hpp): the run ends after this step either way.
  bool should_stop() override {
    if (const int sig = stop_signal_catcher::caught(); sig != 0) {
      if (interrupted_by_ == 0) {
        interrupted_by_ = sig;
        interrupted_at_ = rows_step_;
        if (terminal_) std::fprintf(stderr, "\r\033[K");
        std::fprintf(stderr,
                     "dafuse-train: %s: stopping after step %ld; %s, then the outputs; a second "
                     "signal exits at once\n",
                     signal_name(sig), rows_step_,
                     config_.checkpoint.empty()
                         ? "no --checkpoint to save"
                         : ("saving the checkpoint " + config_.checkpoint).c_str());
      }
      return true;
    }
    return config_.stop_after > 0 && rows_step_ >= config_.stop_after;
  }
  //! The stop signal that ended the training (0: none) and the step it ended after.
  int interrupted_by() const { return interrupted_by_; }
  long interrupted_at() const { return interrupted_at_; }

  void on_evaluation(const df::evaluation& e) override {
    if (keep_rows_) {
      if (rows_.empty() || rows_.back()[0] != double(e.step)) add_row(e.step);
      std::vector<double>& row = rows_.back();
      row[8] = e.source_accuracy;
      row[9] = e.target_accuracy;
      std::size_t column = 10;
      for (const auto v : df::select::all_validators)
        if (v != df::select::validator::source_accuracy && !df::select::scores_a_set(v))
          row[column++] = e.score(v);
    }
    if (config_.quiet) return;
    if (terminal_) std::fprintf(stderr, "\r\033[K");
    std::fprintf(stderr, "eval step %6ld: source acc %s, %s %s%s, target acc (oracle) %s\n",
                 long(e.step), percent(e.source_accuracy).c_str(),
                 std::string(df::select::name(config_.selector)).c_str(),
                 number(e.selection_score).c_str(),
                 e.best ? " (best)" : (e.scheduled ? "" : " (the stop's: not a candidate)"),
                 percent(e.target_accuracy).c_str());
  }

  //! Flushes the rows into the curves table.
  const df::training_curves& curves() {
    for (const auto& row : rows_) curves_.add(row);
    rows_.clear();
    return curves_;
  }

  void finish() {
    if (terminal_) std::fprintf(stderr, "\n");
  }

 private:
  void add_row(df::index_t step) {
    if (!rows_.empty() && rows_.back()[0] == double(step)) return;
    std::vector<double> row(curves_.columns().size(), df::training_curves::not_measured);
    row[0] = double(step);
    if (count_ > 0) {
      row[1] = sums_[0] / double(count_);
      row[2] = sums_[1] / double(count_);
      row[3] = sums_[2] / double(count_);
      row[4] = last_.lambda;
      row[5] = last_.lr;
      row[6] = last_.grad_norm;
      row[7] = last_.loss_scale;
    }
    sums_ = {};
    count_ = 0;
    rows_.push_back(std::move(row));
  }

  void progress(df::index_t step) {
    if (config_.quiet) return;
    const auto now = std::chrono::steady_clock::now();
    const double elapsed = std::chrono::duration<double>(now - start_).count();
    if (terminal_) {
      // Redraw at most 10 times a second: a terminal write costs more than a small step.
      if (step != steps_ && now - last_draw_ < std::chrono::milliseconds(100)) return;
      last_draw_ = now;
      const int width = 30;
      const int filled = int(double(width) * double(step) / double(steps_));
      std::string bar(std::size_t(filled), '#');
      bar.resize(std::size_t(width), '.');
      std::fprintf(stderr,
                   "\r\033[K[%s] %ld/%ld  L_y %.4f  L_d %.4f  acc_d %.2f  λ %.3f  %.0f steps/s"
                   "  %s, ETA %s",
                   bar.c_str(), long(step), steps_, last_.label_loss, last_.domain_loss,
                   last_.domain_accuracy, last_.lambda, double(step) / std::max(elapsed, 1e-9),
                   duration(elapsed).c_str(), eta(step, elapsed).c_str());
      std::fflush(stderr);
    } else {
      const long every = std::max(1L, steps_ / 10);
      if (step % every != 0 && step != steps_) return;
      std::fprintf(stderr,
                   "step %ld/%ld: L_y %.4f L_d %.4f acc_d %.2f lambda %.3f lr %.4g %.1f s, "
                   "ETA %s\n",
                   long(step), steps_, last_.label_loss, last_.domain_loss, last_.domain_accuracy,
                   last_.lambda, last_.lr, elapsed, eta(step, elapsed).c_str());
    }
  }

  // Time left at the run's mean rate so far (evaluations included).
  std::string eta(df::index_t step, double elapsed) const {
    const long done = long(step) - first_step_;
    if (done <= 0) return "?";
    return duration(elapsed / double(done) * double(steps_ - long(step)));
  }

  const config& config_;
  long steps_, curve_every_, eval_every_;
  long first_step_ = -1;  // the step before the first one this run made (a resumed run's start)
  bool terminal_;
  bool keep_rows_;  // --curves was given: the rows are kept for it
  df::training_curves curves_;
  std::vector<std::vector<double>> rows_;
  std::array<double, 3> sums_{};
  long count_ = 0;
  long rows_step_ = 0;  // the last step on_step saw
  int interrupted_by_ = 0;
  long interrupted_at_ = -1;
  df::step_report last_;
  std::chrono::steady_clock::time_point start_, last_draw_{};
};

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

//! The report's format: raise it when a field changes meaning or goes away (adding one does not).
inline constexpr int json_format_version = 2;

//! What a run measured beyond fit_result.
struct run_outcome {
  static constexpr double none = std::numeric_limits<double>::quiet_NaN();
  long trained_source_rows = 0;        //!< source rows trained on (the rest were held out)
  bool clipped = false;                //!< the model clips gradients (max_grad_norm applies)
  double target_test_accuracy = none;  //!< the model the run ends with; NaN: no test set
  double selected_target_test_accuracy = none;  //!< the selected model's; NaN: none or no test set
  // The model --save-model and --predictions wrote, if any.
  bool saved = false;
  bool saved_selected = false;               //!< the selected model, else the last step's
  long saved_step = -1;                      //!< the step its weights are from
  double saved_target_test_accuracy = none;  //!< on --target-test
  double saved_target_accuracy = none;       //!< on the labelled target set (oracle)
  int interrupted_by = 0;                    //!< the stop signal that ended the training (0: none)
  long interrupted_at = -1;                  //!< the step it ended after
};

//! Writes the configuration and every result as one JSON object.
template <class Data>
void write_json(const std::string& path,
                const config& c,
                const model_entry& m,
                const df::fit_args& args,
                const df::fit_options& o,
                const run_data<Data>& d,
                const df::fit_result& r,
                const run_outcome& outcome,
                const df::profiler& prof) {
  const auto rows = [](const Data& x) { return long(df::detail::row_count(x)); };
  std::string j = "{\n";
  j += "  \"program\": \"dafuse-train\", \"format_version\": " +
       std::to_string(json_format_version) + ", \"dafuse_version\": \"" +
       std::to_string(DAFUSE_VERSION_MAJOR) + "." + std::to_string(DAFUSE_VERSION_MINOR) + "." +
       std::to_string(DAFUSE_VERSION_PATCH) + "\",\n";
  j += "  \"model\": {\"name\": " + json_string(m.name) +
       ", \"description\": " + json_string(m.description) + "},\n";
  j += "  \"config\": {\"source\": " + json_string(c.source) +
       ", \"source_labels\": " + json_string(c.source_labels) +
       ", \"target\": " + json_string(c.target) +
       ", \"target_labels\": " + json_string(c.target_labels) +
       ", \"target_test\": " + json_string(c.target_test) +
       ", \"target_test_labels\": " + json_string(c.target_test_labels) + ", \"preprocess\": [";
  for (std::size_t i = 0; i < c.preprocess.size(); ++i)
    j += (i ? ", " : "") + json_string(c.preprocess[i]);
  j += "], \"steps\": " + std::to_string(args.steps) +
       ", \"batch\": " + std::to_string(args.batch) + ", \"lr\": " + number(args.lr) +
       ", \"momentum\": " + number(args.momentum) + ", \"lambda_max\": " + number(args.lambda_max) +
       ", \"weight_decay\": " + number(args.weight_decay) +
       ", \"max_grad_norm\": " + (outcome.clipped ? number(args.max_grad_norm) : "null") +
       ", \"seed\": " + std::to_string(args.seed) +
       ", \"eval_every\": " + std::to_string(o.eval_every) +
       ", \"validation_fraction\": " + number(o.validation_fraction) +
       ", \"validator\": " + json_string(df::select::name(o.selector)) +
       ", \"patience\": " + std::to_string(o.patience) +
       ", \"restore_best\": " + (o.restore_best ? "true" : "false") +
       ", \"checkpoint\": " + json_string(o.checkpoint) +
       ", \"best_checkpoint\": " + json_string(o.best_checkpoint) +
       ", \"resume\": " + json_string(o.resume) + ", \"save_model\": " + json_string(c.save_model) +
       ", \"predictions\": " + json_string(c.predictions) +
       ", \"threads\": " + std::to_string(threads_in_use()) + "},\n";
  j += "  \"data\": {\"source_rows\": " + std::to_string(rows(d.source)) +
       ", \"trained_source_rows\": " + std::to_string(outcome.trained_source_rows) +
       ", \"target_test_rows\": " + std::to_string(d.target_test ? rows(*d.target_test) : 0) +
       ", \"target_rows\": " + std::to_string(rows(d.target)) +
       ", \"width\": " + std::to_string(m.input_width) +
       (m.image.given()
            ? ", \"image\": [" + std::to_string(m.image.height) + ", " +
                  std::to_string(m.image.width) + ", " + std::to_string(m.image.channels) + "]"
            : std::string()) +
       ", \"classes\": " + std::to_string(m.classes) +
       ", \"target_labelled\": " + (d.target.has_labels() ? "true" : "false") + "},\n";
  j += "  \"result\": {\"steps\": " + std::to_string(r.steps) +
       ", \"seconds\": " + number(r.seconds) +
       ", \"steps_per_second\": " + number(double(r.steps) / std::max(r.seconds, 1e-12)) +
       ", \"data_wait_seconds\": " + number(r.data_wait_seconds) +
       ", \"skipped_steps\": " + std::to_string(r.skipped_steps) +
       ", \"source_train_accuracy\": " + number(r.source_accuracy) +
       ", \"final_target_accuracy_oracle\": " + number(r.target_accuracy) +
       ", \"selected_by\": " + json_string(df::select::name(r.selected_by)) +
       ", \"selected_with_target_labels\": false, \"best_step\": " + std::to_string(r.best_step) +
       ", \"best_score\": " + number(r.best_score) +
       ", \"selected_target_accuracy\": " + number(r.selected_target_accuracy) +
       ", \"oracle_target_accuracy\": " + number(r.oracle_target_accuracy) +
       ", \"target_test_accuracy\": " + number(outcome.target_test_accuracy) +
       ", \"selected_target_test_accuracy\": " + number(outcome.selected_target_test_accuracy) +
       ", \"saved_model\": " +
       (outcome.saved
            ? "{\"model\": " + json_string(outcome.saved_selected ? "selected" : "last step") +
                  ", \"step\": " + std::to_string(outcome.saved_step) +
                  ", \"target_test_accuracy\": " + number(outcome.saved_target_test_accuracy) +
                  ", \"target_accuracy_oracle\": " + number(outcome.saved_target_accuracy) + "}"
            : std::string("null")) +
       ", \"stopped_early\": " + (r.stopped_early ? "true" : "false") +
       ", \"interrupted\": " + (outcome.interrupted_by != 0 ? "true" : "false") +
       ", \"interrupted_by\": " +
       json_string(outcome.interrupted_by != 0 ? signal_name(outcome.interrupted_by) : "") +
       ", \"interrupted_at\": " + std::to_string(outcome.interrupted_at) +
       ", \"restored_best\": " + (r.restored_best ? "true" : "false") +
       ", \"diverged\": " + (r.diverged ? "true" : "false") +
       ", \"diverged_at\": " + std::to_string(r.diverged_at) +
       ", \"divergence\": " + json_string(r.divergence) +
       ", \"peak_rss_bytes\": " + std::to_string(df::profiler::peak_rss_bytes()) + "},\n";
  j += "  \"evaluations\": [";
  for (std::size_t i = 0; i < r.evaluations.size(); ++i) {
    const df::evaluation& e = r.evaluations[i];
    j += std::string(i ? ",\n    " : "\n    ") + "{\"step\": " + std::to_string(e.step) +
         ", \"source_accuracy\": " + number(e.source_accuracy) +
         ", \"target_accuracy_oracle\": " + number(e.target_accuracy) +
         ", \"best\": " + (e.best ? "true" : "false") +
         ", \"scheduled\": " + (e.scheduled ? "true" : "false");
    // source_accuracy is written above, once; ensv scores a sweep's trainings, never one run's
    // evaluation.
    for (const auto v : df::select::all_validators)
      if (v != df::select::validator::source_accuracy && !df::select::scores_a_set(v))
        j += ", " + json_string(df::select::name(v)) + ": " + number(e.score(v));
    j += "}";
  }
  j += r.evaluations.empty() ? "],\n" : "\n  ],\n";
  j += "  \"profile\": {";
  for (std::size_t p = 0; p < df::phase_count; ++p) {
    const auto ph = static_cast<df::phase>(p);
    j += std::string(p ? ", " : "") + json_string(df::name(ph)) +
         ": {\"calls\": " + std::to_string(prof.calls(ph)) +
         ", \"seconds\": " + number(prof.total_seconds(ph)) + "}";
  }
  j += "}\n}\n";
  // Through a temporary file renamed over `path`: a full disk leaves the old report (or none)
  // and an error with the reason, never an empty or partial file.
  df::detail::write_file_atomically(path, std::string_view(j));
}

//! "0.1, 1": a list of values as typed (the fewest digits that read back the same float).
inline std::string value_list(const std::vector<float>& v) {
  std::string out;
  for (const float x : v) out.append(out.empty() ? "" : ", ").append(number(x));
  return out;
}

//! "62.10 ± 1.20 %", or "n/a" without labels.
inline std::string percent_std(double mean, double std) {
  if (!std::isfinite(mean)) return "n/a";
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.2f ± %.2f %%", 100 * mean, 100 * std);
  return buf;
}

//! {"source_accuracy": null, "entropy": 0.41, ...}: every validator's score, null where not
//! computed (a sweep_run's or sweep_configuration's `scores`).
inline std::string scores_json(
    const std::array<double, df::select::all_validators.size()>& scores) {
  std::string j = "{";
  for (const auto v : df::select::all_validators)
    j += std::string(j.size() > 1 ? ", " : "") + json_string(df::select::name(v)) + ": " +
         number(scores[std::size_t(v)]);
  return j + "}";
}

//! What a sweep's trainings kept of their predictions (sweep_run::target_probabilities).
struct kept_predictions {
  long trainings = 0;  //!< trainings that kept them (not those that diverged)
  long classes = 0, rows = 0;
  std::uint64_t bytes = 0;  //!< all of them together
};

inline kept_predictions kept_of(const df::sweep_result& r) {
  kept_predictions k;
  for (const df::sweep_run& x : r.runs) {
    if (x.target_probabilities.empty()) continue;
    ++k.trainings;
    k.classes = long(x.target_probabilities.classes);
    k.rows = long(x.target_probabilities.rows);
    k.bytes += x.target_probabilities.bytes();
  }
  return k;
}

//! Writes a sweep's configuration, plan, every training and both choices as one JSON object.
inline void write_sweep_json(const std::string& path,
                             const config& c,
                             const model_entry& m,
                             const df::fit_args& args,
                             const df::sweep_grid& g,
                             const df::sweep_result& r,
                             bool test_set,
                             std::string_view chosen_by) {
  std::string j = "{\n  \"format_version\": " + std::to_string(json_format_version) +
                  ",\n  \"mode\": \"sweep\",\n";
  j += "  \"model\": {\"name\": " + json_string(m.name) +
       ", \"description\": " + json_string(m.description) + "},\n";
  j += "  \"config\": {\"source\": " + json_string(c.source) +
       ", \"target\": " + json_string(c.target) +
       ", \"target_test\": " + json_string(c.target_test) +
       ", \"steps\": " + std::to_string(args.steps) + ", \"batch\": " + std::to_string(args.batch) +
       ", \"momentum\": " + number(args.momentum) +
       ", \"validation_fraction\": " + number(c.validation_fraction) +
       ", \"validator\": " + json_string(chosen_by) + ", \"validators\": [";
  for (std::size_t i = 0; i < c.validators.size(); ++i)
    j += (i ? ", " : "") + json_string(df::select::name(c.validators[i]));
  j += "], \"validator_rows\": " + std::to_string(c.validator_rows) + ", \"lambda_max\": [";
  for (std::size_t i = 0; i < g.lambda_max.size(); ++i)
    j += (i ? ", " : "") + number(g.lambda_max[i]);
  j += "], \"lr\": [";
  for (std::size_t i = 0; i < g.lr.size(); ++i) j += (i ? ", " : "") + number(g.lr[i]);
  j += "], \"seeds\": [";
  for (std::size_t i = 0; i < g.seeds.size(); ++i)
    j += (i ? ", " : "") + std::to_string(g.seeds[i]);
  j += "]},\n";
  j += "  \"plan\": {\"concurrent\": " + std::to_string(r.plan.concurrent) +
       ", \"threads_per_training\": " + std::to_string(r.plan.threads) +
       ", \"processors\": " + std::to_string(r.plan.processors) + "},\n";
  const kept_predictions kept = kept_of(r);
  j += "  \"kept_predictions\": " +
       (kept.trainings > 0 ? "{\"trainings\": " + std::to_string(kept.trainings) +
                                 ", \"classes\": " + std::to_string(kept.classes) + ", \"rows\": " +
                                 std::to_string(kept.rows) + ", \"bytes_per_training\": " +
                                 std::to_string(kept.bytes / std::uint64_t(kept.trainings)) +
                                 ", \"bytes\": " + std::to_string(kept.bytes) + "}"
                           : std::string("null")) +
       ",\n";
  const auto choice = [&](df::index_t at) -> std::string {
    if (at < 0) return "null";
    const df::sweep_configuration& x = r.configurations[std::size_t(at)];
    return "{\"configuration\": " + std::to_string(at) +
           ", \"lambda_max\": " + number(x.lambda_max) + ", \"lr\": " + number(x.lr) +
           ", \"score\": " + number(x.score) +
           ", \"target_accuracy_oracle\": " + number(x.target_accuracy) +
           ", \"target_test_accuracy\": " + number(x.test_accuracy) + "}";
  };
  j += "  \"selected_by\": " + json_string(chosen_by) +
       ",\n  \"selected_with_target_labels\": false,\n  \"selected\": " + choice(r.selected) +
       ",\n  \"oracle_by\": " + json_string(test_set ? "target test accuracy" : "target accuracy") +
       ",\n  \"oracle_uses_target_labels\": true,\n  \"oracle\": " + choice(r.oracle) +
       ",\n  \"seconds\": " + number(r.seconds) + ",\n  \"configurations\": [";
  for (std::size_t i = 0; i < r.configurations.size(); ++i) {
    const df::sweep_configuration& x = r.configurations[i];
    j += std::string(i ? ",\n    " : "\n    ") + "{\"lambda_max\": " + number(x.lambda_max) +
         ", \"lr\": " + number(x.lr) + ", \"score\": " + number(x.score) +
         ", \"scores\": " + scores_json(x.scores) +
         ", \"target_accuracy_oracle\": " + number(x.target_accuracy) +
         ", \"target_accuracy_std\": " + number(x.target_accuracy_std) +
         ", \"target_test_accuracy\": " + number(x.test_accuracy) +
         ", \"target_test_accuracy_std\": " + number(x.test_accuracy_std) + "}";
  }
  j += "\n  ],\n  \"runs\": [";
  for (std::size_t i = 0; i < r.runs.size(); ++i) {
    const df::sweep_run& x = r.runs[i];
    j += std::string(i ? ",\n    " : "\n    ") +
         "{\"configuration\": " + std::to_string(x.configuration) +
         ", \"seed\": " + std::to_string(x.seed) + ", \"score\": " + number(x.score) +
         ", \"scores\": " + scores_json(x.scores) +
         ", \"target_accuracy_oracle\": " + number(x.target_accuracy) +
         ", \"target_test_accuracy\": " + number(x.test_accuracy) +
         ", \"seconds\": " + number(x.seconds) +
         ", \"diverged\": " + (x.diverged ? "true" : "false") + "}";
  }
  j += "\n  ]\n}\n";
  df::detail::write_file_atomically(path, std::string_view(j));
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
  note_conversions<Step::sparse_input>(c);
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
  if (!c.json.empty()) write_json(c.json, c, m, args, o, d, r, outcome, prof);
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
