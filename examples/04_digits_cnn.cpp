// 04_digits_cnn — DANN vs source-only with a convolutional feature extractor on the JDA digits.
//
// The LeNet-like network of the DANN paper's digit experiments (Ganin et al., JMLR 2016):
// G_f = conv 5×5 (32) → max-pool 2 → conv 5×5 (48) → max-pool 2 → fc 100 → fc 100 (ReLU after
// each convolution and fc), G_y = fc 10, G_d = fc 100 → 1. The JDA digits are 16 × 16 (the paper
// used 28 × 28): both convolutions pad by 2, which keeps 16 × 16 and 8 × 8 through them, so the
// flattened width is the paper's 4·4·48 = 768. Pixels in [0, 1] as stored, images NHWC (one
// channel). B = 64 source + 64 target rows per step, SGD (lr 0.01, momentum 0.9) with Ganin's
// schedules (λ_max = 1), PyTorch's default initialisation. Source-only trains the same network
// with the same steps, without the discriminator. Each seed trains both; the example prints each
// seed, then mean ± std, and ends with one JSON line.
//
//   examples/04_digits_cnn [--task mnist-usps|usps-mnist] [--seeds 5] [--first-seed 1]
//                          [--steps 3000] [--data DIR]
// (--first-seed S runs seeds S, …, S + seeds − 1: a long comparison split into parts gives the
// same runs.)
#include <dafuse/dafuse.hpp>

#include "common.hpp"

#include <cstdio>
#include <string>

namespace df = dafuse;
namespace nn = df::nn;

// G_f, G_y and G_d as above: nn::digits_lenet_dann (dafuse/nn/lenet.hpp, which spells it out).
using net = nn::digits_lenet_dann;
template <class Head>
using step_with = df::train_step<net,
                                 df::loader::resident,
                                 df::precision::fp32,
                                 df::clip::none,
                                 Head,
                                 df::optim::sgd>;

int main(int argc, char** argv) try {
  examples::check_options(argc, argv, {"--task", "--seeds", "--first-seed", "--steps", "--data"},
                          "[--task mnist-usps|usps-mnist] [--seeds 5] [--first-seed 1] "
                          "[--steps 3000] [--data DIR]");
  const long seeds = examples::option(argc, argv, "--seeds", 5);
  const long first_seed = examples::option(argc, argv, "--first-seed", 1);
  const long steps = examples::option(argc, argv, "--steps", 3000);
  const std::string task = examples::text_option(argc, argv, "--task", "mnist-usps");
  const std::filesystem::path dir = examples::text_option(
      argc, argv, "--data", std::string(DAFUSE_SOURCE_DIR) + "/data/jda_mnist_usps");
  if (task != "mnist-usps" && task != "usps-mnist") {
    std::fprintf(stderr, "%s: --task: expected mnist-usps or usps-mnist, found '%s'\n", argv[0],
                 task.c_str());
    return 2;
  }
  const bool from_mnist = task == "mnist-usps";
  const std::string source_name = from_mnist ? "mnist" : "usps";
  const std::string target_name = from_mnist ? "usps" : "mnist";
  const df::data::dataset source =
      df::data::load_dataset(dir / (source_name + "_images.npy"),
                             dir / (source_name + "_labels.npy"), df::data::domain::source);
  const df::data::dataset target =
      df::data::load_dataset(dir / (target_name + "_images.npy"),
                             dir / (target_name + "_labels.npy"), df::data::domain::target);

  using source_only_step = step_with<df::head::source_only<df::schedule::ganin>>;
  using dann_step = step_with<df::head::dann<df::schedule::ganin>>;
  std::printf("%s (CNN): %ld source rows, %ld target rows, %ld steps, %ld seed(s)\n", task.c_str(),
              long(source.rows), long(target.rows), steps, seeds);
  const examples::comparison runs = examples::compare_heads<source_only_step, dann_step>(
      source, target, seeds,
      [&](std::uint64_t seed) {
        return df::fit_args{.steps = steps,
                            .batch = 64,
                            .lr = 0.01f,
                            .momentum = 0.9f,
                            .lambda_max = 1.0f,
                            .seed = seed,
                            .init = df::nn::weight_init::torch_default};
      },
      first_seed);
  const auto so = examples::summarize(runs.source_only), da = examples::summarize(runs.dann);
  std::printf("target accuracy over %ld seed(s): source-only %.2f ± %.2f %%, DANN %.2f ± %.2f %%\n",
              seeds, 100 * so.mean, 100 * so.std, 100 * da.mean, 100 * da.std);
  std::printf("training time: %.2f s in all, %.2f s per run of %ld steps\n", runs.seconds,
              runs.seconds / double(2 * seeds), steps);
  std::printf(
      "{\"task\": \"%s\", \"network\": \"lenet\", \"source_only_target_acc\": %.4f, "
      "\"source_only_target_acc_std\": %.4f, \"dann_target_acc\": %.4f, "
      "\"dann_target_acc_std\": %.4f, \"steps\": %ld, \"seeds\": %ld, \"first_seed\": %ld, "
      "\"seconds\": %.3f}\n",
      task.c_str(), so.mean, so.std, da.mean, da.std, steps, seeds, first_seed, runs.seconds);
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "%s\n", e.what());
  return 1;
}
