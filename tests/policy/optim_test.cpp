// SPDX-License-Identifier: Apache-2.0
// Tests for policy/optim.hpp: optim::sgd against a naive transcription of torch.optim.SGD, and
// its argument checks.
#include <dafuse/policy/optim.hpp>
#include "../check.hpp"

#include <cmath>
#include <cstddef>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace policy_optim_test {

namespace {

using dafuse::fit_args;
using dafuse::index_t;
using dafuse::optim::sgd;

//! torch.optim.SGD.step() for one parameter tensor, written out as in PyTorch's _single_tensor_sgd
//! (torch/optim/sgd.py): the momentum buffer is None until the first step that uses it.
struct torch_sgd {
  double momentum, dampening, weight_decay;
  bool nesterov;
  std::optional<std::vector<double>> buf;

  void step(std::vector<double>& params, std::vector<double> grad, double lr) {
    for (std::size_t i = 0; i < params.size(); ++i) {
      double d_p = grad[i];
      if (weight_decay != 0) d_p = d_p + weight_decay * params[i];
      grad[i] = d_p;
    }
    if (momentum != 0) {
      if (!buf) {
        buf = grad;  // torch.clone(d_p).detach()
      } else {
        for (std::size_t i = 0; i < params.size(); ++i)
          (*buf)[i] = momentum * (*buf)[i] + (1 - dampening) * grad[i];
      }
      for (std::size_t i = 0; i < params.size(); ++i)
        grad[i] = nesterov ? grad[i] + momentum * (*buf)[i] : (*buf)[i];
    }
    for (std::size_t i = 0; i < params.size(); ++i) params[i] += -lr * grad[i];
  }
};

//! A gradient that depends on the parameters and the step, as a real loss's would.
std::vector<double> gradient_at(const std::vector<double>& params, int t) {
  std::vector<double> g(params.size());
  for (std::size_t i = 0; i < params.size(); ++i)
    g[i] = 0.5 * params[i] + std::cos(double(i) + 0.7 * t);
  return g;
}

//! Learning rate of step t, as a schedule would give it.
double lr_at(int t) {
  return 0.1 * std::pow(1.0 + 0.5 * t, -0.75);
}

fit_args sgd_args(float momentum, float dampening, float weight_decay, bool nesterov) {
  fit_args a;
  a.momentum = momentum;
  a.dampening = dampening;
  a.weight_decay = weight_decay;
  a.nesterov = nesterov;
  return a;
}

//! Runs `steps` steps of optim::sgd in precision T and of the reference in double; returns the
//! largest relative difference of the parameters.
template <class T>
double run_against_reference(const fit_args& a, int steps) {
  const std::vector<double> start = {0.5, -1.25, 2.0, 0.0, -0.3, 1.7, -2.2};
  std::vector<double> expected = start;
  torch_sgd reference{a.momentum, a.dampening, a.weight_decay, a.nesterov, std::nullopt};

  std::vector<T> params(start.begin(), start.end());
  std::vector<T> state(start.size(), T(0));
  for (int t = 0; t < steps; ++t) {
    // Both sides see the gradient of their own current parameters.
    const std::vector<double> g_ref = gradient_at(expected, t);
    const std::vector<double> g = gradient_at(std::vector<double>(params.begin(), params.end()), t);
    reference.step(expected, g_ref, lr_at(t));
    const sgd::coefficients<T> c = sgd::make<T>(a, lr_at(t), index_t(t));
    for (std::size_t i = 0; i < params.size(); ++i)
      sgd::update<T>(index_t(i), T(g[i]), params.data(), state.data(), index_t(1), c);
  }
  // The parameters must have moved, or the comparison says nothing.
  REQUIRE(std::abs(expected[1] - start[1]) > 1e-3);
  return dafuse::test::max_relative_error(std::span<const T>(params),
                                          std::span<const double>(expected));
}

const fit_args sgd_configurations[] = {
    sgd_args(0.0f, 0.0f, 0.0f, false),    // plain SGD
    sgd_args(0.0f, 0.0f, 5e-2f, false),   // weight decay only
    sgd_args(0.9f, 0.0f, 0.0f, false),    // heavy ball
    sgd_args(0.9f, 0.25f, 1e-2f, false),  // dampening and weight decay
    sgd_args(0.9f, 0.0f, 1e-2f, true),    // Nesterov
    sgd_args(0.5f, 0.0f, 0.0f, true),     // Nesterov, smaller momentum
};

}  // namespace

TEST_CASE("sgd::make copies the arguments and marks only step 0 as the first") {
  const fit_args a = sgd_args(0.75f, 0.125f, 0.5f, true);
  const sgd::coefficients<double> c0 = sgd::make<double>(a, 0.25, 0);
  CHECK(c0.lr == 0.25);
  CHECK(c0.momentum == 0.75);
  CHECK(c0.dampening == 0.125);
  CHECK(c0.weight_decay == 0.5);
  CHECK(c0.nesterov);
  CHECK(c0.first);
  CHECK_FALSE(sgd::make<double>(a, 0.25, 1).first);
  CHECK_FALSE(sgd::make<float>(a, 0.25, 7).first);
}

TEST_CASE("sgd follows torch.optim.SGD over five steps in double") {
  for (const fit_args& a : sgd_configurations) {
    CAPTURE(a.momentum);
    CAPTURE(a.dampening);
    CAPTURE(a.weight_decay);
    CAPTURE(a.nesterov);
    CHECK(run_against_reference<double>(a, 5) < 1e-13);
  }
}

TEST_CASE("sgd in float stays within rounding of the double reference") {
  for (const fit_args& a : sgd_configurations) {
    CAPTURE(a.momentum);
    CAPTURE(a.dampening);
    CAPTURE(a.weight_decay);
    CAPTURE(a.nesterov);
    CHECK(run_against_reference<float>(a, 5) < 1e-5);
  }
}

TEST_CASE("sgd starts the momentum buffer at the first gradient, weight decay included") {
  // Values exact in binary, so every intermediate is exact and the checks can be equalities.
  const fit_args a = sgd_args(0.5f, 0.5f, 0.25f, false);
  double params[1] = {2.0}, state[1] = {123.0};
  sgd::update<double>(0, 1.0, params, state, 1, sgd::make<double>(a, 0.5, 0));
  // d_p = 1 + 0.25·2 = 1.5; b = d_p (no dampening on the first step); θ = 2 − 0.5·1.5.
  CHECK(state[0] == 1.5);
  CHECK(params[0] == 1.25);
  sgd::update<double>(0, 1.0, params, state, 1, sgd::make<double>(a, 0.5, 1));
  // d_p = 1 + 0.25·1.25 = 1.3125; b = 0.5·1.5 + (1 − 0.5)·1.3125 = 1.40625; θ = 1.25 − 0.5·b.
  CHECK(state[0] == 1.40625);
  CHECK(params[0] == 0.546875);
}

TEST_CASE("sgd without momentum neither reads nor writes the momentum state") {
  for (const float wd : {0.0f, 0.1f}) {
    CAPTURE(wd);
    const fit_args a = sgd_args(0.0f, 0.3f, wd, false);
    std::vector<float> params = {1.0f, -2.0f, 3.0f};
    // A NaN in the state would reach the parameters if it were read.
    std::vector<float> state = {std::numeric_limits<float>::quiet_NaN(), 7.0f, -7.0f};
    for (index_t t = 0; t < 3; ++t) {
      const sgd::coefficients<float> c = sgd::make<float>(a, 0.1, t);
      for (index_t i = 0; i < 3; ++i)
        sgd::update<float>(i, 0.5f, params.data(), state.data(), 1, c);
    }
    CHECK(std::isnan(state[0]));
    CHECK(state[1] == 7.0f);
    CHECK(state[2] == -7.0f);
    for (const float p : params) CHECK(std::isfinite(p));
    CHECK(params[0] != 1.0f);
  }
}

TEST_CASE("sgd accepts PyTorch's defaults and valid momentum settings") {
  CHECK(bool(sgd::can_implement(fit_args{})));
  CHECK(bool(sgd::can_implement(sgd_args(0.9f, 0.1f, 5e-4f, false))));
  CHECK(bool(sgd::can_implement(sgd_args(0.9f, 0.0f, 5e-4f, true))));
}

TEST_CASE("sgd rejects bad momentum, weight decay, dampening and Nesterov settings by field") {
  struct bad_case {
    fit_args args;
    const char* field;
  };
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const bad_case cases[] = {
      {sgd_args(-0.1f, 0.0f, 0.0f, false), "fit_args.momentum"},
      {sgd_args(nan, 0.0f, 0.0f, false), "fit_args.momentum"},
      {sgd_args(inf, 0.0f, 0.0f, false), "fit_args.momentum"},
      {sgd_args(0.9f, 0.0f, -1e-4f, false), "fit_args.weight_decay"},
      {sgd_args(0.9f, 0.0f, nan, false), "fit_args.weight_decay"},
      {sgd_args(0.9f, inf, 0.0f, false), "fit_args.dampening"},
      {sgd_args(0.0f, 0.0f, 0.0f, true), "fit_args.nesterov"},  // Nesterov without momentum
      {sgd_args(0.9f, 0.1f, 0.0f, true), "fit_args.nesterov"},  // Nesterov with dampening
  };
  for (const bad_case& c : cases) {
    CAPTURE(c.field);
    CAPTURE(c.args.momentum);
    CAPTURE(c.args.dampening);
    CAPTURE(c.args.weight_decay);
    const dafuse::status s = sgd::can_implement(c.args);
    CHECK_FALSE(bool(s));
    CHECK(s.message.find(c.field) != std::string::npos);
  }
}

}  // namespace policy_optim_test
