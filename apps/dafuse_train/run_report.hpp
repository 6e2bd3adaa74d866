// SPDX-License-Identifier: Apache-2.0
// dafuse-train's reports of a run as files: the JSON of one training (--json) and of a sweep,
// with what the run measured beside fit's result. Defined once in run_report.cpp (the prebuilt
// part, meson.build), not in each unit that runs a step (run.hpp).
#pragma once
#include "config.hpp"
#include "registry.hpp"

#include <dafuse/core/profiler.hpp>
#include <dafuse/policy/arguments.hpp>
#include <dafuse/train/fit.hpp>
#include <dafuse/train/sweep.hpp>

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

namespace dafuse_train {

//! The report's format: raise it when a field changes meaning or goes away (adding one does not).
inline constexpr int json_format_version = 2;

//! OpenMP threads a run uses (1 without OpenMP).
int threads_in_use();

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

//! The rows of a run's data (run_data), dense or sparse alike.
struct data_rows {
  long source = 0, target = 0;
  long target_test = 0;  //!< 0 without --target-test
  bool target_labelled = false;
};

//! Writes the configuration and every result as one JSON object.
void write_json(const std::string& path,
                const config& c,
                const model_entry& m,
                const dafuse::fit_args& args,
                const dafuse::fit_options& o,
                const data_rows& d,
                const dafuse::fit_result& r,
                const run_outcome& outcome,
                const dafuse::profiler& prof);

//! What a sweep's trainings kept of their predictions (sweep_run::target_probabilities).
struct kept_predictions {
  long trainings = 0;  //!< trainings that kept them (not those that diverged)
  long classes = 0, rows = 0;
  std::uint64_t bytes = 0;  //!< all of them together
};

kept_predictions kept_of(const dafuse::sweep_result& r);

//! Writes a sweep's configuration, plan, every training and both choices as one JSON object.
void write_sweep_json(const std::string& path,
                      const config& c,
                      const model_entry& m,
                      const dafuse::fit_args& args,
                      const dafuse::sweep_grid& g,
                      const dafuse::sweep_result& r,
                      bool test_set,
                      std::string_view chosen_by);

}  // namespace dafuse_train
