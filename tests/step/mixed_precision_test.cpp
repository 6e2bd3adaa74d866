// SPDX-License-Identifier: Apache-2.0
// Mixed precision in train_step: stored values are 16-bit values, the step unscales before it
// clips (so max_norm means the same as in fp32), an overflow skips the update and leaves the
// parameters and the optimizer state untouched, and bf16/fp16 gradients stay close to fp32's.
#include <dafuse/head/dann.hpp>
#include <dafuse/step/train_step.hpp>

#include "../check.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

namespace step_mixed_precision_test {

namespace df = dafuse;

namespace {
// tanh, not ReLU: with a kink, a 16-bit rounding that moves a pre-activation across 0 changes a
// whole column's gradient, and the comparisons with fp32 would measure kinks, not rounding.
using net = df::nn::dann_net<df::nn::mlp<12, 24, 16, df::nn::tanh>,
                             df::nn::linear<16, 4>,
                             df::nn::mlp<16, 12, 1, df::nn::tanh>>;
template <class Precision, class Clip = df::clip::none, class Optim = df::optim::sgd>
using step_t = df::train_step<net,
                              df::loader::sync,
                              Precision,
                              Clip,
                              df::head::dann<df::schedule::constant>,
                              Optim>;
using fp16_fixed = df::precision::fp16<df::loss_scale::fixed<1024>>;
using fp16_dynamic = df::precision::fp16<df::loss_scale::dynamic>;

// A reproducible batch; `magnitude` scales the features (1e6 overflows fp16's activations).
template <class Step>
void fill_batch(Step& s, std::uint32_t draw, float magnitude = 1.0f) {
  df::counter_rng rng(17, df::rng_stream::user, draw);
  auto x = s.input();
  for (df::index_t i = 0; i < x.size(); ++i) x.data[i] = magnitude * rng.normal<float>();
  for (auto& y : s.source_labels()) y = std::int32_t(rng.below(Step::class_count));
}

const df::fit_args base_args{.steps = 100, .batch = 16, .lr = 0.1f, .lambda_max = 0.5f, .seed = 3};

// Parameters after one step of `Step` from the shared initialisation, minus the initial ones.
template <class Step>
std::vector<float> one_update(const df::fit_args& args, df::step_report* report = nullptr) {
  Step step(args);
  const std::vector<float> before(step.parameters().begin(), step.parameters().end());
  fill_batch(step, 1);
  const df::step_report r = step.run();
  if (report) *report = r;
  std::vector<float> delta(before.size());
  for (std::size_t i = 0; i < delta.size(); ++i) delta[i] = step.parameters()[i] - before[i];
  return delta;
}

template <class Step>
bool gradients_are_representable() {
  Step step(base_args);
  fill_batch(step, 2);
  step.run();
  return std::all_of(step.gradients().begin(), step.gradients().end(),
                     [](float g) { return df::round_to<Step::compute_format>(g) == g; });
}
}  // namespace

TEST_CASE("mixed precision stores its gradients as 16-bit values") {
  CHECK(gradients_are_representable<step_t<df::precision::bf16>>());
  CHECK(gradients_are_representable<step_t<fp16_fixed>>());
  CHECK(gradients_are_representable<step_t<fp16_dynamic>>());
}

TEST_CASE("bf16 and fp16 gradients are close to fp32's") {
  const auto gradients = [](auto step) {
    fill_batch(step, 3);
    const df::step_report r = step.compute_gradients(0.5);
    std::vector<float> g(step.gradients().begin(), step.gradients().end());
    for (float& v : g) v = float(v / r.loss_scale);  // fp16's are scaled
    return g;
  };
  const std::vector<float> fp32 = gradients(step_t<df::precision::fp32>(base_args));
  const std::vector<float> bf16 = gradients(step_t<df::precision::bf16>(base_args));
  const std::vector<float> fp16 = gradients(step_t<fp16_fixed>(base_args));
  // bf16 keeps 8 significant bits (relative rounding 2^-9 ≈ 2e-3), fp16 11 (2^-12 ≈ 2.4e-4);
  // errors compound over the layers, relative to the largest gradient.
  const double bf16_error =
      df::test::max_relative_error(std::span<const float>(bf16), std::span<const float>(fp32));
  const double fp16_error =
      df::test::max_relative_error(std::span<const float>(fp16), std::span<const float>(fp32));
  CHECK(bf16_error < 3e-2);
  CHECK(fp16_error < 4e-3);
  CHECK(fp16_error < bf16_error);  // the finer format is closer
  CHECK(fp16_error > 0);           // and rounding did happen
}

TEST_CASE("fp16 with a loss scale unscales before it clips: the update matches fp32's") {
  // max_grad_norm well below the gradient norm, so clipping is active; on scaled gradients it
  // would shrink the update 1024 times more than fp32 does.
  df::fit_args args = base_args;
  args.max_grad_norm = 0.05f;
  df::step_report r32, r16;
  const std::vector<float> fp32 =
      one_update<step_t<df::precision::fp32, df::clip::global_norm>>(args, &r32);
  const std::vector<float> fp16 = one_update<step_t<fp16_fixed, df::clip::global_norm>>(args, &r16);
  REQUIRE(r32.grad_norm > 4 * args.max_grad_norm);
  CHECK(r16.loss_scale == 1024.0);
  CHECK(r16.grad_norm == doctest::Approx(r32.grad_norm).epsilon(4e-3));  // unscaled norm
  CHECK(df::test::max_relative_error(std::span<const float>(fp16), std::span<const float>(fp32)) <
        4e-3);

  // The same for clip::value: the clamp applies to unscaled gradients. Some gradients are
  // clamped and some are not (clamping scaled ones would clamp nearly all). The bound is looser:
  // an unclamped gradient just under the bound carries its own relative rounding error.
  args.max_grad_value = 0.05f;
  const std::vector<float> v32 = one_update<step_t<df::precision::fp32, df::clip::value>>(args);
  const std::vector<float> v16 = one_update<step_t<fp16_fixed, df::clip::value>>(args);
  const auto clamped = std::count_if(v32.begin(), v32.end(), [&](float d) {
    return std::fabs(d) >= 0.999f * args.lr * args.max_grad_value;
  });
  CHECK(clamped > 0);
  CHECK(clamped < std::ptrdiff_t(v32.size()) / 2);
  CHECK(df::test::max_relative_error(std::span<const float>(v16), std::span<const float>(v32)) <
        1e-2);
}

TEST_CASE("an fp16 overflow skips the step and leaves parameters and optimizer state intact") {
  df::fit_args args = base_args;
  args.momentum = 0.9f;
  using step_type = step_t<fp16_fixed>;
  step_type interrupted(args), plain(args);
  fill_batch(interrupted, 1);
  fill_batch(plain, 1);
  CHECK_FALSE(interrupted.run().skipped);
  CHECK_FALSE(plain.run().skipped);

  // Features of 1e6 do not fit fp16 (largest 65504): the forward overflows, so do the gradients.
  const std::vector<float> before(interrupted.parameters().begin(), interrupted.parameters().end());
  fill_batch(interrupted, 2, 1e6f);
  const df::step_report r = interrupted.run();
  CHECK(r.skipped);
  CHECK_FALSE(std::isfinite(r.grad_norm));
  CHECK(r.loss_scale == 1024.0);
  CHECK(interrupted.loss_scale().scale == 1024.0);  // a fixed scale stays
  CHECK(std::equal(before.begin(), before.end(), interrupted.parameters().begin()));

  // The next step continues as if the skipped one had not happened: the momentum buffer was not
  // touched (a constant schedule, so the step count does not matter).
  fill_batch(interrupted, 3);
  fill_batch(plain, 3);
  CHECK_FALSE(interrupted.run().skipped);
  CHECK_FALSE(plain.run().skipped);
  CHECK(std::equal(plain.parameters().begin(), plain.parameters().end(),
                   interrupted.parameters().begin()));
}

TEST_CASE("a dynamic loss scale backs off on overflow and grows after loss_scale_interval steps") {
  df::fit_args args = base_args;
  args.loss_scale_init = 256.0f;
  args.loss_scale_interval = 3;
  step_t<fp16_dynamic> step(args);
  const auto run = [&](float magnitude) {
    fill_batch(step, 1, magnitude);
    return step.run();
  };
  CHECK(run(1e6f).skipped);
  CHECK(step.loss_scale().scale == 128.0);
  for (int i = 0; i < 3; ++i) CHECK(run(1.0f).loss_scale == 128.0);
  CHECK(step.loss_scale().scale == 256.0);  // grown after 3 finite steps
  CHECK(run(1.0f).loss_scale == 256.0);
  CHECK(step.loss_scale().good_steps == 1);
  // initialize_parameters starts the scaler over.
  step.initialize_parameters(args.seed);
  CHECK(step.loss_scale().scale == 256.0);
  CHECK(step.loss_scale().good_steps == 0);
}

TEST_CASE("a mixed-precision step checks the loss scaler's arguments") {
  CHECK_THROWS_WITH_AS(step_t<fp16_dynamic>(df::fit_args{.loss_scale_backoff = 2.0f}),
                       doctest::Contains("dafuse: fit_args.loss_scale_backoff: expected a factor "
                                         "in (0, 1)"),
                       df::error);
  // fp32 ignores the scaler's fields.
  CHECK(step_t<df::precision::fp32>::can_implement({.loss_scale_backoff = 2.0f}));
}

TEST_CASE("prediction in bf16 rounds the rows and weights it reads") {
  step_t<df::precision::bf16> mixed(base_args);
  step_t<df::precision::fp32> full(base_args);
  df::counter_rng rng(23, df::rng_stream::user);
  std::vector<float> rows(200 * 12);
  for (float& v : rows) v = rng.normal<float>();
  std::vector<std::int32_t> a(200), b(200);
  mixed.predict(rows.data(), 200, a.data());
  full.predict(rows.data(), 200, b.data());
  // Same initial weights: bf16 rounding changes only near-ties between logits.
  long same = 0;
  for (std::size_t i = 0; i < a.size(); ++i) same += a[i] == b[i];
  CHECK(same >= 180);
}

}  // namespace step_mixed_precision_test
