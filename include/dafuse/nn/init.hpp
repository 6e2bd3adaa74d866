// SPDX-License-Identifier: Apache-2.0
//! @file nn/init.hpp
//! @brief Glorot/He (or PyTorch-default) initialisation of a layer stack from the seeded RNG.
//!
//! Two schemes, both uniform:
//! - `weight_init::glorot_he`: He et al. 2015 ("Delving deep into rectifiers") for layers
//!   followed by the ReLU family, bound = gain·√(3/fan_in); Glorot & Bengio 2010 otherwise,
//!   bound = √(6/(fan_in + fan_out)); biases start at zero.
//! - `weight_init::torch_default`: what torch.nn.Linear does when constructed, W and b from
//!   U(±1/√fan_in) (kaiming_uniform with a = √5; Conv2d's too, fan_in = K·K·C_in). Smaller weights;
//!   choose it to reproduce a PyTorch set-up (the MNIST→USPS demo does: see docs/demo.md for both
//!   measured).
//! Draws go layer by layer, W in column-major order then b, so the same seed gives the same
//! weights on every backend and every thread count.
#pragma once
#include <dafuse/config.hpp>
#include <dafuse/core/rng.hpp>
#include <dafuse/nn/dense.hpp>

#include <cmath>
#include <utility>

namespace dafuse::nn {

//! Which initialisation scheme `initialize` uses (a run-time choice: fit_args::init).
enum class weight_init {
  glorot_he,      //!< He for the ReLU family, Glorot otherwise, zero biases
  torch_default,  //!< torch.nn.Linear's default: W and b from U(±1/√fan_in)
};

//! Half-width of the uniform distribution the weights of `Layer` are drawn from.
template <class Layer, class T>
T init_bound() {
  constexpr auto act = Layer::act;
  if constexpr (decltype(act)::init == init_scheme::he_uniform)
    return act.template init_gain<T>() * std::sqrt(T(3) / T(Layer::fan_in));
  else
    return std::sqrt(T(6) / T(Layer::fan_in + Layer::fan_out));
}

//! Initialises the parameters of every layer of `Stack` at `params` (stack layout).
template <class Stack, class T>
void initialize(T* params, counter_rng& rng, weight_init scheme = weight_init::glorot_he) {
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    (
        [&] {
          using layer = typename Stack::template layer<I>;
          if constexpr (layer::param_count > 0) {  // max-pooling has none
            T* w = params + Stack::template param_offset<I>();
            if (scheme == weight_init::torch_default) {
              const T bound = T(1) / std::sqrt(T(layer::fan_in));
              for (index_t k = 0; k < layer::param_count; ++k) w[k] = rng.uniform<T>(-bound, bound);
              return;
            }
            const T bound = init_bound<layer, T>();
            for (index_t k = 0; k < layer::weight_count; ++k) w[k] = rng.uniform<T>(-bound, bound);
            for (index_t k = 0; k < layer::bias_count; ++k) w[layer::weight_count + k] = T(0);
          }
        }(),
        ...);
  }
  (std::make_index_sequence<Stack::depth>{});
}

}  // namespace dafuse::nn
