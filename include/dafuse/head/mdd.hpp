// SPDX-License-Identifier: Apache-2.0
//! @file head/mdd.hpp
//! @brief head::mdd: Margin Disparity Discrepancy (Zhang et al., "Bridging Theory and Algorithm
//! for Domain Adaptation", ICML 2019).
//!
//! The adversarial classifier f' is the network's G_d, with one output a class (as G_y): it reads
//! h on all 2B rows through the gradient reversal, and G_y also runs on the target rows to give
//! the pseudo-labels ŷ = argmax G_y(h) (constants: no gradient reaches G_y from this loss). With
//! p = softmax(f'(h)) and the margin factor γ,
//!   L = γ · mean_source −log p_ŷ + mean_target −log(1 − p_ŷ):
//! f' minimises it (agree with G_y on the source rows, disagree on the target rows, the sup over
//! f' of the disparity), and G_f, through the reversal R_λ, maximises it: δh = −λ · ∂L/∂h.
//! γ is a std::ratio, 4 by default (tllib's default). −log(1 − p) is computed exactly from the
//! logits (tllib adds an ε inside its log).
#pragma once
#include <dafuse/config.hpp>
#include <dafuse/head/head_base.hpp>
#include <dafuse/head/mcc.hpp>  // detail::positive_ratio
#include <dafuse/nn/dann_net.hpp>
#include <dafuse/nn/grad_reversal.hpp>
#include <dafuse/policy/arguments.hpp>
#include <dafuse/policy/schedule.hpp>

#include <ratio>

namespace dafuse::head {

template <class Schedule = schedule::ganin, class Margin = std::ratio<4>>
struct mdd : reversal_defaults<Schedule> {
  static_assert(schedule_policy<Schedule>,
                "dafuse: head::mdd<S, M> takes a schedule such as schedule::ganin");
  static_assert(detail::positive_ratio<Margin>(),
                "dafuse: head::mdd<S, M>'s margin factor M is a positive std::ratio, e.g. "
                "std::ratio<4> for γ = 4");
  static constexpr bool classifier_reads_target = true;  //!< ŷ on the target rows
  static constexpr discriminator_input discriminator_reads = discriminator_input::features;
  static constexpr head_operation operations = head_operation::margin_disparity;
  //! γ: the source rows' term is weighted by it.
  static constexpr double margin = [] {
    if constexpr (detail::positive_ratio<Margin>())
      return double(Margin::num) / double(Margin::den);
    else
      return 1.0;
  }();

  static status can_implement(const fit_args& a) { return mdd::check_lambda_max(a, "head::mdd"); }
  template <class Net>
  static constexpr bool check_network() {
    static_assert(Net::discriminator_stack::in == Net::feature_width,
                  "dafuse: head::mdd's adversarial classifier f' (the net's G_d) reads h: its "
                  "input width must equal the feature extractor's output width");
    static_assert(Net::discriminator_stack::out == Net::class_count,
                  "dafuse: head::mdd's adversarial classifier f' (the net's G_d) gives one logit "
                  "a class: its output width must equal G_y's (the class count)");
    return Net::discriminator_stack::in == Net::feature_width &&
           Net::discriminator_stack::out == Net::class_count;
  }

  //! f' = G_d on h (all 2B rows), and L with its gradient at f''s output.
  template <class Exec, class Scale>
  static auto forward(Exec& exec, Scale loss_scale) {
    exec.template forward<nn::dann_module::discriminator>();
    return exec.mdd_loss(loss_scale, margin);
  }
  //! G_d's backward: its parameter gradients (their squared norm is returned) and, through the
  //! reversal, −λ · ∂L/∂h written into δh (added to it with `accumulate`, as a later term of
  //! head::combine).
  template <class Exec, class Weight>
  static auto backward(Exec& exec, Weight lambda, bool accumulate = false) {
    const nn::grad_reversal<Weight> reversal{lambda};
    return exec.template backward<nn::dann_module::discriminator>(reversal.backward_scale(),
                                                                  accumulate);
  }
};

static_assert(head_policy<mdd<>>);

}  // namespace dafuse::head
