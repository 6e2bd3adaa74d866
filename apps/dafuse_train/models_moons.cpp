// SPDX-License-Identifier: Apache-2.0
// Registry family "moons": the two-moons network (examples/00_two_moons.cpp): G_f 2 → 15 sigmoid,
// G_y 15 → 2, G_d 15 → 15 → 1 sigmoid; SGD, Ganin's schedules.
#include "registry.hpp"
#include "run.hpp"

namespace dafuse_train {
namespace {
using net = df::nn::dann_net<df::nn::mlp<2, 15, df::nn::sigmoid>,
                             df::nn::linear<15, 2>,
                             df::nn::mlp<15, 15, 1, df::nn::sigmoid>>;
// MDD's G_d is the adversarial classifier f': 15 → 15 → 2, one logit a class.
using mdd_net = df::nn::dann_net<df::nn::mlp<2, 15, df::nn::sigmoid>,
                                 df::nn::linear<15, 2>,
                                 df::nn::mlp<15, 15, 2, df::nn::sigmoid>>;
template <class Head, class Net = net>
using step = df::train_step<Net,
                            df::loader::resident,
                            df::precision::fp32,
                            df::clip::none,
                            Head,
                            df::optim::sgd>;

constexpr model_defaults defaults{.steps = 3000, .batch = 32, .lr = 0.2, .momentum = 0.9};
const model_entry models[] = {
    {"moons-dann", "2-15 sigmoid, 2 classes, 15-15-1 sigmoid discriminator; fp32, DANN", 2, 2,
     false, defaults, run_model<step<df::head::dann<df::schedule::ganin>>>},
    {"moons-source-only", "the same network without the discriminator", 2, 2, false, defaults,
     run_model<step<df::head::source_only<df::schedule::ganin>>>},
    {"moons-mdd",
     "the same with MDD (margin 4): G_d 15-15-2 sigmoid is the adversarial "
     "classifier f'",
     2, 2, false, defaults, run_model<step<df::head::mdd<df::schedule::ganin>, mdd_net>>},
};
}  // namespace

std::span<const model_entry> moons_models() {
  return models;
}

}  // namespace dafuse_train
