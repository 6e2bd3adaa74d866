// head::cdan and head::cdan_e (head/cdan.hpp): two steps against PyTorch (vectors from
// tools/make_cdan_vectors.py, see tests/data/torch/README.md), and the whole step's gradients in
// double against finite differences of a plain reference of the CDAN losses that, as the head
// does, holds softmax(g) and the entropy weights fixed.
//
// With L = L_y + L_d and reversal weight λ the step must produce ∂L_y/∂θ_y for G_y, ∂L_d/∂θ_d for
// G_d and ∂L_y/∂θ_f − λ·∂L_d/∂θ_f for G_f, L_d differentiated with g and w held constant.
#include <dafuse/head/cdan.hpp>
#include <dafuse/step/train_step.hpp>

#include "../check.hpp"
#include "../reference_forward.hpp"
#include "../torch_vectors.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace head_cdan_test {

namespace df = dafuse;

namespace {

// ---- Against PyTorch ---------------------------------------------------------------------------

// The vectors' network: G_f 6→8→5 ReLU, G_y 5→3, G_d reads g ⊗ h: 15→4 ReLU →1.
using torch_net = df::nn::dann_net<df::nn::mlp<6, 8, 5, df::nn::relu>,
                                   df::nn::linear<5, 3>,
                                   df::nn::mlp<15, 4, 1, df::nn::relu>>;
template <class Head>
using torch_step = df::train_step<torch_net,
                                  df::loader::sync,
                                  df::precision::fp32,
                                  df::clip::none,
                                  Head,
                                  df::optim::sgd>;

std::vector<float> torch_layout(const std::string& name) {
  return df::test::to_dafuse_layout<torch_net>(df::test::load_vector(name),
                                               df::test::load_int_vector("cdan_param_shapes"));
}

template <class Head>
void check_against_torch(const std::string& variant) {
  const std::vector<float> h = df::test::load_vector("cdan_hyper");  // λ, lr, momentum, wd
  const df::fit_args args{.steps = 1000,
                          .batch = 4,
                          .lr = h[1],
                          .momentum = h[2],
                          .weight_decay = h[3],
                          .lambda_max = h[0]};
  torch_step<Head> step(args);
  const std::vector<float> initial = torch_layout("cdan_initial_params");
  std::copy(initial.begin(), initial.end(), step.parameters().begin());
  df::test::load_torch_batch(step, "cdan_");
  for (int k = 1; k <= 2; ++k) {
    CAPTURE(variant);
    CAPTURE(k);
    const std::string prefix = variant + "_step" + std::to_string(k) + "_";
    const std::vector<float> losses = df::test::load_vector(prefix + "losses");
    const df::step_report r = step.run();
    CHECK(r.label_loss == doctest::Approx(losses[0]).epsilon(1e-5));
    CHECK(r.domain_loss == doctest::Approx(losses[1]).epsilon(1e-5));
    CHECK(r.grad_norm == doctest::Approx(losses[2]).epsilon(1e-5));
    CHECK(r.lambda == doctest::Approx(args.lambda_max));
    const std::vector<float> grads = torch_layout(prefix + "grads");
    CHECK(df::test::max_relative_error(step.gradients(), std::span<const float>(grads)) < 1e-5);
    const std::vector<float> params = torch_layout(prefix + "params");
    CHECK(df::test::max_relative_error(std::span<const float>(step.parameters()),
                                       std::span<const float>(params)) < 1e-5);
  }
}

// ---- Against finite differences ----------------------------------------------------------------

// Smooth activations, so central differences are exact to O(h²); G_d reads 3 classes × 4 features.
using smooth_net = df::nn::dann_net<df::nn::mlp<5, 7, 4, df::nn::tanh>,
                                    df::nn::linear<4, 3>,
                                    df::nn::mlp<12, 6, 1, df::nn::sigmoid>>;
constexpr df::index_t batch = 5, rows = 2 * batch;
constexpr df::index_t classes = smooth_net::class_count, features = smooth_net::feature_width;

// The module of `params` whose parameters start at `offset`, as naive_forward reads it.
std::vector<double> module_params(const std::vector<double>& params,
                                  df::index_t offset,
                                  df::index_t count) {
  return {params.begin() + offset, params.begin() + offset + count};
}

// What the head holds fixed: each row's softmax g and (CDAN+E) weight w.
struct conditioning {
  std::vector<double> g, w;
};

// The CDAN losses of the plain reference at `params`, with g and w taken from `fixed` (or, when
// it is null, from these parameters' own logits, returned in `seen`).
struct losses {
  double label = 0, domain = 0;
};
losses reference_losses(const std::vector<double>& params,
                        const std::vector<double>& x,
                        const std::vector<std::int32_t>& labels,
                        bool entropy,
                        const conditioning* fixed,
                        conditioning* seen = nullptr) {
  using net = smooth_net;
  const std::vector<double> h =
      df::test::naive_forward<net::feature_stack>(
          module_params(params, net::features_offset, net::feature_stack::param_count), x, rows)
          .y.back();
  const std::vector<double> z =
      df::test::naive_forward<net::classifier_stack>(
          module_params(params, net::classifier_offset, net::classifier_stack::param_count), h,
          rows)
          .y.back();
  conditioning own;
  double label = 0, weight_sum = 0;
  for (df::index_t c = 0; c < rows; ++c) {
    const double* zc = &z[std::size_t(c * classes)];
    double zmax = zc[0], sum = 0, pz = 0;
    for (df::index_t k = 1; k < classes; ++k) zmax = std::max(zmax, zc[k]);
    for (df::index_t k = 0; k < classes; ++k) sum += std::exp(zc[k] - zmax);
    for (df::index_t k = 0; k < classes; ++k) {
      const double p = std::exp(zc[k] - zmax) / sum;
      own.g.push_back(p);
      pz += p * zc[k];
    }
    if (c < batch) label += std::log(sum) + zmax - zc[labels[std::size_t(c)]];
    const double entropy_c = std::log(sum) + zmax - pz;  // −Σ p log p
    own.w.push_back(entropy ? 1.0 + std::exp(-entropy_c) : 1.0);
    weight_sum += own.w.back();
  }
  for (double& w : own.w) w *= double(rows) / weight_sum;
  const conditioning& use = fixed ? *fixed : own;
  std::vector<double> joint(std::size_t(rows * classes * features));
  for (df::index_t c = 0; c < rows; ++c)
    for (df::index_t k = 0; k < classes; ++k)
      for (df::index_t j = 0; j < features; ++j)
        joint[std::size_t((c * classes + k) * features + j)] =
            use.g[std::size_t(c * classes + k)] * h[std::size_t(c * features + j)];
  const std::vector<double> d =
      df::test::naive_forward<net::discriminator_stack>(
          module_params(params, net::discriminator_offset, net::discriminator_stack::param_count),
          joint, rows)
          .y.back();
  double domain = 0;
  for (df::index_t c = 0; c < rows; ++c) {
    const double t = c >= batch ? 1.0 : 0.0, v = d[std::size_t(c)];
    domain +=
        use.w[std::size_t(c)] * (std::max(v, 0.0) - v * t + std::log1p(std::exp(-std::abs(v))));
  }
  if (seen) *seen = own;
  return {label / double(batch), domain / double(rows)};
}

template <class Head>
void check_gradients(double lambda) {
  constexpr bool entropy = Head::entropy_conditioning;
  using step_type = df::train_step<smooth_net, df::loader::sync, df::precision::fp64,
                                   df::clip::none, Head, df::optim::sgd>;
  step_type step(df::fit_args{.batch = batch, .seed = 3});
  df::counter_rng rng(7, df::rng_stream::user);
  auto xv = step.input();
  for (df::index_t i = 0; i < xv.size(); ++i) xv.data[i] = rng.normal<double>();
  for (auto& y : step.source_labels()) y = std::int32_t(rng.below(classes));
  const std::vector<double> x(xv.data, xv.data + xv.size());
  const std::vector<std::int32_t> labels(step.source_labels().begin(), step.source_labels().end());

  const df::step_report report = step.compute_gradients(lambda);
  const std::vector<double> analytic(step.gradients().begin(), step.gradients().end());
  std::vector<double> params(step.parameters().begin(), step.parameters().end());

  // The reference computes the step's own losses.
  conditioning fixed;
  const losses base = reference_losses(params, x, labels, entropy, nullptr, &fixed);
  CHECK(report.label_loss == doctest::Approx(base.label).epsilon(1e-12));
  CHECK(report.domain_loss == doctest::Approx(base.domain).epsilon(1e-12));

  const double h = 1e-6;
  std::vector<double> numeric(params.size(), 0.0);
  for (std::size_t i = 0; i < params.size(); ++i) {
    const double keep = params[i];
    params[i] = keep + h;
    const losses plus = reference_losses(params, x, labels, entropy, &fixed);
    params[i] = keep - h;
    const losses minus = reference_losses(params, x, labels, entropy, &fixed);
    params[i] = keep;
    const double d_label = (plus.label - minus.label) / (2 * h);
    const double d_domain = (plus.domain - minus.domain) / (2 * h);
    const auto j = df::index_t(i);
    if (j < smooth_net::classifier_offset)
      numeric[i] = d_label - lambda * d_domain;  // G_f: through the reversal
    else if (j < smooth_net::discriminator_offset)
      numeric[i] = d_label;  // G_y: g is held fixed, so L_d does not reach it
    else
      numeric[i] = d_domain;  // G_d
  }
  CHECK(df::test::max_relative_error(std::span<const double>(analytic),
                                     std::span<const double>(numeric)) < 1e-7);
}

}  // namespace

TEST_CASE("two CDAN SGD steps match PyTorch, softmax(g) detached as in the authors' code") {
  check_against_torch<df::head::cdan<df::schedule::constant>>("cdan");
}

TEST_CASE("two CDAN+E steps with entropy weights match PyTorch") {
  check_against_torch<df::head::cdan_e<df::schedule::constant>>("cdan_e");
}

TEST_CASE("the CDAN+E vectors differ from CDAN's by far more than the tolerance") {
  // Otherwise the CDAN+E comparison could not tell the weights were applied.
  for (const char* name : {"step1_grads", "step2_params"}) {
    CAPTURE(name);
    const std::vector<float> plain = df::test::load_vector(std::string("cdan_") + name);
    const std::vector<float> weighted = df::test::load_vector(std::string("cdan_e_") + name);
    CHECK(df::test::max_relative_error(std::span<const float>(plain),
                                       std::span<const float>(weighted)) > 3e-5);
  }
}

TEST_CASE("CDAN step gradients equal finite differences with softmax(g) held fixed") {
  check_gradients<df::head::cdan<df::schedule::constant>>(0.7);
}

TEST_CASE("CDAN+E step gradients equal finite differences with g and the weights held fixed") {
  check_gradients<df::head::cdan_e<df::schedule::constant>>(0.35);
}

TEST_CASE("CDAN with lambda = 0 leaves G_f to the label loss and still trains G_d") {
  check_gradients<df::head::cdan<df::schedule::constant>>(0.0);
}

}  // namespace head_cdan_test
