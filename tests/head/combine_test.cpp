// head::combine (head/combine.hpp): a sum of heads has the gradients of the sum of its terms'
// losses — against finite differences of the references (reference_heads.hpp), and, for CDAN+E
// with MCC, against the sum of the terms' own steps' gradients (each of which its own test checks
// against finite differences and PyTorch).
#include <dafuse/head/cdan.hpp>
#include <dafuse/head/combine.hpp>
#include <dafuse/head/coral.hpp>
#include <dafuse/head/dann.hpp>
#include <dafuse/head/mcc.hpp>
#include <dafuse/head/mmd.hpp>

#include "reference_heads.hpp"

#include <cmath>
#include <optional>
#include <ratio>
#include <vector>

namespace head_combine_test {

namespace df = dafuse;
namespace heads = df::test::heads;
namespace head = df::head;
using df::schedule::constant;

namespace {

// G_d reads softmax(g) ⊗ h: 3 classes × 4 features.
using cdan_net = df::nn::dann_net<df::nn::mlp<5, 7, 4, df::nn::tanh>,
                                  df::nn::linear<4, 3>,
                                  df::nn::mlp<12, 6, 1, df::nn::sigmoid>>;

// The fp64 gradients and report of Head's step on cdan_net at weight λ, from seed 3's parameters
// and one fixed batch of B = 5.
template <class Head>
std::pair<std::vector<double>, df::step_report> gradients_of(double lambda) {
  using step_type = df::train_step<cdan_net, df::loader::sync, df::precision::fp64, df::clip::none,
                                   Head, df::optim::sgd>;
  step_type step(df::fit_args{.batch = 5, .seed = 3});
  df::counter_rng rng(11, df::rng_stream::user);
  auto x = step.input();
  for (df::index_t i = 0; i < x.size(); ++i)
    x.data[i] = rng.normal<double>() + (i >= x.size() / 2 ? 0.4 : 0.0);
  for (auto& y : step.source_labels()) y = std::int32_t(rng.below(3));
  const df::step_report r = step.compute_gradients(lambda);
  return {{step.gradients().begin(), step.gradients().end()}, r};
}

}  // namespace

TEST_CASE("a sum of CORAL (factor 2) and MMD has the gradients of L_y + lambda (2 CORAL + MMD)") {
  using sum =
      head::combine<head::weighted<head::coral<constant>, std::ratio<2>>, head::mmd<constant>>;
  constexpr df::index_t b = 5;
  std::optional<double> mean;  // MMD's m̄ at the step's parameters, held fixed
  heads::check_gradients<sum>(1.5, b, [&](const heads::reference_outputs& out) {
    double seen = 0;
    const double mmd = heads::reference_mmd(out, b, false, mean, &seen);
    if (!mean) mean = seen;
    return 2.0 * heads::reference_coral(out, b) + mmd;
  });
}

TEST_CASE("a sum of CORAL on h and MCC on the target logits has the gradients of their sum") {
  using sum = head::combine<head::coral<constant>, head::mcc<constant>>;
  constexpr df::index_t b = 4;
  std::optional<std::vector<double>> weights;  // MCC's entropy weights, held fixed
  heads::check_gradients<sum>(3.0, b, [&](const heads::reference_outputs& out) {
    std::vector<double> seen;
    const double mcc = heads::reference_mcc(out, b, 2.5, weights ? &*weights : nullptr, &seen);
    if (!weights) weights = seen;
    return heads::reference_coral(out, b) + mcc;
  });
}

TEST_CASE("CDAN+E plus MCC (factor 1/2): the gradients are the sum of the terms' gradients") {
  using cdan_e = head::cdan_e<constant>;
  using mcc = head::mcc<constant>;
  using sum = head::combine<cdan_e, head::weighted<mcc, std::ratio<1, 2>>>;
  static_assert(sum::discriminator_reads == df::discriminator_input::multilinear);
  static_assert(sum::classifier_reads_target && sum::writes_logit_gradient);
  const double lambda = 0.8;
  const auto [combined, report] = gradients_of<sum>(lambda);
  const auto [adversarial, cdan_report] = gradients_of<cdan_e>(lambda);
  const auto [confusion, mcc_report] = gradients_of<mcc>(lambda / 2);
  const auto [label_only, label_report] = gradients_of<cdan_e>(0.0);
  // G_f and G_y: ∂L_y counted once; G_d: CDAN+E's alone.
  std::vector<double> expected(combined.size());
  for (std::size_t i = 0; i < expected.size(); ++i)
    expected[i] = df::index_t(i) < cdan_net::discriminator_offset
                      ? adversarial[i] + confusion[i] - label_only[i]
                      : adversarial[i];
  CHECK(df::test::max_relative_error(std::span<const double>(combined),
                                     std::span<const double>(expected)) < 1e-12);
  // And the terms are both seen: the sum differs from each term's step.
  CHECK(df::test::max_relative_error(std::span<const double>(combined),
                                     std::span<const double>(adversarial)) > 1e-4);
  CHECK(df::test::max_relative_error(std::span<const double>(combined),
                                     std::span<const double>(confusion)) > 1e-4);
  CHECK(report.label_loss == doctest::Approx(cdan_report.label_loss).epsilon(1e-12));
  CHECK(report.domain_loss ==
        doctest::Approx(cdan_report.domain_loss + 0.5 * mcc_report.domain_loss).epsilon(1e-12));
  CHECK(report.domain_accuracy == cdan_report.domain_accuracy);
  CHECK(report.discriminator_grad_norm ==
        doctest::Approx(cdan_report.discriminator_grad_norm).epsilon(1e-12));
}

TEST_CASE("each term of a sum keeps its own schedule and factor") {
  using sum = head::combine<head::cdan_e<df::schedule::ganin>,
                            head::weighted<head::mcc<constant>, std::ratio<1, 4>>>;
  const df::fit_args args{.steps = 100, .lambda_max = 2.0f};
  const df::progress start{0, 100}, middle{50, 100};
  CHECK(sum::term_weights(args, start)[0] == 0.0);  // Ganin's ramp starts at 0
  CHECK(sum::term_weights(args, start)[1] == doctest::Approx(0.5));
  CHECK(sum::term_weights(args, middle)[0] ==
        doctest::Approx(2.0 * df::schedule::ganin::lambda(middle)));
  CHECK(sum::weight(args, middle) ==
        doctest::Approx(2.0 * df::schedule::ganin::lambda(middle) + 0.5));
  static_assert(std::is_same_v<sum::schedule_type, df::schedule::ganin>);
  // Training runs the sum with those weights: the report's λ is their sum.
  using step_type = df::train_step<cdan_net, df::loader::sync, df::precision::fp32,
                                   df::clip::global_norm, sum, df::optim::sgd>;
  step_type step(df::fit_args{.steps = 100, .batch = 4, .max_grad_norm = 5, .lambda_max = 2});
  df::counter_rng rng(5, df::rng_stream::user);
  for (int k = 0; k < 3; ++k) {
    auto x = step.input();
    for (df::index_t i = 0; i < x.size(); ++i) x.data[i] = rng.normal<float>();
    for (auto& y : step.source_labels()) y = std::int32_t(rng.below(3));
    const df::step_report r = step.run();
    CHECK(r.lambda == doctest::Approx(sum::weight(args, df::progress{k, 100})));
    CHECK(std::isfinite(r.grad_norm));
    CHECK(std::isfinite(r.domain_loss));
  }
}

TEST_CASE("a sum refuses arguments its terms refuse, naming the term") {
  using sum = head::combine<head::coral<constant>, head::mmd_linear<constant>>;
  using step_type = df::train_step<cdan_net, df::loader::sync, df::precision::fp32, df::clip::none,
                                   sum, df::optim::sgd>;
  CHECK(df::test::throws_naming([] { step_type(df::fit_args{.batch = 3}); },
                                {"fit_args.batch", "head::mmd", "even"}));
  CHECK(df::test::throws_naming([] { step_type(df::fit_args{.batch = 4, .lambda_max = -1}); },
                                {"lambda_max", "head::coral"}));
}

}  // namespace head_combine_test
