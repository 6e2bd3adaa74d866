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
#include <dafuse/head/view.hpp>
#include <dafuse/policy/arguments.hpp>
#include <dafuse/policy/schedule.hpp>

#include <cmath>
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

//! The pieces of MCC's maths, run by the view's loops over the B target rows (i) or the classes
//! (k). Ŷ [classes, B], w [B] and the per-class terms [classes, 2] are the head's scratch.
namespace mcc_maths {

//! Row i's Ŷ_i = softmax(z_i/T) and its unnormalised weight 1 + e^(−H(Ŷ_i)), which it returns
//! for the weights' sum. H = log Σ e^u − Σ Ŷ·u with u = (z − max z)/T: exact, no ε in a log.
template <class T>
struct row_weight {
  const T* z;  //!< the target rows' logits: [classes, B]
  T* y;
  T* w;
  index_t classes;
  double temperature;
  DAFUSE_HOST_DEVICE sum_terms<1> operator()(index_t i) const {
    const T* zi = z + i * classes;
    T* yi = y + i * classes;
    T zmax = zi[0];
    for (index_t k = 1; k < classes; ++k) zmax = zi[k] > zmax ? zi[k] : zmax;
    double total = 0, weighted = 0;
    for (index_t k = 0; k < classes; ++k) {
      const double u = (double(zi[k]) - double(zmax)) / temperature, e = exp(u);
      yi[k] = T(e);
      total += e;
      weighted += e * u;
    }
    for (index_t k = 0; k < classes; ++k) yi[k] = T(double(yi[k]) / total);
    const double entropy = log(total) - weighted / total;
    w[i] = T(1.0 + exp(-entropy));
    return {{double(w[i])}};
  }
};

//! w_i normalised to Σ w = B by the weights' sum.
template <class T>
struct normalise {
  T* w;
  const double* sum;
  index_t batch;
  DAFUSE_HOST_DEVICE void operator()(index_t i) const {
    w[i] = T(double(w[i]) * double(batch) / *sum);
  }
};

//! Class k's s_k = Σ_i w_i·Ŷ_ik and C_kk = Σ_i w_i·Ŷ_ik², kept as (2/s_k, C_kk/s_k²); returns
//! C_kk/s_k for the trace. A class no row gives any probability (underflow) confuses nothing.
template <class T>
struct class_term {
  const T* y;
  const T* w;
  T* terms;  //!< [classes, 2]
  index_t batch, classes;
  DAFUSE_HOST_DEVICE sum_terms<1> operator()(index_t k) const {
    double s = 0, c = 0;
    for (index_t i = 0; i < batch; ++i) {
      const double p = double(y[k + i * classes]);
      s += double(w[i]) * p;
      c += double(w[i]) * p * p;
    }
    const bool seen = s > 0;
    terms[k] = T(seen ? 2.0 / s : 0.0);
    terms[k + classes] = T(seen ? c / (s * s) : 0.0);
    return {{seen ? c / s : 0.0}};
  }
};

//! L = 1 − trace/classes, from the trace's sum.
struct confusion_loss {
  double* loss;
  const double* trace;
  index_t classes;
  DAFUSE_HOST_DEVICE void operator()(index_t) const { *loss = 1.0 - *trace / double(classes); }
};

//! Row i's λ·S·∂L/∂z_i: with w constant, ∂L/∂Ŷ_ik = −(w_i/classes)·(2·Ŷ_ik/s_k − C_kk/s_k²), then
//! through the softmax at temperature T: δz_i = (λS/T)·Ŷ_i ⊙ (g_i − ⟨g_i, Ŷ_i⟩), stored rounded.
template <class T, class Rounding>
struct logit_gradient {
  const T* y;
  const T* w;
  const T* terms;
  T* dz;  //!< the target rows' logit gradient: [classes, B]
  index_t classes;
  step_scalar lambda, loss_scale;
  double temperature;
  DAFUSE_HOST_DEVICE void operator()(index_t i) const {
    const double scale = lambda.get() * loss_scale.get() / temperature;
    const double wi = double(w[i]) / double(classes);
    const T* yi = y + i * classes;
    T* di = dz + i * classes;
    double mean = 0;
    for (index_t k = 0; k < classes; ++k) {
      const double g = -wi * (double(terms[k]) * double(yi[k]) - double(terms[k + classes]));
      di[k] = T(g);
      mean += g * double(yi[k]);
    }
    for (index_t k = 0; k < classes; ++k)
      di[k] = Rounding::round(T(scale * double(yi[k]) * (double(di[k]) - mean)));
  }
};

}  // namespace mcc_maths

template <class Schedule = schedule::ganin, class Temperature = std::ratio<5, 2>>
struct mcc : scheduled_defaults<Schedule> {
  static_assert(schedule_policy<Schedule>,
                "dafuse: head::mcc<S, T> takes a schedule such as schedule::ganin");
  static_assert(detail::positive_ratio<Temperature>(),
                "dafuse: head::mcc<S, T>'s temperature T is a positive std::ratio, e.g. "
                "std::ratio<5, 2> for T = 2.5");
  static constexpr bool classifier_reads_target = true;
  static constexpr bool writes_logit_gradient = true;
  static constexpr bool own_maths = true;
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

  //! The target rows' Ŷ [classes, B], their weights [B], and (2/s_k, C_kk/s_k²) [classes, 2].
  static constexpr index_t scratch_elements(const shape& s) {
    return s.classes * s.batch + s.batch + 2 * s.classes;
  }
  //! The weights' sum, the trace Σ_k C_kk/s_k, and L.
  static constexpr index_t sum_count = 3;

  //! Ŷ_i = softmax(z_i/T) on the B target rows; w_i = 1 + e^(−H(Ŷ_i)) normalised to Σ w = B (a
  //! constant for the gradient); the class confusion C = Ŷᵀ·diag(w)·Ŷ [classes, classes], each
  //! column divided by its sum s_k; L = Σ_{j≠j'} C̃_jj' / classes. Ŷ's rows sum to 1, so
  //! s_k = Σ_i w_i·Ŷ_ik, the normalised columns sum to 1, and L = 1 − (1/classes)·Σ_k C_kk/s_k.
  template <class View, class Scale>
  static auto forward(View& v, Scale /*loss_scale*/) {
    using T = typename View::value_type;
    const shape s = v.shape();
    const index_t b = s.batch, c = s.classes;
    T* y = v.scratch();
    T* w = y + c * b;
    T* terms = w + b;
    double* sums = v.sums();
    v.template map_sum<1>(b, mcc_maths::row_weight<T>{v.logits() + b * c, y, w, c, temperature},
                          sums);
    v.for_each(b, mcc_maths::normalise<T>{w, sums, b});
    v.template map_sum<1>(c, mcc_maths::class_term<T>{y, w, terms, b, c}, sums + 1);
    v.for_each(1, mcc_maths::confusion_loss{sums + 2, sums + 1, c});
    return v.result(step_scalar(sums + 2, 1.0));
  }
  //! λ·S·∂L/∂z written fresh into the target rows' logit gradient; G_y's backward takes it from
  //! there (δh is not touched, so `accumulate` changes nothing). Returns 0 (no G_d).
  template <class View, class Weight>
  static double backward(View& v, Weight lambda, bool /*accumulate*/ = false) {
    using T = typename View::value_type;
    const shape s = v.shape();
    const index_t b = s.batch, c = s.classes;
    const T* y = v.scratch();
    const T* w = y + c * b;
    const T* terms = w + b;
    v.for_each(b, mcc_maths::logit_gradient<T, typename View::rounding>{
                      y, w, terms, v.logit_gradient() + b * c, c, step_scalar(lambda),
                      v.loss_scale(), temperature});
    return 0.0;
  }
};

static_assert(head_policy<mcc<>>);

}  // namespace dafuse::head
