// SPDX-License-Identifier: Apache-2.0
//! @file head/coral.hpp
//! @brief head::coral: Deep CORAL, aligning the features' second-order statistics (Sun & Saenko,
//! "Deep CORAL: Correlation Alignment for Deep Domain Adaptation", ECCV workshops 2016).
//!
//! No discriminator: the loss is L = ‖C_s − C_t‖²_F / (4F²) on the features h (F of them), C the
//! unbiased covariance (1/(B − 1), as the paper) of the B source or the B target rows of the
//! batch, and it enters the total as L_y + λ·L, so G_f descends it (no reversal). The weight
//! λ(p) = lambda_max · Schedule::lambda(p); the default schedule is Ganin's, whose λ ramps from
//! 0 while the features are still random and whose learning rate anneals as the other heads' do
//! (the paper keeps λ fixed: schedule::constant gives that).
#pragma once
#include <dafuse/config.hpp>
#include <dafuse/head/head_base.hpp>
#include <dafuse/policy/arguments.hpp>
#include <dafuse/policy/schedule.hpp>

#include <string>

namespace dafuse::head {

template <class Schedule = schedule::ganin>
struct coral : scheduled_defaults<Schedule> {
  static_assert(schedule_policy<Schedule>,
                "dafuse: head::coral<S> takes a schedule such as schedule::ganin");
  static constexpr bool writes_feature_gradient = true;
  static constexpr head_operation operations = head_operation::covariance_alignment;

  //! lambda_max finite and ≥ 0, and at least 2 rows a domain (the unbiased covariance).
  static status can_implement(const fit_args& a) {
    if (a.batch < 2)
      return {
          "fit_args.batch: head::coral's unbiased covariance needs at least 2 rows per "
          "domain, found " +
          std::to_string(a.batch)};
    return coral::check_lambda_max(a, "head::coral");
  }

  //! The covariances of the source and target rows of h, and L (the report's domain_loss).
  template <class Exec, class Scale>
  static auto forward(Exec& exec, Scale loss_scale) {
    return exec.coral_loss(loss_scale);
  }
  //! λ·∂L/∂h written into δh (added to it with `accumulate`); nothing else is trained
  //! (returns 0).
  template <class Exec, class Weight>
  static auto backward(Exec& exec, Weight lambda, bool accumulate = false) {
    return exec.coral_backward(lambda, accumulate);
  }
};

static_assert(head_policy<coral<>>);

}  // namespace dafuse::head
