// What the tests of the heads without a discriminator share (coral, mmd, mcc and their sums):
// two SGD steps against PyTorch (vectors from tools/make_head_vectors.py, see
// tests/data/torch/README.md), and the whole step's gradients in double against central
// differences of a plain reference of the losses.
//
// With L = L_y + λ·L_h (L_h the head's loss) the step must produce ∂L/∂θ for G_f and G_y, and
// leave G_d, which these heads neither run nor train, without a gradient.
#pragma once
#include <dafuse/step/train_step.hpp>

#include "../check.hpp"
#include "../reference_forward.hpp"
#include "../torch_vectors.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <span>
#include <string>
#include <vector>

namespace dafuse::test::heads {

// ---- Against PyTorch ---------------------------------------------------------------------------

// The vectors' network: G_f 6→8→5 ReLU, G_y 5→3, G_d 5→4 ReLU →1 (never run).
using torch_net =
    nn::dann_net<nn::mlp<6, 8, 5, nn::relu>, nn::linear<5, 3>, nn::mlp<5, 4, 1, nn::relu>>;
template <class Head>
using torch_step =
    train_step<torch_net, loader::sync, precision::fp32, clip::none, Head, optim::sgd>;

inline std::vector<float> torch_layout(const std::string& name) {
  return to_dafuse_layout<torch_net>(load_vector("heads_" + name),
                                     load_int_vector("heads_param_shapes"));
}

//! Two SGD steps of Head (whose schedule must be constant) from the vectors' initial parameters
//! against variant `variant`'s vectors, to 1e-5.
template <class Head>
void check_against_torch(const std::string& variant) {
  const std::vector<float> h = load_vector("heads_hyper");  // lr, momentum, wd
  const float lambda = load_vector("heads_" + variant + "_lambda")[0];
  const fit_args args{.steps = 1000,
                      .batch = 4,
                      .lr = h[0],
                      .momentum = h[1],
                      .weight_decay = h[2],
                      .lambda_max = lambda};
  torch_step<Head> step(args);
  const std::vector<float> initial = torch_layout("initial_params");
  std::copy(initial.begin(), initial.end(), step.parameters().begin());
  load_torch_batch(step, "heads_");
  for (int k = 1; k <= 2; ++k) {
    CAPTURE(variant);
    CAPTURE(k);
    const std::string prefix = variant + "_step" + std::to_string(k) + "_";
    const std::vector<float> losses = load_vector("heads_" + prefix + "losses");
    const step_report r = step.run();
    CHECK(r.label_loss == doctest::Approx(losses[0]).epsilon(1e-5));
    // A discrepancy near 0 is compared in absolute terms, at the gradients' scale.
    CHECK(std::abs(r.domain_loss - double(losses[1])) <=
          1e-5 * std::max(1.0, std::abs(double(losses[1]))));
    CHECK(r.grad_norm == doctest::Approx(losses[2]).epsilon(1e-5));
    CHECK(r.lambda == doctest::Approx(lambda));
    const std::vector<float> grads = torch_layout(prefix + "grads");
    CHECK(max_relative_error(step.gradients(), std::span<const float>(grads)) < 1e-5);
    const std::vector<float> params = torch_layout(prefix + "params");
    CHECK(max_relative_error(std::span<const float>(step.parameters()),
                             std::span<const float>(params)) < 1e-5);
  }
}

//! Variant `variant`'s step-1 gradients differ from those without a head by far more than the
//! tolerance (otherwise the comparison could not tell that the head's gradient was applied).
inline void check_vectors_see_the_head(const std::string& variant) {
  const std::vector<float> plain = load_vector("heads_plain_step1_grads");
  const std::vector<float> with_head = load_vector("heads_" + variant + "_step1_grads");
  CHECK(max_relative_error(std::span<const float>(with_head), std::span<const float>(plain)) >
        1e-3);
}

// ---- Against finite differences ----------------------------------------------------------------

// Smooth activations, so central differences are exact to O(h²). G_d is never run.
using smooth_net =
    nn::dann_net<nn::mlp<5, 7, 4, nn::tanh>, nn::linear<4, 3>, nn::mlp<4, 6, 1, nn::sigmoid>>;
inline constexpr index_t classes = smooth_net::class_count;
inline constexpr index_t features = smooth_net::feature_width;

//! The features h [features, 2B] and logits z [classes, 2B] of all rows, by explicit loops.
struct reference_outputs {
  std::vector<double> h, z;
};
inline reference_outputs reference_forward(const std::vector<double>& params,
                                           const std::vector<double>& x,
                                           index_t rows) {
  using net = smooth_net;
  const auto module = [&](index_t offset, index_t count) {
    return std::vector<double>(params.begin() + offset, params.begin() + offset + count);
  };
  reference_outputs r;
  r.h = naive_forward<net::feature_stack>(
            module(net::features_offset, net::feature_stack::param_count), x, rows)
            .y.back();
  r.z = naive_forward<net::classifier_stack>(
            module(net::classifier_offset, net::classifier_stack::param_count), r.h, rows)
            .y.back();
  return r;
}

//! Mean softmax cross-entropy of the first `batch` columns of z.
inline double reference_label_loss(const std::vector<double>& z,
                                   const std::vector<std::int32_t>& labels,
                                   index_t batch) {
  double sum = 0;
  for (index_t c = 0; c < batch; ++c) {
    const double* zc = &z[std::size_t(c * classes)];
    double zmax = zc[0], total = 0;
    for (index_t k = 1; k < classes; ++k) zmax = std::max(zmax, zc[k]);
    for (index_t k = 0; k < classes; ++k) total += std::exp(zc[k] - zmax);
    sum += std::log(total) + zmax - zc[labels[std::size_t(c)]];
  }
  return sum / double(batch);
}

//! The head's loss L_h from the reference outputs of all 2B rows.
using head_loss = std::function<double(const reference_outputs&)>;

//! The fp64 step's gradients with weight λ equal central differences of L_y + λ·L_h (L_h from
//! `loss`, which holds fixed whatever the head treats as a constant), G_d's are zero, and the
//! report's losses are the reference's.
template <class Head>
void check_gradients(double lambda, index_t batch, const head_loss& loss) {
  using step_type =
      train_step<smooth_net, loader::sync, precision::fp64, clip::none, Head, optim::sgd>;
  const index_t rows = 2 * batch;
  step_type step(fit_args{.batch = batch, .seed = 3});
  counter_rng rng(7, rng_stream::user);
  auto xv = step.input();
  for (index_t i = 0; i < xv.size(); ++i)
    xv.data[i] = rng.normal<double>() + (i >= xv.size() / 2 ? 0.4 : 0.0);
  for (auto& y : step.source_labels()) y = std::int32_t(rng.below(classes));
  const std::vector<double> x(xv.data, xv.data + xv.size());
  const std::vector<std::int32_t> labels(step.source_labels().begin(), step.source_labels().end());

  const step_report report = step.compute_gradients(lambda);
  const std::vector<double> analytic(step.gradients().begin(), step.gradients().end());
  std::vector<double> params(step.parameters().begin(), step.parameters().end());

  const auto losses = [&](const std::vector<double>& p) {
    const reference_outputs out = reference_forward(p, x, rows);
    return std::pair{reference_label_loss(out.z, labels, batch), loss(out)};
  };
  const auto [label, head] = losses(params);
  CHECK(report.label_loss == doctest::Approx(label).epsilon(1e-12));
  CHECK(std::abs(report.domain_loss - head) <= 1e-12 * std::max(1.0, std::abs(head)));

  const double step_size = 1e-6;
  std::vector<double> numeric(params.size(), 0.0);
  double head_part = 0;  // the largest |λ·∂L_h/∂θ|: the head must be seen in the comparison
  for (std::size_t i = 0; i < std::size_t(smooth_net::discriminator_offset); ++i) {
    const double keep = params[i];
    params[i] = keep + step_size;
    const auto plus = losses(params);
    params[i] = keep - step_size;
    const auto minus = losses(params);
    params[i] = keep;
    const double from_head = lambda * (plus.second - minus.second) / (2 * step_size);
    numeric[i] = (plus.first - minus.first) / (2 * step_size) + from_head;
    head_part = std::max(head_part, std::abs(from_head));
  }
  if (lambda > 0) {
    double largest = 0;
    for (const double g : numeric) largest = std::max(largest, std::abs(g));
    CHECK(head_part > 1e-2 * largest);
  }
  CHECK(max_relative_error(std::span<const double>(analytic), std::span<const double>(numeric)) <
        1e-7);
}

}  // namespace dafuse::test::heads
