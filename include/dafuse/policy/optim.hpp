// SPDX-License-Identifier: Apache-2.0
//! @file policy/optim.hpp
//! @brief The optimizer slot: the per-parameter update rule the fused update pass applies.
//!
//! An optimizer names how many state values it keeps per parameter, turns fit_args and the
//! scheduled learning rate into `coefficients` once per step, and updates one parameter given its
//! (already clipped) gradient. The update takes the parameter's index, not a thread id, so the
//! same code runs in a CPU loop and in a GPU kernel.
#pragma once
#include <dafuse/config.hpp>
#include <dafuse/core/meta.hpp>
#include <dafuse/policy/arguments.hpp>

#include <cmath>
#include <concepts>
#include <string>

namespace dafuse::optim {

//! Stochastic gradient descent with PyTorch's torch.optim.SGD semantics:
//!   g ← g + wd·θ;  b ← g on the first step, else μ·b + (1 − dampening)·g;
//!   g ← g + μ·b (Nesterov) or b;  θ ← θ − lr·g.
//! With μ = 0 no momentum buffer is read or written.
struct sgd {
  using optim_tag = void;                        //!< fills the optimizer slot
  static constexpr index_t state_per_param = 1;  //!< the momentum buffer b

  //! The per-step constants of the update.
  template <class T>
  struct coefficients {
    T lr;            //!< learning rate of this step (scheduled)
    T momentum;      //!< μ
    T dampening;     //!< dampening of b
    T weight_decay;  //!< wd
    bool nesterov;   //!< Nesterov momentum
    bool first;      //!< first step: b starts as g
  };

  template <class T>
  DAFUSE_HOST_DEVICE static coefficients<T> make(const fit_args& a, double lr, index_t step_index) {
    return {T(lr), T(a.momentum), T(a.dampening), T(a.weight_decay), a.nesterov, step_index == 0};
  }

  //! Updates θ = params[i] given its clipped gradient g; state[i] is b.
  template <class T>
  DAFUSE_HOST_DEVICE static void update(
      index_t i, T g, T* params, T* state, index_t /*state_stride*/, const coefficients<T>& c) {
    T& theta = params[i];
    g += c.weight_decay * theta;
    if (c.momentum != T(0)) {
      T& b = state[i];
      b = c.first ? g : c.momentum * b + (T(1) - c.dampening) * g;
      g = c.nesterov ? g + c.momentum * b : b;
    }
    theta -= c.lr * g;
  }

  static status can_implement(const fit_args& a) {
    for (const status& s : {dafuse::detail::check_non_negative(a.momentum, "momentum"),
                            dafuse::detail::check_non_negative(a.weight_decay, "weight_decay"),
                            dafuse::detail::check_field(std::isfinite(a.dampening), a.dampening,
                                                        "dampening", "a finite value")})
      if (!s) return s;
    if (a.nesterov && (a.momentum <= 0 || a.dampening != 0))
      return {
          "fit_args.nesterov: Nesterov momentum needs momentum > 0 and dampening = 0 (as in "
          "PyTorch), found momentum " +
          std::to_string(a.momentum) + " and dampening " + std::to_string(a.dampening)};
    return status::ok();
  }
};

//! Adam (Kingma & Ba 2015) with PyTorch's torch.optim.Adam / AdamW semantics, step t = i + 1:
//!   Adam:  g ← g + wd·θ          AdamW: θ ← θ·(1 − lr·wd)   (decoupled: Loshchilov & Hutter 2019)
//!   m ← β₁m + (1 − β₁)g;  v ← β₂v + (1 − β₂)g²
//!   θ ← θ − (lr / (1 − β₁ᵗ)) · m / (√v / √(1 − β₂ᵗ) + ε)
//! State per parameter: m, then v (at stride `state_stride`).
template <bool Decoupled>
struct adam_rule {
  using optim_tag = void;                                    //!< fills the optimizer slot
  static constexpr index_t state_per_param = 2;              //!< m and v
  static constexpr bool decoupled_weight_decay = Decoupled;  //!< AdamW when true

  //! The per-step constants of the update.
  template <class T>
  struct coefficients {
    T lr;                //!< learning rate of this step (scheduled, times the module's multiplier)
    T beta1, beta2;      //!< moment decays
    T eps;               //!< added to the corrected √v
    T weight_decay;      //!< wd
    T step_size;         //!< lr / (1 − β₁ᵗ)
    T correction2_sqrt;  //!< √(1 − β₂ᵗ)
  };

  template <class T>
  DAFUSE_HOST_DEVICE static coefficients<T> make(const fit_args& a, double lr, index_t step_index) {
    const double t = double(step_index + 1);
    const double correction1 = 1.0 - std::pow(double(a.beta1), t);
    const double correction2 = 1.0 - std::pow(double(a.beta2), t);
    return {T(lr),
            T(a.beta1),
            T(a.beta2),
            T(a.eps),
            T(a.weight_decay),
            T(lr / correction1),
            T(std::sqrt(correction2))};
  }

  //! Updates θ = params[i] given its clipped gradient g; m = state[i], v = state[stride + i].
  template <class T>
  DAFUSE_HOST_DEVICE static void update(
      index_t i, T g, T* params, T* state, index_t state_stride, const coefficients<T>& c) {
    T& theta = params[i];
    if constexpr (Decoupled)
      theta *= T(1) - c.lr * c.weight_decay;
    else
      g += c.weight_decay * theta;
    T& m = state[i];
    T& v = state[state_stride + i];
    m = c.beta1 * m + (T(1) - c.beta1) * g;
    v = c.beta2 * v + (T(1) - c.beta2) * g * g;
    theta -= c.step_size * m / (std::sqrt(v) / c.correction2_sqrt + c.eps);
  }

  static status can_implement(const fit_args& a) {
    for (const status& s : {dafuse::detail::check_unit_interval(a.beta1, "beta1"),
                            dafuse::detail::check_unit_interval(a.beta2, "beta2")})
      if (!s) return s;
    if (status s = dafuse::detail::check_positive(a.eps, "eps"); !s) return s;
    return dafuse::detail::check_non_negative(a.weight_decay, "weight_decay");
  }
};

using adam = adam_rule<false>;  //!< Adam, L2 penalty added to the gradient (torch.optim.Adam)
using adamw = adam_rule<true>;  //!< AdamW, decoupled weight decay (torch.optim.AdamW)

}  // namespace dafuse::optim

namespace dafuse {

//! An optimizer policy: state size, per-step coefficients, the per-parameter update, the check.
template <class O>
concept optim_policy = requires(const fit_args& a, float* p) {
  typename O::optim_tag;
  { O::state_per_param } -> std::convertible_to<index_t>;
  O::update(index_t{0}, 0.0f, p, p, index_t{0}, O::template make<float>(a, 0.1, 0));
  { O::can_implement(a) } -> std::same_as<status>;
};

static_assert(optim_policy<optim::sgd>);
static_assert(optim_policy<optim::adam>);
static_assert(optim_policy<optim::adamw>);

}  // namespace dafuse
