// SPDX-License-Identifier: Apache-2.0
// Steps whose feature extractor is an nn::conv_net: the whole fused step's gradients against
// central finite differences of its losses in double; eager_step against train_step (fp64 to
// 1e-12, fp32 to 1e-5) through eager_step_cases.hpp; the LeNet-like DANN of the issue in fp32 and
// bf16; bf16 gradients against fp64's; the same bits on the held team and on its caller.
#include "eager_step_cases.hpp"
#include "gradient_checks.hpp"

#include <dafuse/core/half.hpp>
#include <dafuse/nn/conv2d.hpp>
#include <dafuse/nn/lenet.hpp>

#include <cmath>
#include <span>
#include <vector>

namespace step_conv_step_test {

namespace {

namespace nn = df::nn;

// Smooth activations (tanh, sigmoid) so that finite differences are exact to O(h²); stride,
// padding, two channels, two pools.
using small_conv = nn::conv_net<nn::image<8, 8, 2>,
                                nn::conv2d<2, 3, 3, 1, 1, nn::tanh>,
                                nn::max_pool2d<2>,
                                nn::conv2d<3, 4, 2, 2, 0, nn::sigmoid>,
                                nn::flatten,
                                nn::dense<16, 6, nn::tanh>>;
using conv_dann =
    nn::dann_net<small_conv, nn::mlp<6, 5, 3, nn::tanh>, nn::mlp<6, 4, 1, nn::sigmoid>>;
// ReLU as the LeNet-like network, smaller.
using relu_conv = nn::conv_net<nn::image<10, 10, 1>,
                               nn::conv2d<1, 4, 3, 1, 1>,
                               nn::max_pool2d<2>,
                               nn::conv2d<4, 6, 3, 1, 1>,
                               nn::max_pool2d<2>,
                               nn::flatten,
                               nn::dense<24, 8, nn::relu>>;
using relu_conv_dann = nn::dann_net<relu_conv, nn::linear<8, 3>, nn::mlp<8, 6, 1, nn::relu>>;

// The network on the 16 × 16 JDA digits, padding 2 on both convolutions.
using lenet_dann = nn::digits_lenet_dann;

//! Pixels uniform in [0, 1), as images are.
template <class Step>
void fill_batch(Step& step) {
  df::test::fill_batch(step, [](df::counter_rng& rng) { return rng.uniform<double>(0.0, 1.0); });
}

using namespace eager_cases;
struct conv_sgd_fp64 : both<conv_dann, fp64, global_norm, dann, sgd> {
  static df::fit_args args() { return base_args(); }
};
struct conv_adam_fp32 : both<relu_conv_dann, fp32, none, dann, adam> {
  static df::fit_args args() {
    df::fit_args a = base_args();
    a.lr = 0.01f;
    return a;
  }
};
struct conv_source_only_fp64 : both<relu_conv_dann, fp64, per_module_norm, source_only, sgd> {
  static df::fit_args args() { return base_args(); }
};

}  // namespace

TEST_CASE("a conv DANN step's gradients equal finite differences through the reversal") {
  df::train_step<conv_dann, df::loader::sync, df::precision::fp64, df::clip::none,
                 df::head::dann<df::schedule::ganin>, df::optim::sgd>
      step(df::fit_args{.batch = 3, .seed = 3});
  fill_batch(step);
  df::test::check_step_gradients(step, 0.7);
}

TEST_CASE_TEMPLATE("eager_step trains a conv_net's weights as train_step does",
                   Case,
                   conv_sgd_fp64,
                   conv_adam_fp32,
                   conv_source_only_fp64) {
  check_trains_alike<Case>();
}

TEST_CASE("eager_step's raw gradients of a conv_net are train_step's (double)") {
  check_raw_gradients<conv_sgd_fp64>();
}

TEST_CASE("the LeNet-like network on 16x16 digits takes fp32 steps that lower its label loss") {
  // Source-only, so that the loss of one memorised batch falls steadily (the adversarial game
  // need not at this learning rate).
  using step_type =
      df::train_step<lenet_dann, df::loader::sync, df::precision::fp32, df::clip::none,
                     df::head::source_only<df::schedule::ganin>, df::optim::sgd>;
  CHECK(lenet_dann::feature_stack::param_count == 832 + 38448 + 76900 + 10100);
  step_type step(df::fit_args{.steps = 30, .batch = 16, .lr = 0.01f, .momentum = 0.9f, .seed = 1});
  fill_batch(step);
  const df::step_report first = step.run();
  df::step_report last = first;
  for (int k = 0; k < 29; ++k) last = step.run();  // the same batch: it is memorised
  CHECK(std::isfinite(first.label_loss));
  CHECK(last.label_loss < 0.5 * first.label_loss);
}

TEST_CASE(
    "the LeNet step holds its state, its batch, each activation once and one patch matrix a "
    "thread") {
  // docs/benchmarks.md's breakdown of the lenet configuration (B = 64, eval_chunk = B), in
  // values; tests/step/allocation_test.cpp checks memory_bytes() against what is allocated.
  using step_type = df::train_step<lenet_dann, df::loader::sync, df::precision::fp32,
                                   df::clip::global_norm, df::head::dann<>, df::optim::sgd>;
  using stack = lenet_dann::feature_stack;
  constexpr df::index_t b = 64, rows = 2 * b;
  const step_type step(df::fit_args{.batch = b, .eval_chunk = b});
  // Parameters, gradients and momentum; the batch [256, rows] and the labels [B] (int32).
  const df::index_t state = 3 * lenet_dann::param_count + 256 * rows + b;
  // G_f: each y once (8192 + 2048 + 3072 + 768 + 100 + 100 values a sample) and the δy of the
  // dense layers only (the image layers' δy are written over their y); the convolutions' patch
  // matrix for each thread and a partial weight gradient for each thread but the first.
  static_assert(stack::activation_count == 14280);
  const df::index_t features =
      (14280 + 200) * rows +
      df::backend::host::conv_scratch_elements<stack>(df::backend::host::available_threads());
  // G_y on the source rows, G_d on all: each y with its δy.
  const df::index_t classifier = 2 * 10 * b, discriminator = 2 * (100 + 1) * rows;
  // Evaluation runs in the training scratch: nothing more.
  CHECK(step.memory_bytes() == std::size_t(4 * (state + features + classifier + discriminator)));
}

TEST_CASE(
    "a conv step whose jobs all run on its caller (a busy machine) gives the held team's bits") {
  // The convolutions are dealt in one part per thread the step was built for (backend/host/
  // conv.hpp); the pacer may run every part on the calling thread, and the parts' partial weight
  // gradients are added in part order either way: the same norms, parameters and state.
  using step_type = df::train_step<relu_conv_dann, df::loader::sync, df::precision::fp32,
                                   df::clip::global_norm, df::head::dann<>, df::optim::sgd>;
  const df::fit_args args{.batch = 8, .lr = 0.05f, .momentum = 0.9f, .max_grad_norm = 0.5f};
  const auto trained = [&](const char* pacing) {
    const df::test::environment_variable env("DAFUSE_TEAM_PACING", pacing);
    const df::test::thread_count threads(2);
    step_type s(args);
    std::vector<double> out;  // the norms, then parameters and state (exactly, as doubles)
    for (std::uint32_t k = 0; k < 3; ++k) {
      df::test::fill_batch(s,
                           [k](df::counter_rng& rng) { return rng.uniform<double>(0.0, 1.0 + k); });
      out.push_back(s.run().grad_norm);
    }
    out.insert(out.end(), s.parameters().begin(), s.parameters().end());
    out.insert(out.end(), s.optimizer_state().begin(), s.optimizer_state().end());
    return out;
  };
  const std::vector<double> held = trained("parallel");
  CHECK(trained("parallel") == held);
  CHECK(trained("serial") == held);
  CHECK(trained("adaptive") == held);
}

TEST_CASE("a bf16 conv step stores bf16 gradients close to the fp64 step's") {
  // precision::bf16 runs the convolutions' products on the bf16 kernel (fp32 sums) and stores
  // every activation and gradient as a bf16 value. Smooth activations: a ReLU kink crossed by a
  // rounding would change whole columns, and this would measure kinks, not rounding.
  const df::fit_args args{.batch = 6, .lr = 0.05f, .lambda_max = 0.5f, .seed = 4};
  const auto gradients = [&](auto step) {
    fill_batch(step);
    step.compute_gradients(0.5);
    return std::vector<double>(step.gradients().begin(), step.gradients().end());
  };
  using dann = df::head::dann<df::schedule::ganin>;
  const std::vector<double> fp64 =
      gradients(df::train_step<conv_dann, df::loader::sync, df::precision::fp64, df::clip::none,
                               dann, df::optim::sgd>(args));
  using bf16_step = df::train_step<conv_dann, df::loader::sync, df::precision::bf16, df::clip::none,
                                   dann, df::optim::sgd>;
  const std::vector<double> bf16 = gradients(bf16_step(args));
  // bf16 keeps 8 significant bits (relative rounding 2^-9 ≈ 2e-3), compounded over the layers,
  // relative to the largest gradient; fp32's error would be below 1e-6.
  const double error = df::test::max_relative_error(std::span(bf16), std::span(fp64));
  CHECK(error < 3e-2);
  CHECK(error > 1e-5);  // rounding did happen
  for (double g : bf16) CHECK(double(df::round_to_bf16(float(g))) == g);
}

TEST_CASE(
    "the LeNet-like network takes bf16 steps that lower its label loss, the same bits on "
    "every run and on its caller") {
  using step_type =
      df::train_step<lenet_dann, df::loader::sync, df::precision::bf16, df::clip::global_norm,
                     df::head::source_only<df::schedule::ganin>, df::optim::sgd>;
  const df::fit_args args{
      .steps = 30, .batch = 16, .lr = 0.01f, .momentum = 0.9f, .max_grad_norm = 5.0f, .seed = 1};
  const auto trained = [&](const char* pacing, int steps, std::vector<float>* losses,
                           df::index_t batch = 16) {
    const df::test::environment_variable env("DAFUSE_TEAM_PACING", pacing);
    const df::test::thread_count threads(2);
    df::fit_args a = args;
    a.batch = batch;
    step_type step(a);
    fill_batch(step);
    for (int k = 0; k < steps; ++k) {
      const df::step_report r = step.run();  // the same batch: it is memorised
      if (losses) losses->push_back(float(r.label_loss));
    }
    return std::vector<float>(step.parameters().begin(), step.parameters().end());
  };
  std::vector<float> losses;
  const std::vector<float> held = trained("parallel", 30, &losses);
  CHECK(std::isfinite(losses.front()));
  CHECK(losses.back() < 0.5f * losses.front());
  // B = 64 + 64, as the benchmark: each part's chunk is a whole one (40 samples of conv1, 10240
  // columns), which the products' workspace must hold.
  CHECK(trained("parallel", 3, nullptr, 64) == trained("serial", 3, nullptr, 64));
}

}  // namespace step_conv_step_test
