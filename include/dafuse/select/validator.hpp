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

//! The validators a model-selection loop can rank checkpoints by. None reads target labels:
//! selection with target labels is "oracle" selection and the caller reports it separately.
//! Each scores one model; EnsV, which scores a set of candidates against their ensemble, is a
//! function of the candidates' stored predictions (select::ensemble_validation), not an entry.
enum class validator {
  source_accuracy,           //!< accuracy on held-out source samples (the caller computes it)
  entropy,                   //!< mean_entropy of target predictions
  information_maximization,  //!< information_maximization of target predictions
  snd,                       //!< soft_neighborhood_density of target predictions
  dev,                       //!< deep_embedded_validation
  pad,                       //!< proxy_a_distance of source and target features
  bnm,                       //!< batch_nuclear_norm of target predictions
  mano,                      //!< mano of target predictions (its softmax form, on probabilities)
};

//! Every validator, in declaration order.
inline constexpr std::array<validator, 8> all_validators{validator::source_accuracy,
                                                         validator::entropy,
                                                         validator::information_maximization,
                                                         validator::snd,
                                                         validator::dev,
                                                         validator::pad,
                                                         validator::bnm,
                                                         validator::mano};

//! Short lowercase name: "source_accuracy", "entropy", "im", "snd", "dev", "pad", "bnm",
//! "mano".
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

//! Whether a larger value means a better model: source_accuracy, im, snd, bnm and mano rise with
//! quality; entropy, dev (a risk) and pad (a distance) fall.
constexpr bool higher_is_better(validator v) noexcept {
  return v == validator::source_accuracy || v == validator::information_maximization ||
         v == validator::snd || v == validator::bnm || v == validator::mano;
}

//! Whether the validator reads target labels: false for every one (they are all label-free).
constexpr bool needs_target_labels(validator) noexcept {
  return false;
}

}  // namespace dafuse::select
