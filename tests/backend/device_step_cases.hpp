// The device executor's step tests, written once over the system: the CPU suite runs them on
// system::omp_device (tests/backend/device_executor_test.cpp, built by the host compiler), the
// GPU suite on system::cuda (tests/cuda/cuda_step_test.cu, built by nvcc). Each includes this
// file after defining DAFUSE_TEST_SYSTEM and DAFUSE_TEST_SUITE.
//
// The reference is the host executor (system::omp) in fp64: a device step in fp32 must give its
// losses, norms, gradients, parameters and optimizer state to 1e-5 relative (to the largest
// value of each array), and a device step in fp64 the same to 1e-10.
#pragma once
#include <dafuse/backend/device/executor.hpp>
#include <dafuse/core/rng.hpp>
#include <dafuse/data/batcher.hpp>
#include <dafuse/data/dataset.hpp>
#include <dafuse/head/cdan.hpp>
#include <dafuse/head/combine.hpp>
#include <dafuse/head/coral.hpp>
#include <dafuse/head/dann.hpp>
#include <dafuse/head/mcc.hpp>
#include <dafuse/head/mdd.hpp>
#include <dafuse/head/mmd.hpp>
#include <dafuse/head/source_only.hpp>
#include <dafuse/step/train_step.hpp>
#include <dafuse/train/checkpoint.hpp>
#include <dafuse/train/fit.hpp>

#include "../check.hpp"
#include "../head/bad_product_head.hpp"

#include <unistd.h>
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <ratio>
#include <span>
#include <string>
#include <vector>

#ifndef DAFUSE_TEST_SYSTEM
#error "define DAFUSE_TEST_SYSTEM (the system the device steps run on) before including this file"
#endif

namespace device_cases {

namespace df = dafuse;
using test_system = DAFUSE_TEST_SYSTEM;

template <class Net, class Head, class Clip, class Optim, class Precision = df::precision::fp32>
using device_step =
    df::train_step<Net, df::loader::resident, Precision, Clip, Head, Optim, test_system>;
// The same step on the host executor in fp64: the reference.
template <class Step>
using host_reference = df::train_step<typename Step::net_type,
                                      df::loader::resident,
                                      df::precision::fp64,
                                      typename Step::clip_type,
                                      typename Step::head_type,
                                      typename Step::optim_type,
                                      df::system::omp>;

// G_f 12 → 16 → 8 ReLU, G_y 8 → 3, G_d 8 → 6 → 1 ReLU.
using relu_net = df::nn::dann_net<df::nn::mlp<12, 16, 8, df::nn::relu>,
                                  df::nn::linear<8, 3>,
                                  df::nn::mlp<8, 6, 1, df::nn::relu>>;
// Every other activation: tanh features, a leaky-ReLU classifier with a hidden layer, a sigmoid
// discriminator.
using mixed_net = df::nn::dann_net<df::nn::mlp<12, 10, 8, df::nn::tanh>,
                                   df::nn::mlp<8, 7, 4, df::nn::leaky_relu>,
                                   df::nn::mlp<8, 5, 1, df::nn::sigmoid>>;
// CDAN's G_d reads softmax(g) ⊗ h: 3 classes × 8 features.
using cdan_net = df::nn::dann_net<df::nn::mlp<12, 16, 8, df::nn::relu>,
                                  df::nn::linear<8, 3>,
                                  df::nn::mlp<24, 10, 1, df::nn::relu>>;

// MDD's adversarial classifier f' (G_d) gives one logit a class, as G_y.
using mdd_net = df::nn::dann_net<df::nn::mlp<12, 16, 8, df::nn::relu>,
                                 df::nn::linear<8, 3>,
                                 df::nn::mlp<8, 6, 3, df::nn::relu>>;

inline df::fit_args sgd_args() {
  return {.steps = 40,
          .batch = 6,
          .lr = 0.05f,
          .momentum = 0.9f,
          .nesterov = true,
          .weight_decay = 1e-3f,
          .max_grad_norm = 0.5f,
          .max_grad_norm_discriminator = 0.3f,
          .max_grad_value = 0.05f,
          .lambda_max = 0.8f,
          .seed = 11};
}
inline df::fit_args adam_args() {
  df::fit_args a = sgd_args();
  a.lr = 0.01f;
  a.nesterov = false;
  a.weight_decay = 0.01f;
  a.lr_mult = {1.0f, 2.0f, 0.5f};
  return a;
}

// Batch k of a step: values in [-1, 1), labels in [0, classes), from the seed's user stream.
struct host_batch {
  std::vector<float> x;
  std::vector<std::int32_t> y;
};
template <class Step>
host_batch make_batch(const df::fit_args& a, std::uint32_t k) {
  df::counter_rng rng(a.seed, df::rng_stream::user, k);
  host_batch b;
  b.x.resize(std::size_t(Step::input_width * Step::rows_for(a.batch)));
  for (float& v : b.x) v = rng.uniform<float>(-1.0f, 1.0f);
  b.y.resize(std::size_t(a.batch));
  for (auto& l : b.y) l = std::int32_t(rng.below(std::uint32_t(Step::class_count)));
  return b;
}

// Puts a batch into a step's input on its system (converted to its value type).
template <class Step>
void load_batch(Step& step, const host_batch& b) {
  using T = typename Step::value_type;
  const std::vector<T> x(b.x.begin(), b.x.end());
  const df::matrix_view<T> in = step.input();
  REQUIRE(std::size_t(in.size()) == x.size());
  const std::span<std::int32_t> labels = step.source_labels();
  REQUIRE(labels.size() == b.y.size());
  if constexpr (Step::host_memory) {
    std::copy(x.begin(), x.end(), in.data);
    std::copy(b.y.begin(), b.y.end(), labels.begin());
  } else {
    using system = typename Step::system_type;
    system::upload(in.data, x.data(), x.size() * sizeof(T));
    system::upload(labels.data(), b.y.data(), b.y.size() * sizeof(std::int32_t));
  }
}

// Any step's parameters, gradients and optimizer state as doubles.
template <class Step>
std::vector<double> parameters_of(const Step& s) {
  std::vector<typename Step::value_type> v(static_cast<std::size_t>(Step::parameter_count()));
  s.read_parameters(v);
  return {v.begin(), v.end()};
}
template <class Step>
std::vector<double> gradients_of(const Step& s) {
  std::vector<typename Step::value_type> v(static_cast<std::size_t>(Step::parameter_count()));
  s.read_gradients(v);
  return {v.begin(), v.end()};
}
template <class Step>
std::vector<double> optimizer_state_of(const Step& s) {
  std::vector<typename Step::value_type> v(static_cast<std::size_t>(Step::optimizer_state_size()));
  s.read_optimizer_state(v);
  return {v.begin(), v.end()};
}
// Starts `to` from `from`'s parameters (converted to its value type).
template <class To, class From>
void copy_parameters(To& to, const From& from) {
  const std::vector<double> p = parameters_of(from);
  const std::vector<typename To::value_type> v(p.begin(), p.end());
  to.write_parameters(v);
}

inline double relative(double a, double b) {
  return std::abs(a - b) / std::max(std::abs(b), 1e-12);
}

// `steps` steps of a device step Step and of its fp64 host reference on the same batches, from
// the same parameters: every report figure and every state array agree to `tolerance`.
template <class Step>
void check_against_host(const df::fit_args& args, int steps, double tolerance) {
  Step device(args);
  host_reference<Step> host(args);
  copy_parameters(host, device);
  for (int k = 0; k < steps; ++k) {
    CAPTURE(k);
    const host_batch b = make_batch<Step>(args, std::uint32_t(k));
    load_batch(device, b);
    load_batch(host, b);
    const df::step_report d = device.run();
    const df::step_report h = host.run();
    CHECK(relative(d.label_loss, h.label_loss) < tolerance);
    CHECK(relative(d.domain_loss, h.domain_loss) < tolerance);
    CHECK(relative(d.grad_norm, h.grad_norm) < tolerance);
    CHECK(relative(d.task_grad_norm, h.task_grad_norm) < tolerance);
    CHECK(relative(d.discriminator_grad_norm, h.discriminator_grad_norm) < tolerance);
    // A logit within rounding of 0 could fall on either side: one row at most.
    CHECK(std::abs(d.domain_accuracy - h.domain_accuracy) <= 1.0 / double(2 * args.batch) + 1e-12);
    CHECK(d.lambda == h.lambda);
    CHECK(d.lr == h.lr);
    CHECK(d.skipped == h.skipped);
    CHECK(df::test::max_relative_error(std::span<const double>(gradients_of(device)),
                                       std::span<const double>(gradients_of(host))) < tolerance);
    CHECK(df::test::max_relative_error(std::span<const double>(parameters_of(device)),
                                       std::span<const double>(parameters_of(host))) < tolerance);
    CHECK(df::test::max_relative_error(std::span<const double>(optimizer_state_of(device)),
                                       std::span<const double>(optimizer_state_of(host))) <
          tolerance);
  }
}

// Dense data sets of `rows` rows for fit: classes from a linear rule, so a model can learn them.
template <class Step>
df::data::dataset make_set(df::index_t rows, df::data::domain side, std::uint32_t stream) {
  df::counter_rng rng(5, df::rng_stream::user, stream);
  df::data::host_array<float> x{{std::size_t(rows), std::size_t(Step::input_width)},
                                std::vector<float>(std::size_t(rows * Step::input_width))};
  std::vector<std::int32_t> y(static_cast<std::size_t>(rows));
  const float shift = side == df::data::domain::target ? 0.3f : 0.0f;
  for (df::index_t r = 0; r < rows; ++r) {
    float score = 0;
    for (df::index_t c = 0; c < Step::input_width; ++c) {
      const float v = rng.uniform<float>(-1.0f, 1.0f);
      x.values[std::size_t(r * Step::input_width + c)] = v + shift;
      score += c % 3 == 0 ? v : -0.5f * v;
    }
    y[std::size_t(r)] =
        std::int32_t(score > 0.5f ? 2 : (score > -0.5f ? 1 : 0)) % std::int32_t(Step::class_count);
  }
  return df::data::make_dataset(
      side == df::data::domain::source ? "device test source" : "device test target", side,
      std::move(x), std::move(y));
}

}  // namespace device_cases

TEST_SUITE(DAFUSE_TEST_SUITE) {
  using namespace device_cases;

  TEST_CASE("DANN steps (ReLU, global-norm clipping, Nesterov SGD) match the host fp64 step") {
    check_against_host<device_step<relu_net, df::head::dann<df::schedule::ganin>,
                                   df::clip::global_norm, df::optim::sgd>>(sgd_args(), 4, 1e-5);
  }

  TEST_CASE("DANN steps with tanh, leaky ReLU and sigmoid layers and Adam match the host step") {
    check_against_host<device_step<mixed_net, df::head::dann<df::schedule::ganin>,
                                   df::clip::per_module_norm, df::optim::adam>>(adam_args(), 4,
                                                                                1e-5);
  }

  TEST_CASE("source-only steps with value clipping and AdamW match the host step") {
    check_against_host<device_step<relu_net, df::head::source_only<df::schedule::ganin>,
                                   df::clip::value, df::optim::adamw>>(adam_args(), 4, 1e-5);
  }

  TEST_CASE("CDAN steps match the host step") {
    check_against_host<
        device_step<cdan_net, df::head::cdan<df::schedule::ganin>, df::clip::none, df::optim::sgd>>(
        sgd_args(), 4, 1e-5);
  }

  TEST_CASE("CDAN+E steps (entropy-weighted) with Adam match the host step") {
    check_against_host<device_step<cdan_net, df::head::cdan_e<df::schedule::ganin>,
                                   df::clip::global_norm, df::optim::adam>>(adam_args(), 4, 1e-5);
  }

  // The heads with maths of their own run their functors and products through the device
  // executor's view (backend/device/head_view.hpp).
  TEST_CASE("CORAL steps match the host step") {
    check_against_host<device_step<relu_net, df::head::coral<df::schedule::ganin>,
                                   df::clip::global_norm, df::optim::sgd>>(sgd_args(), 6, 1e-5);
  }
  TEST_CASE("MMD steps, both estimators, match the host step") {
    check_against_host<device_step<relu_net, df::head::mmd<df::schedule::ganin>,
                                   df::clip::global_norm, df::optim::sgd>>(sgd_args(), 6, 1e-5);
    check_against_host<device_step<relu_net, df::head::mmd_linear<df::schedule::ganin>,
                                   df::clip::none, df::optim::adam>>(adam_args(), 6, 1e-5);
  }
  TEST_CASE("MCC steps (G_y's backward on the target rows too) match the host step") {
    check_against_host<device_step<mixed_net, df::head::mcc<df::schedule::ganin>,
                                   df::clip::global_norm, df::optim::adam>>(adam_args(), 6, 1e-5);
  }
  TEST_CASE("MDD steps (G_d as the adversarial classifier) match the host step") {
    check_against_host<device_step<mdd_net, df::head::mdd<df::schedule::ganin>,
                                   df::clip::global_norm, df::optim::sgd>>(sgd_args(), 6, 1e-5);
  }
  TEST_CASE("fp64 device steps of a head with its own maths match the host fp64 step to 1e-10") {
    check_against_host<device_step<mixed_net, df::head::coral<df::schedule::ganin>, df::clip::none,
                                   df::optim::sgd, df::precision::fp64>>(sgd_args(), 4, 1e-10);
    check_against_host<device_step<mdd_net, df::head::mdd<df::schedule::ganin>, df::clip::none,
                                   df::optim::adam, df::precision::fp64>>(adam_args(), 4, 1e-10);
  }
  // Sums of heads: each term's weight r_i·λ_i(p) is computed in device memory as each step
  // begins, and the loss sum is a phase of its own.
  TEST_CASE("sums of heads match the host step") {
    // DANN after CORAL: G_d's input gradient, scaled by a device value (−λ), added to δh.
    check_against_host<device_step<relu_net,
                                   df::head::combine<df::head::coral<df::schedule::ganin>,
                                                     df::head::dann<df::schedule::ganin>>,
                                   df::clip::global_norm, df::optim::sgd>>(sgd_args(), 6, 1e-5);
    // CDAN+E with MCC on the target logits, MCC's weight a third.
    check_against_host<device_step<
        cdan_net,
        df::head::combine<df::head::cdan_e<df::schedule::ganin>,
                          df::head::weighted<df::head::mcc<df::schedule::ganin>, std::ratio<1, 3>>>,
        df::clip::none, df::optim::adam>>(adam_args(), 6, 1e-5);
    // MDD/10 + MCC, as docs/heads.md trains it.
    check_against_host<device_step<
        mdd_net,
        df::head::combine<df::head::weighted<df::head::mdd<df::schedule::ganin>, std::ratio<1, 10>>,
                          df::head::mcc<df::schedule::ganin>>,
        df::clip::global_norm, df::optim::sgd>>(sgd_args(), 6, 1e-5);
  }
  TEST_CASE("fp64 sums of heads match the host fp64 step to 1e-10, a fixed λ too") {
    using head = df::head::combine<
        df::head::mmd<df::schedule::ganin>,
        df::head::weighted<df::head::dann<df::schedule::ganin>, std::ratio<1, 2>>>;
    using step = device_step<mixed_net, head, df::clip::none, df::optim::adam, df::precision::fp64>;
    check_against_host<step>(adam_args(), 4, 1e-10);
    // compute_gradients(λ): every term's λ is the one given (write_uniform_weights).
    const df::fit_args args = adam_args();
    step device(args);
    host_reference<step> host(args);
    copy_parameters(host, device);
    const host_batch b = make_batch<step>(args, 0);
    load_batch(device, b);
    load_batch(host, b);
    const df::step_report d = device.compute_gradients(0.37);
    const df::step_report h = host.compute_gradients(0.37);
    CHECK(d.lambda == 0.37);
    CHECK(relative(d.domain_loss, h.domain_loss) < 1e-10);
    CHECK(relative(d.discriminator_grad_norm, h.discriminator_grad_norm) < 1e-10);
    CHECK(df::test::max_relative_error(std::span<const double>(gradients_of(device)),
                                       std::span<const double>(gradients_of(host))) < 1e-10);
    CHECK(relative(d.task_grad_norm, h.task_grad_norm) < 1e-10);
    // The weights reach G_f: another λ gives another G_f gradient.
    const df::step_report other = device.compute_gradients(0.5);
    CHECK(relative(other.task_grad_norm, d.task_grad_norm) > 1e-6);
  }
  TEST_CASE("a head's product that cannot run is refused before it is planned") {
    using step = device_step<relu_net, df::test::bad_product_head, df::clip::none, df::optim::sgd>;
    step s(sgd_args());
    CHECK(df::test::throws_naming([&] { s.run(); },
                                  {"head::product", "ldc", "at least 8", "found 7"}));
  }
  TEST_CASE("fp64 device steps match the host fp64 step to 1e-10") {
    check_against_host<device_step<mixed_net, df::head::dann<df::schedule::ganin>,
                                   df::clip::global_norm, df::optim::sgd, df::precision::fp64>>(
        sgd_args(), 4, 1e-10);
  }

  TEST_CASE("a device step gives the same bits on every run") {
    using step = device_step<relu_net, df::head::dann<df::schedule::ganin>, df::clip::global_norm,
                             df::optim::adam>;
    const df::fit_args args = adam_args();
    step a(args), b(args);
    for (int k = 0; k < 6; ++k) {
      const host_batch batch = make_batch<step>(args, std::uint32_t(k));
      load_batch(a, batch);
      load_batch(b, batch);
      const df::step_report ra = a.run(), rb = b.run();
      CHECK(ra.label_loss == rb.label_loss);
      CHECK(ra.domain_loss == rb.domain_loss);
      CHECK(ra.grad_norm == rb.grad_norm);
    }
    CHECK(parameters_of(a) == parameters_of(b));
    CHECK(optimizer_state_of(a) == optimizer_state_of(b));
  }

  TEST_CASE("infer and predict on a device step match the host step, a short last chunk included") {
    using step =
        device_step<mixed_net, df::head::dann<df::schedule::ganin>, df::clip::none, df::optim::sgd>;
    df::fit_args args = sgd_args();
    args.eval_chunk = 16;
    step device(args);
    host_reference<step> host(args);
    copy_parameters(host, device);
    const df::index_t n = 40;  // two full chunks and one of 8
    df::counter_rng rng(3, df::rng_stream::user, 99);
    std::vector<float> rows(std::size_t(n * step::input_width));
    for (float& v : rows) v = rng.uniform<float>(-2.0f, 2.0f);
    std::vector<std::int32_t> dc(n, -1), hc(n, -2);
    std::vector<float> dp(std::size_t(n * step::class_count)), hp(dp.size());
    std::vector<float> dh(std::size_t(n * step::feature_width)), hh(dh.size());
    device.infer(rows.data(), n,
                 {.classes = dc.data(), .probabilities = dp.data(), .features = dh.data()});
    host.infer(rows.data(), n,
               {.classes = hc.data(), .probabilities = hp.data(), .features = hh.data()});
    CHECK(dc == hc);
    CHECK(df::test::max_relative_error(std::span<const float>(dp), std::span<const float>(hp)) <
          1e-5);
    CHECK(df::test::max_relative_error(std::span<const float>(dh), std::span<const float>(hh)) <
          1e-5);
    std::vector<std::int32_t> predicted(n, -1);
    device.predict(rows.data(), n, predicted.data());
    CHECK(predicted == hc);
  }

  TEST_CASE("a device step's state moves through copies of exactly its size") {
    using step =
        device_step<relu_net, df::head::dann<df::schedule::ganin>, df::clip::none, df::optim::adam>;
    step s(adam_args());
    std::vector<float> p(static_cast<std::size_t>(step::parameter_count()));
    s.read_parameters(p);
    for (float& v : p) v = 0.25f * v + 0.125f;
    s.write_parameters(p);
    CHECK(parameters_of(s) == std::vector<double>(p.begin(), p.end()));
    std::vector<float> state(std::size_t(step::optimizer_state_size()), 0.5f);
    s.write_optimizer_state(state);
    CHECK(optimizer_state_of(s) == std::vector<double>(state.begin(), state.end()));
    std::vector<float> short_span(p.size() - 1);
    CHECK(df::test::throws_naming([&] { s.read_parameters(short_span); },
                                  {"parameters", std::to_string(p.size()) + " values"}));
    CHECK(
        df::test::throws_naming([&] { s.write_optimizer_state(short_span); }, {"optimizer state"}));
  }

  TEST_CASE("a label out of range is refused by the device step, naming the row") {
    using step =
        device_step<relu_net, df::head::dann<df::schedule::ganin>, df::clip::none, df::optim::sgd>;
    const df::fit_args args = sgd_args();
    step s(args);
    host_batch b = make_batch<step>(args, 0);
    b.y[3] = 7;
    load_batch(s, b);
    CHECK(df::test::throws_naming([&] { s.run(); }, {"source_labels()[3]", "7"}));
  }

  TEST_CASE("a device step resumed from a checkpoint continues bitwise as the uninterrupted one") {
    using step = device_step<relu_net, df::head::dann<df::schedule::ganin>,
                             df::clip::per_module_norm, df::optim::adamw>;
    const df::fit_args args = adam_args();
    const std::string path = (std::filesystem::temp_directory_path() /
                              ("dafuse_device_checkpoint_" + std::to_string(::getpid()) + ".ck"))
                                 .string();
    step whole(args), first(args);
    for (int k = 0; k < 3; ++k) {
      const host_batch b = make_batch<step>(args, std::uint32_t(k));
      load_batch(whole, b);
      load_batch(first, b);
      whole.run();
      first.run();
    }
    df::save_checkpoint(path, first);
    df::fit_args other = args;
    step resumed(other);
    df::load_checkpoint(path, resumed);
    std::filesystem::remove(path);
    CHECK(resumed.step_index() == 3);
    for (int k = 3; k < 6; ++k) {
      const host_batch b = make_batch<step>(args, std::uint32_t(k));
      load_batch(whole, b);
      load_batch(resumed, b);
      whole.run();
      resumed.run();
    }
    CHECK(parameters_of(resumed) == parameters_of(whole));
    CHECK(optimizer_state_of(resumed) == optimizer_state_of(whole));
  }

  TEST_CASE("the device-resident loader draws the host samplers' batches, across epochs") {
    using step =
        device_step<relu_net, df::head::dann<df::schedule::ganin>, df::clip::none, df::optim::sgd>;
    df::fit_args args = sgd_args();
    args.batch = 4;
    // 10 and 7 rows: a batch often spans two epochs, and the target's run out first.
    const df::data::dataset source = make_set<step>(10, df::data::domain::source, 3);
    const df::data::dataset target = make_set<step>(7, df::data::domain::target, 4);
    for (const std::uint64_t first : {std::uint64_t(0), std::uint64_t(5)}) {
      CAPTURE(first);
      step device(args);
      device.load_resident(source, target, first);
      df::data::batcher<df::loader::resident, df::system::omp> host(source, target, args.batch,
                                                                    args.seed, true, first);
      std::vector<float> expected(std::size_t(step::input_width * step::rows_for(args.batch)));
      std::vector<std::int32_t> expected_labels(std::size_t(args.batch));
      std::vector<float> got(expected.size());
      std::vector<std::int32_t> got_labels(expected_labels.size());
      for (int k = 0; k < 12; ++k) {
        CAPTURE(k);
        host.fill(
            df::matrix_view<float>{expected.data(), step::input_width, step::rows_for(args.batch)},
            std::span<std::int32_t>(expected_labels));
        device.enqueue();
        (void)device.last_report();  // waits for the step
        test_system::download(got.data(), device.input().data, got.size() * sizeof(float));
        test_system::download(got_labels.data(), device.source_labels().data(),
                              got_labels.size() * sizeof(std::int32_t));
        CHECK(got == expected);
        CHECK(got_labels == expected_labels);
      }
      CHECK(device.step_index() == 12);
    }
  }

  TEST_CASE("a device-resident loader refuses a domain with fewer rows than a batch") {
    using step =
        device_step<relu_net, df::head::dann<df::schedule::ganin>, df::clip::none, df::optim::sgd>;
    df::fit_args args = sgd_args();
    args.batch = 8;
    const df::data::dataset source = make_set<step>(20, df::data::domain::source, 3);
    const df::data::dataset target = make_set<step>(7, df::data::domain::target, 4);
    step device(args);
    CHECK(df::test::throws_naming([&] { device.load_resident(source, target); },
                                  {"device test target", "rows", "at least 8"}));
  }

  TEST_CASE("fit with loader::resident on a device system trains as the host step does") {
    using step = device_step<relu_net, df::head::dann<df::schedule::ganin>, df::clip::global_norm,
                             df::optim::sgd>;
    df::fit_args args = sgd_args();
    args.steps = 30;
    const df::data::dataset source = make_set<step>(300, df::data::domain::source, 1);
    const df::data::dataset target = make_set<step>(200, df::data::domain::target, 2);
    step device(args);
    host_reference<step> host(args);
    copy_parameters(host, device);
    const df::fit_result d = df::fit(device, source, target);
    const df::fit_result h = df::fit(host, source, target);
    CHECK(d.steps == 30);
    CHECK(d.skipped_steps == 0);
    CHECK(d.last.label_loss == doctest::Approx(h.last.label_loss).epsilon(1e-4));
    // 30 fp32 steps against fp64 ones: rounding grows with the steps, still far below what a
    // wrong batch or update would give.
    CHECK(df::test::max_relative_error(std::span<const double>(d.parameters),
                                       std::span<const double>(h.parameters)) < 1e-4);
    CHECK(std::abs(d.source_accuracy - h.source_accuracy) <= 2.0 / 300);
    CHECK(std::abs(d.target_accuracy - h.target_accuracy) <= 2.0 / 200);
  }
}
