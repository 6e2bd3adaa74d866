// SPDX-License-Identifier: Apache-2.0
// Tests for nn/dann_net.hpp: where each module's parameters sit in the flat buffer, the widths the
// net derives, and which modules end in an activation (G_f) or in logits (G_y, G_d).
#include <dafuse/nn/dann_net.hpp>
#include "../check.hpp"

#include <type_traits>

namespace nn_dann_net_test {

namespace {

namespace nn = dafuse::nn;

template <class Stack>
using last_activation = std::remove_cvref_t<decltype(Stack::template layer<Stack::depth - 1>::act)>;
template <class Stack, std::size_t I>
using activation_of = std::remove_cvref_t<decltype(Stack::template layer<I>::act)>;

// The brief's reference network: G_f 6 → 8 → 5 (ReLU), G_y 5 → 3, G_d 5 → 4 → 1.
using net = nn::dann_net<nn::mlp<6, 8, 5, nn::relu>, nn::linear<5, 3>, nn::mlp<5, 4, 1, nn::relu>>;
// Another shape: a one-layer tanh feature extractor, a two-layer classifier, a linear
// discriminator.
using other_net =
    nn::dann_net<nn::mlp<4, 6, nn::tanh>, nn::mlp<6, 5, 2, nn::relu>, nn::linear<6, 1>>;

}  // namespace

TEST_CASE("dann_net lays out G_f, G_y and G_d in order, each module on a 64-byte boundary") {
  // G_f: 6·8 + 8 = 56, 8·5 + 5 = 45; G_y: 5·3 + 3 = 18; G_d: 5·4 + 4 = 24, 4·1 + 1 = 5.
  CHECK(net::module_alignment == 16);
  CHECK(net::feature_stack::param_count == 101);
  CHECK(net::classifier_stack::param_count == 18);
  CHECK(net::discriminator_stack::param_count == 29);
  CHECK(net::features_offset == 0);
  CHECK(net::classifier_offset == 112);     // 101 rounded up to a multiple of 16
  CHECK(net::discriminator_offset == 144);  // 112 + 18 = 130, rounded up
  CHECK(net::task_param_count == 144);
  CHECK(net::param_count == 173);  // 144 + 29: no padding after the last module

  // G_f: 4·6 + 6 = 30; G_y: 6·5 + 5 = 35, 5·2 + 2 = 12; G_d: 6·1 + 1 = 7.
  CHECK(other_net::classifier_offset == 32);
  CHECK(other_net::discriminator_offset == 80);  // 32 + 47 = 79, rounded up
  CHECK(other_net::task_param_count == 80);
  CHECK(other_net::param_count == 87);

  // Modules whose sizes are multiples of 16 are packed end to end.
  using wide = nn::dann_net<nn::mlp<32, 16, nn::relu>, nn::linear<16, 16>, nn::linear<16, 1>>;
  CHECK(wide::classifier_offset == 32 * 16 + 16);
  CHECK(wide::discriminator_offset == wide::classifier_offset + 16 * 16 + 16);
  CHECK(wide::param_count == wide::discriminator_offset + 17);
}

TEST_CASE("dann_net derives its input, feature and class widths from the modules") {
  CHECK(net::input_width == 6);
  CHECK(net::feature_width == 5);
  CHECK(net::class_count == 3);
  CHECK(net::discriminator_stack::out == 1);

  CHECK(other_net::input_width == 4);
  CHECK(other_net::feature_width == 6);
  CHECK(other_net::class_count == 2);
}

TEST_CASE("dann_net activates the feature extractor's output and keeps logits linear") {
  CHECK(net::feature_stack::depth == 2);
  CHECK(std::is_same_v<activation_of<net::feature_stack, 0>, nn::relu_t>);
  CHECK(std::is_same_v<last_activation<net::feature_stack>, nn::relu_t>);
  CHECK(net::classifier_stack::depth == 1);
  CHECK(std::is_same_v<last_activation<net::classifier_stack>, nn::identity_t>);
  CHECK(net::discriminator_stack::depth == 2);
  CHECK(std::is_same_v<activation_of<net::discriminator_stack, 0>, nn::relu_t>);
  CHECK(std::is_same_v<last_activation<net::discriminator_stack>, nn::identity_t>);

  CHECK(std::is_same_v<last_activation<other_net::feature_stack>, nn::tanh_t>);
  CHECK(std::is_same_v<activation_of<other_net::classifier_stack, 0>, nn::relu_t>);
  CHECK(std::is_same_v<last_activation<other_net::classifier_stack>, nn::identity_t>);
  CHECK(std::is_same_v<last_activation<other_net::discriminator_stack>, nn::identity_t>);
}

TEST_CASE("module_spec accepts mlp and linear and rejects other types") {
  CHECK(nn::module_spec<nn::mlp<6, 8, 5, nn::relu>>);
  CHECK(nn::module_spec<nn::linear<5, 3>>);
  CHECK_FALSE(nn::module_spec<int>);
  CHECK_FALSE(nn::module_spec<nn::dense<5, 3, nn::relu>>);
}

}  // namespace nn_dann_net_test
