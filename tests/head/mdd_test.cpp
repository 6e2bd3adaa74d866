// head::mdd (head/mdd.hpp): two SGD steps against PyTorch (vectors from
// tools/make_cdan_vectors.py, see tests/data/torch/README.md), and the whole step's gradients in
// double against finite differences of a plain reference of the MDD loss, written as the paper
// states it, that holds the pseudo-labels argmax G_y(h) fixed as the head does.
//
// With L = L_y + L_mdd and reversal weight λ the step must produce ∂L_y/∂θ_y for G_y (the
// pseudo-labels carry no gradient), ∂L_mdd/∂θ_d for G_d (the adversarial classifier f') and
// ∂L_y/∂θ_f − λ·∂L_mdd/∂θ_f for G_f.
#include <dafuse/head/combine.hpp>
#include <dafuse/head/mcc.hpp>
#include <dafuse/head/mdd.hpp>
#include <dafuse/step/train_step.hpp>

#include "../check.hpp"
#include "../reference_forward.hpp"
#include "../torch_vectors.hpp"

#include <algorithm>
#include <cmath>
#include <ratio>
#include <string>
#include <utility>
#include <vector>

namespace head_mdd_test {

namespace df = dafuse;

namespace {

// ---- Against PyTorch ---------------------------------------------------------------------------

// The vectors' network: G_f 6→8→5 ReLU, G_y 5→3, f' = G_d 5→4 ReLU →3.
using torch_net = df::nn::dann_net<df::nn::mlp<6, 8, 5, df::nn::relu>,
                                   df::nn::linear<5, 3>,
                                   df::nn::mlp<5, 4, 3, df::nn::relu>>;
using torch_step = df::train_step<torch_net,
                                  df::loader::sync,
                                  df::precision::fp32,
                                  df::clip::none,
                                  df::head::mdd<df::schedule::constant>,
                                  df::optim::sgd>;

std::vector<float> torch_layout(const std::string& name) {
  return df::test::to_dafuse_layout<torch_net>(df::test::load_vector(name),
                                               df::test::load_int_vector("mdd_param_shapes"));
}

// ---- Against finite differences ----------------------------------------------------------------

// Smooth activations, so central differences are exact to O(h²); f' = G_d 4→6→3.
using smooth_net = df::nn::dann_net<df::nn::mlp<5, 7, 4, df::nn::tanh>,
                                    df::nn::linear<4, 3>,
                                    df::nn::mlp<4, 6, 3, df::nn::sigmoid>>;
constexpr df::index_t classes = smooth_net::class_count;

std::vector<double> module_params(const std::vector<double>& params,
                                  df::index_t offset,
                                  df::index_t count) {
  return {params.begin() + offset, params.begin() + offset + count};
}

struct losses {
  double label = 0, disparity = 0;
};
// The losses of the plain reference at `params` on `rows` = 2B rows: the label loss on the
// source rows, and L_mdd = γ·mean_s(−log p_ŷ) + mean_t(−log(1 − p_ŷ)), p = softmax(f'(h)),
// with the pseudo-labels ŷ taken from `fixed` (or, when it is null, from these parameters' own
// logits, returned in `seen`).
losses reference_losses(const std::vector<double>& params,
                        const std::vector<double>& x,
                        const std::vector<std::int32_t>& labels,
                        df::index_t batch,
                        double margin,
                        const std::vector<std::int32_t>* fixed,
                        std::vector<std::int32_t>* seen = nullptr) {
  using net = smooth_net;
  const df::index_t rows = 2 * batch;
  const std::vector<double> h =
      df::test::naive_forward<net::feature_stack>(
          module_params(params, net::features_offset, net::feature_stack::param_count), x, rows)
          .y.back();
  const std::vector<double> z =
      df::test::naive_forward<net::classifier_stack>(
          module_params(params, net::classifier_offset, net::classifier_stack::param_count), h,
          rows)
          .y.back();
  const std::vector<double> f =
      df::test::naive_forward<net::discriminator_stack>(
          module_params(params, net::discriminator_offset, net::discriminator_stack::param_count),
          h, rows)
          .y.back();
  std::vector<std::int32_t> own;
  losses out;
  for (df::index_t c = 0; c < rows; ++c) {
    const double* zc = &z[std::size_t(c * classes)];
    const double* fc = &f[std::size_t(c * classes)];
    own.push_back(std::int32_t(std::max_element(zc, zc + classes) - zc));
    const std::int32_t y = fixed ? (*fixed)[std::size_t(c)] : own.back();
    double sum = 0, zsum = 0;
    for (df::index_t k = 0; k < classes; ++k) {
      sum += std::exp(fc[k]);
      zsum += std::exp(zc[k]);
    }
    const double p = std::exp(fc[y]) / sum;
    if (c < batch) {
      out.label += std::log(zsum) - zc[labels[std::size_t(c)]];
      out.disparity += -margin * std::log(p);
    } else {
      out.disparity += -std::log(1.0 - p);
    }
  }
  out.label /= double(batch);
  out.disparity /= double(batch);
  if (seen) *seen = own;
  return out;
}

template <class Head>
void check_gradients(double lambda, df::index_t batch) {
  using step_type = df::train_step<smooth_net, df::loader::sync, df::precision::fp64,
                                   df::clip::none, Head, df::optim::sgd>;
  step_type step(df::fit_args{.batch = batch, .seed = 3});
  df::counter_rng rng(7, df::rng_stream::user);
  auto xv = step.input();
  for (df::index_t i = 0; i < xv.size(); ++i)
    xv.data[i] = 1.5 * rng.normal<double>() + (i >= xv.size() / 2 ? 0.4 : 0.0);
  for (auto& y : step.source_labels()) y = std::int32_t(rng.below(classes));
  const std::vector<double> x(xv.data, xv.data + xv.size());
  const std::vector<std::int32_t> labels(step.source_labels().begin(), step.source_labels().end());

  const df::step_report report = step.compute_gradients(lambda);
  const std::vector<double> analytic(step.gradients().begin(), step.gradients().end());
  std::vector<double> params(step.parameters().begin(), step.parameters().end());

  std::vector<std::int32_t> fixed;
  const losses base = reference_losses(params, x, labels, batch, Head::margin, nullptr, &fixed);
  CHECK(report.label_loss == doctest::Approx(base.label).epsilon(1e-12));
  CHECK(report.domain_loss == doctest::Approx(base.disparity).epsilon(1e-12));
  // The pseudo-labels must not all be one class, or the test would miss a mix-up of classes.
  CHECK(std::count(fixed.begin(), fixed.end(), fixed[0]) < std::ptrdiff_t(fixed.size()));

  const double h = 1e-6;
  std::vector<double> numeric(params.size(), 0.0);
  for (std::size_t i = 0; i < params.size(); ++i) {
    const double keep = params[i];
    params[i] = keep + h;
    const losses plus = reference_losses(params, x, labels, batch, Head::margin, &fixed);
    params[i] = keep - h;
    const losses minus = reference_losses(params, x, labels, batch, Head::margin, &fixed);
    params[i] = keep;
    const double d_label = (plus.label - minus.label) / (2 * h);
    const double d_disparity = (plus.disparity - minus.disparity) / (2 * h);
    const auto j = df::index_t(i);
    if (j < smooth_net::classifier_offset)
      numeric[i] = d_label - lambda * d_disparity;  // G_f: through the reversal
    else if (j < smooth_net::discriminator_offset)
      numeric[i] = d_label;  // G_y: the pseudo-labels are constants
    else
      numeric[i] = d_disparity;  // f' = G_d
  }
  CHECK(df::test::max_relative_error(std::span<const double>(analytic),
                                     std::span<const double>(numeric)) < 1e-7);
}

// The fp64 gradients and report of Head's step on smooth_net at weight λ, from seed 5's
// parameters and one fixed batch of B = 4.
template <class Head>
std::pair<std::vector<double>, df::step_report> gradients_of(double lambda) {
  using step_type = df::train_step<smooth_net, df::loader::sync, df::precision::fp64,
                                   df::clip::none, Head, df::optim::sgd>;
  step_type step(df::fit_args{.batch = 4, .seed = 5});
  df::counter_rng rng(9, df::rng_stream::user);
  auto x = step.input();
  for (df::index_t i = 0; i < x.size(); ++i)
    x.data[i] = 1.5 * rng.normal<double>() + (i >= x.size() / 2 ? 0.4 : 0.0);
  for (auto& y : step.source_labels()) y = std::int32_t(rng.below(classes));
  const df::step_report r = step.compute_gradients(lambda);
  return {{step.gradients().begin(), step.gradients().end()}, r};
}

}  // namespace

TEST_CASE("two MDD SGD steps match PyTorch, pseudo-labels argmax G_y without a gradient") {
  const std::vector<float> h = df::test::load_vector("mdd_hyper");  // λ, lr, momentum, wd, γ
  REQUIRE(double(h[4]) == df::head::mdd<>::margin);
  const df::fit_args args{.steps = 1000,
                          .batch = 4,
                          .lr = h[1],
                          .momentum = h[2],
                          .weight_decay = h[3],
                          .lambda_max = h[0]};
  torch_step step(args);
  const std::vector<float> initial = torch_layout("mdd_initial_params");
  std::copy(initial.begin(), initial.end(), step.parameters().begin());
  df::test::load_torch_batch(step, "mdd_");
  for (int k = 1; k <= 2; ++k) {
    CAPTURE(k);
    const std::string prefix = "mdd_step" + std::to_string(k) + "_";
    const std::vector<float> losses = df::test::load_vector(prefix + "losses");
    const df::step_report r = step.run();
    CHECK(r.label_loss == doctest::Approx(losses[0]).epsilon(1e-5));
    CHECK(r.domain_loss == doctest::Approx(losses[1]).epsilon(1e-5));
    CHECK(r.grad_norm == doctest::Approx(losses[2]).epsilon(1e-5));
    CHECK(r.lambda == doctest::Approx(args.lambda_max));
    const std::vector<float> grads = torch_layout(prefix + "grads");
    CHECK(df::test::max_relative_error(step.gradients(), std::span<const float>(grads)) < 1e-5);
    const std::vector<float> params = torch_layout(prefix + "params");
    CHECK(df::test::max_relative_error(std::span<const float>(step.parameters()),
                                       std::span<const float>(params)) < 1e-5);
  }
  // f''s gradients come from the MDD loss alone: they must be far from zero, or the comparison
  // could not tell that the head ran.
  const std::vector<float> grads = torch_layout("mdd_step1_grads");
  double largest = 0;
  for (std::size_t i = std::size_t(torch_net::discriminator_offset); i < grads.size(); ++i)
    largest = std::max(largest, std::abs(double(grads[i])));
  CHECK(largest > 1e-2);
}

TEST_CASE("MDD step gradients equal finite differences with the pseudo-labels held fixed") {
  check_gradients<df::head::mdd<df::schedule::constant>>(0.7, 5);
  check_gradients<df::head::mdd<df::schedule::constant, std::ratio<3, 2>>>(0.3, 4);
}

TEST_CASE("MDD with lambda = 0 leaves G_f to the label loss and still trains f'") {
  check_gradients<df::head::mdd<df::schedule::constant>>(0.0, 3);
}

TEST_CASE("head::mdd runs G_y on the target rows for their pseudo-labels, and trains G_d") {
  using step = df::train_step<smooth_net, df::loader::sync, df::precision::fp32, df::clip::none,
                              df::head::mdd<>, df::optim::sgd>;
  static_assert(step::draws_target_rows && step::trains_discriminator);
  // G_y's forward reads the target rows; its backward only the source rows' label loss.
  static_assert(step::classifier_rows_for(4) == 8 && step::classifier_backward_rows_for(4) == 4);
  static_assert(df::head::mdd<>::margin == 4.0);
  static_assert(df::head::mdd<df::schedule::ganin, std::ratio<5, 2>>::margin == 2.5);
  CHECK(df::test::throws_naming([] { step(df::fit_args{.batch = 4, .lambda_max = -1}); },
                                {"lambda_max", "head::mdd"}));
}

TEST_CASE("MDD plus MCC (factor 1/2): the gradients are the sum of the terms' gradients") {
  using mdd = df::head::mdd<df::schedule::constant>;
  using mcc = df::head::mcc<df::schedule::constant>;
  using sum = df::head::combine<mdd, df::head::weighted<mcc, std::ratio<1, 2>>>;
  static_assert(sum::discriminator_reads == df::discriminator_input::features);
  static_assert(sum::own_maths && sum::sum_count == mdd::sum_count + mcc::sum_count + 1);
  static_assert(sum::scratch_elements({4, 8, 5, 3}) ==
                mdd::scratch_elements({4, 8, 5, 3}) + mcc::scratch_elements({4, 8, 5, 3}));
  const double lambda = 0.8;
  const auto [combined, report] = gradients_of<sum>(lambda);
  const auto [disparity, mdd_report] = gradients_of<mdd>(lambda);
  const auto [confusion, mcc_report] = gradients_of<mcc>(lambda / 2);
  const auto [label_only, label_report] = gradients_of<mdd>(0.0);
  // G_f and G_y: ∂L_y counted once; G_d: MDD's alone.
  std::vector<double> expected(combined.size());
  for (std::size_t i = 0; i < expected.size(); ++i)
    expected[i] = df::index_t(i) < smooth_net::discriminator_offset
                      ? disparity[i] + confusion[i] - label_only[i]
                      : disparity[i];
  CHECK(df::test::max_relative_error(std::span<const double>(combined),
                                     std::span<const double>(expected)) < 1e-12);
  CHECK(df::test::max_relative_error(std::span<const double>(combined),
                                     std::span<const double>(disparity)) > 1e-4);
  CHECK(df::test::max_relative_error(std::span<const double>(combined),
                                     std::span<const double>(confusion)) > 1e-4);
  CHECK(report.domain_loss ==
        doctest::Approx(mdd_report.domain_loss + 0.5 * mcc_report.domain_loss).epsilon(1e-12));
  CHECK(report.domain_accuracy == mdd_report.domain_accuracy);
}

}  // namespace head_mdd_test
