// 03_mnist_usps_cuda — the demo (01_mnist_usps) on an NVIDIA GPU: the same alias with
// system::cuda as its 7th argument, trained by the same fit.
//
// Source: 2000 labelled MNIST digits; target: 1800 USPS digits whose labels are used only to
// report accuracy; pixels L2-normalised per image. Features 256 → 256 → 128 (ReLU), classifier
// 128 → 10, discriminator 128 → 128 → 1; B = 64 source + 64 target rows per step; SGD (lr 0.03,
// momentum 0.9) with Ganin's schedules, PyTorch's default initialisation, fp32 (no TF32). The
// data live in device memory (loader::resident). For each seed it trains source-only and DANN
// and times each run whole: from the step's construction and the data's upload to the final
// accuracies. --compare-host also trains DANN on the host (system::omp) for the same seeds.
//
//   examples/03_mnist_usps_cuda [--seeds 3] [--steps 3000] [--compare-host 0|1] [--data DIR]
//
// Without a CUDA device it says so and exits 77 (Meson's "skipped").
#include <dafuse/dafuse.hpp>

#include "common.hpp"

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

namespace df = dafuse;

using net = df::nn::dann_net<df::nn::mlp<256, 256, 128, df::nn::relu>,  // G_f
                             df::nn::linear<128, 10>,                   // G_y
                             df::nn::mlp<128, 128, 1, df::nn::relu>>;   // G_d
template <class Head, class System>
using step_with = df::train_step<net,
                                 df::loader::resident,
                                 df::precision::fp32,
                                 df::clip::none,
                                 Head,
                                 df::optim::sgd,
                                 System>;
using dann_head = df::head::dann<df::schedule::ganin>;
using source_only_head = df::head::source_only<df::schedule::ganin>;

// One whole run: the step built, the data uploaded, `args.steps` steps, the final accuracies.
template <class Step>
std::pair<df::fit_result, double> timed_fit(const df::data::dataset& source,
                                            const df::data::dataset& target,
                                            const df::fit_args& args) {
  const auto start = std::chrono::steady_clock::now();
  df::fit_result r = df::fit<Step>(source, target, args);
  return {r, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()};
}

int main(int argc, char** argv) try {
  examples::check_options(argc, argv, {"--seeds", "--steps", "--compare-host", "--data"},
                          "[--seeds 3] [--steps 3000] [--compare-host 1|0] [--data DIR]");
  const long seeds = examples::option(argc, argv, "--seeds", 3);
  const long steps = examples::option(argc, argv, "--steps", 3000);
  const bool compare_host = examples::text_option(argc, argv, "--compare-host", "1") != "0";
  const std::filesystem::path dir = examples::text_option(
      argc, argv, "--data", std::string(DAFUSE_SOURCE_DIR) + "/data/jda_mnist_usps");
  if (!df::backend::cuda::device_available()) {
    std::printf("03_mnist_usps_cuda: no CUDA device: nothing to run\n");
    return 77;
  }
  df::data::dataset mnist = df::data::load_dataset(
      dir / "mnist_images.npy", dir / "mnist_labels.npy", df::data::domain::source);
  df::data::dataset usps = df::data::load_dataset(dir / "usps_images.npy", dir / "usps_labels.npy",
                                                  df::data::domain::target);
  df::data::l2_normalize_rows(mnist);
  df::data::l2_normalize_rows(usps);
  std::printf(
      "MNIST -> USPS on the GPU: %ld source rows, %ld target rows, %ld steps, %ld seed(s)\n",
      long(mnist.rows), long(usps.rows), steps, seeds);
  std::vector<double> so_acc, da_acc, host_acc, da_seconds, host_seconds;
  for (long seed = 1; seed <= seeds; ++seed) {
    const df::fit_args args{.steps = steps,
                            .batch = 64,
                            .lr = 0.03f,
                            .momentum = 0.9f,
                            .lambda_max = 1.0f,
                            .seed = std::uint64_t(seed),
                            .init = df::nn::weight_init::torch_default};
    const auto [so, so_s] =
        timed_fit<step_with<source_only_head, df::system::cuda>>(mnist, usps, args);
    const auto [da, da_s] = timed_fit<step_with<dann_head, df::system::cuda>>(mnist, usps, args);
    so_acc.push_back(so.target_accuracy);
    da_acc.push_back(da.target_accuracy);
    da_seconds.push_back(da_s);
    std::printf("seed %ld: GPU source-only %.2f %% (%.3f s)   GPU DANN %.2f %% (%.3f s)", seed,
                100 * so.target_accuracy, so_s, 100 * da.target_accuracy, da_s);
    if (compare_host) {
      const auto [host, host_s] =
          timed_fit<step_with<dann_head, df::system::omp>>(mnist, usps, args);
      host_acc.push_back(host.target_accuracy);
      host_seconds.push_back(host_s);
      std::printf("   host DANN %.2f %% (%.3f s)", 100 * host.target_accuracy, host_s);
    }
    std::printf("\n");
  }
  const auto so = examples::summarize(so_acc), da = examples::summarize(da_acc);
  const auto secs = examples::summarize(da_seconds);
  std::printf(
      "GPU target accuracy over %ld seed(s): source-only %.2f ± %.2f %%, DANN %.2f ± %.2f %%\n",
      seeds, 100 * so.mean, 100 * so.std, 100 * da.mean, 100 * da.std);
  std::printf("GPU DANN run, upload to final accuracy: %.1f ms (mean)\n", 1e3 * secs.mean);
  const auto host = examples::summarize(host_acc.empty() ? std::vector<double>{0} : host_acc);
  const auto host_secs =
      examples::summarize(host_seconds.empty() ? std::vector<double>{0} : host_seconds);
  std::printf(
      "{\"task\": \"mnist->usps\", \"device\": \"cuda\", \"steps\": %ld, \"seeds\": %ld, "
      "\"source_only_target_acc\": %.4f, \"dann_target_acc\": %.4f, \"dann_target_acc_std\": %.4f, "
      "\"dann_seconds\": %.4f, \"host_dann_target_acc\": %.4f, \"host_dann_seconds\": %.4f}\n",
      steps, seeds, so.mean, da.mean, da.std, secs.mean, host.mean, host_secs.mean);
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "%s\n", e.what());
  return 1;
}
