// SPDX-License-Identifier: Apache-2.0
// Tests for nn/lenet.hpp: the LeNet-like network resolves to the DANN paper's shapes on 16 × 16
// images (16x16x32, 8x8x32, 8x8x48, 4x4x48, 768), its parameters sit where PyTorch's count puts
// them, its stack asks for the scratch its layers need, and it is a dann_net's G_f.
#include <dafuse/nn/lenet.hpp>
#include "../check.hpp"

#include <dafuse/nn/conv2d.hpp>
#include <dafuse/nn/dann_net.hpp>

#include <algorithm>
#include <type_traits>

namespace nn_lenet_test {

namespace {

namespace nn = dafuse::nn;
using lenet = nn::digits_lenet;

}  // namespace

TEST_CASE("conv_net resolves the LeNet shapes: 16x16x1, 16x16x32, 8x8x32, 8x8x48, 4x4x48, 768") {
  using s = lenet::stack<true>;
  static_assert(s::depth == 6);  // flatten is a view, not a layer
  using c1 = s::layer<0>;
  using p1 = s::layer<1>;
  using c2 = s::layer<2>;
  using p2 = s::layer<3>;
  CHECK(nn::kind_of<c1>() == nn::layer_kind::conv2d);
  CHECK(nn::kind_of<p1>() == nn::layer_kind::max_pool2d);
  CHECK(nn::kind_of<s::layer<4>>() == nn::layer_kind::dense);
  CHECK(lenet::in == 256);
  CHECK(c1::out_height == 16);
  CHECK(c1::out_width == 16);
  CHECK(c1::out == 16 * 16 * 32);
  CHECK(c1::patch == 25);
  CHECK(p1::out == 8 * 8 * 32);
  CHECK(c2::in == 8 * 8 * 32);
  CHECK(c2::patch == 800);
  CHECK(c2::out == 8 * 8 * 48);
  CHECK(p2::out == 768);
  CHECK(lenet::out == 100);
  // Parameters: 32·25 + 32, 48·800 + 48, 768·100 + 100, 100·100 + 100.
  CHECK(c1::param_count == 832);
  CHECK(c2::param_count == 38448);
  CHECK(p1::param_count == 0);
  CHECK(s::param_count == 832 + 38448 + 76900 + 10100);
  CHECK(s::param_offset<2>() == 832);
  CHECK(s::param_offset<4>() == 832 + 38448);
  // Scratch: each pool keeps one argmax a output; the patch matrix is the larger convolution's.
  CHECK(s::index_count == 8 * 8 * 32 + 768);
  CHECK(s::index_offset<3>() == 8 * 8 * 32);
  CHECK(c2::chunk_samples == (1 << 18) / (800 * 64));
  CHECK(s::patch_elements == std::max(c1::patch_elements, c2::patch_elements));
  // The longest product side: conv1's chunk of (1 << 18) / (25 · 256) = 40 samples of 256 pixels.
  CHECK(c1::chunk_samples == 40);
  CHECK(c1::product_side == 40 * 256);
  CHECK(s::max_product_side == 40 * 256);
  CHECK(nn::has_image_layers<s>);
  CHECK(!nn::has_image_layers<nn::mlp<4, 3, nn::relu>::stack<true>>);
}

TEST_CASE("a conv_net is a dann_net feature extractor") {
  using net = nn::digits_lenet_dann;
  CHECK(std::is_same_v<net::feature_stack, lenet::stack<true>>);
  CHECK(net::input_width == 256);
  CHECK(net::feature_width == 100);
  CHECK(net::classifier_offset % 16 == 0);
  CHECK(net::classifier_offset >= lenet::stack<true>::param_count);
}

}  // namespace nn_lenet_test
