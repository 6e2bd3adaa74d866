// 05_custom_head — a head of one's own, written outside the library (custom_head.hpp: entropy
// minimisation on the target rows' predictions), trained beside the shipped ones.
//
// The two moons of 00_two_moons (the target rotated by 35°) and its network, trained from the same
// seeds and steps three ways: source-only; DANN; and DANN plus the entropy of the target
// predictions at a tenth of DANN's weight (head::combine of a shipped head and one's own). The
// example prints the target accuracy of each.
//
//   examples/05_custom_head [--seeds 5] [--steps 3000]
#include <dafuse/dafuse.hpp>

#include "common.hpp"
#include "custom_head.hpp"

#include <cstdio>
#include <ratio>
#include <vector>

namespace df = dafuse;

using net = df::nn::dann_net<df::nn::mlp<2, 15, df::nn::sigmoid>,       // G_f
                             df::nn::linear<15, 2>,                     // G_y
                             df::nn::mlp<15, 15, 1, df::nn::sigmoid>>;  // G_d
template <class Head>
using step = df::train_step<net,
                            df::loader::resident,
                            df::precision::fp32,
                            df::clip::none,
                            Head,
                            df::optim::sgd>;
using source_only = df::head::source_only<df::schedule::ganin>;
using dann = df::head::dann<df::schedule::ganin>;
using dann_entropy = df::head::combine<
    dann,
    df::head::weighted<my_heads::entropy_minimisation<df::schedule::ganin>, std::ratio<1, 10>>>;

int main(int argc, char** argv) try {
  examples::check_options(argc, argv, {"--seeds", "--steps"}, "[--seeds 5] [--steps 3000]");
  const long seeds = examples::option(argc, argv, "--seeds", 5);
  const long steps = examples::option(argc, argv, "--steps", 3000);
  const df::data::dataset source = examples::two_moons(150, 0.05, 0, 0, df::data::domain::source);
  const df::data::dataset target = examples::two_moons(150, 0.05, 35, 1, df::data::domain::target);

  std::vector<double> accuracy[3];
  for (long seed = 1; seed <= seeds; ++seed) {
    const df::fit_args args{
        .steps = steps, .batch = 32, .lr = 0.2f, .momentum = 0.9f, .seed = std::uint64_t(seed)};
    const double runs[3] = {df::fit<step<source_only>>(source, target, args).target_accuracy,
                            df::fit<step<dann>>(source, target, args).target_accuracy,
                            df::fit<step<dann_entropy>>(source, target, args).target_accuracy};
    for (int k = 0; k < 3; ++k) accuracy[k].push_back(runs[k]);
    std::printf("seed %ld: source-only %.2f %%   DANN %.2f %%   DANN + entropy %.2f %%\n", seed,
                100 * runs[0], 100 * runs[1], 100 * runs[2]);
  }
  const auto so = examples::summarize(accuracy[0]), da = examples::summarize(accuracy[1]),
             de = examples::summarize(accuracy[2]);
  std::printf(
      "two moons, target rotated 35°, %ld steps, %ld seed(s): source-only %.1f ± %.1f %%, DANN "
      "%.1f ± %.1f %%, DANN + entropy (a head of one's own) %.1f ± %.1f %%\n",
      steps, seeds, 100 * so.mean, 100 * so.std, 100 * da.mean, 100 * da.std, 100 * de.mean,
      100 * de.std);
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "%s\n", e.what());
  return 1;
}
