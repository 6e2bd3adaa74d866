// SPDX-License-Identifier: Apache-2.0
//! @file head/cdan.hpp
//! @brief head::cdan and head::cdan_e: conditional domain-adversarial training (Long et al.,
//! "Conditional Adversarial Domain Adaptation", NeurIPS 2018).
//!
//! G_y runs on all 2B rows; g = softmax(G_y(h)) conditions G_d, which reads the multilinear map
//! T(h, g) = g ⊗ h, one [classes · features] column a row (T[c·F + j] = g_c·h_j), and gives one
//! logit; its loss is BCE on that logit (source 0, target 1), through the gradient reversal as in
//! DANN: δh_j = −λ · Σ_c g_c · ∂L_d/∂T[c·F + j]. g is treated as a constant (detached), as in
//! the authors' code and tllib: no gradient reaches the logits through the map.
//!
//! CDAN+E (`cdan_e`, EntropyConditioning = true) weights each row's BCE by
//! w_i = 1 + e^(−H(g_i)), H the entropy of g_i, normalised so that Σ w_i = 2B (tllib's form), so
//! that rows the classifier is sure of count more; the weights are constants for the gradient.
#pragma once
#include <dafuse/config.hpp>
#include <dafuse/head/head_base.hpp>
#include <dafuse/nn/dann_net.hpp>
#include <dafuse/nn/grad_reversal.hpp>
#include <dafuse/policy/arguments.hpp>
#include <dafuse/policy/schedule.hpp>

namespace dafuse::head {

template <class Schedule = schedule::ganin, bool EntropyConditioning = false>
struct cdan : reversal_defaults<Schedule> {
  static_assert(schedule_policy<Schedule>,
                "dafuse: head::cdan<S> takes a schedule such as schedule::ganin");
  static constexpr bool classifier_reads_target = true;
  static constexpr discriminator_input discriminator_reads = discriminator_input::multilinear;
  //! Each row's BCE weighted by 1 + e^(−H(g)) (CDAN+E).
  static constexpr bool entropy_conditioning = EntropyConditioning;

  static status can_implement(const fit_args& a) { return cdan::check_lambda_max(a, "head::cdan"); }
  template <class Net>
  static constexpr bool check_network() {
    static_assert(Net::discriminator_stack::in == Net::feature_width * Net::class_count,
                  "dafuse: head::cdan's domain discriminator reads softmax(g) ⊗ h: its input "
                  "width must be the feature width times the class count");
    return cdan::template check_one_logit<Net>();
  }

  //! T = softmax(g) ⊗ h on all 2B rows, G_d on T, and the (weighted) mean BCE of its logit.
  template <class Exec, class Scale>
  static auto forward(Exec& exec, Scale loss_scale) {
    exec.multilinear_map(entropy_conditioning);
    exec.template forward<nn::dann_module::discriminator>();
    return exec.domain_loss(loss_scale, entropy_conditioning);
  }
  //! G_d's backward into ∂L/∂T, scaled by the reversal's −λ, then δh = Σ_c g_c · δT_c (added to
  //! δh with `accumulate`, as a later term of head::combine).
  template <class Exec, class Weight>
  static auto backward(Exec& exec, Weight lambda, bool accumulate = false) {
    const nn::grad_reversal<Weight> reversal{lambda};
    const auto sq = exec.template backward<nn::dann_module::discriminator>(
        reversal.backward_scale(), /*accumulate=*/false);
    exec.multilinear_backward(accumulate);
    return sq;
  }
};

//! CDAN+E: CDAN with entropy conditioning.
template <class Schedule = schedule::ganin>
using cdan_e = cdan<Schedule, true>;

static_assert(head_policy<cdan<>>);
static_assert(head_policy<cdan_e<>>);

}  // namespace dafuse::head
