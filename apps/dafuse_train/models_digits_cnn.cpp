// SPDX-License-Identifier: Apache-2.0
// Registry family "digits-cnn": the LeNet-like network of the DANN paper's digit experiments
// (examples/04_digits_cnn.cpp) on 16 × 16 grey images: G_f conv 5×5 (32, padding 2) → max-pool 2
// → conv 5×5 (48, padding 2) → max-pool 2 → 768 → 100 → 100 ReLU, G_y 100 → 10, G_d 100 → 100 →
// 1; fp32 (the precision conv nets train in), SGD, Ganin's schedules.
#include "registry.hpp"
#include "run.hpp"

#include <dafuse/nn/lenet.hpp>

namespace dafuse_train {
namespace {
namespace nn = df::nn;
using net = nn::digits_lenet_dann;  // dafuse/nn/lenet.hpp
template <class Head>
using step = df::train_step<net,
                            df::loader::resident,
                            df::precision::fp32,
                            df::clip::none,
                            Head,
                            df::optim::sgd>;
using dann = step<df::head::dann<df::schedule::ganin>>;
using source_only = step<df::head::source_only<df::schedule::ganin>>;

constexpr model_defaults defaults{.steps = 3000, .batch = 64, .lr = 0.01, .momentum = 0.9};
const model_entry models[] = {
    {"digits-cnn-dann",
     "LeNet-like conv 5x5 (32) pool 2, conv 5x5 (48) pool 2, 768-100-100 ReLU, 10 classes, "
     "100-100-1 discriminator; fp32, no clip, DANN",
     256, 10, false, defaults, run_model<dann>, image_of<dann>()},
    {"digits-cnn-source-only", "the same network without the discriminator (the baseline)", 256, 10,
     false, defaults, run_model<source_only>, image_of<source_only>()},
};
}  // namespace

std::span<const model_entry> digits_cnn_models() {
  return models;
}

}  // namespace dafuse_train
