// Adaptation heads side by side on real data: source-only, DANN, CDAN, CDAN+E, Deep CORAL, MMD
// (quadratic and linear-time), MCC, CDAN+E + MCC and MDD on the demo's
// MNIST → USPS set-up (JDA 16×16 digits shipped in data/, L2-normalised pixels; G_f 256 → 256 →
// 128 ReLU, G_y 128 → 10, G_d 128 → 128 → 1 for DANN and 1280 → 128 → 1 for CDAN, which reads
// softmax(g) ⊗ h, and 128 → 128 → 10 for MDD's adversarial classifier; B = 64 + 64, SGD lr 0.03
// momentum 0.9, Ganin's schedules, λ_max = 1, PyTorch's default initialisation). Prints each head's
// target accuracy over seeds 1..N as mean ± std and its training time per run, and one JSON line.
// --heads picks some (a comma-separated list of source_only, dann, cdan, cdan_e, coral, mmd,
// mmd_linear, mcc, cdan_e+mcc, mdd, mdd/10+mcc; all by default);
// --lambda-max sets the heads' λ_max.
//
//   build/bench/heads_accuracy [--seeds 5] [--steps 3000] [--data DIR] [--heads LIST]
//                              [--lambda-max 1] [--reverse 1]
#include <dafuse/dafuse.hpp>

#include "../examples/common.hpp"

#include <cstdio>
#include <filesystem>
#include <ratio>
#include <string>
#include <vector>

namespace df = dafuse;

namespace {

template <df::index_t DiscriminatorInput, df::index_t DiscriminatorOutput>
using digits_net =
    df::nn::dann_net<df::nn::mlp<256, 256, 128, df::nn::relu>,
                     df::nn::linear<128, 10>,
                     df::nn::mlp<DiscriminatorInput, 128, DiscriminatorOutput, df::nn::relu>>;
template <class Head, df::index_t DiscriminatorInput = 128, df::index_t DiscriminatorOutput = 1>
using digits_step = df::train_step<digits_net<DiscriminatorInput, DiscriminatorOutput>,
                                   df::loader::resident,
                                   df::precision::fp32,
                                   df::clip::none,
                                   Head,
                                   df::optim::sgd>;

struct head_result {
  const char* name;
  double mean = 0, std = 0, seconds_per_run = 0;
};

template <class Step>
head_result run(const char* name,
                const df::data::dataset& source,
                const df::data::dataset& target,
                long seeds,
                long steps,
                float lambda_max) {
  std::vector<double> accuracy;
  double seconds = 0;
  for (long seed = 1; seed <= seeds; ++seed) {
    const df::fit_args args{.steps = steps,
                            .batch = 64,
                            .lr = 0.03f,
                            .momentum = 0.9f,
                            .lambda_max = lambda_max,
                            .seed = std::uint64_t(seed),
                            .init = df::nn::weight_init::torch_default};
    const df::fit_result r = df::fit<Step>(source, target, args);
    accuracy.push_back(r.target_accuracy);
    seconds += r.seconds;
    std::printf("%-12s seed %ld: %.2f %% (%.2f s)\n", name, seed, 100 * r.target_accuracy,
                r.seconds);
  }
  const examples::summary s = examples::summarize(accuracy);
  return {name, s.mean, s.std, seconds / double(seeds)};
}

}  // namespace

int main(int argc, char** argv) try {
  const long seeds = examples::option(argc, argv, "--seeds", 5);
  const long steps = examples::option(argc, argv, "--steps", 3000);
  const std::filesystem::path dir = examples::text_option(
      argc, argv, "--data", std::string(DAFUSE_SOURCE_DIR) + "/data/jda_mnist_usps");
  // --reverse 1: USPS → MNIST (the same set-up, the domains swapped).
  const bool reverse = examples::option(argc, argv, "--reverse", 0) != 0;
  const auto load = [&](const char* name, bool source) {
    df::data::dataset d = df::data::load_dataset(
        dir / (std::string(name) + "_images.npy"), dir / (std::string(name) + "_labels.npy"),
        source ? df::data::domain::source : df::data::domain::target);
    df::data::l2_normalize_rows(d);
    return d;
  };
  const df::data::dataset mnist = load("mnist", !reverse), usps = load("usps", reverse);
  const df::data::dataset& source = reverse ? usps : mnist;
  const df::data::dataset& target = reverse ? mnist : usps;
  const char* task = reverse ? "usps->mnist" : "mnist->usps";
  std::printf("%s: %ld seed(s) of %ld steps per head\n", task, seeds, steps);
  const std::string heads = "," +
                            examples::text_option(argc, argv, "--heads",
                                                  "source_only,dann,cdan,cdan_e,coral,mmd,"
                                                  "mmd_linear,mcc,cdan_e+mcc,mdd,mdd/10+mcc") +
                            ",";
  const float lambda_max = std::stof(examples::text_option(argc, argv, "--lambda-max", "1"));
  using ganin = df::schedule::ganin;
  std::vector<head_result> results;
  const auto pick = [&]<class Step>(const char* key, const char* name) {
    if (heads.find("," + std::string(key) + ",") != std::string::npos)
      results.push_back(run<Step>(name, source, target, seeds, steps, lambda_max));
  };
  pick.operator()<digits_step<df::head::source_only<ganin>>>("source_only", "source-only");
  pick.operator()<digits_step<df::head::dann<ganin>>>("dann", "DANN");
  pick.operator()<digits_step<df::head::cdan<ganin>, 1280>>("cdan", "CDAN");
  pick.operator()<digits_step<df::head::cdan_e<ganin>, 1280>>("cdan_e", "CDAN+E");
  pick.operator()<digits_step<df::head::coral<ganin>>>("coral", "CORAL");
  pick.operator()<digits_step<df::head::mmd<ganin>>>("mmd", "MMD");
  pick.operator()<digits_step<df::head::mmd_linear<ganin>>>("mmd_linear", "MMD (linear)");
  pick.operator()<digits_step<df::head::mcc<ganin>>>("mcc", "MCC");
  pick.
  operator()<digits_step<df::head::combine<df::head::cdan_e<ganin>, df::head::mcc<ganin>>, 1280>>(
      "cdan_e+mcc", "CDAN+E + MCC");
  // MDD's G_d is the adversarial classifier f': 128 → 128 → 10.
  pick.operator()<digits_step<df::head::mdd<ganin>, 128, 10>>("mdd", "MDD");
  // MDD at a tenth of λ_max (tllib's reversal ceiling 0.1 when λ_max = 1) plus MCC at λ_max.
  pick.operator()<
      digits_step<df::head::combine<df::head::weighted<df::head::mdd<ganin>, std::ratio<1, 10>>,
                                    df::head::mcc<ganin>>,
                  128, 10>>("mdd/10+mcc", "MDD/10 + MCC");
  std::printf("\n| head | target accuracy (mean ± std over %ld seeds) | seconds per run |\n",
              seeds);
  std::printf("| --- | --- | --- |\n");
  for (const head_result& h : results)
    std::printf("| %s | %.2f ± %.2f %% | %.2f |\n", h.name, 100 * h.mean, 100 * h.std,
                h.seconds_per_run);
  std::printf("{\"task\": \"%s\", \"seeds\": %ld, \"steps\": %ld, \"lambda_max\": %g", task, seeds,
              steps, double(lambda_max));
  for (const head_result& h : results)
    std::printf(", \"%s\": {\"acc\": %.4f, \"std\": %.4f, \"seconds_per_run\": %.3f}", h.name,
                h.mean, h.std, h.seconds_per_run);
  std::printf("}\n");
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "%s\n", e.what());
  return 1;
}
