// SPDX-License-Identifier: Apache-2.0
//! @file policy/schedule.hpp
//! @brief Schedules of λ and of the learning rate over training progress.
//!
//! A schedule is a type with two static functions of the step's `progress` (its index i and the
//! run's length N, so both progress-based p = i / N and iteration-based schedules can be written):
//! the factor λ that multiplies fit_args::lambda_max, and the factor that multiplies the base
//! learning rate. Write your own by providing both (and `schedule_tag`); `schedule_policy` checks
//! it.
#pragma once
#include <dafuse/config.hpp>
#include <dafuse/core/meta.hpp>

#include <cmath>
#include <concepts>

namespace dafuse {

//! Where training is: step i (from 0) of a run of N steps.
struct progress {
  index_t step = 0;   //!< i: steps taken before this one
  index_t steps = 1;  //!< N: fit_args::steps
  //! p = i / N, 0 at the first step.
  DAFUSE_HOST_DEVICE constexpr double fraction() const { return double(step) / double(steps); }
};

}  // namespace dafuse

namespace dafuse::schedule {

//! Ganin et al., JMLR 2016, section 5.2.2: λ(p) = 2 / (1 + e^(−γp)) − 1 with γ = 10, which
//! suppresses the noisy discriminator signal early on; lr(p) = lr₀ / (1 + αp)^β with α = 10,
//! β = 0.75.
struct ganin {
  using schedule_tag = void;            //!< a schedule
  static constexpr double gamma = 10;   //!< steepness of the λ ramp
  static constexpr double alpha = 10;   //!< learning-rate decay speed
  static constexpr double beta = 0.75;  //!< learning-rate decay power
  DAFUSE_HOST_DEVICE static double lambda(const progress& t) {
    return 2.0 / (1.0 + std::exp(-gamma * t.fraction())) - 1.0;
  }
  DAFUSE_HOST_DEVICE static double lr_factor(const progress& t) {
    return std::pow(1.0 + alpha * t.fraction(), -beta);
  }
};

//! The Transfer-Learning-Library's DANN defaults, by iteration i rather than progress (Jiang et
//! al., "Transfer-Learning-Library", 2020: WarmStartGradientReverseLayer and its lr scheduler):
//! λ(i) = 2 / (1 + e^(−α·i/max_iters)) − 1 with α = 1, max_iters = 1000, so λ keeps rising past
//! 1000 steps; lr(i) = lr₀·(1 + γ·i)^(−decay) with γ = 0.001, decay = 0.75.
struct tllib {
  using schedule_tag = void;                 //!< a schedule
  static constexpr double alpha = 1;         //!< steepness of the λ ramp
  static constexpr double max_iters = 1000;  //!< iterations over which λ ramps
  static constexpr double gamma = 0.001;     //!< learning-rate decay speed
  static constexpr double decay = 0.75;      //!< learning-rate decay power
  DAFUSE_HOST_DEVICE static double lambda(const progress& t) {
    return 2.0 / (1.0 + std::exp(-alpha * double(t.step) / max_iters)) - 1.0;
  }
  DAFUSE_HOST_DEVICE static double lr_factor(const progress& t) {
    return std::pow(1.0 + gamma * double(t.step), -decay);
  }
};

//! λ = lambda_max and lr = lr₀ throughout.
struct constant {
  using schedule_tag = void;  //!< a schedule
  DAFUSE_HOST_DEVICE static double lambda(const progress&) { return 1.0; }
  DAFUSE_HOST_DEVICE static double lr_factor(const progress&) { return 1.0; }
};

}  // namespace dafuse::schedule

namespace dafuse {

//! A schedule: λ and learning-rate factors as functions of the step's progress.
template <class S>
concept schedule_policy = requires(const progress& t) {
  typename S::schedule_tag;
  { S::lambda(t) } -> std::convertible_to<double>;
  { S::lr_factor(t) } -> std::convertible_to<double>;
};

static_assert(schedule_policy<schedule::ganin>);
static_assert(schedule_policy<schedule::tllib>);
static_assert(schedule_policy<schedule::constant>);

}  // namespace dafuse
