// SPDX-License-Identifier: Apache-2.0
// Tests for nn/activation.hpp: the derivative each activation gives from its output against finite
// differences of the activation itself, values at known points, and the initialisation metadata.
#include <dafuse/nn/activation.hpp>
#include "../check.hpp"

#include <cmath>
#include <type_traits>

namespace nn_activation_test {

namespace {

namespace nn = dafuse::nn;

//! An activation object as a type, for TEST_CASE_TEMPLATE.
template <auto Act>
struct act_case {
  static constexpr auto act = Act;
  using type = std::remove_cvref_t<decltype(Act)>;
  //! The ReLU family has a kink at 0 where the finite difference means nothing.
  static constexpr bool has_kink = type::init == nn::init_scheme::he_uniform;
};

using identity_case = act_case<nn::identity>;
using relu_case = act_case<nn::relu>;
using leaky_relu_case = act_case<nn::leaky_relu>;
using leaky_relu_02_case = act_case<nn::leaky_relu_t{0.2f}>;
using sigmoid_case = act_case<nn::sigmoid>;
using tanh_case = act_case<nn::tanh>;

}  // namespace

}  // namespace nn_activation_test

// doctest names the types from the global namespace.
TYPE_TO_STRING_AS("identity", nn_activation_test::identity_case);
TYPE_TO_STRING_AS("relu", nn_activation_test::relu_case);
TYPE_TO_STRING_AS("leaky_relu", nn_activation_test::leaky_relu_case);
TYPE_TO_STRING_AS("leaky_relu_t{0.2f}", nn_activation_test::leaky_relu_02_case);
TYPE_TO_STRING_AS("sigmoid", nn_activation_test::sigmoid_case);
TYPE_TO_STRING_AS("tanh", nn_activation_test::tanh_case);

namespace nn_activation_test {

TEST_CASE_TEMPLATE("derivative_from_output(f(z)) matches a central finite difference of f",
                   C,
                   identity_case,
                   relu_case,
                   leaky_relu_case,
                   leaky_relu_02_case,
                   sigmoid_case,
                   tanh_case) {
  constexpr auto act = C::act;
  constexpr double h = 1e-6;
  int checked = 0;
  for (int i = 0; i <= 160; ++i) {
    const double z = -8.0 + 0.1 * i + 0.0137;  // a grid that straddles 0 without landing on it
    if (C::has_kink && std::abs(z) < 1e-3) continue;
    const double fd = (act(z + h) - act(z - h)) / (2 * h);
    const double analytic = act.derivative_from_output(act(z));
    INFO("z = " << z);
    CHECK(analytic == doctest::Approx(fd).epsilon(1e-7).scale(1.0));
    ++checked;
  }
  CHECK(checked >= 160);
}

TEST_CASE_TEMPLATE("the float derivative from the output agrees with the double one",
                   C,
                   identity_case,
                   relu_case,
                   leaky_relu_case,
                   leaky_relu_02_case,
                   sigmoid_case,
                   tanh_case) {
  constexpr auto act = C::act;
  for (int i = 0; i <= 40; ++i) {
    const double z = -4.0 + 0.2 * i + 0.031;
    const float zf = static_cast<float>(z);
    const float df = act.derivative_from_output(act(zf));
    const double dd = act.derivative_from_output(act(double(zf)));
    INFO("z = " << z);
    CHECK(double(df) == doctest::Approx(dd).epsilon(1e-5).scale(1.0));
  }
}

TEST_CASE("identity passes values through with derivative one") {
  CHECK(nn::identity(3.5) == 3.5);
  CHECK(nn::identity(-2.25f) == -2.25f);
  CHECK(nn::identity.derivative_from_output(-7.0) == 1.0);
  CHECK(nn::identity_t::is_identity);
}

TEST_CASE("relu clamps negatives to zero and has derivative zero at zero as PyTorch") {
  CHECK(nn::relu(2.5) == 2.5);
  CHECK(nn::relu(-2.5) == 0.0);
  CHECK(nn::relu(0.0) == 0.0);
  CHECK(nn::relu(-1e-30f) == 0.0f);
  CHECK(nn::relu.derivative_from_output(2.5) == 1.0);
  CHECK(nn::relu.derivative_from_output(1e-30) == 1.0);
  CHECK(nn::relu.derivative_from_output(0.0) == 0.0);
  CHECK_FALSE(nn::relu_t::is_identity);
}

TEST_CASE("leaky_relu scales negatives by its slope, 0.01 by default") {
  CHECK(nn::leaky_relu.negative_slope == 0.01f);
  CHECK(nn::leaky_relu(3.0) == 3.0);
  CHECK(nn::leaky_relu(-2.0f) == doctest::Approx(-0.02f));
  CHECK(nn::leaky_relu(0.0) == 0.0);
  CHECK(nn::leaky_relu.derivative_from_output(3.0) == 1.0);
  CHECK(nn::leaky_relu.derivative_from_output(-0.02f) == 0.01f);
  // At z = 0 the output is 0 and the derivative is the slope's side.
  CHECK(nn::leaky_relu.derivative_from_output(0.0f) == 0.01f);

  constexpr nn::leaky_relu_t steep{0.2f};
  CHECK(steep(-5.0f) == doctest::Approx(-1.0f));
  CHECK(steep(4.0f) == 4.0f);
  CHECK(steep.derivative_from_output(-1.0f) == 0.2f);
  CHECK(steep.derivative_from_output(4.0f) == 1.0f);
  CHECK_FALSE(nn::leaky_relu_t::is_identity);
}

TEST_CASE("sigmoid and tanh take their textbook values") {
  CHECK(nn::sigmoid(0.0) == 0.5);
  CHECK(nn::sigmoid(std::log(3.0)) == doctest::Approx(0.75).epsilon(1e-15));
  CHECK(nn::sigmoid(-std::log(3.0)) == doctest::Approx(0.25).epsilon(1e-15));
  CHECK(nn::sigmoid(2.0) == doctest::Approx(1.0 / (1.0 + std::exp(-2.0))).epsilon(1e-15));
  CHECK(nn::sigmoid.derivative_from_output(0.5) == 0.25);
  CHECK(nn::sigmoid.derivative_from_output(0.75) == 0.1875);

  CHECK(nn::tanh(0.0) == 0.0);
  CHECK(nn::tanh(std::atanh(0.5)) == doctest::Approx(0.5).epsilon(1e-15));
  CHECK(nn::tanh(-1.0f) == doctest::Approx(std::tanh(-1.0f)));
  CHECK(nn::tanh.derivative_from_output(0.5) == 0.75);
  CHECK(nn::tanh.derivative_from_output(0.0) == 1.0);
  CHECK_FALSE(nn::sigmoid_t::is_identity);
  CHECK_FALSE(nn::tanh_t::is_identity);
}

TEST_CASE_TEMPLATE("sigmoid saturates to exactly 0 and 1 at ±1000 without overflow",
                   T,
                   float,
                   double) {
  const T hi = nn::sigmoid(T(1000));
  const T lo = nn::sigmoid(T(-1000));
  REQUIRE(std::isfinite(hi));
  REQUIRE(std::isfinite(lo));
  CHECK(hi == T(1));
  CHECK(lo == T(0));
  CHECK(nn::sigmoid.derivative_from_output(hi) == T(0));
  CHECK(nn::sigmoid.derivative_from_output(lo) == T(0));
  // Far in the left tail the value is still the positive e^z, not a cancelled 0.
  CHECK(nn::sigmoid(T(-30)) > T(0));
  CHECK(nn::sigmoid(T(-30)) == doctest::Approx(std::exp(T(-30))).epsilon(1e-6).scale(0));
}

TEST_CASE("init_gain and init scheme follow He for the ReLU family and Glorot otherwise") {
  CHECK(nn::identity.init_gain<double>() == 1.0);
  CHECK(nn::sigmoid.init_gain<double>() == 1.0);
  CHECK(nn::tanh.init_gain<double>() == 1.0);
  CHECK(nn::relu.init_gain<double>() == doctest::Approx(std::sqrt(2.0)).epsilon(1e-15));
  CHECK(nn::relu.init_gain<float>() == doctest::Approx(std::sqrt(2.0f)));
  // He et al. 2015, eq. 15: gain = √(2 / (1 + a²)) for slope a.
  const double a = double(0.01f);
  CHECK(nn::leaky_relu.init_gain<double>() ==
        doctest::Approx(std::sqrt(2.0 / (1.0 + a * a))).epsilon(1e-15));
  const double b = double(0.2f);
  CHECK(nn::leaky_relu_t{0.2f}.init_gain<double>() ==
        doctest::Approx(std::sqrt(2.0 / (1.0 + b * b))).epsilon(1e-15));

  CHECK(nn::identity_t::init == nn::init_scheme::glorot_uniform);
  CHECK(nn::sigmoid_t::init == nn::init_scheme::glorot_uniform);
  CHECK(nn::tanh_t::init == nn::init_scheme::glorot_uniform);
  CHECK(nn::relu_t::init == nn::init_scheme::he_uniform);
  CHECK(nn::leaky_relu_t::init == nn::init_scheme::he_uniform);
}

}  // namespace nn_activation_test
