// SPDX-License-Identifier: Apache-2.0
//! @file nn/lenet.hpp
//! @brief The LeNet-like DANN network of the DANN paper's digit experiments, on 16 × 16 digits.
//!
//! Ganin et al., JMLR 2016, section 5.2.1 (and tllib's digit scripts): G_f = conv 5×5 (32) →
//! max-pool 2 → conv 5×5 (48) → max-pool 2 → fc 100 → fc 100, ReLU after each convolution and fc;
//! G_y = fc 10; G_d = fc 100 → 1. The JDA digits are 16 × 16 grey images (the paper used 28 × 28):
//! both convolutions pad by 2, which keeps 16 × 16 and 8 × 8 through them, so the flattened width
//! is the paper's 4·4·48 = 768. One definition for the example, the CLI, the benchmarks and the
//! tests that use it.
#pragma once
#include <dafuse/config.hpp>
#include <dafuse/nn/activation.hpp>
#include <dafuse/nn/conv2d.hpp>
#include <dafuse/nn/dann_net.hpp>
#include <dafuse/nn/dense.hpp>

namespace dafuse::nn {

//! G_f: 16×16×1 → 16×16×32 → 8×8×32 → 8×8×48 → 4×4×48 → 768 → 100 → 100.
using digits_lenet = conv_net<image<16, 16, 1>,
                              conv2d<1, 32, 5, 1, 2>,   // 16×16×32
                              max_pool2d<2>,            // 8×8×32
                              conv2d<32, 48, 5, 1, 2>,  // 8×8×48
                              max_pool2d<2>,            // 4×4×48
                              flatten,                  // 768
                              dense<768, 100, relu>,
                              dense<100, 100, relu>>;

//! The whole network: G_f above, G_y 100 → 10 classes, G_d 100 → 100 → 1 domain logit.
using digits_lenet_dann = dann_net<digits_lenet,             // G_f
                                   linear<100, 10>,          // G_y
                                   mlp<100, 100, 1, relu>>;  // G_d

}  // namespace dafuse::nn
