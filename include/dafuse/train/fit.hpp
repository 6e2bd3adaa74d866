// SPDX-License-Identifier: Apache-2.0
//! @file train/fit.hpp
//! @brief `fit`: train a step type for fit_args::steps steps and report target accuracy and time.
#pragma once
#include <dafuse/config.hpp>
#include <dafuse/core/error.hpp>
#include <dafuse/data/batcher.hpp>
#include <dafuse/data/csr.hpp>
#include <dafuse/data/dataset.hpp>
#include <dafuse/data/sparse_batcher.hpp>
#include <dafuse/step/arguments.hpp>
#include <dafuse/step/train_step.hpp>

#include <chrono>
#include <cstdint>
#include <limits>
#include <vector>

namespace dafuse {

//! What `fit` returns.
struct fit_result {
  double target_accuracy = std::numeric_limits<double>::quiet_NaN();  //!< NaN without labels
  double source_accuracy = 0;      //!< on the source training rows
  double seconds = 0;              //!< wall time of the training loop (not of the evaluation)
  double data_wait_seconds = 0;    //!< of `seconds`, waiting for data (see fit())
  index_t steps = 0;               //!< steps taken
  index_t skipped_steps = 0;       //!< steps whose update was skipped for non-finite gradients
  step_report last;                //!< the last step's report
  std::vector<double> parameters;  //!< trained parameters (the step's flat layout)
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
//! The loop `fit` runs for any data set kind and its batcher: steps, timing, accuracies.
template <class Step, class Data, class Batcher, class Fill>
fit_result train_loop(
    Step& step, const Data& source, const Data& target, Batcher& batches, Fill fill) {
  const fit_args& args = step.args();
  fit_result r;
  const auto start = std::chrono::steady_clock::now();
  for (index_t t = 0; t < args.steps; ++t) {
    fill();
    r.last = step.run();
    r.skipped_steps += r.last.skipped;
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.data_wait_seconds = batches.wait_seconds();
  r.steps = args.steps;
  r.source_accuracy = accuracy(step, source);
  if (target.has_labels()) r.target_accuracy = accuracy(step, target);
  r.parameters.assign(step.parameters().begin(), step.parameters().end());
  return r;
}
}  // namespace detail

//! Trains `step` in place for args.steps steps on batches its loader draws from `source`
//! (labelled) and `target` (labels, if any, are never used for training). Returns the timings
//! and accuracies; the step keeps the trained parameters.
//!
//! fit_result::data_wait_seconds sums the loader's waits over the fills (its wait_seconds()): the
//! whole fill for loader::sync and loader::resident, only the time blocked on a batch the workers
//! have not finished for loader::prefetch (its copy into the step's input is not counted).
template <class Step>
fit_result fit(Step& step, const data::dataset& source, const data::dataset& target) {
  const fit_args& args = step.args();
  data::check_width(source, Step::input_width);
  data::check_labels(source, Step::class_count);
  if (Step::adversarial) data::check_width(target, Step::input_width);
  if (target.has_labels()) data::check_labels(target, Step::class_count);

  data::batcher<typename Step::loader_type, typename Step::system_type> batches(
      source, target, args.batch, args.seed, Step::adversarial);
  return detail::train_loop(step, source, target, batches,
                            [&] { batches.fill(step.input(), step.source_labels()); });
}

//! Trains a step with a sparse first layer on CSR data sets (the loader slot does not apply:
//! batches are always gathered on the host by data::sparse_batcher). Same result fields.
template <class Step>
fit_result fit(Step& step, const data::sparse_dataset& source, const data::sparse_dataset& target) {
  static_assert(Step::sparse_input,
                "dafuse: sparse data sets need a network whose feature extractor reads sparse "
                "input: nn::sparse_input<nn::mlp<...>>");
  const fit_args& args = step.args();
  data::check_width(source, Step::input_width);
  data::check_labels(source, Step::class_count);
  if (Step::adversarial) data::check_width(target, Step::input_width);
  if (target.has_labels()) data::check_labels(target, Step::class_count);
  data::sparse_batcher batches(source, target, args.batch, args.seed, Step::adversarial);
  return detail::train_loop(step, source, target, batches,
                            [&] { batches.fill(step.sparse_batch(), step.source_labels()); });
}

//! Builds a `Step` from `args` (initialised from args.seed) and trains it: see the overload above.
template <class Step, class Data>
fit_result fit(const Data& source, const Data& target, const fit_args& args) {
  Step step(args);
  return fit(step, source, target);
}

}  // namespace dafuse
