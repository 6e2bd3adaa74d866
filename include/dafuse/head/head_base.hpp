// SPDX-License-Identifier: Apache-2.0
//! @file head/head_base.hpp
//! @brief What an adaptation head says about itself, with every property's default in one place
//! (`head::defaults`), and the contract a head policy satisfies (`head_policy`).
//!
//! A head says whether the batch holds target rows, whether G_y also runs on them, what G_d
//! reads (nothing, the features h, or the multilinear map softmax(g) ⊗ h), the weight of its loss
//! over training (λ), whether it runs maths of its own over the executor's view (head/view.hpp)
//! and what scratch that needs, and, as two functions over the view, its forward with its loss
//! and its backward into δh (and, for a head on the target logits, into their gradient δz). The
//! step composes these; nothing DANN-specific sits in the step.
#pragma once
#include <dafuse/config.hpp>
#include <dafuse/core/meta.hpp>
#include <dafuse/head/view.hpp>
#include <dafuse/policy/arguments.hpp>
#include <dafuse/policy/schedule.hpp>

#include <concepts>
#include <cstddef>

namespace dafuse {

//! What the domain discriminator G_d reads.
enum class discriminator_input {
  none,         //!< no G_d: it is neither run nor trained
  features,     //!< h = G_f(x), through the gradient reversal (DANN)
  multilinear,  //!< T = softmax(G_y(h)) ⊗ h, one [classes · features] column a row (CDAN)
};

}  // namespace dafuse

namespace dafuse::head {

//! The defaults of every head property: a head derives from this and overrides what it changes.
//! The defaults describe no adaptation at all.
struct defaults {
  using head_tag = void;  //!< fills the head slot
  //! The batch holds B target rows after the B source rows.
  static constexpr bool draws_target_rows = false;
  //! G_y also runs on the target rows (their softmax is read by the head; no label loss there).
  static constexpr bool classifier_reads_target = false;
  //! What G_d reads; `none` leaves it untrained and its parameters untouched.
  static constexpr discriminator_input discriminator_reads = discriminator_input::none;
  //! The head's backward writes its gradient into δh on all rows, fresh (G_y's then adds to it).
  static constexpr bool writes_feature_gradient = false;
  //! The head's backward writes the gradient of the target rows' logits δz (G_y's backward then
  //! runs on all rows; needs classifier_reads_target).
  static constexpr bool writes_logit_gradient = false;
  //! The head runs maths of its own over the view's loops and products (head/view.hpp), beyond
  //! the modules' passes and G_d's loss.
  static constexpr bool own_maths = false;
  //! Values of the step's type that its maths keeps for a step of `shape` (the view's scratch()).
  static constexpr index_t scratch_elements(const shape&) { return 0; }
  //! Doubles its maths keeps (the view's sums()).
  static constexpr index_t sum_count = 0;
  //! Run-time checks of the fields the head reads.
  static status can_implement(const fit_args&) { return status::ok(); }
  //! The weight of the head's loss at `now` (λ of the reversal for adversarial heads).
  DAFUSE_HOST_DEVICE static double weight(const fit_args&, progress) { return 0.0; }
  //! Compile-time checks of the network's shapes the head relies on (static_asserts with a
  //! `dafuse:` message); true when they hold.
  template <class Net>
  static constexpr bool check_network() {
    return true;
  }
};

//! What every head with a scheduled loss on the target rows shares: it draws target rows, and its
//! loss weight is λ(p) = lambda_max · Schedule::lambda(p), lambda_max finite and ≥ 0.
template <class Schedule>
struct scheduled_defaults : defaults {
  using schedule_type = Schedule;  //!< λ and learning-rate schedule
  static constexpr bool draws_target_rows = true;
  //! λ(p) = lambda_max · Schedule::lambda(p).
  DAFUSE_HOST_DEVICE static double weight(const fit_args& a, progress now) {
    return double(a.lambda_max) * Schedule::lambda(now);
  }

 protected:
  //! lambda_max must be finite and ≥ 0; `head` names the head in the message.
  static status check_lambda_max(const fit_args& a, const char* head) {
    return detail::check_non_negative(a.lambda_max, "lambda_max", head);
  }
};

//! What every head trained through the gradient reversal shares: a scheduled λ, and a backward
//! that writes G_d's input gradient into δh through the reversal.
template <class Schedule>
struct reversal_defaults : scheduled_defaults<Schedule> {
  static constexpr bool writes_feature_gradient = true;  //!< G_d's input gradient, through R_λ

 protected:
  //! G_d gives one logit (source = 0, target = 1).
  template <class Net>
  static constexpr bool check_one_logit() {
    static_assert(Net::discriminator_stack::out == 1,
                  "dafuse: the domain discriminator must output one logit (source = 0, "
                  "target = 1)");
    return true;
  }
};

//! The properties of head H agree with each other (a head written by deriving from another and
//! overriding one property may not): each failed check says why in its own static_assert.
template <class H>
constexpr bool check_contract() {
  constexpr bool reads_target = H::discriminator_reads != discriminator_input::none ||
                                H::writes_feature_gradient || H::writes_logit_gradient;
  static_assert(!reads_target || H::draws_target_rows,
                "dafuse: this head's loss reads the target rows, so the batch must hold them: "
                "the head needs draws_target_rows = true");
  static_assert(!H::writes_logit_gradient || H::classifier_reads_target,
                "dafuse: this head writes the target rows' logit gradient, so G_y must run on "
                "them: the head needs classifier_reads_target = true");
  return (!reads_target || H::draws_target_rows) &&
         (!H::writes_logit_gradient || H::classifier_reads_target);
}

}  // namespace dafuse::head

namespace dafuse {

//! A head policy: its tag, its schedule, what it reads, trains and writes, its weight, its
//! argument check and its maths' scratch. Heads with a loss (a discriminator, or a gradient they
//! write) also provide forward(view, loss_scale) and backward(view, weight) over the executor's
//! view (head/dann.hpp shows the shape; head/coral.hpp a head with maths of its own).
template <class H>
concept head_policy = requires(const fit_args& a, progress p) {
  typename H::head_tag;
  typename H::schedule_type;
  { H::draws_target_rows } -> std::convertible_to<bool>;
  { H::classifier_reads_target } -> std::convertible_to<bool>;
  { H::discriminator_reads } -> std::convertible_to<discriminator_input>;
  { H::writes_feature_gradient } -> std::convertible_to<bool>;
  { H::writes_logit_gradient } -> std::convertible_to<bool>;
  { H::own_maths } -> std::convertible_to<bool>;
  { H::scratch_elements(head::shape{}) } -> std::convertible_to<index_t>;
  { H::sum_count } -> std::convertible_to<index_t>;
  { H::can_implement(a) } -> std::same_as<status>;
  { H::weight(a, p) } -> std::convertible_to<double>;
}
&&schedule_policy<typename H::schedule_type>;

//! A head that weights several terms (head::combine): its backward takes one weight per term.
template <class H>
inline constexpr bool weights_terms = requires {
  H::term_count;
};

//! How many weights head H's backward takes: one per term of a head that weights several, else
//! one (λ).
template <class H>
inline constexpr std::size_t backward_weight_count = [] {
  if constexpr (weights_terms<H>)
    return std::size_t(H::term_count);
  else
    return std::size_t(1);
}();

//! out[0, backward_weight_count<H>) = the weights H's backward takes at `now`: λ = H::weight(a,
//! now), or each term's r_i·λ_i(p); each is `lambda` instead when `lambda` is not NaN (a caller
//! that fixes λ). A device step computes them in device memory as each step begins.
template <class H>
DAFUSE_HOST_DEVICE void write_backward_weights(const fit_args& a,
                                               progress now,
                                               double lambda,
                                               double* out) {
  const bool fixed = lambda == lambda;
  if constexpr (weights_terms<H>) {
    if (fixed)
      H::write_uniform_weights(lambda, out);
    else
      H::write_term_weights(a, now, out);
  } else {
    out[0] = fixed ? lambda : H::weight(a, now);
  }
}

//! λ and the learning rate of one step.
struct step_rates {
  double lambda = 0.0;  //!< the head's weight (the reversal's λ): Head::weight(args, p)
  double lr = 0.0;      //!< lr₀ · Schedule::lr_factor(p), Schedule the head's schedule_type
};

//! The rates of step `step_index` of a run of args.steps under head H. The fused and the eager
//! step both take their rates from here.
template <class H>
DAFUSE_HOST_DEVICE step_rates scheduled_rates(const fit_args& args, index_t step_index) {
  const progress now{step_index, args.steps};
  return {H::weight(args, now), double(args.lr) * H::schedule_type::lr_factor(now)};
}

}  // namespace dafuse
