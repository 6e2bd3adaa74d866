// SPDX-License-Identifier: Apache-2.0
//! @file head/dann.hpp
//! @brief head::dann: domain-adversarial training through the gradient reversal (Ganin &
//! Lempitsky 2015; Ganin et al., JMLR 2016).
//!
//! G_d reads h on all 2B rows and gives one logit; its loss is the mean BCE on that logit
//! (source 0, target 1). The reversal R_λ is the identity forward and multiplies the gradient by
//! −λ backward, so G_d's input gradient enters δh as −λ · ∂L_d/∂h: G_d learns to tell the domains
//! apart while G_f learns features that fool it. λ(p) = lambda_max · Schedule::lambda(p).
#pragma once
#include <dafuse/config.hpp>
#include <dafuse/head/head_base.hpp>
#include <dafuse/nn/dann_net.hpp>
#include <dafuse/nn/grad_reversal.hpp>
#include <dafuse/policy/arguments.hpp>
#include <dafuse/policy/schedule.hpp>

namespace dafuse::head {

template <class Schedule = schedule::ganin>
struct dann : reversal_defaults<Schedule> {
  static_assert(schedule_policy<Schedule>,
                "dafuse: head::dann<S> takes a schedule such as schedule::ganin");
  static constexpr discriminator_input discriminator_reads = discriminator_input::features;

  static status can_implement(const fit_args& a) { return dann::check_lambda_max(a, "head::dann"); }
  template <class Net>
  static constexpr bool check_network() {
    static_assert(Net::discriminator_stack::in == Net::feature_width,
                  "dafuse: the domain discriminator's input width must equal the feature "
                  "extractor's output width (head::dann's G_d reads h)");
    return dann::template check_one_logit<Net>();
  }

  //! G_d on h (all 2B rows) and the mean BCE of its logit; writes the logit's gradient.
  template <class Exec, class Scale>
  static auto forward(Exec& exec, Scale loss_scale) {
    exec.template forward<nn::dann_module::discriminator>();
    return exec.domain_loss(loss_scale);
  }
  //! G_d's backward: its parameter gradients (their squared norm is returned) and, through the
  //! reversal, −λ · ∂L_d/∂h written into δh (added to it with `accumulate`, as a later term of
  //! head::combine).
  template <class Exec, class Weight>
  static auto backward(Exec& exec, Weight lambda, bool accumulate = false) {
    const nn::grad_reversal<Weight> reversal{lambda};
    return exec.template backward<nn::dann_module::discriminator>(reversal.backward_scale(),
                                                                  accumulate);
  }
};

static_assert(head_policy<dann<>>);

}  // namespace dafuse::head
