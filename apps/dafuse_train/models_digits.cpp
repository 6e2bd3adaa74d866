// SPDX-License-Identifier: Apache-2.0
// Registry family "digits": the MNIST→USPS demo network (examples/01_mnist_usps.cpp), 16×16
// images: G_f 256 → 256 → 128 ReLU, G_y 128 → 10, G_d 128 → 128 → 1; SGD, Ganin's schedules.
#include "registry.hpp"
#include "run.hpp"

namespace dafuse_train {
namespace {
using net = df::nn::dann_net<df::nn::mlp<256, 256, 128, df::nn::relu>,
                             df::nn::linear<128, 10>,
                             df::nn::mlp<128, 128, 1, df::nn::relu>>;
template <class Precision, class Clip, class Head>
using step = df::train_step<net, df::loader::resident, Precision, Clip, Head, df::optim::sgd>;
using dann = df::head::dann<df::schedule::ganin>;
using source_only = df::head::source_only<df::schedule::ganin>;

constexpr model_defaults defaults{.steps = 3000, .batch = 64, .lr = 0.03, .momentum = 0.9};
const model_entry models[] = {
    {"digits-dann", "256-256-128 ReLU, 10 classes, 128-128-1 discriminator; fp32, no clip, DANN",
     256, 10, false, defaults, run_model<step<df::precision::fp32, df::clip::none, dann>>},
    {"digits-dann-bf16", "the same with bf16 products (fp32 master weights)", 256, 10, false,
     defaults, run_model<step<df::precision::bf16, df::clip::none, dann>>},
    {"digits-dann-clip", "the same in fp32 with global-norm clipping (--max-grad-norm)", 256, 10,
     false, defaults, run_model<step<df::precision::fp32, df::clip::global_norm, dann>>},
    {"digits-source-only", "the same network without the discriminator (the baseline)", 256, 10,
     false, defaults, run_model<step<df::precision::fp32, df::clip::none, source_only>>},
};
}  // namespace

std::span<const model_entry> digits_models() {
  return models;
}

}  // namespace dafuse_train
