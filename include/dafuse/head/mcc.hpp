// SPDX-License-Identifier: Apache-2.0
//! @file head/mcc.hpp
//! @brief head::mcc: Minimum Class Confusion on the target rows' predictions (Jin et al.,
//! "Minimum Class Confusion for Versatile Domain Adaptation", ECCV 2020).
//!
//! No discriminator: G_y also runs on the B target rows; with Ŷ = softmax(z/T) at temperature T,
//! each row weighted by w_i = 1 + e^(−H(Ŷ_i)) normalised to Σ w = B (confident rows count more;
//! the weights are constants for the gradient, as in the authors' code), the class confusion
//! C = Ŷᵀ·diag(w)·Ŷ has each column divided by its sum (the paper's category normalisation), and
//! the loss is the confusion between different classes, Σ_{j≠j'} C̃_jj' / classes. It enters as
//! L_y + λ·L, and its gradient reaches G_y's parameters and, through the target rows' logits, G_f.
//! λ(p) = lambda_max · Schedule::lambda(p), Ganin's ramp by default (the paper keeps the weight
//! fixed: schedule::constant). T is a std::ratio, 2.5 by default (the paper's choice for most
//! tasks).
#pragma once
#include <dafuse/config.hpp>
#include <dafuse/head/head_base.hpp>
#include <dafuse/policy/arguments.hpp>
#include <dafuse/policy/schedule.hpp>

#include <cstdint>
#include <ratio>
#include <type_traits>

namespace dafuse::head {

namespace detail {
template <class T>
struct is_ratio : std::false_type {};
template <std::intmax_t N, std::intmax_t D>
struct is_ratio<std::ratio<N, D>> : std::true_type {};
template <class T>
constexpr bool positive_ratio() {
  if constexpr (is_ratio<T>::value)
    return T::num > 0;
  else
    return false;
}
}  // namespace detail

template <class Schedule = schedule::ganin, class Temperature = std::ratio<5, 2>>
struct mcc : scheduled_defaults<Schedule> {
  static_assert(schedule_policy<Schedule>,
                "dafuse: head::mcc<S, T> takes a schedule such as schedule::ganin");
  static_assert(detail::positive_ratio<Temperature>(),
                "dafuse: head::mcc<S, T>'s temperature T is a positive std::ratio, e.g. "
                "std::ratio<5, 2> for T = 2.5");
  static constexpr bool classifier_reads_target = true;
  static constexpr bool writes_logit_gradient = true;
  static constexpr head_operation operations = head_operation::class_confusion;
  //! T: the softmax of z/T is what the confusion reads.
  static constexpr double temperature = [] {
    if constexpr (detail::positive_ratio<Temperature>())
      return double(Temperature::num) / double(Temperature::den);
    else
      return 1.0;
  }();

  static status can_implement(const fit_args& a) { return mcc::check_lambda_max(a, "head::mcc"); }
  template <class Net>
  static constexpr bool check_network() {
    static_assert(Net::class_count >= 2,
                  "dafuse: head::mcc measures the confusion between classes: G_y needs at "
                  "least 2 outputs");
    return Net::class_count >= 2;
  }

  //! The target rows' Ŷ, weights and class confusion, and L (the report's domain_loss).
  template <class Exec, class Scale>
  static auto forward(Exec& exec, Scale loss_scale) {
    return exec.mcc_loss(loss_scale, temperature);
  }
  //! λ·∂L/∂z written into the target rows' logit gradient; G_y's backward takes it from there
  //! (δh is not touched, so `accumulate` changes nothing).
  template <class Exec, class Weight>
  static auto backward(Exec& exec, Weight lambda, bool /*accumulate*/ = false) {
    return exec.mcc_backward(lambda);
  }
};

static_assert(head_policy<mcc<>>);

}  // namespace dafuse::head
