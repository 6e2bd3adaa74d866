// SPDX-License-Identifier: Apache-2.0
//! @file nn/loss.hpp
//! @brief Softmax cross-entropy and binary cross-entropy on logits, each fused with its gradient.
//!
//! Both work on one sample (one column of logits) given its index, so the same code runs in a CPU
//! loop and, later, in a CUDA thread. Each returns the sample's loss and writes the gradient of
//! `scale · loss` with respect to the logits, where the caller passes scale = 1/n for a mean.
#pragma once
#include <dafuse/config.hpp>
#include <dafuse/core/meta.hpp>

#include <cmath>
#include <cstdint>

namespace dafuse::nn {

//! Softmax cross-entropy of one sample: ℓ = logsumexp(z) − z_y;  ∂ℓ/∂z_k = p_k − [k = y].
//! z: [classes] logits; label in [0, classes); dz: [classes] receives scale·∂ℓ/∂z (may alias z).
//! Subtracting max z first keeps exp finite for any logits.
template <class T>
DAFUSE_HOST_DEVICE T
softmax_cross_entropy(const T* z, index_t classes, std::int32_t label, T scale, T* dz) {
  T zmax = z[0];
  for (index_t k = 1; k < classes; ++k) zmax = z[k] > zmax ? z[k] : zmax;
  T sum = 0;
  for (index_t k = 0; k < classes; ++k) sum += std::exp(z[k] - zmax);
  const T log_sum = std::log(sum);
  const T loss = log_sum + zmax - z[label];
  for (index_t k = 0; k < classes; ++k) {
    const T p = std::exp(z[k] - zmax - log_sum);
    dz[k] = scale * (p - (k == label ? T(1) : T(0)));
  }
  return loss;
}

//! Binary cross-entropy on a logit z with target t ∈ {0, 1} (PyTorch's BCEWithLogitsLoss):
//! ℓ = max(z, 0) − z·t + log(1 + e^(−|z|)), never overflowing; ∂ℓ/∂z = σ(z) − t.
//! Writes scale·∂ℓ/∂z to *dz (may alias z) and returns ℓ.
template <class T>
DAFUSE_HOST_DEVICE T binary_cross_entropy_with_logit(T z, T target, T scale, T* dz) {
  const T e = std::exp(-std::abs(z));  // in (0, 1]
  const T loss = (z > T(0) ? z : T(0)) - z * target + std::log1p(e);
  const T sigma = z >= T(0) ? T(1) / (T(1) + e) : e / (T(1) + e);
  *dz = scale * (sigma - target);
  return loss;
}

//! Softmax of one sample's logits: p_k = exp(z_k − max z) / Σ_j exp(z_j − max z), computed in
//! the logits' type and written as Out (e.g. float probabilities from double logits).
template <class T, class Out>
DAFUSE_HOST_DEVICE void softmax(const T* z, index_t classes, Out* p) {
  T zmax = z[0];
  for (index_t k = 1; k < classes; ++k) zmax = z[k] > zmax ? z[k] : zmax;
  T sum = 0;
  for (index_t k = 0; k < classes; ++k) sum += std::exp(z[k] - zmax);
  for (index_t k = 0; k < classes; ++k) p[k] = Out(std::exp(z[k] - zmax) / sum);
}

//! Entropy of one sample's softmax, H = −Σ p_k log p_k = logsumexp(z) − Σ p_k z_k, from its
//! logits z: [classes]; exact for any logits (no ε inside a log).
template <class T>
DAFUSE_HOST_DEVICE T softmax_entropy(const T* z, index_t classes) {
  T zmax = z[0];
  for (index_t k = 1; k < classes; ++k) zmax = z[k] > zmax ? z[k] : zmax;
  T sum = 0, weighted = 0;
  for (index_t k = 0; k < classes; ++k) {
    const T e = std::exp(z[k] - zmax);
    sum += e;
    weighted += e * (z[k] - zmax);
  }
  return std::log(sum) - weighted / sum;
}
//! Index of the largest logit (first on ties): the predicted class.
template <class T>
DAFUSE_HOST_DEVICE std::int32_t argmax(const T* z, index_t classes) {
  std::int32_t best = 0;
  for (index_t k = 1; k < classes; ++k)
    if (z[k] > z[best]) best = static_cast<std::int32_t>(k);
  return best;
}

}  // namespace dafuse::nn
