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

#include <cstdio>

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

int main(int argc, char** argv) try {
  examples::check_options(argc, argv, {"--seeds", "--steps"}, "[--seeds 5] [--steps 3000]");
  const long seeds = examples::option(argc, argv, "--seeds", 5);
  const long steps = examples::option(argc, argv, "--steps", 3000);
  const df::data::dataset source = examples::two_moons(150, 0.05, 0, 0, df::data::domain::source);
  const df::data::dataset target = examples::two_moons(150, 0.05, 35, 1, df::data::domain::target);

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
