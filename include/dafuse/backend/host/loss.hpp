// SPDX-License-Identifier: Apache-2.0
//! @file backend/host/loss.hpp
//! @brief The step's two losses over a whole batch, 16 samples at a time in SIMD registers.
//!
//! nn/loss.hpp defines each loss on one sample, the form a CUDA thread runs. On the CPU a loop of
//! those calls spends its time in scalar libm (expf, log1pf): a fifth of a moons step (2 → 15 →
//! 2, B = 32). Here the same formulas run on Eigen arrays of 16 samples, whose exp, log and log1p
//! are vectorised, and the last n mod 16 samples go through the per-sample functions. Results
//! agree with the per-sample functions to a few units in the last place (a test checks it).
#pragma once
#include <dafuse/config.hpp>

#include <dafuse/core/meta.hpp>
#include <dafuse/nn/loss.hpp>

#include <Eigen/Core>

#include <cstdint>

namespace dafuse::backend::host {

namespace detail {
inline constexpr index_t loss_lanes = 16;  //!< samples per vector step
template <class T>
using lane_array = Eigen::Array<T, loss_lanes, 1>;
}  // namespace detail

//! Binary cross-entropy with logits over n samples: sample c has logit z[c] and target
//! t = [c ≥ first_target]. Writes dz[c] = scale·(σ(z) − t) (dz may alias z), adds to `right` the
//! samples on their target's side of 0 (z > 0 for t = 1, z < 0 for t = 0), and returns Σ ℓ, with
//! ℓ = max(z, 0) − z·t + log(1 + e^(−|z|)) as in nn::binary_cross_entropy_with_logit.
template <class T>
double binary_cross_entropy_with_logits(
    const T* z, index_t n, index_t first_target, T scale, T* dz, index_t& right) {
  using lanes = detail::lane_array<T>;
  constexpr index_t width = detail::loss_lanes;
  const lanes offsets = lanes::LinSpaced(T(0), T(width - 1));
  double sum = 0;
  index_t c = 0;
  for (; c + width <= n; c += width) {
    const lanes x = Eigen::Map<const lanes>(z + c);
    // t = [c + i ≥ first_target], from the lane offsets (exact in T for any batch a step holds).
    const lanes t = (offsets + T(c) >= T(first_target)).template cast<T>();
    const lanes e = (-x.abs()).exp();  // in (0, 1]
    const lanes loss = x.max(T(0)) - x * t + e.log1p();
    const lanes inv = (T(1) + e).inverse();
    const lanes sigma = (x >= T(0)).select(inv, e * inv);
    Eigen::Map<lanes>(dz + c) = scale * (sigma - t);
    sum += double(loss.sum());
    right += ((t > T(0)) && (x > T(0))).count() + ((t == T(0)) && (x < T(0))).count();
  }
  for (; c < n; ++c) {
    const T x = z[c];
    const bool is_target = c >= first_target;
    sum += double(nn::binary_cross_entropy_with_logit(x, T(is_target), scale, &dz[c]));
    right += is_target ? x > T(0) : x < T(0);
  }
  return sum;
}

//! Softmax cross-entropy over n samples: column c of the column-major [classes, n] logits z has
//! label y[c] ∈ [0, classes) (the caller checks). Writes dz = scale·(softmax(z) − onehot(y))
//! column by column (dz may alias z) and returns Σ ℓ, ℓ = logsumexp(z) − z_y, as in
//! nn::softmax_cross_entropy. Each column is shifted by its maximum first, so exp stays finite.
template <class T>
double softmax_cross_entropy(
    const T* z, index_t classes, index_t n, const std::int32_t* y, T scale, T* dz) {
  using lanes = detail::lane_array<T>;
  using flat = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>;
  constexpr index_t width = detail::loss_lanes;
  double sum = 0;
  index_t c0 = 0;
  for (; c0 + width <= n; c0 += width) {
    // dz = z − max of its column, then exp over the 16 columns as one flat array.
    lanes shifted_label;
    for (index_t i = 0; i < width; ++i) {
      const T* zc = z + (c0 + i) * classes;
      T* dc = dz + (c0 + i) * classes;
      T zmax = zc[0];
      for (index_t k = 1; k < classes; ++k) zmax = zc[k] > zmax ? zc[k] : zmax;
      for (index_t k = 0; k < classes; ++k) dc[k] = zc[k] - zmax;
      shifted_label[i] = dc[y[c0 + i]];
    }
    flat e(dz + c0 * classes, width * classes);
    e = e.exp();
    lanes total;
    for (index_t i = 0; i < width; ++i) {
      const T* ec = dz + (c0 + i) * classes;
      T s = 0;
      for (index_t k = 0; k < classes; ++k) s += ec[k];
      total[i] = s;
    }
    // ℓ = log Σ exp(z − max) − (z_y − max); softmax = exp(z − max) / Σ.
    sum += double((total.log() - shifted_label).sum());
    const lanes inverse = scale * total.inverse();
    for (index_t i = 0; i < width; ++i) {
      T* dc = dz + (c0 + i) * classes;
      for (index_t k = 0; k < classes; ++k) dc[k] *= inverse[i];
      dc[y[c0 + i]] -= scale;
    }
  }
  for (index_t c = c0; c < n; ++c)
    sum +=
        double(nn::softmax_cross_entropy(z + c * classes, classes, y[c], scale, dz + c * classes));
  return sum;
}

}  // namespace dafuse::backend::host
