// SPDX-License-Identifier: Apache-2.0
//! @file policy/clip.hpp
//! @brief The clip slot: how gradients are limited before the optimizer sees them.
//!
//! The step computes the squared L2 norm of each module's gradient while it produces it; a clip
//! policy turns those norms into a per-module scale and a clamp bound, which the fused update pass
//! applies to every gradient as it reads it (no extra pass over memory). The task part (G_f, G_y)
//! and the discriminator get separate scales so they can be clipped apart.
#pragma once
#include <dafuse/config.hpp>
#include <dafuse/policy/arguments.hpp>

#include <cmath>
#include <concepts>
#include <limits>
#include <string>

namespace dafuse {

//! Squared L2 norms of the raw gradients of each module, accumulated in double.
struct grad_norms {
  double features_sq = 0;       //!< ‖∂L/∂θ_f‖²
  double classifier_sq = 0;     //!< ‖∂L/∂θ_y‖²
  double discriminator_sq = 0;  //!< ‖∂L/∂θ_d‖²
  //! ‖g‖ over every parameter (PyTorch's clip_grad_norm_ total_norm with norm_type 2).
  DAFUSE_HOST_DEVICE double global() const {
    return std::sqrt(features_sq + classifier_sq + discriminator_sq);
  }
  //! ‖g‖ over G_f and G_y.
  DAFUSE_HOST_DEVICE double task() const { return std::sqrt(features_sq + classifier_sq); }
  //! ‖g‖ over G_d.
  DAFUSE_HOST_DEVICE double discriminator() const { return std::sqrt(discriminator_sq); }
};

//! What the update pass does to each gradient g before the optimizer sees it:
//! g ← clamp(g · scale, −limit, limit), with the scale of g's module.
struct clip_scales {
  double task = 1;                                         //!< scale for G_f and G_y
  double discriminator = 1;                                //!< scale for G_d
  double limit = std::numeric_limits<double>::infinity();  //!< clamp bound (∞: none)
};

namespace detail {
//! PyTorch's clip_grad_norm_ coefficient max_norm / (norm + 1e-6), never above 1 (1e-6 guards
//! against division by zero).
DAFUSE_HOST_DEVICE inline double norm_clip_scale(double norm, double max_norm) {
  const double coefficient = max_norm / (norm + 1e-6);
  return coefficient < 1 ? coefficient : 1;
}
//! A clipping bound: finite and > 0, with the way out named.
inline status check_bound(float value, const char* field, const char* policy) {
  return check_positive(value, field, policy, "(use clip::none to train without clipping)");
}
}  // namespace detail

}  // namespace dafuse

namespace dafuse::clip {

//! Gradients pass unchanged.
struct none {
  using clip_tag = void;  //!< fills the clip slot
  DAFUSE_HOST_DEVICE static clip_scales scales(const grad_norms&, const fit_args&) { return {}; }
  static status can_implement(const fit_args&) { return status::ok(); }
};

//! One norm over all parameters, as torch.nn.utils.clip_grad_norm_: when ‖g‖ > max_norm every
//! gradient is multiplied by max_norm / (‖g‖ + 1e-6); otherwise they are left as they are.
struct global_norm {
  using clip_tag = void;  //!< fills the clip slot
  DAFUSE_HOST_DEVICE static clip_scales scales(const grad_norms& n, const fit_args& a) {
    const double s = detail::norm_clip_scale(n.global(), a.max_grad_norm);
    return {s, s};
  }
  static status can_implement(const fit_args& a) {
    return detail::check_bound(a.max_grad_norm, "max_grad_norm", "clip::global_norm");
  }
};

//! Each gradient clamped to ±max_grad_value, as torch.nn.utils.clip_grad_value_.
struct value {
  using clip_tag = void;  //!< fills the clip slot
  DAFUSE_HOST_DEVICE static clip_scales scales(const grad_norms&, const fit_args& a) {
    return {1, 1, double(a.max_grad_value)};
  }
  static status can_implement(const fit_args& a) {
    return detail::check_bound(a.max_grad_value, "max_grad_value", "clip::value");
  }
};

//! Two norms: G_f and G_y together against max_grad_norm, G_d alone against
//! max_grad_norm_discriminator (each as clip_grad_norm_ over its own parameters), so a
//! discriminator with large gradients cannot shrink the task's update, nor the reverse.
struct per_module_norm {
  using clip_tag = void;  //!< fills the clip slot
  DAFUSE_HOST_DEVICE static clip_scales scales(const grad_norms& n, const fit_args& a) {
    return {detail::norm_clip_scale(n.task(), a.max_grad_norm),
            detail::norm_clip_scale(n.discriminator(), a.max_grad_norm_discriminator)};
  }
  static status can_implement(const fit_args& a) {
    if (status s = detail::check_bound(a.max_grad_norm, "max_grad_norm", "clip::per_module_norm");
        !s)
      return s;
    return detail::check_bound(a.max_grad_norm_discriminator, "max_grad_norm_discriminator",
                               "clip::per_module_norm");
  }
};

}  // namespace dafuse::clip

namespace dafuse {

//! A clip policy: turns gradient norms into scales and a bound, and checks its arguments.
template <class C>
concept clip_policy = requires(const grad_norms& n, const fit_args& a) {
  typename C::clip_tag;
  { C::scales(n, a) } -> std::same_as<clip_scales>;
  { C::can_implement(a) } -> std::same_as<status>;
};

static_assert(clip_policy<clip::none>);
static_assert(clip_policy<clip::global_norm>);
static_assert(clip_policy<clip::value>);
static_assert(clip_policy<clip::per_module_norm>);

}  // namespace dafuse
