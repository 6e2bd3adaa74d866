// Adaptation heads side by side on real data: source-only, DANN, CDAN and CDAN+E on the demo's
// MNIST → USPS set-up (JDA 16×16 digits shipped in data/, L2-normalised pixels; G_f 256 → 256 →
// 128 ReLU, G_y 128 → 10, G_d 128 → 128 → 1 for DANN and 1280 → 128 → 1 for CDAN, which reads
// softmax(g) ⊗ h; B = 64 + 64, SGD lr 0.03 momentum 0.9, Ganin's schedules, λ_max = 1, PyTorch's
// default initialisation). Prints each head's target accuracy over seeds 1..N as mean ± std and
// its training time per run, and one JSON line.
//
//   build/bench/heads_accuracy [--seeds 5] [--steps 3000] [--data DIR]
#include <dafuse/dafuse.hpp>

#include "../examples/common.hpp"

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

namespace df = dafuse;

namespace {

template <df::index_t DiscriminatorInput>
using digits_net = df::nn::dann_net<df::nn::mlp<256, 256, 128, df::nn::relu>,
                                    df::nn::linear<128, 10>,
                                    df::nn::mlp<DiscriminatorInput, 128, 1, df::nn::relu>>;
template <class Head, df::index_t DiscriminatorInput = 128>
using digits_step = df::train_step<digits_net<DiscriminatorInput>,
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
                long steps) {
  std::vector<double> accuracy;
  double seconds = 0;
  for (long seed = 1; seed <= seeds; ++seed) {
    const df::fit_args args{.steps = steps,
                            .batch = 64,
                            .lr = 0.03f,
                            .momentum = 0.9f,
                            .lambda_max = 1.0f,
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
  df::data::dataset mnist = df::data::load_dataset(
      dir / "mnist_images.npy", dir / "mnist_labels.npy", df::data::domain::source);
  df::data::dataset usps = df::data::load_dataset(dir / "usps_images.npy", dir / "usps_labels.npy",
                                                  df::data::domain::target);
  df::data::l2_normalize_rows(mnist);
  df::data::l2_normalize_rows(usps);
  std::printf("MNIST -> USPS: %ld seed(s) of %ld steps per head\n", seeds, steps);
  using ganin = df::schedule::ganin;
  const head_result results[] = {
      run<digits_step<df::head::source_only<ganin>>>("source-only", mnist, usps, seeds, steps),
      run<digits_step<df::head::dann<ganin>>>("DANN", mnist, usps, seeds, steps),
      run<digits_step<df::head::cdan<ganin>, 1280>>("CDAN", mnist, usps, seeds, steps),
      run<digits_step<df::head::cdan_e<ganin>, 1280>>("CDAN+E", mnist, usps, seeds, steps)};
  std::printf("\n| head | target accuracy (mean ± std over %ld seeds) | seconds per run |\n",
              seeds);
  std::printf("| --- | --- | --- |\n");
  for (const head_result& h : results)
    std::printf("| %s | %.2f ± %.2f %% | %.2f |\n", h.name, 100 * h.mean, 100 * h.std,
                h.seconds_per_run);
  std::printf("{\"task\": \"mnist->usps\", \"seeds\": %ld, \"steps\": %ld", seeds, steps);
  for (const head_result& h : results)
    std::printf(", \"%s\": {\"acc\": %.4f, \"std\": %.4f, \"seconds_per_run\": %.3f}", h.name,
                h.mean, h.std, h.seconds_per_run);
  std::printf("}\n");
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "%s\n", e.what());
  return 1;
}
