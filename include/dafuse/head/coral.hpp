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
#include <dafuse/head/view.hpp>
#include <dafuse/policy/arguments.hpp>
#include <dafuse/policy/schedule.hpp>

#include <array>
#include <string>

namespace dafuse::head {

//! The pieces of CORAL's maths, run by the view's loops.
namespace coral_maths {

//! x̃_j = h_j − mean_j over each domain's B columns (domain d = i / F, feature j = i % F), in
//! double, stored rounded.
template <class T, class Rounding>
struct centre {
  const T* h;
  T* x;
  index_t batch, features;
  DAFUSE_HOST_DEVICE void operator()(index_t i) const {
    const index_t j = i % features, first = (i / features) * batch;
    double mean = 0;
    for (index_t c = first; c < first + batch; ++c) mean += double(h[j + c * features]);
    mean /= double(batch);
    for (index_t c = first; c < first + batch; ++c)
      x[j + c * features] = Rounding::round(T(double(h[j + c * features]) - mean));
  }
};

}  // namespace coral_maths

template <class Schedule = schedule::ganin>
struct coral : scheduled_defaults<Schedule> {
  static_assert(schedule_policy<Schedule>,
                "dafuse: head::coral<S> takes a schedule such as schedule::ganin");
  static constexpr bool writes_feature_gradient = true;
  static constexpr bool own_maths = true;

  //! lambda_max finite and ≥ 0, and at least 2 rows a domain (the unbiased covariance).
  static status can_implement(const fit_args& a) {
    if (a.batch < 2)
      return {
          "fit_args.batch: head::coral's unbiased covariance needs at least 2 rows per "
          "domain, found " +
          std::to_string(a.batch)};
    return coral::check_lambda_max(a, "head::coral");
  }

  //! X̃, the centred h [F, rows], then D = C_s − C_t [F, F].
  static constexpr index_t scratch_elements(const shape& s) {
    return s.features * s.rows + s.features * s.features;
  }
  //! ‖D‖², L, then λ·S/((B − 1)·F²) for the backward's products.
  static constexpr index_t sum_count = 3;
  //! D's two products (X̃_s·X̃_sᵀ, X̃_t·X̃_tᵀ) and δh's two (D·X̃_s, D·X̃_t).
  static constexpr std::array<product, 4> products(const shape& s) {
    const index_t f = s.features, b = s.batch;
    const product covariance{false, true, f, f, b, f, f, f};
    const product gradient{false, false, f, b, f, f, f, f};
    return {covariance, covariance, gradient, gradient};
  }

  //! With X̃ each domain's B columns of h less their mean, C = X̃·X̃ᵀ/(B − 1) its unbiased
  //! covariance and D = C_s − C_t: L = ‖D‖²_F / (4F²), the report's domain_loss.
  template <class View, class Scale>
  static auto forward(View& v, Scale /*loss_scale*/) {
    using T = typename View::value_type;
    const shape s = v.shape();
    const index_t f = s.features, b = s.batch;
    T* x = v.scratch();
    T* d = x + f * s.rows;
    v.for_each(2 * f, coral_maths::centre<T, typename View::rounding>{v.features(), x, b, f});
    const double alpha = 1.0 / double(b - 1);
    v.product(products(s)[0], alpha, x, x, T(0), d);
    v.product(products(s)[1], -alpha, x + f * b, x + f * b, T(1), d);
    v.for_each(f * f, round_values<T, typename View::rounding>{d});
    v.template map_sum<1>(f * f, squares<T>{d}, v.sums());
    v.for_each(1, quotient{v.sums() + 1, v.sums(), 4.0 * double(f) * double(f)});
    return v.result(step_scalar(v.sums() + 1, 1.0));
  }
  //! λ·S·∂L/∂h written fresh into δh (added to it with `accumulate`): ∂L/∂C_s = D/(2F²) and, D
  //! symmetric, ∂L/∂x̃_i = D·x̃_i/((B − 1)·F²) on a source column, its negative on a target one;
  //! the centring adds nothing (X̃'s columns sum to 0, so Σ_i D·x̃_i = 0). D is scaled by that
  //! coefficient in place first (λ and S are read when the phase runs). Nothing else is
  //! trained: returns 0.
  template <class View, class Weight>
  static double backward(View& v, Weight lambda, bool accumulate = false) {
    using T = typename View::value_type;
    const shape s = v.shape();
    const index_t f = s.features, b = s.batch;
    const T* x = v.scratch();
    T* d = v.scratch() + f * s.rows;
    T* dh = v.feature_gradient();
    double* coefficient = v.sums() + 2;
    v.for_each(1, product_of_scalars{coefficient, step_scalar(lambda), v.loss_scale(),
                                     double(b - 1) * double(f) * double(f)});
    v.for_each(f * f, scale_values<T, typename View::rounding>{d, step_scalar(coefficient, 1.0)});
    const T beta = accumulate ? T(1) : T(0);
    v.product(products(s)[2], 1.0, d, x, beta, dh);
    v.product(products(s)[3], -1.0, d, x + f * b, beta, dh + f * b);
    v.for_each(f * s.rows, round_values<T, typename View::rounding>{dh});
    return 0.0;
  }
};

static_assert(head_policy<coral<>>);

}  // namespace dafuse::head
