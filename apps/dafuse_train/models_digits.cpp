// SPDX-License-Identifier: Apache-2.0
// Registry family "digits": the MNIST→USPS demo network (examples/01_mnist_usps.cpp), 16×16
// images: G_f 256 → 256 → 128 ReLU, G_y 128 → 10, G_d 128 → 128 → 1; SGD, Ganin's schedules.
// The MCC and CDAN+E + MCC entries are the heads that did best on MNIST → USPS (docs/heads.md).
#include "registry.hpp"
#include "run.hpp"

namespace dafuse_train {
namespace {
using net = df::nn::dann_net<df::nn::mlp<256, 256, 128, df::nn::relu>,
                             df::nn::linear<128, 10>,
                             df::nn::mlp<128, 128, 1, df::nn::relu>>;
template <class Precision, class Clip, class Head, class Net = net>
using step = df::train_step<Net, df::loader::resident, Precision, Clip, Head, df::optim::sgd>;
// CDAN's G_d reads softmax(g) ⊗ h: 10 × 128 values a row.
using cdan_net = df::nn::dann_net<df::nn::mlp<256, 256, 128, df::nn::relu>,
                                  df::nn::linear<128, 10>,
                                  df::nn::mlp<1280, 128, 1, df::nn::relu>>;
// MDD's G_d is the adversarial classifier f': 128 → 128 → 10, one logit a class.
using mdd_net = df::nn::dann_net<df::nn::mlp<256, 256, 128, df::nn::relu>,
                                 df::nn::linear<128, 10>,
                                 df::nn::mlp<128, 128, 10, df::nn::relu>>;
using mcc = df::head::mcc<df::schedule::ganin>;
using cdan_e_mcc = df::head::combine<df::head::cdan_e<df::schedule::ganin>, mcc>;
using dann = df::head::dann<df::schedule::ganin>;
using source_only = df::head::source_only<df::schedule::ganin>;

constexpr model_defaults defaults{.steps = 3000, .batch = 64, .lr = 0.03, .momentum = 0.9};
// MDD's reversal weight rises to 0.1, as tllib's (at 1 it collapses on MNIST → USPS:
// docs/heads.md "MDD").
constexpr model_defaults mdd_defaults{
    .steps = 3000, .batch = 64, .lr = 0.03, .momentum = 0.9, .lambda_max = 0.1};
const model_entry models[] = {
    {"digits-dann", "256-256-128 ReLU, 10 classes, 128-128-1 discriminator; fp32, no clip, DANN",
     256, 10, false, defaults, run_model<step<df::precision::fp32, df::clip::none, dann>>},
    {"digits-dann-bf16", "the same with bf16 products (fp32 master weights)", 256, 10, false,
     defaults, run_model<step<df::precision::bf16, df::clip::none, dann>>},
    {"digits-dann-clip", "the same in fp32 with global-norm clipping (--max-grad-norm)", 256, 10,
     false, defaults, run_model<step<df::precision::fp32, df::clip::global_norm, dann>>},
    {"digits-source-only", "the same network without the discriminator (the baseline)", 256, 10,
     false, defaults, run_model<step<df::precision::fp32, df::clip::none, source_only>>},
    {"digits-mcc", "the same with Minimum Class Confusion on the target logits (no G_d)", 256, 10,
     false, defaults, run_model<step<df::precision::fp32, df::clip::none, mcc>>},
    {"digits-cdan-e-mcc", "CDAN+E (G_d 1280-128-1 on softmax(g) x h) plus MCC", 256, 10, false,
     defaults, run_model<step<df::precision::fp32, df::clip::none, cdan_e_mcc, cdan_net>>},
    {"digits-mdd", "MDD (margin 4): G_d 128-128-10 is the adversarial classifier f'", 256, 10,
     false, mdd_defaults,
     run_model<
         step<df::precision::fp32, df::clip::none, df::head::mdd<df::schedule::ganin>, mdd_net>>},
};
}  // namespace

std::span<const model_entry> digits_models() {
  return models;
}

}  // namespace dafuse_train
