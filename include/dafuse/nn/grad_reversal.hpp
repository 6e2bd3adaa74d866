// SPDX-License-Identifier: Apache-2.0
//! @file nn/grad_reversal.hpp
//! @brief The gradient reversal layer of DANN: identity forward, −λ·gradient backward.
//!
//! Ganin & Lempitsky, "Unsupervised Domain Adaptation by Backpropagation", ICML 2015, and Ganin et
//! al., "Domain-Adversarial Training of Neural Networks", JMLR 17(59), 2016, section 5.2.
//!
//! Sign convention: the discriminator G_d minimises the domain loss L_d; the feature extractor
//! G_f receives −λ·∂L_d/∂features, i.e. it ascends L_d (it learns features the discriminator
//! cannot separate), while the label loss L_y flows through unchanged. With total loss
//! L = L_y + L_d the feature gradient is ∂L_y/∂h − λ·∂L_d/∂h. λ ≥ 0 comes from the schedule at run
//! time, so changing it never changes the code that runs. In a dafuse step the layer costs
//! nothing: its forward is the identity (no copy) and its backward is the scalar −λ folded into
//! the product that produces the discriminator's input gradient.
#pragma once
#include <dafuse/config.hpp>

namespace dafuse::nn {

//! The reversal as a value: what the step folds into the discriminator's backward.
template <class T>
struct grad_reversal {
  T lambda = T(1);  //!< λ ≥ 0, the weight of the adversarial signal

  //! Forward: the identity.
  DAFUSE_HOST_DEVICE constexpr T forward(T x) const { return x; }
  //! Backward: ∂L/∂x = −λ·∂L/∂y.
  DAFUSE_HOST_DEVICE constexpr T backward(T dy) const { return -lambda * dy; }
  //! The factor the backward multiplies by, for folding into a product's α.
  DAFUSE_HOST_DEVICE constexpr T backward_scale() const { return -lambda; }
};

}  // namespace dafuse::nn
