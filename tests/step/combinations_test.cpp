// Every combination of clip × head × optimizer that should compile does, and trains: a few
// dozen steps on a small separable problem lower the label loss.
#include <dafuse/step/train_step.hpp>

#include <dafuse/data/batcher.hpp>

#include "../check.hpp"

#include <tuple>
#include <vector>

namespace df = dafuse;

namespace {
using net = df::nn::dann_net<df::nn::mlp<4, 16, df::nn::tanh>,
                             df::nn::linear<16, 3>,
                             df::nn::mlp<16, 8, 1, df::nn::relu>>;

template <class Clip, class Head, class Optim>
struct combo {
  using step = df::train_step<net, df::loader::resident, df::precision::fp32, Clip, Head, Optim>;
};

df::data::dataset clusters(df::data::domain side) {
  df::counter_rng rng(31, df::rng_stream::synthetic_data, std::uint32_t(side));
  df::data::host_array<float> x{{60, 4}, std::vector<float>(240)};
  std::vector<std::int32_t> y(60);
  for (std::size_t i = 0; i < 60; ++i) {
    y[i] = std::int32_t(i % 3);
    for (std::size_t k = 0; k < 4; ++k)
      x.values[i * 4 + k] = 0.3f * rng.normal<float>() + (k == std::size_t(y[i]) ? 2.f : 0.f) +
                            (side == df::data::domain::target ? 0.3f : 0.f);
  }
  return df::data::make_dataset("clusters", side, std::move(x), std::move(y));
}

template <class C, class H, class O>
using c = combo<C, H, O>;
using all_combinations = std::tuple<
    c<df::clip::none, df::head::dann<df::schedule::ganin>, df::optim::sgd>,
    c<df::clip::global_norm, df::head::dann<df::schedule::ganin>, df::optim::sgd>,
    c<df::clip::value, df::head::dann<df::schedule::ganin>, df::optim::sgd>,
    c<df::clip::per_module_norm, df::head::dann<df::schedule::ganin>, df::optim::sgd>,
    c<df::clip::none, df::head::dann<df::schedule::tllib>, df::optim::adam>,
    c<df::clip::global_norm, df::head::dann<df::schedule::constant>, df::optim::adam>,
    c<df::clip::value, df::head::dann<df::schedule::ganin>, df::optim::adamw>,
    c<df::clip::per_module_norm, df::head::dann<df::schedule::ganin>, df::optim::adamw>,
    c<df::clip::none, df::head::source_only<>, df::optim::sgd>,
    c<df::clip::global_norm, df::head::source_only<df::schedule::ganin>, df::optim::adam>,
    c<df::clip::value, df::head::source_only<df::schedule::tllib>, df::optim::adamw>,
    c<df::clip::per_module_norm, df::head::source_only<>, df::optim::sgd>>;
}  // namespace

TEST_CASE_TEMPLATE_DEFINE("each clip × head × optimizer combination trains", Combo, combinations) {
  using step_type = typename Combo::step;
  const auto source = clusters(df::data::domain::source);
  const auto target = clusters(df::data::domain::target);
  const bool adam_like = !std::is_same_v<typename step_type::optim_type, df::optim::sgd>;
  const df::fit_args args{.steps = 60,
                          .batch = 12,
                          .lr = adam_like ? 0.01f : 0.05f,
                          .momentum = 0.9f,
                          .weight_decay = 1e-4f,
                          .lr_mult = {.classifier = 2.0f, .discriminator = 2.0f},
                          .max_grad_norm = 1.0f,
                          .max_grad_norm_discriminator = 0.5f,
                          .max_grad_value = 0.05f,
                          .seed = 2};
  step_type step(args);
  df::data::batcher<df::loader::resident, df::system::omp> batches(
      source, target, args.batch, args.seed, step_type::adversarial);
  double first = 0, last = 0;
  for (int t = 0; t < 60; ++t) {
    batches.fill(step.input(), step.source_labels());
    const df::step_report r = step.run();
    REQUIRE(std::isfinite(r.label_loss));
    CHECK_FALSE(r.skipped);
    if (t < 5) first += r.label_loss / 5;
    if (t >= 55) last += r.label_loss / 5;
  }
  CHECK(last < 0.7 * first);
}
TEST_CASE_TEMPLATE_APPLY(combinations, all_combinations);
