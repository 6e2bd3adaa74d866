// SPDX-License-Identifier: Apache-2.0
// Tests for nn/init.hpp: reproducibility from the seed, the order of draws, He and Glorot bounds
// computed here independently, zero biases, and the variance the bounds imply.
#include <dafuse/nn/init.hpp>
#include "../check.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

namespace nn_init_test {

namespace {

namespace nn = dafuse::nn;
using dafuse::counter_rng;
using dafuse::index_t;
using dafuse::rng_stream;

//! Every activation, each after a layer of a different shape.
using mixed_stack = nn::layer_stack<nn::dense<20, 16, nn::relu>,
                                    nn::dense<16, 12, nn::leaky_relu_t{0.2f}>,
                                    nn::dense<12, 10, nn::leaky_relu>,
                                    nn::dense<10, 8, nn::tanh>,
                                    nn::dense<8, 6, nn::sigmoid>,
                                    nn::dense<6, 3, nn::identity>>;
using relu_mlp = nn::mlp<6, 8, 5, nn::relu>::stack<false>;

//! The half-width the papers give, written out here rather than taken from the header:
//! He et al. 2015: gain·√(3/fan_in) with gain² = 2/(1 + a²) for the ReLU family (a = 0 for ReLU);
//! Glorot & Bengio 2010: √(6/(fan_in + fan_out)) otherwise.
template <class Layer>
double expected_bound() {
  using act = std::remove_cvref_t<decltype(Layer::act)>;
  const double fan_in = double(Layer::in), fan_out = double(Layer::out);
  if constexpr (std::is_same_v<act, nn::relu_t>) {
    return std::sqrt(2.0) * std::sqrt(3.0 / fan_in);
  } else if constexpr (std::is_same_v<act, nn::leaky_relu_t>) {
    const double a = double(Layer::act.negative_slope);
    return std::sqrt(2.0 / (1.0 + a * a)) * std::sqrt(3.0 / fan_in);
  } else {
    return std::sqrt(6.0 / (fan_in + fan_out));
  }
}

template <class Stack, class T>
std::vector<T> initialized(std::uint64_t seed) {
  // NaN first, so an entry initialize skips shows up.
  std::vector<T> params(Stack::param_count, std::numeric_limits<T>::quiet_NaN());
  counter_rng rng(seed, rng_stream::init);
  nn::initialize<Stack>(params.data(), rng);
  return params;
}

//! Calls f.template operator()<I>() for each layer index I of Stack.
template <class Stack, class F>
void for_each_layer(F&& f) {
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    (f.template operator()<I>(), ...);
  }
  (std::make_index_sequence<Stack::depth>{});
}

template <class Stack>
index_t weight_total() {
  index_t total = 0;
  for_each_layer<Stack>([&]<std::size_t I>() { total += Stack::template layer<I>::weight_count; });
  return total;
}

}  // namespace

TEST_CASE_TEMPLATE("init_bound is He's for the ReLU family and Glorot's otherwise",
                   T,
                   float,
                   double) {
  for_each_layer<mixed_stack>([]<std::size_t I>() {
    using layer = mixed_stack::layer<I>;
    INFO("layer " << I);
    CHECK(double(nn::init_bound<layer, T>()) ==
          doctest::Approx(expected_bound<layer>()).epsilon(1e-6).scale(0));
  });
  // Two values by hand: ReLU after 20 inputs, √2·√(3/20); Glorot for 6 → 3, √(6/9).
  CHECK(double(nn::init_bound<mixed_stack::layer<0>, T>()) ==
        doctest::Approx(std::sqrt(0.3)).epsilon(1e-6));
  CHECK(double(nn::init_bound<mixed_stack::layer<5>, T>()) ==
        doctest::Approx(std::sqrt(6.0 / 9.0)).epsilon(1e-6));
}

TEST_CASE_TEMPLATE(
    "initialize gives identical parameters for the same seed and different ones "
    "for another seed",
    T,
    float,
    double) {
  const std::vector<T> a = initialized<mixed_stack, T>(7);
  const std::vector<T> b = initialized<mixed_stack, T>(7);
  const std::vector<T> c = initialized<mixed_stack, T>(8);
  for (std::size_t i = 0; i < a.size(); ++i) REQUIRE(a[i] == b[i]);
  std::size_t equal_weights = 0;
  for_each_layer<mixed_stack>([&]<std::size_t I>() {
    using layer = mixed_stack::layer<I>;
    const std::size_t first = mixed_stack::param_offset<I>();
    for (index_t k = 0; k < layer::weight_count; ++k)
      equal_weights += a[first + std::size_t(k)] == c[first + std::size_t(k)] ? 1 : 0;
  });
  CHECK(equal_weights == 0);
}

TEST_CASE_TEMPLATE("initialize keeps weights within the bound and sets biases to zero",
                   T,
                   float,
                   double) {
  auto check_stack = [&]<class Stack>() {
    const std::vector<T> p = initialized<Stack, T>(2024);
    for_each_layer<Stack>([&]<std::size_t I>() {
      using layer = typename Stack::template layer<I>;
      const double bound = expected_bound<layer>();
      const T* w = p.data() + Stack::template param_offset<I>();
      INFO("layer " << I << ", bound " << bound);
      for (index_t k = 0; k < layer::weight_count; ++k) {
        REQUIRE(std::isfinite(w[k]));
        REQUIRE(std::abs(double(w[k])) <= bound * (1 + 1e-6));
      }
      for (index_t k = 0; k < layer::out; ++k) CHECK(w[layer::weight_count + k] == T(0));
    });
  };
  check_stack.template operator()<mixed_stack>();
  check_stack.template operator()<relu_mlp>();
}

TEST_CASE_TEMPLATE(
    "initialize draws layer by layer, W in column-major order, biases drawing "
    "nothing",
    T,
    float,
    double) {
  const std::vector<T> p = initialized<mixed_stack, T>(99);
  counter_rng replay(99, rng_stream::init);
  for_each_layer<mixed_stack>([&]<std::size_t I>() {
    using layer = mixed_stack::layer<I>;
    const T bound = nn::init_bound<layer, T>();
    const T* w = p.data() + mixed_stack::param_offset<I>();
    INFO("layer " << I);
    for (index_t k = 0; k < layer::weight_count; ++k)
      REQUIRE(w[k] == replay.uniform<T>(-bound, bound));
  });

  counter_rng rng(99, rng_stream::init);
  std::vector<T> q(mixed_stack::param_count);
  nn::initialize<mixed_stack>(q.data(), rng);
  CHECK(rng.position() == std::uint64_t(weight_total<mixed_stack>()));
}

TEST_CASE_TEMPLATE("initialize of a 512x512 layer has the variance its bound implies",
                   T,
                   float,
                   double) {
  // U(±b) has variance b²/3: 2/fan_in for He with ReLU, 2/(fan_in + fan_out) for Glorot.
  auto check_layer = [&]<class Stack>(double expected_variance) {
    using layer = typename Stack::template layer<0>;
    const std::vector<T> p = initialized<Stack, T>(31337);
    double sum = 0, sum_sq = 0, largest = 0;
    for (index_t k = 0; k < layer::weight_count; ++k) {
      const double w = double(p[std::size_t(k)]);
      sum += w;
      sum_sq += w * w;
      largest = std::max(largest, std::abs(w));
    }
    const double n = double(layer::weight_count);
    const double mean = sum / n;
    const double variance = sum_sq / n - mean * mean;
    const double bound = expected_bound<layer>();
    CHECK(bound * bound / 3 == doctest::Approx(expected_variance).epsilon(1e-12));
    CHECK(std::abs(mean) < 0.01 * bound);
    CHECK(variance == doctest::Approx(expected_variance).epsilon(0.05).scale(0));
    CHECK(largest > 0.999 * bound);  // the whole interval is used
  };
  check_layer.template operator()<nn::layer_stack<nn::dense<512, 512, nn::relu>>>(2.0 / 512);
  check_layer.template operator()<nn::layer_stack<nn::dense<512, 512, nn::tanh>>>(2.0 / 1024);
}

TEST_CASE("initialize uses the Glorot/He scheme unless told otherwise") {
  std::vector<float> implicit(mixed_stack::param_count), explicit_scheme(mixed_stack::param_count);
  counter_rng a(5, rng_stream::init), b(5, rng_stream::init);
  nn::initialize<mixed_stack>(implicit.data(), a);
  nn::initialize<mixed_stack>(explicit_scheme.data(), b, nn::weight_init::glorot_he);
  for (std::size_t i = 0; i < implicit.size(); ++i) REQUIRE(implicit[i] == explicit_scheme[i]);
}

TEST_CASE_TEMPLATE("torch_default initialisation draws W then b of each layer from U(±1/√fan_in)",
                   T,
                   float,
                   double) {
  std::vector<T> p(mixed_stack::param_count, std::numeric_limits<T>::quiet_NaN());
  counter_rng rng(12, rng_stream::init);
  nn::initialize<mixed_stack>(p.data(), rng, nn::weight_init::torch_default);
  // Every parameter, biases included, is one draw, layer by layer
  // (torch.nn.Linear.reset_parameters).
  CHECK(rng.position() == std::uint64_t(mixed_stack::param_count));

  counter_rng replay(12, rng_stream::init);
  index_t nonzero_biases = 0;
  for_each_layer<mixed_stack>([&]<std::size_t I>() {
    using layer = mixed_stack::layer<I>;
    const double bound = 1.0 / std::sqrt(double(layer::in));
    const T* w = p.data() + mixed_stack::param_offset<I>();
    INFO("layer " << I);
    for (index_t k = 0; k < layer::param_count; ++k) {
      REQUIRE(std::abs(double(w[k])) <= bound * (1 + 1e-6));
      const T tb = T(1) / std::sqrt(T(layer::in));
      REQUIRE(w[k] == replay.uniform<T>(-tb, tb));
    }
    for (index_t k = 0; k < layer::out; ++k) nonzero_biases += w[layer::weight_count + k] != T(0);
  });
  CHECK(nonzero_biases == 16 + 12 + 10 + 8 + 6 + 3);
}

TEST_CASE("torch_default initialisation of a 512x512 layer has variance 1/(3·fan_in)") {
  using stack = nn::layer_stack<nn::dense<512, 512, nn::relu>>;
  std::vector<double> p(stack::param_count);
  counter_rng rng(4, rng_stream::init);
  nn::initialize<stack>(p.data(), rng, nn::weight_init::torch_default);
  double sum = 0, sum_sq = 0;
  for (index_t k = 0; k < stack::layer<0>::weight_count; ++k) {
    sum += p[std::size_t(k)];
    sum_sq += p[std::size_t(k)] * p[std::size_t(k)];
  }
  const double n = double(stack::layer<0>::weight_count);
  const double variance = sum_sq / n - (sum / n) * (sum / n);
  CHECK(variance == doctest::Approx(1.0 / (3 * 512)).epsilon(0.05).scale(0));
}

}  // namespace nn_init_test
