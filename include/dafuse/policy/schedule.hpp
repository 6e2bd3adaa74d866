// SPDX-License-Identifier: Apache-2.0
//! @file policy/schedule.hpp
//! @brief Schedules of λ and of the learning rate over training progress p ∈ [0, 1).
//!
//! A schedule is a type with two static functions of p = step / steps: the factor λ(p) that
//! multiplies fit_args::lambda_max, and the factor that multiplies the base learning rate. Write
//! your own by providing both (and `schedule_tag`); it is checked by `schedule_policy`.
#pragma once
#include <dafuse/config.hpp>

#include <cmath>
#include <concepts>

namespace dafuse::schedule {

//! Ganin et al., JMLR 2016, section 5.2.2: λ(p) = 2 / (1 + e^(−γp)) − 1 with γ = 10, which
//! suppresses the noisy discriminator signal early on; lr(p) = lr₀ / (1 + αp)^β with α = 10,
//! β = 0.75.
struct ganin {
  using schedule_tag = void;            //!< a schedule
  static constexpr double gamma = 10;   //!< steepness of the λ ramp
  static constexpr double alpha = 10;   //!< learning-rate decay speed
  static constexpr double beta = 0.75;  //!< learning-rate decay power
  static double lambda(double p) { return 2.0 / (1.0 + std::exp(-gamma * p)) - 1.0; }
  static double lr_factor(double p) { return std::pow(1.0 + alpha * p, -beta); }
};

//! λ = lambda_max and lr = lr₀ throughout.
struct constant {
  using schedule_tag = void;  //!< a schedule
  static double lambda(double) { return 1.0; }
  static double lr_factor(double) { return 1.0; }
};

}  // namespace dafuse::schedule

namespace dafuse {

//! A schedule: λ and learning-rate factors as functions of progress p.
template <class S>
concept schedule_policy = requires(double p) {
  typename S::schedule_tag;
  { S::lambda(p) } -> std::convertible_to<double>;
  { S::lr_factor(p) } -> std::convertible_to<double>;
};

static_assert(schedule_policy<schedule::ganin>);
static_assert(schedule_policy<schedule::constant>);

}  // namespace dafuse
