// SPDX-License-Identifier: Apache-2.0
// The whole fp64 step's gradients against central finite differences of its losses, shared by the
// dense (gradient_check_test.cpp) and convolutional (conv_step_test.cpp) step tests.
//
// With total loss L = L_y + L_d and reversal weight λ, the step must produce
//   ∂L_y/∂θ_y for G_y,   ∂L_d/∂θ_d for G_d,   ∂L_y/∂θ_f − λ·∂L_d/∂θ_f for G_f
// (without a trained G_d: ∂L_y/∂θ for G_f and G_y, nothing for G_d).
#pragma once
#include <dafuse/core/rng.hpp>

#include "../check.hpp"

#include <cmath>
#include <cstdint>
#include <span>
#include <vector>

namespace dafuse::test {

//! Fills the step's batch from a fixed seed: each input value by draw(rng), labels uniform.
template <class Step, class Draw>
void fill_batch(Step& step, Draw draw) {
  counter_rng rng(7, rng_stream::user);
  auto x = step.input();
  for (index_t i = 0; i < x.size(); ++i) x.data[i] = draw(rng);
  for (auto& y : step.source_labels()) y = std::int32_t(rng.below(Step::class_count));
}

//! Checks the step's gradients (central differences, h = 1e-6, relative error < 1e-7) and that
//! the reported norm is the norm of exactly the trained parameters' gradients.
template <class Step>
void check_step_gradients(Step& step, double lambda) {
  using Net = typename Step::net_type;
  step.compute_gradients(lambda);
  const std::vector<double> analytic(step.gradients().begin(), step.gradients().end());
  const double h = 1e-6;
  auto params = step.parameters();
  std::vector<double> numeric(params.size(), 0.0);
  for (std::size_t i = 0; i < params.size(); ++i) {
    const double keep = params[i];
    params[i] = keep + h;
    const step_report plus = step.compute_gradients(lambda);
    params[i] = keep - h;
    const step_report minus = step.compute_gradients(lambda);
    params[i] = keep;
    const double d_label = (plus.label_loss - minus.label_loss) / (2 * h);
    const double d_domain = (plus.domain_loss - minus.domain_loss) / (2 * h);
    const auto j = index_t(i);
    if (j < Net::classifier_offset)
      numeric[i] = d_label - lambda * d_domain;  // G_f: through the reversal
    else if (j < Net::discriminator_offset)
      numeric[i] = d_label;  // G_y
    else
      numeric[i] = Step::trains_discriminator ? d_domain : 0.0;  // G_d (untouched without it)
  }
  const std::size_t trained = std::size_t(Step::trained_param_count);
  CHECK(max_relative_error(std::span(analytic).first(trained),
                           std::span<const double>(numeric).first(trained)) < 1e-7);
  double sq = 0;
  for (std::size_t i = 0; i < trained; ++i) sq += analytic[i] * analytic[i];
  CHECK(step.compute_gradients(lambda).grad_norm == doctest::Approx(std::sqrt(sq)).epsilon(1e-12));
}

}  // namespace dafuse::test
