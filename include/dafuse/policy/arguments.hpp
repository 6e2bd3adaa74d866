// SPDX-License-Identifier: Apache-2.0
//! @file policy/arguments.hpp
//! @brief The run-time numbers of a training set-up (types decide structure, these decide values).
#pragma once
#include <dafuse/config.hpp>
#include <dafuse/core/meta.hpp>
#include <dafuse/nn/init.hpp>

#include <cmath>
#include <cstdint>
#include <string>

namespace dafuse {

//! One number per module of a DANN network (G_f, G_y, G_d).
struct module_factors {
  float features = 1.0f;       //!< G_f
  float classifier = 1.0f;     //!< G_y
  float discriminator = 1.0f;  //!< G_d
};

//! Everything a step and `fit` read at run time. Policies that do not use a field ignore it;
//! each policy's `can_implement` checks the fields it does use. Defaults follow PyTorch's where
//! PyTorch has one (SGD: no momentum, no dampening, no weight decay).
struct fit_args {
  index_t steps = 1000;        //!< optimizer steps; schedules see progress p = step / steps
  index_t batch = 64;          //!< rows per domain per step: B source + B target
  float lr = 0.01f;            //!< base learning rate lr₀ (schedules scale it)
  float momentum = 0.0f;       //!< optim::sgd: momentum μ
  float dampening = 0.0f;      //!< optim::sgd: dampening of the momentum buffer
  bool nesterov = false;       //!< optim::sgd: Nesterov momentum (needs μ > 0, dampening 0)
  float weight_decay = 0.0f;   //!< L2 penalty (sgd, adam) or decoupled decay rate (adamw)
  float beta1 = 0.9f;          //!< optim::adam/adamw: decay of the first moment
  float beta2 = 0.999f;        //!< optim::adam/adamw: decay of the second moment
  float eps = 1e-8f;           //!< optim::adam/adamw: added to √v̂
  module_factors lr_mult{};    //!< per-module learning-rate multipliers (e.g. 10 for new heads)
  float max_grad_norm = 1.0f;  //!< clip::global_norm: largest L2 norm of all gradients;
                               //!< clip::per_module_norm: of G_f and G_y together
  float max_grad_norm_discriminator = 1.0f;  //!< clip::per_module_norm: of G_d
  float max_grad_value = 1.0f;  //!< clip::value: gradients are clamped to ±max_grad_value
  float lambda_max = 1.0f;      //!< head::dann: λ(p) = lambda_max · schedule λ(p)
  std::uint64_t seed = 0;       //!< initialisation and sampling; same seed → same result
  nn::weight_init init = nn::weight_init::glorot_he;  //!< initialisation scheme (nn/init.hpp)
  index_t eval_chunk = 1024;                          //!< samples per forward pass when evaluating
  //! A step with sparse input (nn::sparse_input): the non-zeros its batch buffers hold room
  //! for. 0: every feature of every row (the densest batch possible: 5 MB for 5000 features and
  //! 128 rows, where an Amazon reviews batch holds about 12 000 non-zeros);
  //! data::densest_batch_nonzeros gives the most a pair of data sets can draw, and fit sizes the
  //! step it builds that way.
  index_t sparse_nonzeros = 0;
  float loss_scale_init = 65536.0f;    //!< loss_scale::dynamic: the first S (GradScaler: 2^16)
  float loss_scale_growth = 2.0f;      //!< loss_scale::dynamic: S ← S · growth after an interval
  float loss_scale_backoff = 0.5f;     //!< loss_scale::dynamic: S ← S · backoff on overflow
  index_t loss_scale_interval = 2000;  //!< loss_scale::dynamic: finite steps before S grows
  float loss_scale_min = 1.0f;         //!< loss_scale::dynamic: S never backs off below it
};

//! The answer of a `can_implement`: empty when the arguments are usable, otherwise a sentence
//! that names the field, what was found and what to do.
struct status {
  std::string message;  //!< empty on success
  explicit operator bool() const { return message.empty(); }
  static status ok() { return {}; }
};

namespace detail {
//! The wording every argument check uses:
//! `fit_args.<field>: expected <what>[ for <policy>], found <value>[ <advice>]`, or success.
inline status check_field(bool ok,
                          float value,
                          const char* field,
                          const char* what,
                          const char* policy = nullptr,
                          const char* advice = nullptr) {
  if (ok) return status::ok();
  std::string m = std::string("fit_args.") + field + ": expected " + what;
  if (policy) m.append(" for ").append(policy);
  m.append(", found ").append(std::to_string(value));
  if (advice) m.append(" ").append(advice);
  return {m};
}
//! A finite value ≥ 0.
inline status check_non_negative(float value, const char* field, const char* policy = nullptr) {
  return check_field(value >= 0 && std::isfinite(value), value, field, "a finite value >= 0",
                     policy);
}
//! A finite value > 0.
inline status check_positive(float value,
                             const char* field,
                             const char* policy = nullptr,
                             const char* advice = nullptr) {
  return check_field(value > 0 && std::isfinite(value), value, field, "a finite value > 0", policy,
                     advice);
}
//! A value in [0, 1), such as a moment decay.
inline status check_unit_interval(float value, const char* field) {
  return check_field(value >= 0 && value < 1, value, field, "a value in [0, 1)");
}
}  // namespace detail

}  // namespace dafuse
