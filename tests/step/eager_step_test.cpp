// SPDX-License-Identifier: Apache-2.0
// eager_step against train_step: built from the same fit_args they start from the same weights,
// and on the same batches they report the same losses and norms and train the same weights, for
// dense, wide (products split by W's columns) and sparse networks, both heads, every clip policy
// and every optimizer, in fp64 (to 1e-12 relative) and fp32 (to 1e-5: the passes sum in other
// orders). Non-finite batches skip the update in both; bad labels and sparse batches are errors;
// the interface is train_step's.
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

namespace {
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
  //! Relative agreement expected: fp64 sums in another order differ in the last bits; fp32 ones
  //! by a few units of 1e-7, grown a little over the steps.
  static constexpr double tolerance =
      std::is_same_v<typename Precision::master_type, double> ? 1e-12 : 1e-5;
};

// Small bounds, so that every clip policy clips at every step.
df::fit_args base_args() {
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
df::fit_args wide_args() {
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
double relative_difference(double a, double b) {
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
}  // namespace

TEST_CASE_TEMPLATE("eager_step trains the weights train_step trains from the same arguments",
                   Case,
                   sgd_momentum_fp64,
                   sgd_momentum_fp32,
                   nesterov_global_norm_fp64,
                   dampened_global_norm_fp32,
                   adam_per_module_norm_fp64,
                   adamw_per_module_norm_fp32,
                   plain_sgd_value_fp64,
                   adam_value_fp32,
                   source_only_global_norm_fp64,
                   source_only_adamw_fp32,
                   sparse_global_norm_fp64,
                   sparse_adam_fp32,
                   sparse_source_only_per_module_norm_fp64,
                   wide_global_norm_fp64,
                   wide_adam_fp32) {
  using fused_type = typename Case::fused;
  using eager_type = typename Case::eager;
  using T = typename eager_type::value_type;
  using clip_type = typename eager_type::clip_type;
  const df::fit_args args = Case::args();
  const double tolerance = Case::tolerance;
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

TEST_CASE_TEMPLATE("eager_step's raw gradients are train_step's, batch after batch (double)",
                   Case,
                   sgd_momentum_fp64,
                   source_only_global_norm_fp64,
                   sparse_global_norm_fp64,
                   sparse_source_only_per_module_norm_fp64,
                   wide_global_norm_fp64) {
  const df::fit_args args = Case::args();
  typename Case::fused fused(args);
  typename Case::eager eager(args);
  for (std::uint32_t draw = 0; draw < 4; ++draw) {
    CAPTURE(draw);
    fill(fused, 100 + draw);
    fill(eager, 100 + draw);
    const double lambda = 0.3 * draw;
    const df::step_report f = fused.compute_gradients(lambda), e = eager.compute_gradients(lambda);
    check_reports_agree<typename Case::fused, typename Case::eager>(e, f, 1e-12);
    CHECK(df::test::max_relative_error(eager.gradients(), fused.gradients()) <= 1e-12);
    CHECK(eager.norms().features_sq == doctest::Approx(fused.norms().features_sq).epsilon(1e-12));
  }
  CHECK(eager.step_index() == 0);
}

TEST_CASE_TEMPLATE("a non-finite batch skips the update in both steps alike",
                   Case,
                   sgd_momentum_fp32,
                   adam_per_module_norm_fp64,
                   sparse_adam_fp32) {
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
  check_reports_agree<typename Case::fused, typename Case::eager>(e2, f2, Case::tolerance);
  CHECK(df::test::max_relative_error(std::span<const T>(eager.parameters()),
                                     std::span<const T>(fused.parameters())) <= Case::tolerance);
}

TEST_CASE("eager_step offers train_step's interface and argument checks") {
  using f = sgd_momentum_fp32::fused;
  using e = sgd_momentum_fp32::eager;
  static_assert(
      e::input_width == f::input_width && e::class_count == f::class_count &&
      e::feature_width == f::feature_width && e::draws_target_rows == f::draws_target_rows &&
      e::sparse_input == f::sparse_input && e::trained_param_count == f::trained_param_count &&
      std::is_same_v<e::value_type, f::value_type> &&
      std::is_same_v<e::accumulate_type, f::accumulate_type> &&
      std::is_same_v<e::schedule_type, f::schedule_type> &&
      std::is_same_v<e::arguments, df::fit_args> && std::is_same_v<e::fused_type, f>);
  static_assert(sparse_adam_fp32::eager::sparse_input);
  static_assert(!source_only_adamw_fp32::eager::trains_discriminator);

  for (const df::fit_args& a : {df::fit_args{}, df::fit_args{.batch = 0}, df::fit_args{.lr = -1},
                                df::fit_args{.nesterov = true}, df::fit_args{.lambda_max = -1}})
    CHECK(e::can_implement(a).message == f::can_implement(a).message);
  CHECK(adam_value_fp32::eager::can_implement({.max_grad_value = 0})
            .message.find("fit_args.max_grad_value") != std::string::npos);
  CHECK_THROWS_WITH_AS(e(df::fit_args{.batch = -3}),
                       doctest::Contains("dafuse: fit_args.batch: expected at least 1"), df::error);

  e dense(df::fit_args{.batch = 5});
  CHECK(dense.feature_rows() == 10);
  CHECK(dense.input().rows == 6);
  CHECK(dense.input().cols == 10);
  CHECK(dense.source_labels().size() == 5);
  CHECK(dense.parameters().size() == std::size_t(mixed_net::param_count));
  CHECK(dense.gradients().size() == std::size_t(mixed_net::param_count));
  CHECK(dense.optimizer_state().size() == std::size_t(mixed_net::param_count));
  CHECK(dense.args().batch == 5);
  CHECK(dense.step_index() == 0);
  // Every intermediate has its own buffer: more memory than the fused step's scratch (without
  // the fused step's evaluation buffers, which eager_step does not have).
  CHECK(dense.memory_bytes() > f(df::fit_args{.batch = 5, .eval_chunk = 1}).memory_bytes());
  source_only_adamw_fp32::eager source(df::fit_args{.batch = 5});
  CHECK(source.input().cols == 5);  // only source rows
  CHECK(source.optimizer_state().size() == 2 * std::size_t(relu_net::param_count));

  sparse_adam_fp32::eager sparse(df::fit_args{.batch = 4});
  sparse_adam_fp32::fused sparse_fused(df::fit_args{.batch = 4});
  CHECK(sparse.sparse_batch().offsets.size() == sparse_fused.sparse_batch().offsets.size());
  CHECK(sparse.sparse_batch().indices.size() == sparse_fused.sparse_batch().indices.size());
  CHECK(sparse.sparse_batch().values.size() == sparse_fused.sparse_batch().values.size());
}

TEST_CASE("bad labels and sparse batches are errors that name the slot and change nothing") {
  sgd_momentum_fp32::eager dense(sgd_momentum_fp32::args());
  fill(dense, 0);
  dense.source_labels()[2] = 4;
  const std::vector<float> before(dense.parameters().begin(), dense.parameters().end());
  CHECK_THROWS_WITH_AS(dense.run(),
                       doctest::Contains("eager_step: source_labels()[2]: expected a class in "
                                         "[0, 4)"),
                       df::error);
  CHECK(std::equal(before.begin(), before.end(), dense.parameters().begin()));
  CHECK(dense.step_index() == 0);

  sparse_adam_fp32::eager sparse(sparse_adam_fp32::args());
  fill(sparse, 0);
  auto slots = sparse.sparse_batch();
  const std::int32_t saved = slots.indices[3];
  slots.indices[3] = 30;
  CHECK_THROWS_WITH_AS(
      sparse.run(),
      doctest::Contains("eager_step: sparse_batch().indices[3]: expected a feature in [0, 30)"),
      df::error);
  slots.indices[3] = saved;
  slots.offsets[2] = slots.offsets[1] - 1;
  CHECK_THROWS_WITH_AS(sparse.run(), doctest::Contains("sparse_batch().offsets[2]"), df::error);
  fill(sparse, 0);
  CHECK_NOTHROW(sparse.run());  // usable again after the errors
}
