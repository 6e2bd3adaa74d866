// SPDX-License-Identifier: Apache-2.0
// Tests for policy/clip.hpp: the clip multipliers against a naive clip_grad_norm_ on the
// concatenated gradient, and the argument checks.
#include <dafuse/policy/clip.hpp>
#include "../check.hpp"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

namespace policy_clip_test {

namespace {

using dafuse::clip_scales;
using dafuse::fit_args;
using dafuse::grad_norms;

//! Gradients of the three modules, as the step would produce them.
struct module_grads {
  std::vector<double> features, classifier, discriminator;
};

double sum_sq(const std::vector<double>& g) {
  double s = 0;
  for (const double x : g) s += x * x;
  return s;
}

grad_norms norms_of(const module_grads& g) {
  return {sum_sq(g.features), sum_sq(g.classifier), sum_sq(g.discriminator)};
}

//! torch.nn.utils.clip_grad_norm_(max_norm, norm_type=2) written out on the concatenation of all
//! gradients: total = ‖concat(g)‖₂, coef = max_norm / (total + 1e-6), clamped to at most 1.
double naive_clip_coefficient(const module_grads& g, double max_norm) {
  std::vector<double> all = g.features;
  all.insert(all.end(), g.classifier.begin(), g.classifier.end());
  all.insert(all.end(), g.discriminator.begin(), g.discriminator.end());
  double total = 0;
  for (const double x : all) total += x * x;
  total = std::sqrt(total);
  const double coef = max_norm / (total + 1e-6);
  return coef > 1 ? 1 : coef;
}

module_grads example_grads(double scale) {
  module_grads g{{0.3, -1.2, 0.05, 2.0}, {-0.7, 0.4}, {1.1, -0.25, 0.6}};
  for (auto* v : {&g.features, &g.classifier, &g.discriminator})
    for (double& x : *v) x *= scale;
  return g;
}

fit_args with_max_norm(float max_norm) {
  fit_args a;
  a.max_grad_norm = max_norm;
  return a;
}

}  // namespace

TEST_CASE("grad_norms::global is the L2 norm over every module together") {
  CHECK(grad_norms{9, 16, 0}.global() == 5.0);
  CHECK(grad_norms{1, 4, 4}.global() == 3.0);
  CHECK(grad_norms{}.global() == 0.0);
  const module_grads g = example_grads(1.0);
  double naive = 0;
  for (const auto* v : {&g.features, &g.classifier, &g.discriminator})
    for (const double x : *v) naive += x * x;
  CHECK(norms_of(g).global() == doctest::Approx(std::sqrt(naive)).epsilon(1e-15));
}

TEST_CASE("clip::none leaves every gradient unchanged") {
  for (const double scale : {0.0, 1e-3, 1.0, 1e6}) {
    const clip_scales s = dafuse::clip::none::scales(norms_of(example_grads(scale)), fit_args{});
    CHECK(s.task == 1.0);
    CHECK(s.discriminator == 1.0);
  }
  // It reads no argument, so it accepts whatever max_grad_norm holds.
  CHECK(bool(dafuse::clip::none::can_implement(with_max_norm(0.0f))));
  CHECK(bool(dafuse::clip::none::can_implement(with_max_norm(std::nanf("")))));
}

TEST_CASE("global_norm leaves gradients below max_norm unchanged") {
  const module_grads g = example_grads(0.1);  // ‖g‖ ≈ 0.28
  REQUIRE(norms_of(g).global() < 1.0);
  const clip_scales s = dafuse::clip::global_norm::scales(norms_of(g), with_max_norm(1.0f));
  CHECK(s.task == 1.0);
  CHECK(s.discriminator == 1.0);
  CHECK(naive_clip_coefficient(g, 1.0) == 1.0);

  const clip_scales zero =
      dafuse::clip::global_norm::scales(norms_of(example_grads(0.0)), with_max_norm(0.5f));
  CHECK(zero.task == 1.0);
  CHECK(zero.discriminator == 1.0);
}

TEST_CASE("global_norm scales gradients above max_norm by max_norm / (norm + 1e-6)") {
  for (const double scale : {1.0, 3.0, 250.0}) {
    for (const float max_norm : {0.5f, 1.0f, 2.0f}) {
      CAPTURE(scale);
      CAPTURE(max_norm);
      const module_grads g = example_grads(scale);
      REQUIRE(norms_of(g).global() > max_norm);
      const double expected = naive_clip_coefficient(g, max_norm);
      const clip_scales s = dafuse::clip::global_norm::scales(norms_of(g), with_max_norm(max_norm));
      CHECK(s.task == doctest::Approx(expected).epsilon(1e-14));
      CHECK(s.discriminator == doctest::Approx(expected).epsilon(1e-14));
      CHECK(s.task < 1.0);
      // After scaling, the total norm is max_norm (less the 1e-6 guard).
      CHECK(s.task * norms_of(g).global() == doctest::Approx(double(max_norm)).epsilon(1e-5));
    }
  }
}

TEST_CASE("global_norm at exactly max_norm scales by max_norm / (max_norm + 1e-6), as PyTorch") {
  const clip_scales s = dafuse::clip::global_norm::scales(grad_norms{4, 0, 0}, with_max_norm(2));
  CHECK(s.task == doctest::Approx(2.0 / (2.0 + 1e-6)).epsilon(1e-15));
  CHECK(s.task < 1.0);
}

TEST_CASE("global_norm accepts a finite positive max_grad_norm") {
  CHECK(bool(dafuse::clip::global_norm::can_implement(fit_args{})));
  CHECK(bool(dafuse::clip::global_norm::can_implement(with_max_norm(1e-3f))));
  CHECK(bool(dafuse::clip::global_norm::can_implement(with_max_norm(1e6f))));
}

TEST_CASE("global_norm rejects a max_grad_norm that is zero, negative, NaN or infinite") {
  for (const float bad : {0.0f, -0.0f, -1.0f, std::numeric_limits<float>::quiet_NaN(),
                          std::numeric_limits<float>::infinity()}) {
    CAPTURE(bad);
    const dafuse::status s = dafuse::clip::global_norm::can_implement(with_max_norm(bad));
    CHECK_FALSE(bool(s));
    CHECK(s.message.find("fit_args.max_grad_norm") != std::string::npos);
    CHECK(s.message.find("clip::none") != std::string::npos);  // the way out
  }
}

TEST_CASE("clip::value keeps the scales at 1 and bounds every gradient by max_grad_value") {
  fit_args a;
  a.max_grad_value = 0.25f;
  const clip_scales s = dafuse::clip::value::scales(norms_of(example_grads(10.0)), a);
  CHECK(s.task == 1.0);
  CHECK(s.discriminator == 1.0);
  CHECK(s.limit == doctest::Approx(0.25));
  CHECK(std::isinf(dafuse::clip::none::scales({}, a).limit));
  a.max_grad_value = 0;
  CHECK(dafuse::clip::value::can_implement(a).message.find("fit_args.max_grad_value") !=
        std::string::npos);
}

TEST_CASE("clip::per_module_norm clips G_f+G_y and G_d against their own norms") {
  grad_norms n;
  n.features_sq = 9;  // task norm √(9 + 16) = 5
  n.classifier_sq = 16;
  n.discriminator_sq = 0.01;  // discriminator norm 0.1
  fit_args a;
  a.max_grad_norm = 2.0f;
  a.max_grad_norm_discriminator = 0.5f;
  CHECK(n.task() == doctest::Approx(5.0));
  CHECK(n.discriminator() == doctest::Approx(0.1));
  clip_scales s = dafuse::clip::per_module_norm::scales(n, a);
  CHECK(s.task == doctest::Approx(2.0 / (5.0 + 1e-6)).epsilon(1e-15));
  CHECK(s.discriminator == 1.0);  // 0.1 < 0.5: untouched
  a.max_grad_norm_discriminator = 0.05f;
  s = dafuse::clip::per_module_norm::scales(n, a);
  CHECK(s.discriminator == doctest::Approx(0.05 / (0.1 + 1e-6)).epsilon(1e-6));
  CHECK(std::isinf(s.limit));
  a.max_grad_norm_discriminator = -1;
  CHECK(dafuse::clip::per_module_norm::can_implement(a).message.find(
            "fit_args.max_grad_norm_discriminator") != std::string::npos);
}

}  // namespace policy_clip_test
