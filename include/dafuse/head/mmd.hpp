// SPDX-License-Identifier: Apache-2.0
//! @file head/mmd.hpp
//! @brief head::mmd: multi-kernel maximum mean discrepancy on the features (DAN: Long et al.,
//! "Learning Transferable Features with Deep Adaptation Networks", ICML 2015).
//!
//! No discriminator: the loss is MMD² between the B source and the B target rows of h under the
//! kernel k(x, y) = (1/K)·Σ_u exp(−‖x − y‖² / (2·α_u·m̄)), the uniform convex combination of K
//! Gaussian kernels whose bandwidths are fixed multiples α_u ∈ {1/8, 1/4, 1/2, 1, 2} of m̄, the
//! batch's mean pairwise squared distance. m̄ is treated as a constant for the gradient (DAN
//! sets the bandwidths from the data, not through them), and the kernel weights are fixed
//! rather than learned by DAN's quadratic program. Estimators: the unbiased quadratic one
//! (mmd_estimator::quadratic, O(B²) pairs) or the linear-time one over B/2 quad-tuples
//! (mmd_estimator::linear, B even; m̄ is then the mean over the 2B pairs it reads). The loss
//! enters as L_y + λ·MMD², λ(p) = lambda_max · Schedule::lambda(p) (Ganin's ramp by default,
//! as head::coral; schedule::constant keeps λ fixed).
#pragma once
#include <dafuse/config.hpp>
#include <dafuse/head/head_base.hpp>
#include <dafuse/head/view.hpp>
#include <dafuse/policy/arguments.hpp>
#include <dafuse/policy/schedule.hpp>

#include <array>
#include <cmath>
#include <cstddef>
#include <string>

namespace dafuse::head {

//! Which estimator of MMD² head::mmd uses.
enum class mmd_estimator {
  quadratic,  //!< unbiased, all pairs of rows: O(B²)
  linear,     //!< unbiased, B/2 quad-tuples (s_2i, s_2i+1, t_2i, t_2i+1): O(B)
};

//! The pieces of MMD's maths, run by the view's loops over the pairs of rows the estimator reads
//! or over the rows. Scratch: a [rows, rows] matrix holding pair (i, j), i < j, at (i, j) (column
//! j), zero elsewhere, then a [rows, rows] matrix M with δH = H·M.
namespace mmd_maths {

//! Pair p of the estimator: rows i < j and the coefficient c of its kernel value. Quadratic: all
//! i < j, column by column (p = j(j − 1)/2 + i), c = 2/(B(B − 1)) within a domain and −2/B²
//! across. Linear: the quad-tuples (s_2q, s_2q+1, t_2q, t_2q+1), four pairs each: c = 2/B for
//! (s_2q, s_2q+1) and (t_2q, t_2q+1), −2/B for (s_2q, t_2q+1) and (s_2q+1, t_2q).
struct pairs {
  index_t batch;
  bool linear;
  DAFUSE_HOST_DEVICE index_t count() const {
    return linear ? 2 * batch : batch * (2 * batch - 1);  // 4 per quad-tuple; C(2B, 2)
  }
  DAFUSE_HOST_DEVICE void at(index_t p, index_t& i, index_t& j, double& c) const {
    const double b = double(batch);
    if (linear) {
      const index_t first = 2 * (p / 4);
      const double same = 2.0 / b;
      switch (p % 4) {
        case 0:
          i = first, j = first + 1, c = same;
          return;
        case 1:
          i = batch + first, j = batch + first + 1, c = same;
          return;
        case 2:
          i = first, j = batch + first + 1, c = -same;
          return;
        default:
          i = first + 1, j = batch + first, c = -same;
          return;
      }
    }
    // The largest j with j(j − 1)/2 ≤ p, from the square root and then exactly.
    j = index_t((1.0 + sqrt(1.0 + 8.0 * double(p))) / 2.0);
    while (j * (j - 1) / 2 > p) --j;
    while ((j + 1) * j / 2 <= p) ++j;
    i = p - j * (j - 1) / 2;
    c = (i < batch) == (j < batch) ? 2.0 / (b * (b - 1.0)) : -2.0 / (b * b);
  }
};

//! d = ‖h_i − h_j‖² of pair p, summed in T, stored at (i, j) and returned for the mean.
template <class T>
struct pair_distance {
  const T* h;
  T* d;
  index_t rows, features;
  pairs estimator;
  DAFUSE_HOST_DEVICE sum_terms<1> operator()(index_t p) const {
    index_t i, j;
    double c;
    estimator.at(p, i, j, c);
    const T* a = h + i * features;
    const T* b = h + j * features;
    T s = 0;
    for (index_t f = 0; f < features; ++f) s += (a[f] - b[f]) * (a[f] - b[f]);
    d[i + j * rows] = s;
    return {{double(s)}};
  }
};

//! Pair p's term c·k(d) of the loss, k(d) = (1/K)·Σ_u exp(−d / (2·α_u·m̄)), m̄ the mean distance
//! (1 when every distance is 0: then any bandwidth gives the same loss and gradient); keeps
//! 2·c·k'(d) at (i, j) for the gradient.
template <class T, std::size_t K>
struct pair_kernel {
  T* d;
  index_t rows;
  pairs estimator;
  const double* distance_sum;
  double multipliers[K];
  DAFUSE_HOST_DEVICE sum_terms<1> operator()(index_t p) const {
    index_t i, j;
    double c;
    estimator.at(p, i, j, c);
    const double total = *distance_sum;
    const double mean = total > 0 ? total / double(estimator.count()) : 1.0;
    double k = 0, slope = 0;
    for (std::size_t u = 0; u < K; ++u) {
      const double width = 2.0 * multipliers[u] * mean, e = exp(-double(d[i + j * rows]) / width);
      k += e;
      slope -= e / width;
    }
    d[i + j * rows] = T(2.0 * c * slope / double(K));
    return {{c * k / double(K)}};
  }
};

//! Column j of M = λ·S·(diag(Q·1) − Q), Q the symmetric matrix of the pairs' 2·c·k'(d) (zero
//! off the pairs): then (H·M)_j = λ·S·Σ_i Q_ij·(h_j − h_i), the pairs' gradient at h_j.
template <class T>
struct gradient_column {
  const T* q;  //!< the pairs' values at (i, j), i < j; zero elsewhere
  T* m;
  index_t rows;
  step_scalar lambda, loss_scale;
  DAFUSE_HOST_DEVICE void operator()(index_t j) const {
    const double scale = lambda.get() * loss_scale.get();
    double diagonal = 0;
    for (index_t i = 0; i < rows; ++i) {
      const T v = i < j ? q[i + j * rows] : i > j ? q[j + i * rows] : T(0);
      m[i + j * rows] = T(-scale * double(v));
      diagonal += double(v);
    }
    m[j + j * rows] = T(scale * diagonal);
  }
};

}  // namespace mmd_maths

template <class Schedule = schedule::ganin, mmd_estimator Estimator = mmd_estimator::quadratic>
struct mmd : scheduled_defaults<Schedule> {
  static_assert(schedule_policy<Schedule>,
                "dafuse: head::mmd<S, E> takes a schedule such as schedule::ganin");
  static constexpr bool writes_feature_gradient = true;
  static constexpr bool own_maths = true;
  static constexpr mmd_estimator estimator = Estimator;  //!< quadratic or linear
  //! α_u: each kernel's 2σ² is 2·α_u·m̄ (the multipliers of tllib's DAN set-up).
  static constexpr std::array<double, 5> bandwidth_multipliers{0.125, 0.25, 0.5, 1.0, 2.0};

  //! lambda_max finite and ≥ 0; at least 2 rows a domain (quadratic) or an even count (linear).
  static status can_implement(const fit_args& a) {
    if (Estimator == mmd_estimator::quadratic && a.batch < 2)
      return {
          "fit_args.batch: head::mmd's unbiased estimator needs at least 2 rows per domain, "
          "found " +
          std::to_string(a.batch)};
    if (Estimator == mmd_estimator::linear && (a.batch < 2 || a.batch % 2 != 0))
      return {
          "fit_args.batch: head::mmd's linear-time estimator pairs the rows of each domain: "
          "expected an even count >= 2, found " +
          std::to_string(a.batch)};
    return mmd::check_lambda_max(a, "head::mmd");
  }

  //! The pairs' distances, then their gradient coefficients [rows, rows]; M [rows, rows].
  static constexpr index_t scratch_elements(const shape& s) { return 2 * s.rows * s.rows; }
  //! The distances' sum, then the loss.
  static constexpr index_t sum_count = 2;
  //! δH = H·M.
  static constexpr std::array<product, 1> products(const shape& s) {
    return {product{false, false, s.features, s.rows, s.rows, s.features, s.rows, s.features}};
  }

  //! Multi-kernel MMD² (DAN: Long et al. 2015) between the source and target rows of h, with
  //! k(d) = (1/K)·Σ_u exp(−d / (2·α_u·m̄)) on d = ‖h_i − h_j‖², the K bandwidth multipliers α_u
  //! and m̄ the mean of d over the pairs the estimator reads (a constant for the gradient): L =
  //! Σ_pairs c_ij·k(d_ij) (mmd_maths::pairs), the report's domain_loss.
  template <class View, class Scale>
  static auto forward(View& v, Scale /*loss_scale*/) {
    using T = typename View::value_type;
    const shape s = v.shape();
    const mmd_maths::pairs estimator{s.batch, Estimator == mmd_estimator::linear};
    T* d = v.scratch();
    double* sums = v.sums();
    v.for_each(s.rows * s.rows, zero<T>{d});
    v.template map_sum<1>(
        estimator.count(),
        mmd_maths::pair_distance<T>{v.features(), d, s.rows, s.features, estimator}, sums);
    mmd_maths::pair_kernel<T, bandwidth_multipliers.size()> kernel{d, s.rows, estimator, sums, {}};
    for (std::size_t u = 0; u < bandwidth_multipliers.size(); ++u)
      kernel.multipliers[u] = bandwidth_multipliers[u];
    v.template map_sum<1>(estimator.count(), kernel, sums + 1);
    return v.result(step_scalar(sums + 1, 1.0));
  }
  //! λ·S·∂MMD²/∂h written fresh into δh (added to it with `accumulate`): each pair adds
  //! q·(h_i − h_j) to δh_i and q·(h_j − h_i) to δh_j, q = λ·S·2·c·k'(d) (∂d/∂h_i = 2(h_i − h_j)),
  //! as one product δH = H·M (mmd_maths::gradient_column). Nothing else is trained: returns 0.
  template <class View, class Weight>
  static double backward(View& v, Weight lambda, bool accumulate = false) {
    using T = typename View::value_type;
    const shape s = v.shape();
    const T* q = v.scratch();
    T* m = v.scratch() + s.rows * s.rows;
    v.for_each(s.rows,
               mmd_maths::gradient_column<T>{q, m, s.rows, step_scalar(lambda), v.loss_scale()});
    T* dh = v.feature_gradient();
    v.product(products(s)[0], 1.0, v.features(), m, accumulate ? T(1) : T(0), dh);
    v.for_each(s.features * s.rows, round_values<T, typename View::rounding>{dh});
    return 0.0;
  }
};

//! MMD with the linear-time estimator.
template <class Schedule = schedule::ganin>
using mmd_linear = mmd<Schedule, mmd_estimator::linear>;

static_assert(head_policy<mmd<>>);
static_assert(head_policy<mmd_linear<>>);

}  // namespace dafuse::head
