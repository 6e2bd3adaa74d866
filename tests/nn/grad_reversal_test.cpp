// SPDX-License-Identifier: Apache-2.0
// Tests for nn/grad_reversal.hpp: identity forward, −λ·dy backward (Ganin & Lempitsky 2015), and
// what that means against a finite difference of the forward.
#include <dafuse/nn/grad_reversal.hpp>
#include "../check.hpp"

#include <cmath>

namespace nn_grad_reversal_test {

namespace {
namespace nn = dafuse::nn;
}  // namespace

TEST_CASE_TEMPLATE("grad_reversal forward is the identity", T, float, double) {
  const nn::grad_reversal<T> r{T(0.75)};
  for (T x : {T(-3.5), T(0), T(1e-20), T(2.25), T(1e20)}) CHECK(r.forward(x) == x);
}

TEST_CASE_TEMPLATE("grad_reversal backward is minus lambda times the incoming gradient",
                   T,
                   float,
                   double) {
  for (T lambda : {T(0.25), T(1), T(3)}) {
    const nn::grad_reversal<T> r{lambda};
    CHECK(r.backward_scale() == -lambda);
    for (T dy : {T(-2), T(0.5), T(7)}) {
      CHECK(r.backward(dy) == -lambda * dy);
      CHECK(r.backward(dy) == r.backward_scale() * dy);
    }
  }
}

TEST_CASE("grad_reversal defaults to lambda one") {
  const nn::grad_reversal<double> r;
  CHECK(r.lambda == 1.0);
  CHECK(r.backward(2.5) == -2.5);
  CHECK(r.backward_scale() == -1.0);
}

TEST_CASE("grad_reversal with lambda zero stops the gradient") {
  const nn::grad_reversal<double> r{0.0};
  CHECK(r.backward(5.0) == 0.0);
  CHECK(r.backward(-1e30) == 0.0);
  CHECK(r.backward_scale() == 0.0);
  CHECK(r.forward(5.0) == 5.0);
}

TEST_CASE("grad_reversal works in constant expressions") {
  constexpr nn::grad_reversal<float> r{0.5f};
  constexpr float forward = r.forward(3.0f);
  constexpr float backward = r.backward(2.0f);
  constexpr float scale = r.backward_scale();
  CHECK(forward == 3.0f);
  CHECK(backward == -1.0f);
  CHECK(scale == -0.5f);
}

TEST_CASE("grad_reversal backward is minus lambda times the finite-difference derivative") {
  // L(y) = sin(y) + y² downstream of the reversal y = R_λ(x). The forward makes L(R_λ(x)) = L(x),
  // so a finite difference in x measures the true derivative dL/dx; the reversal instead hands
  // the layer below −λ·dL/dy (Ganin & Lempitsky 2015).
  constexpr double h = 1e-6;
  for (double lambda : {0.1, 1.0, 2.5}) {
    const nn::grad_reversal<double> r{lambda};
    for (double x : {-1.3, 0.2, 0.9}) {
      auto loss = [&](double v) {
        const double y = r.forward(v);
        return std::sin(y) + y * y;
      };
      const double fd = (loss(x + h) - loss(x - h)) / (2 * h);
      const double dy = std::cos(r.forward(x)) + 2 * r.forward(x);
      INFO("lambda = " << lambda << ", x = " << x);
      CHECK(r.backward(dy) == doctest::Approx(-lambda * fd).epsilon(1e-8));
    }
  }
}

}  // namespace nn_grad_reversal_test
