// SPDX-License-Identifier: Apache-2.0
// bench/compile_time.sh: a user's translation unit with one train_step type (the demo's network,
// fp32, DANN, SGD) trained by fit on two data sets read from NPY files. It includes what it uses;
// the script also compiles it with the umbrella header forced in first (-include), plain and from
// a precompiled header.
#include <dafuse/data/dataset.hpp>
#include <dafuse/head/dann.hpp>
#include <dafuse/policy/optim.hpp>
#include <dafuse/train/fit.hpp>

#include <cstdio>

namespace df = dafuse;

using net = df::nn::dann_net<df::nn::mlp<256, 256, 128, df::nn::relu>,  // G_f
                             df::nn::linear<128, 10>,                   // G_y
                             df::nn::mlp<128, 128, 1, df::nn::relu>>;   // G_d
using step = df::train_step<net,
                            df::loader::resident,
                            df::precision::fp32,
                            df::clip::global_norm,
                            df::head::dann<df::schedule::ganin>,
                            df::optim::sgd>;

int main(int argc, char** argv) try {
  if (argc != 5) {
    std::fprintf(stderr, "usage: one_step SOURCE_X SOURCE_Y TARGET_X TARGET_Y (NPY files)\n");
    return 2;
  }
  const df::data::dataset source =
      df::data::load_dataset(argv[1], argv[2], df::data::domain::source);
  const df::data::dataset target =
      df::data::load_dataset(argv[3], argv[4], df::data::domain::target);
  const df::fit_result r = df::fit<step>(source, target, {.steps = 100, .batch = 64, .lr = 0.03f});
  std::printf("target accuracy %.4f\n", r.target_accuracy);
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "%s\n", e.what());
  return 1;
}
