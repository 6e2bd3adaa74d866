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
#include <dafuse/step/arguments.hpp>

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
  static coefficients<T> make(const fit_args& a, double lr, index_t step_index) {
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
    if (!(a.momentum >= 0) || !std::isfinite(a.momentum))
      return {"fit_args.momentum: expected a finite value >= 0, found " +
              std::to_string(a.momentum)};
    if (!(a.weight_decay >= 0) || !std::isfinite(a.weight_decay))
      return {"fit_args.weight_decay: expected a finite value >= 0, found " +
              std::to_string(a.weight_decay)};
    if (!std::isfinite(a.dampening))
      return {"fit_args.dampening: expected a finite value, found " + std::to_string(a.dampening)};
    if (a.nesterov && (a.momentum <= 0 || a.dampening != 0))
      return {
          "fit_args.nesterov: Nesterov momentum needs momentum > 0 and dampening = 0 (as in "
          "PyTorch), found momentum " +
          std::to_string(a.momentum) + " and dampening " + std::to_string(a.dampening)};
    return status::ok();
  }
};

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

}  // namespace dafuse
