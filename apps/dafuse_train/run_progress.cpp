// SPDX-License-Identifier: Apache-2.0
#include "run_progress.hpp"

#include "run_text.hpp"
#include "signals.hpp"

#include <dafuse/select/validator.hpp>

#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <utility>

namespace dafuse_train {

namespace df = dafuse;

std::vector<std::string> curve_columns() {
  std::vector<std::string> c{
      "step", "label_loss", "domain_loss", "domain_accuracy", "lambda",
      "lr",   "grad_norm",  "loss_scale",  "source_accuracy", "target_accuracy (oracle)"};
  // A validator that scores a set of trainings (ensv) has no value at one run's evaluation.
  for (const auto v : df::select::all_validators)
    if (v != df::select::validator::source_accuracy && !df::select::scores_a_set(v))
      c.push_back("validator " + std::string(df::select::name(v)));
  return c;
}

reporter::reporter(const config& c, long steps, long eval_every)
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

long reporter::planned_curve_rows(const config& c, long steps, long eval_every) {
  const long every = c.curve_every > 0 ? c.curve_every : std::max(1L, steps / 500);
  return steps / every + steps / std::max(1L, eval_every) + 2;
}

void reporter::on_step(df::index_t step, const df::step_report& r) {
  if (first_step_ < 0) first_step_ = long(step) - 1;
  rows_step_ = long(step);
  sums_[0] += r.label_loss;
  sums_[1] += r.domain_loss;
  sums_[2] += r.domain_accuracy;
  ++count_;
  last_ = r;
  if (keep_rows_ &&
      (step % curve_every_ == 0 || step == steps_ || (eval_every_ > 0 && step % eval_every_ == 0)))
    add_row(step);
  progress(step);
}

bool reporter::should_stop() {
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

void reporter::on_evaluation(const df::evaluation& e) {
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

const df::training_curves& reporter::curves() {
  for (const auto& row : rows_) curves_.add(row);
  rows_.clear();
  return curves_;
}

void reporter::finish() {
  if (terminal_) std::fprintf(stderr, "\n");
}

void reporter::add_row(df::index_t step) {
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

void reporter::progress(df::index_t step) {
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

std::string reporter::eta(df::index_t step, double elapsed) const {
  const long done = long(step) - first_step_;
  if (done <= 0) return "?";
  return duration(elapsed / double(done) * double(steps_ - long(step)));
}

}  // namespace dafuse_train
