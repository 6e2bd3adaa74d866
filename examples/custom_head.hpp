// SPDX-License-Identifier: Apache-2.0
// A head written outside the library: entropy minimisation on the target rows' predictions
// (Grandvalet & Bengio, "Semi-supervised Learning by Entropy Minimization", NIPS 2004; the
// entropy term of many domain-adaptation methods since). Nothing in dafuse was edited for it:
// its maths runs over the view every executor gives a head (<dafuse/head/view.hpp>), and
// examples/05_custom_head.cpp trains it. tests/head/custom_head_test.cpp checks it against
// PyTorch (tools/make_head_vectors.py, variant "entropy").
//
// G_y also runs on the B target rows; with p_i = softmax(z_i) and H_i = −Σ_k p_ik·log p_ik,
// L = (1/B)·Σ_i H_i enters as L_y + λ·L, so G_y and, through the logits, G_f make the target
// predictions confident. ∂H_i/∂z_ik = −p_ik·(log p_ik + H_i).
#pragma once
#include <dafuse/head/head_base.hpp>
#include <dafuse/head/view.hpp>
#include <dafuse/policy/arguments.hpp>
#include <dafuse/policy/schedule.hpp>

#include <cmath>

namespace my_heads {

namespace df = dafuse;

//! The pieces of the maths, one target row i at a time (z_i: the row's `classes` logits).
namespace entropy_maths {

//! log Σ_k e^(z_k − max z) and max z, for log p_k = z_k − max z − that log.
template <class T>
DAFUSE_HOST_DEVICE double log_partition(const T* z, df::index_t classes, double& zmax) {
  zmax = double(z[0]);
  for (df::index_t k = 1; k < classes; ++k) zmax = double(z[k]) > zmax ? double(z[k]) : zmax;
  double total = 0;
  for (df::index_t k = 0; k < classes; ++k) total += exp(double(z[k]) - zmax);
  return log(total);
}

//! H = −Σ_k p_k·log p_k of the row's softmax, from log_partition's max z and log.
template <class T>
DAFUSE_HOST_DEVICE double row_entropy_of(const T* z,
                                         df::index_t classes,
                                         double zmax,
                                         double log_z) {
  double entropy = 0;
  for (df::index_t k = 0; k < classes; ++k) {
    const double log_p = double(z[k]) - zmax - log_z;
    entropy -= exp(log_p) * log_p;
  }
  return entropy;
}

//! H_i, for the loss's sum.
template <class T>
struct row_entropy {
  const T* z;  //!< the target rows' logits: [classes, B]
  df::index_t classes;
  DAFUSE_HOST_DEVICE df::sum_terms<1> operator()(df::index_t i) const {
    const T* zi = z + i * classes;
    double zmax;
    const double log_z = log_partition(zi, classes, zmax);
    return {{row_entropy_of(zi, classes, zmax, log_z)}};
  }
};

//! Row i's λ·S·∂L/∂z_i = −(λS/B)·p_i ⊙ (log p_i + H_i), stored as the step stores values.
template <class T, class Rounding>
struct logit_gradient {
  const T* z;
  T* dz;  //!< the target rows' logit gradient: [classes, B]
  df::index_t classes, batch;
  df::step_scalar lambda, loss_scale;
  DAFUSE_HOST_DEVICE void operator()(df::index_t i) const {
    const T* zi = z + i * classes;
    T* di = dz + i * classes;
    double zmax;
    const double log_z = log_partition(zi, classes, zmax);
    const double entropy = row_entropy_of(zi, classes, zmax, log_z);
    const double scale = lambda.get() * loss_scale.get() / double(batch);
    for (df::index_t k = 0; k < classes; ++k) {
      const double log_p = double(zi[k]) - zmax - log_z;
      di[k] = Rounding::round(T(-scale * exp(log_p) * (log_p + entropy)));
    }
  }
};

}  // namespace entropy_maths

template <class Schedule = df::schedule::ganin>
struct entropy_minimisation : df::head::scheduled_defaults<Schedule> {
  static constexpr bool classifier_reads_target = true;  //!< p on the target rows
  static constexpr bool writes_logit_gradient = true;    //!< λ·∂L/∂z there
  static constexpr bool own_maths = true;
  //! Σ_i H_i, then L.
  static constexpr df::index_t sum_count = 2;

  static df::status can_implement(const df::fit_args& a) {
    return entropy_minimisation::check_lambda_max(a, "my_heads::entropy_minimisation");
  }

  //! L = mean entropy of the target rows' predictions (the report's domain_loss).
  template <class View, class Scale>
  static auto forward(View& v, Scale /*loss_scale*/) {
    using T = typename View::value_type;
    const df::head::shape s = v.shape();
    double* sums = v.sums();
    v.template map_sum<1>(
        s.batch, entropy_maths::row_entropy<T>{v.logits() + s.batch * s.classes, s.classes}, sums);
    v.for_each(1, df::head::quotient{sums + 1, sums, double(s.batch)});
    return v.result(df::step_scalar(sums + 1, 1.0));
  }
  //! λ·S·∂L/∂z written into the target rows' logit gradient; G_y's backward takes it from there.
  //! Returns 0 (no G_d).
  template <class View, class Weight>
  static double backward(View& v, Weight lambda, bool /*accumulate*/ = false) {
    using T = typename View::value_type;
    const df::head::shape s = v.shape();
    v.for_each(s.batch,
               entropy_maths::logit_gradient<T, typename View::rounding>{
                   v.logits() + s.batch * s.classes, v.logit_gradient() + s.batch * s.classes,
                   s.classes, s.batch, df::step_scalar(lambda), v.loss_scale()});
    return 0.0;
  }
};

static_assert(df::head_policy<entropy_minimisation<>>);

}  // namespace my_heads
