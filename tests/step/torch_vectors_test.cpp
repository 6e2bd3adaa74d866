// One DANN step against PyTorch: weights, batch and expected losses, gradients and updated
// weights come from tools/make_step_vectors.py (see tests/data/torch/README.md).
#include <dafuse/head/dann.hpp>
#include <dafuse/step/train_step.hpp>

#include <dafuse/data/npy.hpp>

#include "../check.hpp"
#include "../torch_vectors.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace step_torch_vectors_test {

namespace df = dafuse;

namespace {

// The network of the vectors: G_f 6→8→5 ReLU, G_y 5→3, G_d 5→4 ReLU →1.
using torch_net = df::nn::dann_net<df::nn::mlp<6, 8, 5, df::nn::relu>,
                                   df::nn::linear<5, 3>,
                                   df::nn::mlp<5, 4, 1, df::nn::relu>>;
template <class Clip, class Optim = df::optim::sgd, class Precision = df::precision::fp32>
using torch_step = df::train_step<torch_net,
                                  df::loader::sync,
                                  Precision,
                                  Clip,
                                  df::head::dann<df::schedule::constant>,
                                  Optim>;

std::vector<float> load(const std::string& name) {
  return df::test::load_vector(name);
}

// A flat PyTorch parameter vector of torch_net in dafuse's layout.
std::vector<float> to_dafuse_layout(const std::vector<float>& torch_flat) {
  return df::test::to_dafuse_layout<torch_net>(torch_flat,
                                               df::test::load_int_vector("param_shapes"));
}

// The first set of vectors: SGD with λ, lr, momentum, wd, max_norm from hyper.npy.
df::fit_args sgd_args(bool nesterov) {
  const std::vector<float> hyper = load("hyper");  // λ, lr, momentum, wd, max_norm, steps
  return {.steps = 1000,
          .batch = 4,
          .lr = hyper[1],
          .momentum = hyper[2],
          .nesterov = nesterov,
          .weight_decay = hyper[3],
          .max_grad_norm = hyper[4],
          .lambda_max = hyper[0]};
}

// The later variants: <variant>_hyper.npy = lr, β₁ or momentum, wd, β₂, ε, clip_a, clip_b, and
// the learning-rate multipliers of G_f, G_y, G_d.
df::fit_args variant_args(const std::string& variant) {
  const std::vector<float> h = load(variant + "_hyper");
  return {.steps = 1000,
          .batch = 4,
          .lr = h[0],
          .momentum = h[1],
          .weight_decay = h[2],
          .beta1 = h[1],
          .beta2 = h[3],
          .eps = h[4],
          .lr_mult = {h[7], h[8], h[9]},
          .max_grad_norm = h[5],
          .max_grad_norm_discriminator = h[6],
          .max_grad_value = h[5],
          .lambda_max = load("hyper")[0]};
}

// Loads the vectors' initial parameters and batch into `step`.
template <class Step>
void load_initial_state(Step& step) {
  const std::vector<float> initial = to_dafuse_layout(load("initial_params"));
  REQUIRE(initial.size() == std::size_t(torch_net::param_count));
  std::copy(initial.begin(), initial.end(), step.parameters().begin());

  df::test::load_torch_batch(step, "");
}

template <class Clip, class Optim = df::optim::sgd>
void check_variant(const std::string& variant, const df::fit_args& args) {
  torch_step<Clip, Optim> step(args);
  load_initial_state(step);

  for (int k = 1; k <= 2; ++k) {
    CAPTURE(variant);
    CAPTURE(k);
    const std::string prefix = variant + "_step" + std::to_string(k) + "_";
    const std::vector<float> losses = load(prefix + "losses");
    const df::step_report r = step.run();
    CHECK(r.label_loss == doctest::Approx(losses[0]).epsilon(1e-5));
    CHECK(r.domain_loss == doctest::Approx(losses[1]).epsilon(1e-5));
    CHECK(r.grad_norm == doctest::Approx(losses[2]).epsilon(1e-5));
    CHECK(r.lambda == doctest::Approx(args.lambda_max));
    if (variant == "per_module") {
      const std::vector<float> norms = load(prefix + "module_norms");
      CHECK(r.task_grad_norm == doctest::Approx(norms[0]).epsilon(1e-5));
      CHECK(r.discriminator_grad_norm == doctest::Approx(norms[1]).epsilon(1e-5));
    }

    const std::vector<float> grads = to_dafuse_layout(load(prefix + "grads"));
    CHECK(df::test::max_relative_error(step.gradients(), std::span<const float>(grads)) < 1e-5);
    const std::vector<float> params = to_dafuse_layout(load(prefix + "params"));
    CHECK(df::test::max_relative_error(std::span<const float>(step.parameters()),
                                       std::span<const float>(params)) < 1e-5);
  }
}

}  // namespace

TEST_CASE("two DANN SGD steps with momentum and weight decay match PyTorch") {
  check_variant<df::clip::none>("noclip", sgd_args(false));
}

TEST_CASE("two DANN SGD steps with global-norm clipping match PyTorch's clip_grad_norm_") {
  check_variant<df::clip::global_norm>("clip", sgd_args(false));
}

TEST_CASE("two DANN SGD steps with Nesterov momentum match PyTorch") {
  check_variant<df::clip::none>("nesterov", sgd_args(true));
}

TEST_CASE("two DANN Adam steps with L2 weight decay match torch.optim.Adam") {
  check_variant<df::clip::none, df::optim::adam>("adam", variant_args("adam"));
}

TEST_CASE("two DANN AdamW steps with decoupled decay and norm clipping match torch.optim.AdamW") {
  check_variant<df::clip::global_norm, df::optim::adamw>("adamw", variant_args("adamw"));
}

TEST_CASE("per-module learning-rate multipliers match PyTorch parameter groups") {
  check_variant<df::clip::none>("sgd_lr_mult", variant_args("sgd_lr_mult"));
}

TEST_CASE("clip::value matches torch.nn.utils.clip_grad_value_") {
  check_variant<df::clip::value>("clip_value", variant_args("clip_value"));
}

TEST_CASE("clip::per_module_norm matches clip_grad_norm_ over G_f+G_y and over G_d apart") {
  check_variant<df::clip::per_module_norm>("per_module", variant_args("per_module"));
}

namespace {

// Mixed-precision vectors (tools/make_precision_vectors.py): PyTorch autograd with every stored
// value rounded to the 16-bit format, and GradScaler's protocol. Each step reports its losses,
// the unscaled pre-clip norm (∞ on overflow), the scale S it used and whether it was skipped.
template <class Precision>
void check_precision_variant(const std::string& variant, int steps) {
  const std::vector<float> h = load(variant + "_hyper");
  // lr, momentum, weight_decay, max_norm, init_scale, growth, backoff, interval
  const df::fit_args args{.steps = 1000,
                          .batch = 4,
                          .lr = h[0],
                          .momentum = h[1],
                          .weight_decay = h[2],
                          .max_grad_norm = h[3],
                          .lambda_max = load("hyper")[0],
                          .loss_scale_init = h[4],
                          .loss_scale_growth = h[5],
                          .loss_scale_backoff = h[6],
                          .loss_scale_interval = df::index_t(h[7])};
  torch_step<df::clip::global_norm, df::optim::sgd, Precision> step(args);
  load_initial_state(step);
  for (int k = 1; k <= steps; ++k) {
    CAPTURE(variant);
    CAPTURE(k);
    const std::string prefix = variant + "_step" + std::to_string(k) + "_";
    const std::vector<float> expected = load(prefix + "losses");
    const df::step_report r = step.run();
    // Both sides store the same 16-bit values and differ only in the order of fp32 sums (here by
    // ~3e-8). The bound leaves room for a sum that lands on a rounding boundary and rounds the
    // other way on another machine (one 16-bit ulp in one δ moves the weights by ~1e-5), while a
    // missed rounding point or clipping of scaled gradients moves them by 1e-3 or more.
    const double eps = 1e-4;
    CHECK(r.label_loss == doctest::Approx(expected[0]).epsilon(eps));
    CHECK(r.domain_loss == doctest::Approx(expected[1]).epsilon(eps));
    CHECK(r.loss_scale == double(expected[3]));
    CHECK(r.skipped == (expected[4] != 0));
    if (r.skipped) {
      CHECK_FALSE(std::isfinite(r.grad_norm));
    } else {
      CHECK(r.grad_norm == doctest::Approx(expected[2]).epsilon(eps));
    }
    const std::vector<float> params = to_dafuse_layout(load(prefix + "params"));
    CHECK(df::test::max_relative_error(std::span<const float>(step.parameters()),
                                       std::span<const float>(params)) < eps);
  }
}

}  // namespace

TEST_CASE("two bf16 DANN steps with norm clipping match PyTorch with bf16 rounding") {
  check_precision_variant<df::precision::bf16>("bf16", 2);
}

TEST_CASE("fp16 with a dynamic loss scale skips, backs off and grows as GradScaler does") {
  check_precision_variant<df::precision::fp16<df::loss_scale::dynamic>>("fp16", 8);
}

}  // namespace step_torch_vectors_test
