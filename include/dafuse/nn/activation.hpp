// SPDX-License-Identifier: Apache-2.0
//! @file nn/activation.hpp
//! @brief Element-wise activations, written so their derivative comes from the output alone.
//!
//! Each activation is a small structural type with a constexpr instance (`nn::relu`), so it can
//! be passed as a template argument next to layer widths: `nn::mlp<784, 256, 10, nn::relu>`.
//! The backward pass only keeps a layer's output y = f(z), so each activation gives f'(z) as a
//! function of y; that is exact for the monotone activations here and saves storing z.
#pragma once
#include <dafuse/config.hpp>

#include <cmath>
#include <concepts>

namespace dafuse::nn {

//! How a layer followed by an activation is initialised (see nn/init.hpp).
enum class init_scheme {
  glorot_uniform,  //!< U(±√(6/(fan_in+fan_out))): Glorot & Bengio 2010, for linear/sigmoid/tanh
  he_uniform,      //!< U(±gain·√(3/fan_in)): He et al. 2015, for the ReLU family
};

//! f(z) = z. The output layer of a classifier or discriminator (logits).
struct identity_t {
  static constexpr init_scheme init = init_scheme::glorot_uniform;  //!< initialisation
  static constexpr bool is_identity = true;  //!< lets the backward skip the derivative pass
  template <class T>
  DAFUSE_HOST_DEVICE constexpr T operator()(T z) const {
    return z;
  }
  template <class T>
  DAFUSE_HOST_DEVICE constexpr T derivative_from_output(T) const {
    return T(1);
  }
  template <class T>
  constexpr T init_gain() const {
    return T(1);
  }
};

//! f(z) = max(z, 0); f'(z) = [y > 0] (0 at z = 0, as PyTorch).
struct relu_t {
  static constexpr init_scheme init = init_scheme::he_uniform;  //!< initialisation
  static constexpr bool is_identity = false;                    //!< needs a derivative pass
  template <class T>
  DAFUSE_HOST_DEVICE constexpr T operator()(T z) const {
    return z > T(0) ? z : T(0);
  }
  template <class T>
  DAFUSE_HOST_DEVICE constexpr T derivative_from_output(T y) const {
    return y > T(0) ? T(1) : T(0);
  }
  template <class T>
  T init_gain() const {
    return std::sqrt(T(2));
  }
};

//! f(z) = z for z > 0, slope·z otherwise; f'(z) from y because slope > 0 keeps the sign.
struct leaky_relu_t {
  float negative_slope = 0.01f;                                 //!< PyTorch's default
  static constexpr init_scheme init = init_scheme::he_uniform;  //!< initialisation
  static constexpr bool is_identity = false;                    //!< needs a derivative pass
  template <class T>
  DAFUSE_HOST_DEVICE constexpr T operator()(T z) const {
    return z > T(0) ? z : T(negative_slope) * z;
  }
  template <class T>
  DAFUSE_HOST_DEVICE constexpr T derivative_from_output(T y) const {
    return y > T(0) ? T(1) : T(negative_slope);
  }
  template <class T>
  T init_gain() const {  // He et al. 2015, eq. 15: gain² = 2 / (1 + a²)
    return std::sqrt(T(2) / (T(1) + T(negative_slope) * T(negative_slope)));
  }
};

//! f(z) = 1 / (1 + e^(−z)); f'(z) = y(1 − y).
struct sigmoid_t {
  static constexpr init_scheme init = init_scheme::glorot_uniform;  //!< initialisation
  static constexpr bool is_identity = false;                        //!< needs a derivative pass
  template <class T>
  DAFUSE_HOST_DEVICE T operator()(T z) const {
    // Two branches so exp never overflows.
    if (z >= T(0)) return T(1) / (T(1) + std::exp(-z));
    const T e = std::exp(z);
    return e / (T(1) + e);
  }
  template <class T>
  DAFUSE_HOST_DEVICE constexpr T derivative_from_output(T y) const {
    return y * (T(1) - y);
  }
  template <class T>
  constexpr T init_gain() const {
    return T(1);
  }
};

//! f(z) = tanh z; f'(z) = 1 − y².
struct tanh_t {
  static constexpr init_scheme init = init_scheme::glorot_uniform;  //!< initialisation
  static constexpr bool is_identity = false;                        //!< needs a derivative pass
  template <class T>
  DAFUSE_HOST_DEVICE T operator()(T z) const {
    return std::tanh(z);
  }
  template <class T>
  DAFUSE_HOST_DEVICE constexpr T derivative_from_output(T y) const {
    return T(1) - y * y;
  }
  template <class T>
  constexpr T init_gain() const {
    return T(1);
  }
};

inline constexpr identity_t identity{};      //!< no activation (logits)
inline constexpr relu_t relu{};              //!< max(z, 0)
inline constexpr leaky_relu_t leaky_relu{};  //!< slope 0.01; write leaky_relu_t{0.2f} for another
inline constexpr sigmoid_t sigmoid{};        //!< logistic
inline constexpr tanh_t tanh{};              //!< hyperbolic tangent

//! What a layer needs of an activation object.
template <class A>
concept activation = requires(const A& a, float y) {
  { a(y) } -> std::convertible_to<float>;
  { a.derivative_from_output(y) } -> std::convertible_to<float>;
  { a.template init_gain<float>() } -> std::convertible_to<float>;
  { A::init } -> std::convertible_to<init_scheme>;
  { A::is_identity } -> std::convertible_to<bool>;
};

static_assert(activation<identity_t> && activation<relu_t> && activation<leaky_relu_t> &&
              activation<sigmoid_t> && activation<tanh_t>);

}  // namespace dafuse::nn
