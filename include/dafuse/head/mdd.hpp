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
#include <dafuse/head/view.hpp>
#include <dafuse/nn/dann_net.hpp>
#include <dafuse/nn/grad_reversal.hpp>
#include <dafuse/nn/loss.hpp>
#include <dafuse/policy/arguments.hpp>
#include <dafuse/policy/schedule.hpp>

#include <cmath>
#include <ratio>

namespace dafuse::head {

//! The pieces of MDD's maths, run by the view's loops over all rows c (the B source rows first).
namespace mdd_maths {

//! Row c's terms of L, and G_d's output gradient there. ŷ = argmax z_c (a constant), p =
//! softmax(f'_c); on a source row −log p_ŷ, weighted by γ, with gradient (S·γ/B)·(p − onehot(ŷ));
//! on a target row −log(1 − p_ŷ) = logsumexp(f') − logsumexp_{k≠ŷ}(f') (exact, no ε in a log),
//! with gradient (S/B)·(p − q), q the softmax of f' over the classes other than ŷ (q_ŷ = 0).
//! Returns (the source term, the target term, whether f' does what it is trained for: agree
//! with ŷ on a source row, disagree on a target row).
template <class T, class Rounding>
struct disparity_row {
  const T* z;   //!< G_y's logits: [classes, rows]
  const T* f;   //!< f' = G_d's output: [classes, rows]
  T* gradient;  //!< its gradient
  index_t batch, classes;
  step_scalar loss_scale;
  double margin;
  DAFUSE_HOST_DEVICE sum_terms<3> operator()(index_t c) const {
    const bool is_source = c < batch;
    const T* zc = z + c * classes;
    const T* fc = f + c * classes;
    T* dc = gradient + c * classes;
    const index_t y = nn::argmax(zc, classes);
    // logsumexp over all classes and over the classes other than ŷ, from one maximum each.
    double all_max = double(fc[0]), rest_max = -HUGE_VAL;
    for (index_t k = 0; k < classes; ++k) {
      all_max = double(fc[k]) > all_max ? double(fc[k]) : all_max;
      if (k != y) rest_max = double(fc[k]) > rest_max ? double(fc[k]) : rest_max;
    }
    double all = 0, rest = 0;
    for (index_t k = 0; k < classes; ++k) {
      all += exp(double(fc[k]) - all_max);
      if (k != y) rest += exp(double(fc[k]) - rest_max);
    }
    const double log_all = all_max + log(all), log_rest = rest_max + log(rest);
    const double scale = loss_scale.get() / double(batch) * (is_source ? margin : 1.0);
    for (index_t k = 0; k < classes; ++k) {
      const double p = exp(double(fc[k]) - log_all);
      const double other = is_source ? double(k == y)
                           : k == y  ? 0.0
                                     : exp(double(fc[k]) - log_rest);
      dc[k] = Rounding::round(T(scale * (p - other)));
    }
    const double right = double((nn::argmax(fc, classes) == y) == is_source);
    if (is_source) return {{log_all - double(fc[y]), 0.0, right}};
    return {{0.0, log_all - log_rest, right}};
  }
};

//! L = (γ·Σ_source + Σ_target)/B and the accuracy (right rows)/rows, from the rows' sums.
struct disparity_loss {
  double* out;  //!< L, then the accuracy
  const double* sums;
  double margin;
  index_t batch, rows;
  DAFUSE_HOST_DEVICE void operator()(index_t) const {
    out[0] = (margin * sums[0] + sums[1]) / double(batch);
    out[1] = sums[2] / double(rows);
  }
};

}  // namespace mdd_maths

template <class Schedule = schedule::ganin, class Margin = std::ratio<4>>
struct mdd : reversal_defaults<Schedule> {
  static_assert(schedule_policy<Schedule>,
                "dafuse: head::mdd<S, M> takes a schedule such as schedule::ganin");
  static_assert(detail::positive_ratio<Margin>(),
                "dafuse: head::mdd<S, M>'s margin factor M is a positive std::ratio, e.g. "
                "std::ratio<4> for γ = 4");
  static constexpr bool classifier_reads_target = true;  //!< ŷ on the target rows
  static constexpr discriminator_input discriminator_reads = discriminator_input::features;
  static constexpr bool own_maths = true;
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

  //! The rows' three sums (source, target, right), then L and the accuracy.
  static constexpr index_t sum_count = 5;

  //! f' = G_d on h (all 2B rows), and L (Zhang et al. 2019, G_d as the adversarial classifier
  //! f', G_y's predictions ŷ = argmax z as pseudo-labels, constants) with its gradient at f''s
  //! output: L = γ·(1/B)·Σ_source −log p_ŷ + (1/B)·Σ_target −log(1 − p_ŷ), p = softmax(f'(h)).
  //! The accuracy is the fraction of rows where f' agrees with ŷ on a source row and disagrees
  //! on a target row.
  template <class View, class Scale>
  static auto forward(View& v, Scale loss_scale) {
    using T = typename View::value_type;
    v.template forward<nn::dann_module::discriminator>();
    const shape s = v.shape();
    double* sums = v.sums();
    v.template map_sum<3>(s.rows,
                          mdd_maths::disparity_row<T, typename View::rounding>{
                              v.logits(), v.discriminator_output(), v.discriminator_gradient(),
                              s.batch, s.classes, step_scalar(loss_scale), margin},
                          sums);
    v.for_each(1, mdd_maths::disparity_loss{sums + 3, sums, margin, s.batch, s.rows});
    return v.result(step_scalar(sums + 3, 1.0), step_scalar(sums + 4, 1.0));
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
