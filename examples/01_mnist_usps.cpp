// 01_mnist_usps — the demo: DANN vs source-only on MNIST → USPS (JDA 16×16 digits).
//
// Source: 2000 labelled MNIST digits; target: 1800 USPS digits whose labels are used only to
// report accuracy. Pixels are L2-normalised per image. The network is the reference PyTorch
// set-up the demo is compared with: features 256 → 256 → 128 (ReLU), classifier 128 → 10,
// discriminator 128 → 128 → 1; B = 64 source + 64 target rows per step; 3000 steps of SGD
// (lr 0.03, momentum 0.9) with Ganin's schedules (λ_max = 1) and PyTorch's default
// initialisation. Source-only trains the same network with the same steps and learning-rate
// schedule, without the discriminator. Each seed trains both; the demo prints each seed, then
// mean ± std, and ends with one JSON line.
//
// --precision bf16 or fp16 (with PyTorch's dynamic loss scaling) trains in mixed precision.
//
//   examples/01_mnist_usps [--seeds 5] [--steps 3000] [--precision fp32|bf16|fp16] [--data DIR]
#include <dafuse/dafuse.hpp>

#include "common.hpp"

#include <cstdio>
#include <string>
#include <vector>

namespace df = dafuse;

using net = df::nn::dann_net<df::nn::mlp<256, 256, 128, df::nn::relu>,  // G_f
                             df::nn::linear<128, 10>,                   // G_y
                             df::nn::mlp<128, 128, 1, df::nn::relu>>;   // G_d
template <class Precision, class Head>
using step_with =
    df::train_step<net, df::loader::resident, Precision, df::clip::none, Head, df::optim::sgd>;

// Trains source-only and DANN in `Precision` for each seed and prints the summary.
template <class Precision>
int run(const df::data::dataset& mnist,
        const df::data::dataset& usps,
        long seeds,
        long steps,
        const std::string& precision) {
  using source_only_step = step_with<Precision, df::head::source_only<df::schedule::ganin>>;
  using dann_step = step_with<Precision, df::head::dann<df::schedule::ganin>>;
  std::printf("MNIST -> USPS: %ld source rows, %ld target rows, %ld steps, %ld seed(s), %s\n",
              long(mnist.rows), long(usps.rows), steps, seeds, precision.c_str());
  const examples::comparison runs = examples::compare_heads<source_only_step, dann_step>(
      mnist, usps, seeds, [&](std::uint64_t seed) {
        return df::fit_args{.steps = steps,
                            .batch = 64,
                            .lr = 0.03f,
                            .momentum = 0.9f,
                            .lambda_max = 1.0f,
                            .seed = seed,
                            .init = df::nn::weight_init::torch_default};
      });
  const double seconds = runs.seconds;
  const auto so = examples::summarize(runs.source_only), da = examples::summarize(runs.dann);
  std::printf("target accuracy over %ld seed(s): source-only %.2f ± %.2f %%, DANN %.2f ± %.2f %%\n",
              seeds, 100 * so.mean, 100 * so.std, 100 * da.mean, 100 * da.std);
  std::printf("training time: %.2f s in all, %.2f s per run of %ld steps\n", seconds,
              seconds / double(2 * seeds), steps);
  if (runs.skipped_steps > 0)
    std::printf("skipped steps (loss-scale overflows): %ld in all\n", runs.skipped_steps);
  std::printf(
      "{\"task\": \"mnist->usps\", \"precision\": \"%s\", \"source_only_target_acc\": %.4f, "
      "\"source_only_target_acc_std\": %.4f, \"dann_target_acc\": %.4f, "
      "\"dann_target_acc_std\": %.4f, \"steps\": %ld, \"seeds\": %ld, \"seconds\": %.3f, "
      "\"skipped_steps\": %ld}\n",
      precision.c_str(), so.mean, so.std, da.mean, da.std, steps, seeds, seconds,
      runs.skipped_steps);
  return 0;
}

int main(int argc, char** argv) try {
  examples::check_options(argc, argv, {"--seeds", "--steps", "--precision", "--data"},
                          "[--seeds 5] [--steps 3000] [--precision fp32|bf16|fp16] [--data DIR]");
  const long seeds = examples::option(argc, argv, "--seeds", 5);
  const long steps = examples::option(argc, argv, "--steps", 3000);
  const std::string precision = examples::text_option(argc, argv, "--precision", "fp32");
  const std::filesystem::path dir = examples::text_option(
      argc, argv, "--data", std::string(DAFUSE_SOURCE_DIR) + "/data/jda_mnist_usps");

  df::data::dataset mnist = df::data::load_dataset(
      dir / "mnist_images.npy", dir / "mnist_labels.npy", df::data::domain::source);
  df::data::dataset usps = df::data::load_dataset(dir / "usps_images.npy", dir / "usps_labels.npy",
                                                  df::data::domain::target);
  df::data::l2_normalize_rows(mnist);
  df::data::l2_normalize_rows(usps);

  if (precision == "fp32") return run<df::precision::fp32>(mnist, usps, seeds, steps, precision);
  if (precision == "bf16") return run<df::precision::bf16>(mnist, usps, seeds, steps, precision);
  if (precision == "fp16")
    return run<df::precision::fp16<df::loss_scale::dynamic>>(mnist, usps, seeds, steps, precision);
  std::fprintf(stderr, "%s: --precision: expected fp32, bf16 or fp16, found '%s'\n", argv[0],
               precision.c_str());
  return 2;
} catch (const std::exception& e) {
  std::fprintf(stderr, "%s\n", e.what());
  return 1;
}
