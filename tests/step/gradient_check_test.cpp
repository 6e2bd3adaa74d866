// The whole step's gradients against central finite differences of its losses, in double.
//
// With total loss L = L_y + L_d and reversal weight λ, the step must produce
//   ∂L_y/∂θ_y for G_y,   ∂L_d/∂θ_d for G_d,   ∂L_y/∂θ_f − λ·∂L_d/∂θ_f for G_f
// (source-only: ∂L_y/∂θ for G_f and G_y, nothing for G_d).
#include <dafuse/head/dann.hpp>
#include <dafuse/head/source_only.hpp>
#include <dafuse/step/train_step.hpp>

#include "../check.hpp"

#include <vector>

namespace df = dafuse;

namespace {

// Smooth activations everywhere so finite differences are exact to O(h²); one ReLU network too.
using smooth_net = df::nn::dann_net<df::nn::mlp<5, 7, 4, df::nn::tanh>,
                                    df::nn::linear<4, 3>,
                                    df::nn::mlp<4, 6, 1, df::nn::sigmoid>>;
using leaky_net = df::nn::dann_net<df::nn::mlp<5, 6, 4, df::nn::leaky_relu_t{0.2f}>,
                                   df::nn::mlp<4, 5, 3, df::nn::tanh>,
                                   df::nn::mlp<4, 3, 1, df::nn::leaky_relu_t{0.2f}>>;

template <class Net, class Head>
using fp64_step = df::
    train_step<Net, df::loader::sync, df::precision::fp64, df::clip::none, Head, df::optim::sgd>;

template <class Step>
void fill_batch(Step& step) {
  df::counter_rng rng(7, df::rng_stream::user);
  auto x = step.input();
  for (df::index_t i = 0; i < x.size(); ++i) x.data[i] = rng.normal<double>();
  for (auto& y : step.source_labels()) y = std::int32_t(rng.below(Step::class_count));
}

template <class Net, class Head>
void check_step_gradients(double lambda) {
  using step_type = fp64_step<Net, Head>;
  step_type step(df::fit_args{.batch = 5, .seed = 3});
  fill_batch(step);
  step.compute_gradients(lambda);
  const std::vector<double> analytic(step.gradients().begin(), step.gradients().end());

  const double h = 1e-6;
  auto params = step.parameters();
  std::vector<double> numeric(params.size(), 0.0);
  for (std::size_t i = 0; i < params.size(); ++i) {
    const double keep = params[i];
    params[i] = keep + h;
    const df::step_report plus = step.compute_gradients(lambda);
    params[i] = keep - h;
    const df::step_report minus = step.compute_gradients(lambda);
    params[i] = keep;
    const double d_label = (plus.label_loss - minus.label_loss) / (2 * h);
    const double d_domain = (plus.domain_loss - minus.domain_loss) / (2 * h);
    const auto j = df::index_t(i);
    if (j < Net::classifier_offset)
      numeric[i] = d_label - lambda * d_domain;  // G_f: through the reversal
    else if (j < Net::discriminator_offset)
      numeric[i] = d_label;  // G_y
    else
      numeric[i] = step_type::trains_discriminator ? d_domain : 0.0;  // G_d (untouched without it)
  }
  const std::size_t trained = std::size_t(step_type::trained_param_count);
  CHECK(df::test::max_relative_error(std::span(analytic).first(trained),
                                     std::span<const double>(numeric).first(trained)) < 1e-7);
  // The reported norm is the norm of exactly those gradients.
  double sq = 0;
  for (std::size_t i = 0; i < trained; ++i) sq += analytic[i] * analytic[i];
  CHECK(step.compute_gradients(lambda).grad_norm == doctest::Approx(std::sqrt(sq)).epsilon(1e-12));
}

}  // namespace

TEST_CASE("DANN step gradients equal finite differences through the reversal (tanh, sigmoid)") {
  check_step_gradients<smooth_net, df::head::dann<df::schedule::ganin>>(0.7);
}

TEST_CASE("DANN step gradients equal finite differences with leaky ReLU and an mlp classifier") {
  check_step_gradients<leaky_net, df::head::dann<df::schedule::constant>>(0.35);
}

TEST_CASE("with lambda = 0 the feature gradient ignores the discriminator") {
  check_step_gradients<smooth_net, df::head::dann<df::schedule::ganin>>(0.0);
}

TEST_CASE("source-only step gradients equal finite differences of the label loss") {
  check_step_gradients<smooth_net, df::head::source_only<>>(0.0);
}
