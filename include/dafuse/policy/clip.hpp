// SPDX-License-Identifier: Apache-2.0
//! @file policy/clip.hpp
//! @brief The clip slot: how gradients are limited before the optimizer sees them.
//!
//! The step computes the squared L2 norm of each module's gradient while it produces it; a clip
//! policy turns those norms into multipliers, which the fused update pass applies to every
//! gradient as it reads it (no extra pass over memory). The task part (G_f, G_y) and the
//! discriminator get separate multipliers so later policies can clip them apart.
#pragma once
#include <dafuse/config.hpp>
#include <dafuse/step/arguments.hpp>

#include <cmath>
#include <concepts>
#include <string>

namespace dafuse {

//! Squared L2 norms of the raw gradients of each module, accumulated in double.
struct grad_norms {
  double features_sq = 0;       //!< ‖∂L/∂θ_f‖²
  double classifier_sq = 0;     //!< ‖∂L/∂θ_y‖²
  double discriminator_sq = 0;  //!< ‖∂L/∂θ_d‖²
  //! ‖g‖ over every parameter (PyTorch's clip_grad_norm_ total_norm with norm_type 2).
  double global() const { return std::sqrt(features_sq + classifier_sq + discriminator_sq); }
};

//! Multipliers the update pass applies to gradients.
struct clip_scales {
  double task = 1;           //!< for G_f and G_y
  double discriminator = 1;  //!< for G_d
};

}  // namespace dafuse

namespace dafuse::clip {

//! Gradients pass unchanged.
struct none {
  using clip_tag = void;  //!< fills the clip slot
  static clip_scales scales(const grad_norms&, const fit_args&) { return {}; }
  static status can_implement(const fit_args&) { return status::ok(); }
};

//! One norm over all parameters, as torch.nn.utils.clip_grad_norm_: when ‖g‖ > max_norm every
//! gradient is multiplied by max_norm / (‖g‖ + 1e-6); otherwise they are left as they are.
struct global_norm {
  using clip_tag = void;                   //!< fills the clip slot
  static constexpr double epsilon = 1e-6;  //!< PyTorch's guard against division by zero
  static clip_scales scales(const grad_norms& n, const fit_args& a) {
    const double coefficient = double(a.max_grad_norm) / (n.global() + epsilon);
    const double s = coefficient < 1 ? coefficient : 1;
    return {s, s};
  }
  static status can_implement(const fit_args& a) {
    if (!(a.max_grad_norm > 0) || !std::isfinite(a.max_grad_norm))
      return {"fit_args.max_grad_norm: expected a finite value > 0 for clip::global_norm, found " +
              std::to_string(a.max_grad_norm) + " (use clip::none to train without clipping)"};
    return status::ok();
  }
};

}  // namespace dafuse::clip

namespace dafuse {

//! A clip policy: turns gradient norms into multipliers and checks its arguments.
template <class C>
concept clip_policy = requires(const grad_norms& n, const fit_args& a) {
  typename C::clip_tag;
  { C::scales(n, a) } -> std::same_as<clip_scales>;
  { C::can_implement(a) } -> std::same_as<status>;
};

static_assert(clip_policy<clip::none>);
static_assert(clip_policy<clip::global_norm>);

}  // namespace dafuse
