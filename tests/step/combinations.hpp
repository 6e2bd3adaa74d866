// Combinations of precision × clip × head × optimizer that should compile do, and train: a few
// dozen steps on a small separable problem lower the label loss. The default suite runs an
// all-pairs subset (every pair of values of any two slots appears in some step: 16 step types,
// combinations_pairs_*_test.cpp); the slow suite runs the full product, 96 step types, one
// translation unit per precision (combinations_<precision>_test.cpp).
#pragma once
#include <dafuse/head/dann.hpp>
#include <dafuse/head/source_only.hpp>
#include <dafuse/step/train_step.hpp>

#include <dafuse/data/batcher.hpp>

#include "../check.hpp"

#include <array>
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
  using slots = std::tuple<Precision, Clip, Head, Optim>;
};

//! The four clip policies for one precision, head and optimizer.
template <class P, class H, class O>
using with_every_clip = std::tuple<combo<P, df::clip::none, H, O>,
                                   combo<P, df::clip::global_norm, H, O>,
                                   combo<P, df::clip::value, H, O>,
                                   combo<P, df::clip::per_module_norm, H, O>>;

// The head each (head, optimizer) pair trains with: the schedules varied across the pairs.
using dann_sgd = df::head::dann<df::schedule::ganin>;
using dann_adam = df::head::dann<df::schedule::tllib>;
using dann_adamw = df::head::dann<df::schedule::constant>;
using source_only_sgd = df::head::source_only<>;
using source_only_adam = df::head::source_only<df::schedule::ganin>;
using source_only_adamw = df::head::source_only<df::schedule::tllib>;

//! clip × head × optimizer for precision P: 4 × 2 × 3.
template <class P>
using every_combination =
    decltype(std::tuple_cat(with_every_clip<P, dann_sgd, df::optim::sgd>{},
                            with_every_clip<P, dann_adam, df::optim::adam>{},
                            with_every_clip<P, dann_adamw, df::optim::adamw>{},
                            with_every_clip<P, source_only_sgd, df::optim::sgd>{},
                            with_every_clip<P, source_only_adam, df::optim::adam>{},
                            with_every_clip<P, source_only_adamw, df::optim::adamw>{}));

using fp16_dynamic = df::precision::fp16<df::loss_scale::dynamic>;
using fp16_fixed = df::precision::fp16<df::loss_scale::fixed<1024>>;

//! An all-pairs subset of precision (4) × clip (4) × head (2) × optimizer (3): each precision
//! meets each clip once, and every pair of values of any two slots appears (16 rows, the least
//! possible: precision × clip; checked below). fp32 and bf16 rows.
using pairwise_fp32_bf16 = std::tuple<
    combo<df::precision::fp32, df::clip::none, source_only_sgd, df::optim::sgd>,
    combo<df::precision::fp32, df::clip::global_norm, dann_adam, df::optim::adam>,
    combo<df::precision::fp32, df::clip::value, source_only_sgd, df::optim::sgd>,
    combo<df::precision::fp32, df::clip::per_module_norm, source_only_adamw, df::optim::adamw>,
    combo<df::precision::bf16, df::clip::none, dann_adamw, df::optim::adamw>,
    combo<df::precision::bf16, df::clip::global_norm, dann_sgd, df::optim::sgd>,
    combo<df::precision::bf16, df::clip::value, source_only_adam, df::optim::adam>,
    combo<df::precision::bf16, df::clip::per_module_norm, source_only_sgd, df::optim::sgd>>;
//! The fp16 rows of the same subset.
using pairwise_fp16 =
    std::tuple<combo<fp16_dynamic, df::clip::none, dann_adam, df::optim::adam>,
               combo<fp16_dynamic, df::clip::global_norm, dann_sgd, df::optim::sgd>,
               combo<fp16_dynamic, df::clip::value, dann_sgd, df::optim::sgd>,
               combo<fp16_dynamic, df::clip::per_module_norm, source_only_adamw, df::optim::adamw>,
               combo<fp16_fixed, df::clip::none, dann_sgd, df::optim::sgd>,
               combo<fp16_fixed, df::clip::global_norm, source_only_adamw, df::optim::adamw>,
               combo<fp16_fixed, df::clip::value, dann_adamw, df::optim::adamw>,
               combo<fp16_fixed, df::clip::per_module_norm, dann_adam, df::optim::adam>>;

// The index of T in List, or -1.
template <class T, class... List>
constexpr int index_in(std::tuple<List...>) {
  int i = 0, found = -1;
  ((std::is_same_v<T, List> ? found = i : 0, ++i), ...);
  return found;
}
using precisions = std::tuple<df::precision::fp32, df::precision::bf16, fp16_dynamic, fp16_fixed>;
using clips =
    std::tuple<df::clip::none, df::clip::global_norm, df::clip::value, df::clip::per_module_norm>;
using heads = std::tuple<df::head::dann<>, df::head::source_only<>>;
using optimizers = std::tuple<df::optim::sgd, df::optim::adam, df::optim::adamw>;
template <class Head>
using head_kind =
    std::conditional_t<Head::draws_target_rows, df::head::dann<>, df::head::source_only<>>;

// Each row's value index per slot (precision, clip, head kind, optimizer).
template <class Combo>
constexpr std::array<int, 4> slot_indices() {
  using s = typename Combo::slots;
  return {index_in<std::tuple_element_t<0, s>>(precisions{}),
          index_in<std::tuple_element_t<1, s>>(clips{}),
          index_in<head_kind<std::tuple_element_t<2, s>>>(heads{}),
          index_in<std::tuple_element_t<3, s>>(optimizers{})};
}

//! Whether the rows meet every pair of values of every two slots.
template <class... Combo>
constexpr bool covers_every_pair(std::tuple<Combo...>) {
  constexpr std::array<int, 4> sizes{4, 4, 2, 3};
  const std::array<std::array<int, 4>, sizeof...(Combo)> rows{slot_indices<Combo>()...};
  for (const auto& r : rows)
    for (int k = 0; k < 4; ++k)
      if (r[k] < 0) return false;
  for (int a = 0; a < 4; ++a)
    for (int b = a + 1; b < 4; ++b)
      for (int va = 0; va < sizes[a]; ++va)
        for (int vb = 0; vb < sizes[b]; ++vb) {
          bool met = false;
          for (const auto& r : rows) met = met || (r[a] == va && r[b] == vb);
          if (!met) return false;
        }
  return true;
}
static_assert(covers_every_pair(decltype(std::tuple_cat(pairwise_fp32_bf16{}, pairwise_fp16{})){}),
              "the default suite's subset must meet every pair of slot values");
static_assert(!covers_every_pair(pairwise_fp32_bf16{}), "the check can fail");

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

TEST_CASE_TEMPLATE_DEFINE("each combination of policies trains", Combo, trains) {
  combinations::check_trains<typename Combo::step>();
}
