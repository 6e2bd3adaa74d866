// SPDX-License-Identifier: Apache-2.0
// Tests for nn/conv2d.hpp (structure): the shapes a conv_net resolves, where its parameters sit,
// the scratch its stack asks for, and the initialisation of its layers (fan-in K·K·C_in).
#include <dafuse/nn/conv2d.hpp>
#include "../check.hpp"

#include <dafuse/core/rng.hpp>
#include <dafuse/nn/dann_net.hpp>
#include <dafuse/nn/init.hpp>
#include <dafuse/nn/lenet.hpp>

#include <cmath>
#include <type_traits>
#include <vector>

namespace nn_conv2d_test {

namespace {

namespace nn = dafuse::nn;
using dafuse::index_t;

// The DANN paper's LeNet-like extractor on the 16 × 16 JDA digits, padding 2 ("same").
using lenet = nn::digits_lenet;
// Stride, padding 0, an odd size the pool floors, three channels, and flatten last.
using strided = nn::conv_net<nn::image<9, 11, 3>,
                             nn::conv2d<3, 4, 3, 2, 1, nn::tanh>,
                             nn::max_pool2d<2>,
                             nn::flatten>;

template <class Stack, std::size_t I>
using activation_of = std::remove_cvref_t<decltype(Stack::template layer<I>::act)>;

}  // namespace

TEST_CASE("conv_net floors strided and pooled sizes as PyTorch does and keeps the activations") {
  using s = strided::stack<true>;
  using c = s::layer<0>;
  // ⌊(9 + 2 − 3) / 2⌋ + 1 = 5, ⌊(11 + 2 − 3) / 2⌋ + 1 = 6; pooled ⌊5/2⌋ = 2, 6/2 = 3.
  CHECK(c::out_height == 5);
  CHECK(c::out_width == 6);
  CHECK(s::layer<1>::out_height == 2);
  CHECK(s::layer<1>::out_width == 3);
  CHECK(strided::out == 2 * 3 * 4);
  CHECK(std::is_same_v<activation_of<s, 0>, nn::tanh_t>);
  // As logits the last layer with an activation becomes linear; pooling has none.
  CHECK(std::is_same_v<activation_of<lenet::stack<false>, 5>, nn::identity_t>);
  CHECK(std::is_same_v<activation_of<lenet::stack<false>, 4>, nn::relu_t>);
  CHECK(std::is_same_v<activation_of<lenet::stack<true>, 5>, nn::relu_t>);
}

TEST_CASE("initialize draws a conv2d's weights from its fan-in K*K*C_in and zeroes its bias") {
  using s = strided::stack<true>;
  using c = s::layer<0>;
  std::vector<double> p(s::param_count, 7.0);
  dafuse::counter_rng rng(3, dafuse::rng_stream::init);
  nn::initialize<s>(p.data(), rng);
  // tanh: Glorot, √(6 / (fan_in + fan_out)), fan_in = 3·3·3, fan_out = 3·3·4.
  const double bound = std::sqrt(6.0 / (27.0 + 36.0));
  double largest = 0;
  for (index_t k = 0; k < c::weight_count; ++k) largest = std::max(largest, std::abs(p[k]));
  CHECK(largest <= bound);
  CHECK(largest > 0.8 * bound);
  for (index_t k = 0; k < c::bias_count; ++k) CHECK(p[c::weight_count + k] == 0.0);

  std::vector<double> q(s::param_count, 7.0);
  dafuse::counter_rng rng2(3, dafuse::rng_stream::init);
  nn::initialize<s>(q.data(), rng2, nn::weight_init::torch_default);
  const double torch_bound = 1.0 / std::sqrt(27.0);
  double q_largest = 0;
  for (index_t k = 0; k < c::param_count; ++k) q_largest = std::max(q_largest, std::abs(q[k]));
  CHECK(q_largest <= torch_bound);
  CHECK(q[c::weight_count] != 0.0);  // PyTorch draws conv biases too
}

}  // namespace nn_conv2d_test
