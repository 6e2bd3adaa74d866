// train_step: argument checks, what each head trains, schedules, loaders agree, prediction.
#include <dafuse/head/dann.hpp>
#include <dafuse/head/source_only.hpp>
#include <dafuse/step/train_step.hpp>

#include <dafuse/data/batcher.hpp>

#include "../check.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace step_train_step_test {

namespace df = dafuse;

namespace {
using net = df::nn::dann_net<df::nn::mlp<4, 8, df::nn::relu>,
                             df::nn::linear<8, 3>,
                             df::nn::mlp<8, 6, 1, df::nn::relu>>;
template <class Head, class Loader = df::loader::sync, class Clip = df::clip::none>
using step_t = df::train_step<net, Loader, df::precision::fp32, Clip, Head, df::optim::sgd>;
using dann_step = step_t<df::head::dann<df::schedule::ganin>>;
using source_only_step = step_t<df::head::source_only<>>;

template <class Step>
void random_batch(Step& s, std::uint32_t draw) {
  df::counter_rng rng(11, df::rng_stream::user, draw);
  auto x = s.input();
  for (df::index_t i = 0; i < x.size(); ++i) x.data[i] = rng.normal<float>();
  for (auto& y : s.source_labels()) y = std::int32_t(rng.below(Step::class_count));
}

df::data::dataset toy(df::data::domain side, float shift) {
  df::counter_rng rng(5, df::rng_stream::synthetic_data, side == df::data::domain::source);
  df::data::host_array<float> x{{40, 4}, std::vector<float>(160)};
  std::vector<std::int32_t> y(40);
  for (std::size_t i = 0; i < 40; ++i) {
    y[i] = std::int32_t(i % 3);
    for (std::size_t k = 0; k < 4; ++k) x.values[i * 4 + k] = rng.normal<float>() + shift + y[i];
  }
  return df::data::make_dataset(side == df::data::domain::source ? "toy source" : "toy target",
                                side, std::move(x), std::move(y));
}
}  // namespace

TEST_CASE("can_implement names the field and the expectation") {
  const auto message = [](df::fit_args a) { return dann_step::can_implement(a).message; };
  CHECK(message({}).empty());
  CHECK(message({.batch = 0}).find("fit_args.batch") != std::string::npos);
  CHECK(message({.steps = 0}).find("fit_args.steps") != std::string::npos);
  CHECK(message({.lr = -1}).find("fit_args.lr") != std::string::npos);
  CHECK(message({.lr = NAN}).find("fit_args.lr") != std::string::npos);
  CHECK(message({.lambda_max = -1}).find("fit_args.lambda_max") != std::string::npos);
  CHECK(message({.nesterov = true}).find("fit_args.nesterov") != std::string::npos);
  CHECK(step_t<df::head::dann<>, df::loader::sync, df::clip::global_norm>::can_implement(
            {.max_grad_norm = 0})
            .message.find("fit_args.max_grad_norm") != std::string::npos);
  CHECK_THROWS_WITH_AS(dann_step(df::fit_args{.batch = -3}),
                       doctest::Contains("dafuse: fit_args.batch: expected at least 1"), df::error);
}

TEST_CASE("a label outside [0, classes) is an error, not a silent wrong gradient") {
  dann_step s(df::fit_args{.batch = 4});
  random_batch(s, 0);
  s.source_labels()[2] = 3;
  const std::vector<float> before(s.parameters().begin(), s.parameters().end());
  CHECK_THROWS_WITH_AS(s.run(), doctest::Contains("source_labels()[2]: expected a class in [0, 3)"),
                       df::error);
  CHECK(std::equal(before.begin(), before.end(), s.parameters().begin()));
}

TEST_CASE("a step that holds a thread team gives a label error back and trains on after it") {
  // Products of 2·512·512·64 FLOP split among the threads, so run() holds one OpenMP team
  // (backend/host/team.hpp) and the label check throws on the team's first thread: the error
  // must reach the caller with the team released, and the step must go on as if it had not been.
  using wide_net = df::nn::dann_net<df::nn::mlp<512, 512, df::nn::relu>, df::nn::linear<512, 3>,
                                    df::nn::mlp<512, 512, 1, df::nn::relu>>;
  using wide_step = df::train_step<wide_net, df::loader::resident, df::precision::fp32,
                                   df::clip::none, df::head::dann<>, df::optim::sgd>;
  const df::fit_args args{.batch = 32, .lr = 0.05f, .momentum = 0.9f};
  wide_step failed(args), clean(args);
  random_batch(failed, 0);
  random_batch(clean, 0);
  const std::vector<float> before(failed.parameters().begin(), failed.parameters().end());
  const std::int32_t label = failed.source_labels()[5];
  failed.source_labels()[5] = -1;
  CHECK_THROWS_WITH_AS(
      failed.run(), doctest::Contains("source_labels()[5]: expected a class in [0, 3)"), df::error);
  CHECK(std::equal(before.begin(), before.end(), failed.parameters().begin()));
  failed.source_labels()[5] = label;
  for (int k = 0; k < 2; ++k) {
    failed.run();
    clean.run();
  }
  CHECK(std::equal(clean.parameters().begin(), clean.parameters().end(),
                   failed.parameters().begin()));
  CHECK(std::equal(clean.optimizer_state().begin(), clean.optimizer_state().end(),
                   failed.optimizer_state().begin()));
}

TEST_CASE("a step whose jobs all run on its caller (a busy machine) gives the held team's bits") {
  // The pacer (backend/host/team.hpp) may run a step's jobs on the calling thread alone; the
  // jobs loop over the parts the step was built with, so parameters, optimizer state and the
  // global norm's sums are the same bits as on the held team.
  using wide_net = df::nn::dann_net<df::nn::mlp<512, 512, df::nn::relu>, df::nn::linear<512, 3>,
                                    df::nn::mlp<512, 512, 1, df::nn::relu>>;
  using wide_step = df::train_step<wide_net, df::loader::resident, df::precision::fp32,
                                   df::clip::global_norm, df::head::dann<>, df::optim::sgd>;
  const df::fit_args args{.batch = 32, .lr = 0.05f, .momentum = 0.9f, .max_grad_norm = 0.5f};
  const auto trained = [&](const char* pacing) {
    const df::test::environment_variable env("DAFUSE_TEAM_PACING", pacing);
    const df::test::thread_count threads(2);
    wide_step s(args);
    std::vector<double> out;  // the norms, then parameters and state (exactly, as doubles)
    for (std::uint32_t k = 0; k < 3; ++k) {
      random_batch(s, k);
      out.push_back(s.run().grad_norm);
    }
    out.insert(out.end(), s.parameters().begin(), s.parameters().end());
    out.insert(out.end(), s.optimizer_state().begin(), s.optimizer_state().end());
    return out;
  };
  const std::vector<double> held = trained("parallel");
  CHECK(trained("serial") == held);
  CHECK(trained("adaptive") == held);
}

TEST_CASE("source-only steps leave the discriminator's parameters untouched") {
  source_only_step s(df::fit_args{.batch = 4, .lr = 0.1f, .weight_decay = 0.1f});
  const std::vector<float> before(s.parameters().begin(), s.parameters().end());
  for (std::uint32_t k = 0; k < 3; ++k) {
    random_batch(s, k);
    const df::step_report r = s.run();
    CHECK(r.domain_loss == 0);
    CHECK(r.lambda == 0);
  }
  const auto after = s.parameters();
  CHECK(std::equal(before.begin() + net::discriminator_offset, before.end(),
                   after.begin() + net::discriminator_offset));
  CHECK_FALSE(
      std::equal(before.begin(), before.begin() + net::discriminator_offset, after.begin()));
  CHECK(s.input().cols == 4);  // only source rows
}

TEST_CASE("the padding before G_y and G_d stays zero through initialisation and training") {
  // G_f holds 4·8 + 8 = 40 values and G_y 8·3 + 3 = 27: 8 and 5 values of padding follow them.
  static_assert(net::classifier_offset == 48 && net::discriminator_offset == 80);
  const auto padding_is_zero = [](std::span<const float> values) {
    for (df::index_t i = net::feature_stack::param_count; i < net::classifier_offset; ++i)
      if (values[std::size_t(i)] != 0.0f) return false;
    for (df::index_t i = net::classifier_offset + net::classifier_stack::param_count;
         i < net::discriminator_offset; ++i)
      if (values[std::size_t(i)] != 0.0f) return false;
    return true;
  };
  // Weight decay and momentum would move any padding value that was not zero.
  dann_step s(df::fit_args{.batch = 4, .lr = 0.1f, .momentum = 0.9f, .weight_decay = 0.1f});
  CHECK(padding_is_zero(s.parameters()));
  for (std::uint32_t k = 0; k < 3; ++k) {
    random_batch(s, k);
    s.run();
  }
  CHECK(padding_is_zero(s.parameters()));
  CHECK(padding_is_zero(s.gradients()));
  CHECK(padding_is_zero(s.optimizer_state()));
  // Re-drawing the weights zeroes padding a caller wrote through parameters().
  s.parameters()[std::size_t(net::classifier_offset - 1)] = 1.0f;
  s.initialize_parameters(7);
  CHECK(padding_is_zero(s.parameters()));
}

TEST_CASE("the step follows Ganin's schedules of lambda and learning rate") {
  dann_step s(df::fit_args{.steps = 10, .batch = 2, .lr = 0.5f, .lambda_max = 0.8f});
  for (int t = 0; t < 10; ++t) {
    random_batch(s, std::uint32_t(t));
    const df::step_report r = s.run();
    const double p = t / 10.0;
    CHECK(r.lambda == doctest::Approx(0.8 * (2 / (1 + std::exp(-10 * p)) - 1)));
    CHECK(r.lr == doctest::Approx(0.5 / std::pow(1 + 10 * p, 0.75)));
  }
  CHECK(s.step_index() == 10);
}

TEST_CASE("global-norm clipping keeps the update within lr times max_norm") {
  using clipped =
      step_t<df::head::dann<df::schedule::constant>, df::loader::sync, df::clip::global_norm>;
  clipped s(df::fit_args{.batch = 4, .lr = 1.0f, .max_grad_norm = 1e-3f});
  random_batch(s, 1);
  const std::vector<float> before(s.parameters().begin(), s.parameters().end());
  const df::step_report r = s.run();
  REQUIRE(r.grad_norm > 1e-3);
  double moved = 0;
  for (std::size_t i = 0; i < before.size(); ++i)
    moved += std::pow(double(s.parameters()[i]) - before[i], 2);
  CHECK(std::sqrt(moved) == doctest::Approx(1e-3).epsilon(1e-3));
}

TEST_CASE("loader::sync and loader::resident train bitwise the same weights") {
  const auto source = toy(df::data::domain::source, 0), target = toy(df::data::domain::target, 1);
  const df::fit_args args{.steps = 20, .batch = 8, .lr = 0.05f, .momentum = 0.9f, .seed = 4};
  step_t<df::head::dann<>, df::loader::sync> a(args);
  step_t<df::head::dann<>, df::loader::resident> b(args);
  df::data::batcher<df::loader::sync, df::system::omp> fa(source, target, 8, 4, true);
  df::data::batcher<df::loader::resident, df::system::omp> fb(source, target, 8, 4, true);
  for (int t = 0; t < 20; ++t) {
    fa.fill(a.input(), a.source_labels());
    fb.fill(b.input(), b.source_labels());
    a.run();
    b.run();
  }
  CHECK(std::equal(a.parameters().begin(), a.parameters().end(), b.parameters().begin()));
}

TEST_CASE("predict returns the argmax of the classifier's logits, in chunks") {
  dann_step s(df::fit_args{.batch = 2, .eval_chunk = 3});
  df::counter_rng rng(2, df::rng_stream::user);
  std::vector<float> rows(7 * 4);
  for (float& v : rows) v = rng.normal<float>();
  std::vector<std::int32_t> predicted(7);
  s.predict(rows.data(), 7, predicted.data());
  // Reference: the same maths written naively.
  const auto p = s.parameters();
  for (int n = 0; n < 7; ++n) {
    std::vector<double> h(8), z(3);
    for (int o = 0; o < 8; ++o) {
      double a = p[32 + o];
      for (int i = 0; i < 4; ++i) a += p[i * 8 + o] * rows[n * 4 + i];
      h[o] = std::max(a, 0.0);
    }
    const df::index_t off = net::classifier_offset;
    for (int o = 0; o < 3; ++o) {
      double a = p[off + 24 + o];
      for (int i = 0; i < 8; ++i) a += p[off + i * 3 + o] * h[i];
      z[o] = a;
    }
    CHECK(predicted[n] == std::int32_t(std::max_element(z.begin(), z.end()) - z.begin()));
  }
}

TEST_CASE("can_implement checks the Adam fields and the learning-rate multipliers") {
  using adam_step = df::train_step<net, df::loader::sync, df::precision::fp32, df::clip::none,
                                   df::head::dann<>, df::optim::adam>;
  CHECK(adam_step::can_implement({}).message.empty());
  CHECK(adam_step::can_implement({.beta1 = 1.0f}).message.find("fit_args.beta1") !=
        std::string::npos);
  CHECK(adam_step::can_implement({.beta2 = -0.1f}).message.find("fit_args.beta2") !=
        std::string::npos);
  CHECK(adam_step::can_implement({.eps = 0}).message.find("fit_args.eps") != std::string::npos);
  CHECK(adam_step::can_implement({.lr_mult = {.discriminator = -1}})
            .message.find("fit_args.lr_mult") != std::string::npos);
}

TEST_CASE("a step whose gradients are not finite is skipped and leaves the parameters intact") {
  dann_step s(df::fit_args{.batch = 4, .lr = 0.1f, .momentum = 0.9f});
  random_batch(s, 3);
  s.run();  // a normal step first, so the momentum buffers hold values
  const std::vector<float> before(s.parameters().begin(), s.parameters().end());
  s.input().data[5] = std::numeric_limits<float>::quiet_NaN();
  const df::step_report r = s.run();
  CHECK(r.skipped);
  CHECK_FALSE(std::isfinite(r.grad_norm));
  CHECK(std::equal(before.begin(), before.end(), s.parameters().begin()));
  CHECK(s.step_index() == 2);
  random_batch(s, 4);
  const df::step_report next = s.run();
  CHECK_FALSE(next.skipped);
  CHECK(std::isfinite(next.label_loss));
}

}  // namespace step_train_step_test
