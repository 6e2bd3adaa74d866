// SPDX-License-Identifier: Apache-2.0
//! @file head/mmd.hpp
//! @brief head::mmd: multi-kernel maximum mean discrepancy on the features (DAN: Long et al.,
//! "Learning Transferable Features with Deep Adaptation Networks", ICML 2015).
//!
//! No discriminator: the loss is MMD² between the B source and the B target rows of h under the
//! kernel k(x, y) = (1/K)·Σ_u exp(−‖x − y‖² / (2·α_u·m̄)), the uniform convex combination of K
//! Gaussian kernels whose bandwidths are fixed multiples α_u ∈ {1/8, 1/4, 1/2, 1, 2} of m̄, the
//! batch's mean pairwise squared distance. m̄ is treated as a constant for the gradient (DAN
//! sets the bandwidths from the data, not through them), and the kernel weights are fixed
//! rather than learned by DAN's quadratic program. Estimators: the unbiased quadratic one
//! (mmd_estimator::quadratic, O(B²) pairs) or the linear-time one over B/2 quad-tuples
//! (mmd_estimator::linear, B even; m̄ is then the mean over the 2B pairs it reads). The loss
//! enters as L_y + λ·MMD², λ(p) = lambda_max · Schedule::lambda(p) (Ganin's ramp by default,
//! as head::coral; schedule::constant keeps λ fixed).
#pragma once
#include <dafuse/config.hpp>
#include <dafuse/head/head_base.hpp>
#include <dafuse/policy/arguments.hpp>
#include <dafuse/policy/schedule.hpp>

#include <array>
#include <string>

namespace dafuse::head {

//! Which estimator of MMD² head::mmd uses.
enum class mmd_estimator {
  quadratic,  //!< unbiased, all pairs of rows: O(B²)
  linear,     //!< unbiased, B/2 quad-tuples (s_2i, s_2i+1, t_2i, t_2i+1): O(B)
};

template <class Schedule = schedule::ganin, mmd_estimator Estimator = mmd_estimator::quadratic>
struct mmd : scheduled_defaults<Schedule> {
  static_assert(schedule_policy<Schedule>,
                "dafuse: head::mmd<S, E> takes a schedule such as schedule::ganin");
  static constexpr bool writes_feature_gradient = true;
  static constexpr head_operation operations = head_operation::kernel_discrepancy;
  static constexpr mmd_estimator estimator = Estimator;  //!< quadratic or linear
  //! α_u: each kernel's 2σ² is 2·α_u·m̄ (the multipliers of tllib's DAN set-up).
  static constexpr std::array<double, 5> bandwidth_multipliers{0.125, 0.25, 0.5, 1.0, 2.0};

  //! lambda_max finite and ≥ 0; at least 2 rows a domain (quadratic) or an even count (linear).
  static status can_implement(const fit_args& a) {
    if (Estimator == mmd_estimator::quadratic && a.batch < 2)
      return {
          "fit_args.batch: head::mmd's unbiased estimator needs at least 2 rows per domain, "
          "found " +
          std::to_string(a.batch)};
    if (Estimator == mmd_estimator::linear && (a.batch < 2 || a.batch % 2 != 0))
      return {
          "fit_args.batch: head::mmd's linear-time estimator pairs the rows of each domain: "
          "expected an even count >= 2, found " +
          std::to_string(a.batch)};
    return mmd::check_lambda_max(a, "head::mmd");
  }

  //! The pairs' distances and kernels, and MMD² (the report's domain_loss).
  template <class Exec, class Scale>
  static auto forward(Exec& exec, Scale loss_scale) {
    return exec.mmd_loss(loss_scale, Estimator == mmd_estimator::linear, bandwidth_multipliers);
  }
  //! λ·∂MMD²/∂h written into δh (added to it with `accumulate`); nothing else is trained
  //! (returns 0).
  template <class Exec, class Weight>
  static auto backward(Exec& exec, Weight lambda, bool accumulate = false) {
    return exec.mmd_backward(lambda, accumulate);
  }
};

//! MMD with the linear-time estimator.
template <class Schedule = schedule::ganin>
using mmd_linear = mmd<Schedule, mmd_estimator::linear>;

static_assert(head_policy<mmd<>>);
static_assert(head_policy<mmd_linear<>>);

}  // namespace dafuse::head
