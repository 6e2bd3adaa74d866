// SPDX-License-Identifier: Apache-2.0
//! @file select/validator.hpp
//! @brief The names of the model-selection validators (select/validators.hpp computes them): a
//! light header for code that only parses, stores or prints a choice of validator.
#pragma once
#include <dafuse/core/error.hpp>

#include <array>
#include <string>
#include <string_view>

namespace dafuse::select {

//! The validators a model-selection loop can rank candidates by. None reads target labels:
//! selection with target labels is "oracle" selection and the caller reports it separately.
//! Each scores one model, except ensv, which scores a set of candidates against their ensemble
//! (scores_a_set): a sweep computes it over its trainings' kept predictions once they have all
//! finished; fit, which ranks one run's checkpoints, refuses it.
enum class validator {
  source_accuracy,           //!< accuracy on held-out source samples (the caller computes it)
  entropy,                   //!< mean_entropy of target predictions
  information_maximization,  //!< information_maximization of target predictions
  snd,                       //!< soft_neighborhood_density of target predictions
  dev,                       //!< deep_embedded_validation
  pad,                       //!< proxy_a_distance of source and target features
  bnm,                       //!< batch_nuclear_norm of target predictions
  mano,                      //!< mano of target predictions (its softmax form, on probabilities)
  ensv,  //!< ensemble_validation over a sweep's trainings (their agreement with the ensemble)
};

//! Every validator, in declaration order.
inline constexpr std::array<validator, 9> all_validators{validator::source_accuracy,
                                                         validator::entropy,
                                                         validator::information_maximization,
                                                         validator::snd,
                                                         validator::dev,
                                                         validator::pad,
                                                         validator::bnm,
                                                         validator::mano,
                                                         validator::ensv};

//! Short lowercase name: "source_accuracy", "entropy", "im", "snd", "dev", "pad", "bnm",
//! "mano", "ensv".
constexpr std::string_view name(validator v) noexcept {
  switch (v) {
    case validator::source_accuracy:
      return "source_accuracy";
    case validator::entropy:
      return "entropy";
    case validator::information_maximization:
      return "im";
    case validator::snd:
      return "snd";
    case validator::dev:
      return "dev";
    case validator::pad:
      return "pad";
    case validator::bnm:
      return "bnm";
    case validator::mano:
      return "mano";
    case validator::ensv:
      return "ensv";
  }
  return "unknown";
}

//! The validator called `text` (one of the names `name` gives, exactly). `field` names the
//! setting being parsed in the error (a flag or a config key).
inline validator parse_validator(std::string_view text, std::string_view field = "validator") {
  std::string valid;
  for (const validator v : all_validators) {
    if (name(v) == text) return v;
    valid.append(valid.empty() ? "one of " : ", ").append(name(v));
  }
  fail("select::parse_validator", field, valid, "\"" + std::string(text) + "\"");
}

//! Whether a larger value means a better model: source_accuracy, im, snd, bnm, mano and ensv (an
//! agreement) rise with quality; entropy, dev (a risk) and pad (a distance) fall.
constexpr bool higher_is_better(validator v) noexcept {
  return v == validator::source_accuracy || v == validator::information_maximization ||
         v == validator::snd || v == validator::bnm || v == validator::mano || v == validator::ensv;
}

//! Whether the validator scores a set of candidates against one another rather than one model:
//! true for ensv only (each candidate's score depends on every other's predictions). A sweep
//! computes it once all its trainings have finished; fit's selection among one run's
//! checkpoints cannot, and refuses it.
constexpr bool scores_a_set(validator v) noexcept {
  return v == validator::ensv;
}

//! Whether the validator reads target labels: false for every one (they are all label-free).
constexpr bool needs_target_labels(validator) noexcept {
  return false;
}

}  // namespace dafuse::select
