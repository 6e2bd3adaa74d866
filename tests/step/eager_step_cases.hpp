// SPDX-License-Identifier: Apache-2.0
// The cases eager_step's tests run (eager_step_<part>_test.cpp, one translation unit per network
// family and precision, so both cores share them): each configuration built both ways from the
// same fit_args, the batches both see, and the checks as templates over a case.
#pragma once
#include <dafuse/head/dann.hpp>
#include <dafuse/head/source_only.hpp>
#include <dafuse/step/eager_step.hpp>
#include <dafuse/step/train_step.hpp>

#include "../check.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <type_traits>
#include <vector>

namespace df = dafuse;

namespace eager_cases {
// tanh features, a sigmoid hidden layer in G_y, ReLU in G_d.
using mixed_net = df::nn::dann_net<df::nn::mlp<6, 16, 12, df::nn::tanh>,
                                   df::nn::mlp<12, 10, 4, df::nn::sigmoid>,
                                   df::nn::mlp<12, 10, 1, df::nn::relu>>;
// ReLU features, a linear G_y, a two-hidden-layer tanh G_d.
using relu_net = df::nn::dann_net<df::nn::mlp<6, 16, 10, df::nn::relu>,
                                  df::nn::linear<10, 3>,
                                  df::nn::mlp<10, 8, 8, 1, df::nn::tanh>>;
// Wide enough for layer_split: with two threads or more G_f's layers and G_d's first split their
// products by W's columns, the forward adding per-thread partial sums (2·512·512·64 FLOP and
// 2·256·512·64 = 2^24, with fewer samples than inputs); the heads stay on one thread.
using wide_net = df::nn::dann_net<df::nn::mlp<512, 512, 256, df::nn::relu>,
                                  df::nn::linear<256, 10>,
                                  df::nn::mlp<256, 512, 1, df::nn::relu>>;
// CSR input: the first layer takes the sparse products.
using sparse_net = df::nn::dann_net<df::nn::sparse_input<df::nn::mlp<30, 16, 8, df::nn::relu>>,
                                    df::nn::linear<8, 3>,
                                    df::nn::mlp<8, 6, 1, df::nn::relu>>;

using df::clip::global_norm;
using df::clip::none;
using df::clip::per_module_norm;
using df::clip::value;
using df::optim::adam;
using df::optim::adamw;
using df::optim::sgd;
using df::precision::fp32;
using df::precision::fp64;
using dann = df::head::dann<df::schedule::ganin>;
using source_only = df::head::source_only<df::schedule::ganin>;

// One configuration run both ways.
template <class Net, class Precision, class Clip, class Head, class Optim>
struct both {
  using fused = df::train_step<Net, df::loader::sync, Precision, Clip, Head, Optim>;
  using eager = df::eager_step<Net, df::loader::sync, Precision, Clip, Head, Optim>;
  //! Relative agreement expected after `steps` steps. The two steps add each sum's terms in other
  //! orders (Eigen's products against dafuse's kernels, whose order also differs between
  //! instruction sets), which moves a sum of L terms by at most γ_L = L·u/(1 − L·u) of the sum of
  //! their magnitudes (Higham, "Accuracy and Stability of Numerical Algorithms", §3.1), u the
  //! master type's unit roundoff; L is the step's longest sum (a layer's fan-in or fan-out, or the
  //! 2·batch rows a weight gradient sums), and each step's differences add to the last's.
  static double tolerance(const df::fit_args& a, int steps) {
    using T = typename Precision::master_type;
    using net = typename fused::net_type;
    const double u = std::numeric_limits<T>::epsilon() / 2;
    const double longest = double(std::max(
        {longest_sum<typename net::feature_stack>(), longest_sum<typename net::classifier_stack>(),
         longest_sum<typename net::discriminator_stack>(), df::index_t(2 * a.batch)}));
    return double(std::max(steps, 1)) * longest * u / (1 - longest * u);
  }

 private:
  template <class Stack>
  static constexpr df::index_t longest_sum() {
    return [&]<std::size_t... I>(std::index_sequence<I...>) {
      return std::max(
          {df::index_t(std::max(Stack::template layer<I>::in, Stack::template layer<I>::out))...});
    }
    (std::make_index_sequence<Stack::depth>{});
  }
};

// Small bounds, so that every clip policy clips at every step.
inline df::fit_args base_args() {
  return {.steps = 8,
          .batch = 6,
          .lr = 0.05f,
          .momentum = 0.9f,
          .weight_decay = 1e-3f,
          .lr_mult = {.classifier = 2.0f, .discriminator = 1.5f},
          .max_grad_norm = 0.05f,
          .max_grad_norm_discriminator = 0.02f,
          .max_grad_value = 0.01f,
          .lambda_max = 0.8f,
          .seed = 3};
}

struct sgd_momentum_fp64 : both<mixed_net, fp64, none, dann, sgd> {
  static df::fit_args args() { return base_args(); }
};
struct sgd_momentum_fp32 : both<mixed_net, fp32, none, dann, sgd> {
  static df::fit_args args() { return base_args(); }
};
struct nesterov_global_norm_fp64 : both<mixed_net, fp64, global_norm, dann, sgd> {
  static df::fit_args args() {
    df::fit_args a = base_args();
    a.nesterov = true;
    return a;
  }
};
struct dampened_global_norm_fp32 : both<relu_net, fp32, global_norm, dann, sgd> {
  static df::fit_args args() {
    df::fit_args a = base_args();
    a.dampening = 0.1f;
    return a;
  }
};
struct adam_per_module_norm_fp64
    : both<mixed_net, fp64, per_module_norm, df::head::dann<df::schedule::tllib>, adam> {
  static df::fit_args args() {
    df::fit_args a = base_args();
    a.lr = 0.01f;
    return a;
  }
};
struct adamw_per_module_norm_fp32
    : both<relu_net, fp32, per_module_norm, df::head::dann<df::schedule::constant>, adamw> {
  static df::fit_args args() {
    df::fit_args a = base_args();
    a.lr = 0.01f;
    a.weight_decay = 0.05f;
    return a;
  }
};
struct plain_sgd_value_fp64 : both<mixed_net, fp64, value, dann, sgd> {
  static df::fit_args args() {
    df::fit_args a = base_args();
    a.momentum = 0;
    return a;
  }
};
struct adam_value_fp32 : both<relu_net, fp32, value, dann, adam> {
  static df::fit_args args() {
    df::fit_args a = base_args();
    a.lr = 0.01f;
    return a;
  }
};
struct source_only_global_norm_fp64 : both<mixed_net, fp64, global_norm, source_only, sgd> {
  static df::fit_args args() { return base_args(); }
};
struct source_only_adamw_fp32 : both<relu_net, fp32, none, source_only, adamw> {
  static df::fit_args args() {
    df::fit_args a = base_args();
    a.lr = 0.01f;
    return a;
  }
};
struct sparse_global_norm_fp64 : both<sparse_net, fp64, global_norm, dann, sgd> {
  static df::fit_args args() { return base_args(); }
};
struct sparse_adam_fp32 : both<sparse_net, fp32, none, dann, adam> {
  static df::fit_args args() {
    df::fit_args a = base_args();
    a.lr = 0.01f;
    return a;
  }
};
// The wide network: 32 + 32 rows (fewer samples than inputs), four steps.
inline df::fit_args wide_args() {
  df::fit_args a = base_args();
  a.steps = 4;
  a.batch = 32;
  a.lr = 0.001f;
  return a;
}
struct wide_global_norm_fp64 : both<wide_net, fp64, global_norm, dann, sgd> {
  static df::fit_args args() { return wide_args(); }
};
struct wide_adam_fp32 : both<wide_net, fp32, none, dann, adam> {
  static df::fit_args args() { return wide_args(); }
};
struct sparse_source_only_per_module_norm_fp64
    : both<sparse_net, fp64, per_module_norm, source_only, sgd> {
  static df::fit_args args() { return base_args(); }
};

// Batch `draw`, the same for every step type of a precision: normal dense rows, or sparse rows
// with ~20 % non-zero small counts (changing the used features from batch to batch, so that a
// stale column of the sparse weight gradient would show).
template <class Step>
void fill(Step& s, std::uint32_t draw) {
  using T = typename Step::value_type;
  df::counter_rng rng(23, df::rng_stream::user, draw);
  if constexpr (Step::sparse_input) {
    auto slots = s.sparse_batch();
    std::size_t at = 0;
    slots.offsets[0] = 0;
    for (df::index_t c = 0; c < s.feature_rows(); ++c) {
      for (df::index_t j = 0; j < Step::input_width; ++j)
        if (rng.below(5) == 0) {
          slots.indices[at] = std::int32_t(j);
          slots.values[at] = T(std::round(4 * rng.uniform<double>() + 1));
          ++at;
        }
      slots.offsets[std::size_t(c) + 1] = std::int32_t(at);
    }
  } else {
    const auto x = s.input();
    for (df::index_t i = 0; i < x.size(); ++i) x.data[i] = rng.normal<T>();
  }
  for (auto& y : s.source_labels()) y = std::int32_t(rng.below(Step::class_count));
}

// |a − b| relative to the larger of the two (0 when both are 0).
inline double relative_difference(double a, double b) {
  const double scale = std::max(std::abs(a), std::abs(b));
  return scale == 0 ? 0 : std::abs(a - b) / scale;
}

template <class T>
double norm_of(std::span<const T> v) {
  double sum = 0;
  for (const T x : v) sum += double(x) * double(x);
  return std::sqrt(sum);
}

template <class T>
double largest_magnitude(std::span<const T> v) {
  double m = 0;
  for (const T x : v) m = std::max(m, std::abs(double(x)));
  return m;
}

// Whether the clip policy changes the raw gradients of this step (fused gradients are raw).
template <class Clip, class Fused>
bool clips(const df::step_report& r, const Fused& fused, const df::fit_args& a) {
  if constexpr (std::is_same_v<Clip, global_norm>)
    return r.grad_norm > a.max_grad_norm;
  else if constexpr (std::is_same_v<Clip, per_module_norm>)
    return r.task_grad_norm > a.max_grad_norm ||
           r.discriminator_grad_norm > a.max_grad_norm_discriminator;
  else if constexpr (std::is_same_v<Clip, value>)
    return largest_magnitude(fused.gradients()) > a.max_grad_value;
  else
    return false;
}

template <class Fused, class Eager>
void check_reports_agree(const df::step_report& e, const df::step_report& f, double tolerance) {
  CHECK(relative_difference(e.label_loss, f.label_loss) <= tolerance);
  CHECK(relative_difference(e.domain_loss, f.domain_loss) <= tolerance);
  CHECK(relative_difference(e.grad_norm, f.grad_norm) <= tolerance);
  CHECK(relative_difference(e.task_grad_norm, f.task_grad_norm) <= tolerance);
  CHECK(relative_difference(e.discriminator_grad_norm, f.discriminator_grad_norm) <= tolerance);
  CHECK(e.domain_accuracy == f.domain_accuracy);
  CHECK(e.lambda == f.lambda);
  CHECK(e.lr == f.lr);
  CHECK(e.loss_scale == 1);
  CHECK(e.skipped == f.skipped);
}

//! Both steps run Case::args().steps steps on the same batches: same reports, clipped
//! gradients, trained weights and optimizer state.
template <class Case>
void check_trains_alike() {
  using fused_type = typename Case::fused;
  using eager_type = typename Case::eager;
  using T = typename eager_type::value_type;
  using clip_type = typename eager_type::clip_type;
  const df::fit_args args = Case::args();
  const double tolerance = Case::tolerance(args, args.steps);
  fused_type fused(args);
  eager_type eager(args);
  REQUIRE(std::equal(eager.parameters().begin(), eager.parameters().end(),
                     fused.parameters().begin(), fused.parameters().end()));

  int clipped = 0;
  for (std::uint32_t t = 0; t < std::uint32_t(args.steps); ++t) {
    CAPTURE(t);
    fill(fused, t);
    fill(eager, t);
    const df::step_report f = fused.run(), e = eager.run();
    REQUIRE_FALSE(f.skipped);
    check_reports_agree<fused_type, eager_type>(e, f, tolerance);
    if (clips<clip_type>(f, fused, args)) ++clipped;
    // eager_step clips gradients() in place, as clip_grad_norm_ and clip_grad_value_ do.
    if constexpr (std::is_same_v<clip_type, global_norm>)
      CHECK(norm_of(eager.gradients()) <= args.max_grad_norm * (1 + tolerance));
    if constexpr (std::is_same_v<clip_type, value>)
      CHECK(largest_magnitude(eager.gradients()) <= args.max_grad_value);
    if constexpr (std::is_same_v<clip_type, none>)
      CHECK(df::test::max_relative_error(eager.gradients(), fused.gradients()) <= tolerance);
  }
  // The bounds are small: the clip policies are exercised at every step.
  if constexpr (!std::is_same_v<clip_type, none>) CHECK(clipped == args.steps);

  CHECK(eager.step_index() == fused.step_index());
  CHECK(df::test::max_relative_error(std::span<const T>(eager.parameters()),
                                     std::span<const T>(fused.parameters())) <= tolerance);
  CHECK(df::test::max_relative_error(std::span<const T>(eager.optimizer_state()),
                                     std::span<const T>(fused.optimizer_state())) <= tolerance);
  if constexpr (!eager_type::trains_discriminator) {
    // G_d is not trained without a discriminator head: still its initial weights in both.
    const auto p = eager.parameters();
    eager_type initial(args);
    CHECK(std::equal(p.begin() + eager_type::net_type::discriminator_offset, p.end(),
                     initial.parameters().begin() + eager_type::net_type::discriminator_offset));
  }
}

//! compute_gradients on four batches at four λ: the same raw gradients and norms (double).
template <class Case>
void check_raw_gradients() {
  const df::fit_args args = Case::args();
  typename Case::fused fused(args);
  typename Case::eager eager(args);
  for (std::uint32_t draw = 0; draw < 4; ++draw) {
    CAPTURE(draw);
    fill(fused, 100 + draw);
    fill(eager, 100 + draw);
    const double lambda = 0.3 * draw;
    const df::step_report f = fused.compute_gradients(lambda), e = eager.compute_gradients(lambda);
    const double tolerance = Case::tolerance(args, 1);
    check_reports_agree<typename Case::fused, typename Case::eager>(e, f, tolerance);
    CHECK(df::test::max_relative_error(eager.gradients(), fused.gradients()) <= tolerance);
    CHECK(eager.norms().features_sq ==
          doctest::Approx(fused.norms().features_sq).epsilon(tolerance));
  }
  CHECK(eager.step_index() == 0);
}

//! A non-finite batch after a normal step is skipped alike, and training goes on in step.
template <class Case>
void check_skips_non_finite() {
  using T = typename Case::eager::value_type;
  const df::fit_args args = Case::args();
  typename Case::fused fused(args);
  typename Case::eager eager(args);
  fill(fused, 0);
  fill(eager, 0);
  fused.run();
  eager.run();  // a normal step first, so the optimizer state holds values
  const std::vector<T> before(eager.parameters().begin(), eager.parameters().end());
  const std::vector<T> state(eager.optimizer_state().begin(), eager.optimizer_state().end());
  fill(fused, 1);
  fill(eager, 1);
  const auto poison = [](auto& s) {
    if constexpr (Case::eager::sparse_input)
      s.sparse_batch().values[3] = std::numeric_limits<T>::infinity();
    else
      s.input().data[5] = std::numeric_limits<T>::quiet_NaN();
  };
  poison(fused);
  poison(eager);
  const df::step_report f = fused.run(), e = eager.run();
  CHECK(f.skipped);
  CHECK(e.skipped);
  CHECK_FALSE(std::isfinite(e.grad_norm));
  CHECK(e.lambda == f.lambda);
  CHECK(e.lr == f.lr);
  CHECK(std::equal(before.begin(), before.end(), eager.parameters().begin()));
  CHECK(std::equal(state.begin(), state.end(), eager.optimizer_state().begin()));
  CHECK(eager.step_index() == 2);
  CHECK(fused.step_index() == 2);
  // Training goes on, in step.
  fill(fused, 2);
  fill(eager, 2);
  const df::step_report f2 = fused.run(), e2 = eager.run();
  CHECK_FALSE(e2.skipped);
  check_reports_agree<typename Case::fused, typename Case::eager>(
      e2, f2, Case::tolerance(args, args.steps));
  CHECK(df::test::max_relative_error(std::span<const T>(eager.parameters()),
                                     std::span<const T>(fused.parameters())) <=
        Case::tolerance(args, args.steps));
}

}  // namespace eager_cases
