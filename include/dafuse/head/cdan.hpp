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
#include <dafuse/core/meta.hpp>
#include <dafuse/core/step_values.hpp>
#include <dafuse/head/head_base.hpp>
#include <dafuse/nn/dann_net.hpp>
#include <dafuse/nn/grad_reversal.hpp>
#include <dafuse/nn/loss.hpp>
#include <dafuse/policy/arguments.hpp>
#include <dafuse/policy/schedule.hpp>

#include <cmath>

namespace dafuse::head {

//! The pieces of CDAN's multilinear map, run by both executors (a loop on the host, kernels on a
//! device): column c at a time, T the stored type, Rounding the step's (head::no_rounding, or a
//! mixed-precision step's rounding of what it stores).
namespace cdan_maths {

//! CDAN's multilinear map on column c: g = softmax(z_c), T_c[k·F + j] = round(g_k · h_j), and,
//! with `weights`, the row's unnormalised entropy weight 1 + e^(−H(g)), also returned to be summed.
template <class T, class Rounding>
struct multilinear_column {
  const T* z;        //!< logits [classes, rows]
  const T* h;        //!< features [F, rows]
  T* g;              //!< softmax(z) [classes, rows]
  T* joint;          //!< T [classes · F, rows]
  T* weights;        //!< [rows] or null (CDAN: no weights)
  index_t classes;   //!< K
  index_t features;  //!< F
  DAFUSE_HOST_DEVICE sum_terms<1> operator()(index_t c) const {
    const T* zc = z + c * classes;
    T* gc = g + c * classes;
    nn::softmax(zc, classes, gc);
    double w = 0;
    if (weights) {
      w = 1.0 + std::exp(-double(nn::softmax_entropy(zc, classes)));
      weights[c] = T(w);
    }
    const T* hc = h + c * features;
    T* t = joint + c * classes * features;
    for (index_t k = 0; k < classes; ++k)
      for (index_t j = 0; j < features; ++j) t[k * features + j] = Rounding::round(gc[k] * hc[j]);
    return {{w}};
  }
};

//! Scales each entropy weight so that they sum to the row count: w_c ← w_c · rows / Σ w.
template <class T>
struct normalise_weights {
  T* weights;         //!< [rows]
  const double* sum;  //!< Σ w (read when the phase runs)
  index_t rows;       //!< R
  DAFUSE_HOST_DEVICE void operator()(index_t c) const {
    weights[c] = T(double(weights[c]) * double(rows) / *sum);
  }
};

//! δh_c = round(Σ_k g_k · δT_c[k·F + j]) on column c (g held constant, as the map's forward took
//! it), written fresh or, with `accumulate`, added to δh.
template <class T, class Rounding>
struct multilinear_backward_column {
  const T* g;               //!< [classes, rows]
  const T* joint_gradient;  //!< δT [classes · F, rows]
  T* dh;                    //!< [F, rows]
  index_t classes;          //!< K
  index_t features;         //!< F
  bool accumulate = false;  //!< add to dh (a later term of a sum of heads) rather than write it
  DAFUSE_HOST_DEVICE void operator()(index_t c) const {
    const T* gc = g + c * classes;
    const T* dt = joint_gradient + c * classes * features;
    T* out = dh + c * features;
    for (index_t j = 0; j < features; ++j) {
      T sum = T(0);
      for (index_t k = 0; k < classes; ++k) sum += gc[k] * dt[k * features + j];
      out[j] = Rounding::round(accumulate ? out[j] + sum : sum);
    }
  }
};

}  // namespace cdan_maths

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
