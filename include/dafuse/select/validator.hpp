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
enum class validator {
  source_accuracy,           //!< accuracy on held-out source samples (the caller computes it)
  entropy,                   //!< mean_entropy of target predictions
  information_maximization,  //!< information_maximization of target predictions
  snd,                       //!< soft_neighborhood_density of target predictions
  dev,                       //!< deep_embedded_validation
  pad,                       //!< proxy_a_distance of source and target features
};

//! Every validator, in declaration order.
inline constexpr std::array<validator, 6> all_validators{validator::source_accuracy,
                                                         validator::entropy,
                                                         validator::information_maximization,
                                                         validator::snd,
                                                         validator::dev,
                                                         validator::pad};

//! Short lowercase name: "source_accuracy", "entropy", "im", "snd", "dev", "pad".
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

//! Whether a larger value means a better model: source_accuracy, im and snd rise with quality;
//! entropy, dev (a risk) and pad (a distance) fall.
constexpr bool higher_is_better(validator v) noexcept {
  return v == validator::source_accuracy || v == validator::information_maximization ||
         v == validator::snd;
}

//! Whether the validator reads target labels: false for every one (they are all label-free).
constexpr bool needs_target_labels(validator) noexcept {
  return false;
}

}  // namespace dafuse::select
