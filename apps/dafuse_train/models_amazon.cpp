// SPDX-License-Identifier: Apache-2.0
// Registry family "amazon": the Amazon reviews network (examples/02_amazon_reviews.cpp), CSR
// rows of 5000 features: G_f sparse 5000 → 100 ReLU, G_y 100 → 2, G_d 100 → 1; SGD, Ganin's
// schedules with λ_max = 0.1.
#include "registry.hpp"
#include "run.hpp"

namespace dafuse_train {
namespace {
using net = df::nn::dann_net<df::nn::sparse_input<df::nn::mlp<5000, 100, df::nn::relu>>,
                             df::nn::linear<100, 2>,
                             df::nn::linear<100, 1>>;
// MDD's G_d is the adversarial classifier f': 100 → 2, one logit a class.
using mdd_net = df::nn::dann_net<df::nn::sparse_input<df::nn::mlp<5000, 100, df::nn::relu>>,
                                 df::nn::linear<100, 2>,
                                 df::nn::linear<100, 2>>;
template <class Head, class Net = net>
using step = df::
    train_step<Net, df::loader::sync, df::precision::fp32, df::clip::none, Head, df::optim::sgd>;

constexpr model_defaults defaults{
    .steps = 2000, .batch = 64, .lr = 0.01, .momentum = 0.9, .lambda_max = 0.1};
const model_entry models[] = {
    {"amazon-dann", "CSR 5000-100 ReLU, 2 classes, 100-1 discriminator; fp32, DANN (lambda 0.1)",
     5000, 2, true, defaults, run_model<step<df::head::dann<df::schedule::ganin>>>},
    {"amazon-source-only", "the same network without the discriminator", 5000, 2, true, defaults,
     run_model<step<df::head::source_only<df::schedule::ganin>>>},
    {"amazon-mdd",
     "the same G_f and G_y, MDD (margin 4) with G_d 100-2 as the adversarial "
     "classifier f' (lambda 0.1)",
     5000, 2, true, defaults, run_model<step<df::head::mdd<df::schedule::ganin>, mdd_net>>},
};
}  // namespace

std::span<const model_entry> amazon_models() {
  return models;
}

}  // namespace dafuse_train
