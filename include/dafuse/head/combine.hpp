// SPDX-License-Identifier: Apache-2.0
//! @file head/combine.hpp
//! @brief head::combine: a head that is the weighted sum of other heads (e.g. CDAN+E with MCC,
//! as tllib's and the MCC paper's "CDAN + MCC"), composed at compile time.
//!
//! combine<T₁, …, T_n> adds the terms' losses: L = L_y + Σ_i r_i·λ_i(p)·L_i, each term a head H_i
//! or head::weighted<H_i, R_i> with a fixed factor r_i = R_i (a std::ratio; 1 for a bare head),
//! and λ_i(p) = H_i::weight(args, p), from the term's own schedule. The step runs G_f and G_y once
//! (on the target rows too when any term reads them), then each term's forward, then each term's
//! backward: the first term that writes δh writes it, the later ones add to it, a term on the
//! target logits writes their gradient, and G_y's and G_f's backward run once on the sum. The
//! learning-rate schedule is the first term's. The report's domain_loss is Σ_i r_i·L_i (before
//! the schedules' λ_i), its domain_accuracy that of the term with G_d.
//!
//! The network has one G_d, so at most one term may train it; and at most one term may write the
//! target logits' gradient. It runs on every system: the weights r_i·λ_i(p) reach the terms'
//! backward as the step hands λ to a single head (numbers on a host, values in the step's memory
//! that a device step computes as each step begins), and the loss sum is a phase of its own.
#pragma once
#include <dafuse/config.hpp>
#include <dafuse/core/step_values.hpp>
#include <dafuse/head/head_base.hpp>
#include <dafuse/head/view.hpp>
#include <dafuse/policy/arguments.hpp>
#include <dafuse/policy/schedule.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <ratio>
#include <tuple>
#include <utility>

namespace dafuse::head {

//! A term of head::combine: head H with the fixed factor R (a positive std::ratio).
template <class H, class R = std::ratio<1>>
struct weighted {
  using term_head = H;  //!< the head
  //! r: the term's loss enters as r·λ_H(p)·L_H.
  static constexpr double factor = double(R::num) / double(R::den);
  static_assert(R::num > 0, "dafuse: head::weighted<H, R>'s factor R is a positive std::ratio");
};

namespace detail {
template <class T>
struct term_traits {
  using head = T;
  static constexpr double factor = 1.0;
};
template <class H, class R>
struct term_traits<weighted<H, R>> {
  using head = H;
  static constexpr double factor = weighted<H, R>::factor;
};
template <class T>
using term_head = typename term_traits<T>::head;
//! Whether head H has a loss of its own (a forward and a backward the step runs).
template <class H>
constexpr bool has_loss() {
  return H::discriminator_reads != discriminator_input::none || H::writes_feature_gradient ||
         H::writes_logit_gradient;
}
//! Head 0 of a pack.
template <class T, class...>
struct first_term {
  using type = T;
};
//! *out = Σ_i factor_i·L_i over N terms' losses (handles read when the phase runs): the report's
//! domain loss of a sum of heads.
template <std::size_t N>
struct weighted_losses {
  double* out;
  step_scalar loss[N];
  double factor[N];
  DAFUSE_HOST_DEVICE void operator()(index_t) const {
    double sum = 0;
    for (std::size_t i = 0; i < N; ++i) sum += factor[i] * loss[i].get();
    *out = sum;
  }
};
}  // namespace detail

template <class... Terms>
struct combine : defaults {
  static_assert(sizeof...(Terms) >= 1, "dafuse: head::combine needs at least one head");
  static_assert((head_policy<detail::term_head<Terms>> && ...),
                "dafuse: head::combine's arguments are heads, such as head::cdan_e<>, or "
                "head::weighted<head, std::ratio<...>>");
  static_assert(((detail::term_head<Terms>::discriminator_reads != discriminator_input::none) +
                 ... + 0) <= 1,
                "dafuse: head::combine takes at most one head with a domain discriminator (the "
                "network has one G_d)");
  static_assert((int(detail::term_head<Terms>::writes_logit_gradient) + ... + 0) <= 1,
                "dafuse: head::combine takes at most one head on the target logits (such as "
                "head::mcc)");
  static_assert(!(weights_terms<detail::term_head<Terms>> || ...),
                "dafuse: head::combine's terms are single heads: list the terms of an inner "
                "combine in the outer one");

  //! The learning-rate schedule: the first term's.
  using schedule_type =
      typename detail::term_head<typename detail::first_term<Terms...>::type>::schedule_type;
  static constexpr std::size_t term_count = sizeof...(Terms);  //!< n
  static constexpr bool draws_target_rows = (detail::term_head<Terms>::draws_target_rows || ...);
  static constexpr bool classifier_reads_target =
      (detail::term_head<Terms>::classifier_reads_target || ...);
  //! What the one term with G_d has it read (none without such a term).
  static constexpr discriminator_input discriminator_reads = [] {
    discriminator_input reads = discriminator_input::none;
    ((reads = detail::term_head<Terms>::discriminator_reads != discriminator_input::none
                  ? detail::term_head<Terms>::discriminator_reads
                  : reads),
     ...);
    return reads;
  }();
  static constexpr bool writes_feature_gradient =
      (detail::term_head<Terms>::writes_feature_gradient || ...);
  static constexpr bool writes_logit_gradient =
      (detail::term_head<Terms>::writes_logit_gradient || ...);
  static constexpr bool own_maths = (detail::term_head<Terms>::own_maths || ...);
  //! The terms' scratch, one after the other.
  static constexpr index_t scratch_elements(const shape& s) {
    return (index_t(0) + ... + detail::term_head<Terms>::scratch_elements(s));
  }
  //! The terms' sums, one after the other; then the loss Σ_i r_i·L_i.
  static constexpr index_t terms_sum_count =
      (index_t(0) + ... + detail::term_head<Terms>::sum_count);
  static constexpr index_t sum_count = terms_sum_count + 1;

  //! out[i] = term i's weight at `now`: r_i·λ_i(p).
  DAFUSE_HOST_DEVICE static void write_term_weights(const fit_args& a, progress now, double* out) {
    std::size_t i = 0;
    ((out[i++] = detail::term_traits<Terms>::factor * detail::term_head<Terms>::weight(a, now)),
     ...);
  }
  //! out[i] = term i's weight when every term's λ is `lambda`: r_i·λ.
  DAFUSE_HOST_DEVICE static void write_uniform_weights(double lambda, double* out) {
    std::size_t i = 0;
    ((out[i++] = detail::term_traits<Terms>::factor * lambda), ...);
  }
  //! Each term's weight at `now`: r_i·λ_i(p).
  static std::array<double, term_count> term_weights(const fit_args& a, progress now) {
    std::array<double, term_count> w{};
    write_term_weights(a, now, w.data());
    return w;
  }
  //! The sum of the terms' weights (the report's λ).
  DAFUSE_HOST_DEVICE static double weight(const fit_args& a, progress now) {
    return (0.0 + ... +
            (detail::term_traits<Terms>::factor * detail::term_head<Terms>::weight(a, now)));
  }
  //! The first failed check of a term.
  static status can_implement(const fit_args& a) {
    status result = status::ok();
    ((result = result ? detail::term_head<Terms>::can_implement(a) : result), ...);
    return result;
  }
  template <class Net>
  static constexpr bool check_network() {
    return (detail::term_head<Terms>::template check_network<Net>() && ...);
  }

  //! Each term's forward, in order, each on its own scratch and sums; then the loss Σ_i r_i·L_i
  //! into the last sum. Returns it and the G_d term's accuracy (0 without one), as the view
  //! gives a head's result.
  template <class View, class Scale>
  static auto forward(View& v, Scale loss_scale) {
    detail::weighted_losses<term_count> total{v.sums() + terms_sum_count, {}, {}};
    step_scalar accuracy(0.0);
    std::size_t i = 0;
    index_t scratch = 0, sums = 0;
    (
        [&] {
          using head = detail::term_head<Terms>;
          auto term = v.after(scratch, sums);
          scratch += head::scratch_elements(v.shape());
          sums += head::sum_count;
          if constexpr (detail::has_loss<head>()) {
            const auto d = head::forward(term, loss_scale);
            total.loss[i] = step_scalar(d.loss);
            total.factor[i] = detail::term_traits<Terms>::factor;
            if constexpr (head::discriminator_reads != discriminator_input::none)
              accuracy = step_scalar(d.accuracy);
          }
          ++i;
        }(),
        ...);
    v.for_each(1, total);
    return v.result(step_scalar(total.out, 1.0), accuracy);
  }
  //! Each term's backward with its weight (`weights[i]`: a number, or a handle of a value in the
  //! step's memory): the first term that writes δh writes it, the later ones add to it. Returns
  //! G_d's squared gradient norm, as the G_d term's backward gives it (0 without a G_d term).
  template <class View, class Weights>
  static auto backward(View& v, const Weights& weights, bool accumulate = false) {
    using norm = decltype(v.result(step_scalar(0.0)).loss);
    norm discriminator_sq = norm(0.0);
    bool written = accumulate;
    std::size_t i = 0;
    index_t scratch = 0, sums = 0;
    (
        [&] {
          using head = detail::term_head<Terms>;
          auto term = v.after(scratch, sums);
          scratch += head::scratch_elements(v.shape());
          sums += head::sum_count;
          if constexpr (detail::has_loss<head>()) {
            const auto sq = head::backward(term, weights[i], written);
            if constexpr (head::discriminator_reads != discriminator_input::none)
              discriminator_sq = sq;
            written = written || head::writes_feature_gradient;
          }
          ++i;
        }(),
        ...);
    return discriminator_sq;
  }
};

}  // namespace dafuse::head
