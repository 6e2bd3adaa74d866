// SPDX-License-Identifier: Apache-2.0
// dafuse-train's view of a training while it runs: the progress output, the evaluation lines,
// the rows of --curves and the stop (--stop-after, a stop signal), as one fit_callback that no
// step type decides. Defined once in run_progress.cpp (the prebuilt part, meson.build).
#pragma once
#include "config.hpp"

#include <dafuse/backend/executor.hpp>
#include <dafuse/train/curves.hpp>
#include <dafuse/train/fit.hpp>

#include <array>
#include <chrono>
#include <string>
#include <vector>

namespace dafuse_train {

//! The curves' columns: per-step figures (averaged over each curve interval) then evaluations.
std::vector<std::string> curve_columns();

//! Progress output, curve rows and evaluation lines: the run's fit_callback.
class reporter final : public dafuse::fit_callback {
 public:
  reporter(const config& c, long steps, long eval_every);

  //! Rows the curves will hold: one per curve interval and per evaluation, and the last step.
  static long planned_curve_rows(const config& c, long steps, long eval_every);

  void on_step(dafuse::index_t step, const dafuse::step_report& r) override;

  //! --stop-after N, or a stop signal (signals.hpp): the run ends after this step either way.
  bool should_stop() override;
  //! The stop signal that ended the training (0: none) and the step it ended after.
  int interrupted_by() const { return interrupted_by_; }
  long interrupted_at() const { return interrupted_at_; }

  void on_evaluation(const dafuse::evaluation& e) override;

  //! Flushes the rows into the curves table.
  const dafuse::training_curves& curves();

  void finish();

 private:
  void add_row(dafuse::index_t step);
  void progress(dafuse::index_t step);
  // Time left at the run's mean rate so far (evaluations included).
  std::string eta(dafuse::index_t step, double elapsed) const;

  const config& config_;
  long steps_, curve_every_, eval_every_;
  long first_step_ = -1;  // the step before the first one this run made (a resumed run's start)
  bool terminal_;
  bool keep_rows_;  // --curves was given: the rows are kept for it
  dafuse::training_curves curves_;
  std::vector<std::vector<double>> rows_;
  std::array<double, 3> sums_{};
  long count_ = 0;
  long rows_step_ = 0;  // the last step on_step saw
  int interrupted_by_ = 0;
  long interrupted_at_ = -1;
  dafuse::step_report last_;
  std::chrono::steady_clock::time_point start_, last_draw_{};
};

}  // namespace dafuse_train
