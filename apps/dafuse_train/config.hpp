// SPDX-License-Identifier: Apache-2.0
// dafuse-train's command line: every option, its default, and the parser that checks them.
#pragma once
#include "network.hpp"

#include <dafuse/select/validator.hpp>

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace dafuse_train {

//! A command line dafuse-train refuses: the message says which option and what was expected.
struct usage_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

//! --sweep KEY=V1,V2,... (repeated): a grid of trainings run in parallel, one configuration
//! chosen by --validator (train/sweep.hpp). An empty list takes the single value of --lambda-max,
//! --lr or --seed (or the model's default).
struct sweep_text {
  bool given = false;
  std::vector<double> lambda_max, lr;  //!< --sweep lambda_max=..., --sweep lr=...
  std::vector<std::uint64_t> seeds;    //!< --sweep seeds=...
  long parallel = 0;  //!< --sweep-parallel: trainings at once at most (0: as the processors allow)
};

//! Everything one run reads from the command line.
struct config {
  std::string model;  //!< registry name (--model)
  //! A network of any width (--features, --classifier, --discriminator, --sparse, --precision,
  //! --clip, --head, --network FILE) instead of a registry model: compiled once (jit.hpp).
  network_text network;
  //! --sparse, --precision, --clip, --head, --optim or --schedule was given
  bool network_policies_given = false;
  std::string source, source_labels;  //!< features (NPY, or a CSR prefix) and labels
  std::string target, target_labels;  //!< target labels are optional and only reported
  //! A labelled target test set (--target-test, --target-test-labels): never trained on, only
  //! reported, with the model the run ends with.
  std::string target_test, target_test_labels;
  std::vector<std::string> preprocess;  //!< transforms in order (--preprocess a,b)
  long steps = 0, batch = 0;            //!< 0: the model's default
  //! Absent: the model's default. Given values are checked (lr > 0, momentum and λ_max >= 0),
  //! never silently replaced.
  std::optional<double> lr, momentum, lambda_max;
  double weight_decay = 0;  //!< L2 penalty (sgd, adam) or decoupled decay rate (adamw)
  double max_grad_norm = 1;
  std::uint64_t seed = 1;
  long eval_every = 0;
  double validation_fraction = 0.1;
  dafuse::select::validator selector = dafuse::select::validator::source_accuracy;
  bool selector_given = false;  //!< --validator was on the command line
  //! --validator reverse: each training of a --sweep scored by reverse validation
  //! (train/reverse_validation.hpp) instead of `selector`.
  bool reverse_validation = false;
  std::vector<dafuse::select::validator> validators;  //!< extra validators (--validators)
  long validator_rows = 2000;
  long patience = 0;
  bool restore_best = false;
  std::string checkpoint, best_checkpoint, resume;
  long checkpoint_every = 0;
  bool profile = false;
  std::string trace, json, curves;
  std::string save_model;   //!< write the selected model here (a model file, train/model_file.hpp)
  std::string predictions;  //!< write the selected model's classes of the target (test) rows
  long curve_every = 0;     //!< 0: about 500 points over the run
  long stop_after = 0;      //!< stop (as if interrupted) once this many steps are done
  long threads = 0;         //!< OpenMP threads (0: OpenMP's default)
  bool quiet = false;       //!< no progress output
  sweep_text sweep;         //!< --sweep: a grid instead of one training
  bool help = false, list = false, version = false;
};

//! What the program is doing ("loading --source"), for the message when memory runs out: an
//! allocation that fails deep inside names nothing, so main names the step it was in.
inline std::string& activity() {
  static std::string now = "starting";
  return now;
}

//! Parses argv; throws usage_error for an unknown option, a missing value or a bad number.
config parse(int argc, char** argv);

//! The --help text (the registry is listed by the caller).
std::string usage();

}  // namespace dafuse_train
