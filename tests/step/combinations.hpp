// Every combination of precision × clip × head × optimizer that should compile does, and trains:
// a few dozen steps on a small separable problem lower the label loss. One translation unit per
// precision (combinations_<precision>_test.cpp) includes this with DAFUSE_TEST_PRECISION set, so
// the 24 step types of each compile in parallel.
#pragma once
#include <dafuse/head/dann.hpp>
#include <dafuse/head/source_only.hpp>
#include <dafuse/step/train_step.hpp>

#include <dafuse/data/batcher.hpp>

#include "../check.hpp"

#include <tuple>
#include <type_traits>
#include <vector>

namespace df = dafuse;

namespace combinations {
using net = df::nn::dann_net<df::nn::mlp<4, 16, df::nn::tanh>,
                             df::nn::linear<16, 3>,
                             df::nn::mlp<16, 8, 1, df::nn::relu>>;

template <class Precision, class Clip, class Head, class Optim>
struct combo {
  using step = df::train_step<net, df::loader::resident, Precision, Clip, Head, Optim>;
};

//! The four clip policies for one precision, head and optimizer.
template <class P, class H, class O>
using with_every_clip = std::tuple<combo<P, df::clip::none, H, O>,
                                   combo<P, df::clip::global_norm, H, O>,
                                   combo<P, df::clip::value, H, O>,
                                   combo<P, df::clip::per_module_norm, H, O>>;

//! clip × head × optimizer for precision P: 4 × 2 × 3, the schedules varied across rows.
template <class P>
using every_combination = decltype(std::tuple_cat(
    with_every_clip<P, df::head::dann<df::schedule::ganin>, df::optim::sgd>{},
    with_every_clip<P, df::head::dann<df::schedule::tllib>, df::optim::adam>{},
    with_every_clip<P, df::head::dann<df::schedule::constant>, df::optim::adamw>{},
    with_every_clip<P, df::head::source_only<>, df::optim::sgd>{},
    with_every_clip<P, df::head::source_only<df::schedule::ganin>, df::optim::adam>{},
    with_every_clip<P, df::head::source_only<df::schedule::tllib>, df::optim::adamw>{}));

inline df::data::dataset clusters(df::data::domain side) {
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

//! 60 steps of `Step`: the label loss of the last 5 is below 0.7 × that of the first 5.
template <class Step>
void check_trains() {
  const auto source = clusters(df::data::domain::source);
  const auto target = clusters(df::data::domain::target);
  const bool adam_like = !std::is_same_v<typename Step::optim_type, df::optim::sgd>;
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
  Step step(args);
  df::data::batcher<df::loader::resident, df::system::omp> batches(
      source, target, args.batch, args.seed, Step::draws_target_rows);
  double first = 0, last = 0;
  int skipped = 0;
  for (int t = 0; t < 60; ++t) {
    batches.fill(step.input(), step.source_labels());
    const df::step_report r = step.run();
    REQUIRE(std::isfinite(r.label_loss));
    skipped += r.skipped;
    if (t < 5) first += r.label_loss / 5;
    if (t >= 55) last += r.label_loss / 5;
  }
  // Only a dynamic loss scale may skip steps (while it finds its level); nothing else overflows.
  if constexpr (std::is_same_v<typename Step::loss_scale_type, df::loss_scale::dynamic>)
    CHECK(skipped < 10);
  else
    CHECK(skipped == 0);
  CHECK(last < 0.7 * first);
}

}  // namespace combinations

TEST_CASE_TEMPLATE_DEFINE("each clip × head × optimizer combination trains", Combo, trains) {
  combinations::check_trains<typename Combo::step>();
}
TEST_CASE_TEMPLATE_APPLY(trains, combinations::every_combination<DAFUSE_TEST_PRECISION>);
