// SPDX-License-Identifier: Apache-2.0
#include "run_report.hpp"

#include "run_text.hpp"
#include "signals.hpp"

#include <dafuse/config.hpp>
#include <dafuse/core/file.hpp>
#include <dafuse/select/validator.hpp>

#include <algorithm>
#include <array>
#include <cstddef>

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace dafuse_train {

namespace df = dafuse;

namespace {

// {"source_accuracy": null, "entropy": 0.41, ...}: every validator's score, null where not
// computed (a sweep_run's or sweep_configuration's `scores`).
std::string scores_json(const std::array<double, df::select::all_validators.size()>& scores) {
  std::string j = "{";
  for (const auto v : df::select::all_validators)
    j += std::string(j.size() > 1 ? ", " : "") + json_string(df::select::name(v)) + ": " +
         number(scores[std::size_t(v)]);
  return j + "}";
}

}  // namespace

int threads_in_use() {
#if defined(_OPENMP)
  return omp_get_max_threads();
#else
  return 1;
#endif
}

void write_json(const std::string& path,
                const config& c,
                const model_entry& m,
                const df::fit_args& args,
                const df::fit_options& o,
                const data_rows& d,
                const df::fit_result& r,
                const run_outcome& outcome,
                const df::profiler& prof) {
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
  j += "  \"data\": {\"source_rows\": " + std::to_string(d.source) +
       ", \"trained_source_rows\": " + std::to_string(outcome.trained_source_rows) +
       ", \"target_test_rows\": " + std::to_string(d.target_test) +
       ", \"target_rows\": " + std::to_string(d.target) +
       ", \"width\": " + std::to_string(m.input_width) +
       (m.image.given()
            ? ", \"image\": [" + std::to_string(m.image.height) + ", " +
                  std::to_string(m.image.width) + ", " + std::to_string(m.image.channels) + "]"
            : std::string()) +
       ", \"classes\": " + std::to_string(m.classes) +
       ", \"target_labelled\": " + (d.target_labelled ? "true" : "false") + "},\n";
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

kept_predictions kept_of(const df::sweep_result& r) {
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

void write_sweep_json(const std::string& path,
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

}  // namespace dafuse_train
