// 00_two_moons — the toy problem of Ganin et al., JMLR 2016, section 5.1.1 (figure 2).
//
// Source: two interleaving half circles ("moons"), 150 points with Gaussian noise σ = 0.05,
// labelled by moon. Target: the same kind of sample (another draw), rotated by 35° about the
// data's centre, unlabelled for training. A shallow network — features 2 → 15 (sigmoid),
// classifier 15 → 2, discriminator 15 → 15 → 1 — is trained source-only and with DANN from the
// same seed and steps; the example prints the target accuracy of both.
//
//   examples/00_two_moons [--seeds 5] [--steps 3000]
#include <dafuse/dafuse.hpp>

#include "common.hpp"

#include <cmath>
#include <cstdio>
#include <numbers>
#include <vector>

namespace df = dafuse;

using net = df::nn::dann_net<df::nn::mlp<2, 15, df::nn::sigmoid>,       // G_f
                             df::nn::linear<15, 2>,                     // G_y
                             df::nn::mlp<15, 15, 1, df::nn::sigmoid>>;  // G_d
using dann_step = df::train_step<net,
                                 df::loader::resident,
                                 df::precision::fp32,
                                 df::clip::none,
                                 df::head::dann<df::schedule::ganin>,
                                 df::optim::sgd>;
using source_only_step = df::train_step<net,
                                        df::loader::resident,
                                        df::precision::fp32,
                                        df::clip::none,
                                        df::head::source_only<df::schedule::ganin>,
                                        df::optim::sgd>;

// `n` points of two moons (as scikit-learn's make_moons: upper moon label 0, lower moon label 1,
// t evenly spaced on [0, π]) with N(0, noise²) jitter, rotated by `degrees` about (0.5, 0.25).
df::data::dataset two_moons(
    int n, double noise, double degrees, std::uint32_t draw, df::data::domain side) {
  df::counter_rng rng(2016, df::rng_stream::synthetic_data, draw);
  const double a = degrees * std::numbers::pi / 180, c = std::cos(a), s = std::sin(a);
  df::data::host_array<float> x{{std::size_t(n), 2}, std::vector<float>(2 * std::size_t(n))};
  std::vector<std::int32_t> y(static_cast<std::size_t>(n));
  const int half = n / 2;
  for (int i = 0; i < n; ++i) {
    const bool lower = i >= half;
    const int k = lower ? i - half : i, count = lower ? n - half : half;
    const double t = std::numbers::pi * k / (count - 1);
    double px = lower ? 1 - std::cos(t) : std::cos(t);
    double py = lower ? 0.5 - std::sin(t) : std::sin(t);
    px += noise * rng.normal<double>() - 0.5;
    py += noise * rng.normal<double>() - 0.25;
    x.values[2 * i] = float(c * px - s * py + 0.5);
    x.values[2 * i + 1] = float(s * px + c * py + 0.25);
    y[std::size_t(i)] = lower ? 1 : 0;
  }
  return df::data::make_dataset(
      side == df::data::domain::source ? "two moons (source)" : "two moons rotated 35° (target)",
      side, std::move(x), std::move(y));
}

int main(int argc, char** argv) try {
  examples::check_options(argc, argv, {"--seeds", "--steps"}, "[--seeds 5] [--steps 3000]");
  const long seeds = examples::option(argc, argv, "--seeds", 5);
  const long steps = examples::option(argc, argv, "--steps", 3000);
  const df::data::dataset source = two_moons(150, 0.05, 0, 0, df::data::domain::source);
  const df::data::dataset target = two_moons(150, 0.05, 35, 1, df::data::domain::target);

  const examples::comparison runs = examples::compare_heads<source_only_step, dann_step>(
      source, target, seeds, [&](std::uint64_t seed) {
        return df::fit_args{
            .steps = steps, .batch = 32, .lr = 0.2f, .momentum = 0.9f, .seed = seed};
      });
  const auto so = examples::summarize(runs.source_only), da = examples::summarize(runs.dann);
  std::printf(
      "two moons, target rotated 35°, %ld steps, %ld seed(s): source-only %.1f ± %.1f %%, "
      "DANN %.1f ± %.1f %%\n",
      steps, seeds, 100 * so.mean, 100 * so.std, 100 * da.mean, 100 * da.std);
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "%s\n", e.what());
  return 1;
}
