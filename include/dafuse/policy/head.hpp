// SPDX-License-Identifier: Apache-2.0
//! @file policy/head.hpp
//! @brief The adversarial head slot: what the step does with the target rows and G_d.
#pragma once
#include <dafuse/config.hpp>
#include <dafuse/policy/arguments.hpp>
#include <dafuse/policy/schedule.hpp>

#include <cmath>
#include <concepts>
#include <string>

namespace dafuse::head {

//! No adaptation: only source rows are used, G_d is neither run nor updated. The schedule only
//! shapes the learning rate (use the same one as the DANN run you compare with).
template <class Schedule = schedule::constant>
struct source_only {
  static_assert(schedule_policy<Schedule>,
                "dafuse: head::source_only<S> takes a schedule such as schedule::ganin");
  using head_tag = void;                      //!< fills the head slot
  using schedule_type = Schedule;             //!< learning-rate schedule
  static constexpr bool adversarial = false;  //!< no discriminator, no target rows
  static status can_implement(const fit_args&) { return status::ok(); }
};

//! DANN (Ganin & Lempitsky 2015): the discriminator sees source (label 0) and target (label 1)
//! features through the gradient reversal with λ(p) = lambda_max · Schedule::lambda(p); its loss
//! is binary cross-entropy on its logit.
template <class Schedule = schedule::ganin>
struct dann {
  static_assert(schedule_policy<Schedule>,
                "dafuse: head::dann<S> takes a schedule such as schedule::ganin");
  using head_tag = void;                     //!< fills the head slot
  using schedule_type = Schedule;            //!< λ and learning-rate schedule
  static constexpr bool adversarial = true;  //!< runs G_d on source and target rows
  static status can_implement(const fit_args& a) {
    return detail::check_non_negative(a.lambda_max, "lambda_max", "head::dann");
  }
};

}  // namespace dafuse::head

namespace dafuse {

//! A head policy: whether it is adversarial, its schedule, its argument check.
template <class H>
concept head_policy = requires(const fit_args& a) {
  typename H::head_tag;
  typename H::schedule_type;
  { H::adversarial } -> std::convertible_to<bool>;
  { H::can_implement(a) } -> std::same_as<status>;
}
&&schedule_policy<typename H::schedule_type>;

static_assert(head_policy<head::source_only<>>);
static_assert(head_policy<head::dann<schedule::ganin>>);

}  // namespace dafuse
