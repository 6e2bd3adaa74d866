// SPDX-License-Identifier: Apache-2.0
// Tests for nn/dense.hpp (structure: layers, activations, offsets) and for the host backend's
// forward and backward of a layer stack (backend/host/dense.hpp) against a naive triple loop and
// central finite differences in double.
#include <dafuse/nn/dense.hpp>
#include "../check.hpp"
#include "../reference_forward.hpp"

#include <dafuse/backend/host/dense.hpp>
#include <dafuse/backend/host/gemm.hpp>
#include <dafuse/core/buffer.hpp>
#include <dafuse/core/rng.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

namespace nn_dense_test {

namespace {

namespace nn = dafuse::nn;
namespace host = dafuse::backend::host;
using dafuse::index_t;
using dafuse::matrix_view;
using dafuse::test::naive_forward;
using dafuse::test::reference_pass;

template <class Stack, std::size_t I>
using activation_of = std::remove_cvref_t<decltype(Stack::template layer<I>::act)>;

// ---- Stacks under test -------------------------------------------------------------------------

using tanh_logits = nn::mlp<5, 7, 4, 3, nn::tanh>::stack<false>;
using tanh_features = nn::mlp<5, 7, 4, 3, nn::tanh>::stack<true>;
using sigmoid_leaky = nn::layer_stack<nn::dense<5, 7, nn::sigmoid>,
                                      nn::dense<7, 4, nn::leaky_relu_t{0.2f}>,
                                      nn::dense<4, 3, nn::identity>>;
using relu_logits = nn::mlp<5, 7, 4, 3, nn::relu>::stack<false>;
using relu_features = nn::mlp<5, 7, 4, 3, nn::relu>::stack<true>;
using leaky_features = nn::mlp<5, 6, 3, nn::leaky_relu>::stack<true>;
using one_linear = nn::linear<5, 3>::stack<false>;

// ---- A plain reference
// ---------------------------------------------------------------------------

//! L = Σ_ij R_ij·y_ij over the last layer's output, so that δy = R.
double weighted_sum(const reference_pass& r, const std::vector<double>& weights) {
  double loss = 0;
  for (std::size_t i = 0; i < weights.size(); ++i) loss += weights[i] * r.y.back()[i];
  return loss;
}

//! ∂L/∂θ and ∂L/∂x of L = Σ_ij R_ij·y_ij by explicit loops: δz = δy ⊙ f'(z) (f' from the
//! output, checked against finite differences in activation_test), ∂L/∂W = δz·xᵀ, ∂L/∂b = Σ_j δz,
//! δx = Wᵀ·δz.
struct reference_gradients {
  std::vector<double> params, x;
};

template <class Stack>
reference_gradients naive_backward(const std::vector<double>& params,
                                   const std::vector<double>& x,
                                   index_t n,
                                   const std::vector<double>& weights) {
  const reference_pass ref = naive_forward<Stack>(params, x, n);
  reference_gradients g{std::vector<double>(params.size()), {}};
  std::vector<double> dy = weights;
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    (
        [&] {
          constexpr std::size_t l = Stack::depth - 1 - I;
          using layer = typename Stack::template layer<l>;
          constexpr index_t in_w = layer::in, out_w = layer::out;
          const std::vector<double>& in = l == 0 ? x : ref.y[l == 0 ? 0 : l - 1];
          const double* w = params.data() + Stack::template param_offset<l>();
          double* gw = g.params.data() + Stack::template param_offset<l>();
          std::vector<double> dz(dy.size()), dx(static_cast<std::size_t>(in_w * n), 0.0);
          for (std::size_t e = 0; e < dz.size(); ++e)
            dz[e] = dy[e] * layer::act.derivative_from_output(ref.y[l][e]);
          for (index_t i = 0; i < out_w; ++i) {
            double db = 0;
            for (index_t j = 0; j < n; ++j) db += dz[std::size_t(j * out_w + i)];
            gw[layer::weight_count + i] = db;
            for (index_t k = 0; k < in_w; ++k) {
              double dw = 0;
              for (index_t j = 0; j < n; ++j)
                dw += dz[std::size_t(j * out_w + i)] * in[std::size_t(j * in_w + k)];
              gw[k * out_w + i] = dw;
            }
          }
          for (index_t j = 0; j < n; ++j)
            for (index_t k = 0; k < in_w; ++k)
              for (index_t i = 0; i < out_w; ++i)
                dx[std::size_t(j * in_w + k)] += w[k * out_w + i] * dz[std::size_t(j * out_w + i)];
          dy = std::move(dx);
        }(),
        ...);
  }
  (std::make_index_sequence<Stack::depth>{});
  g.x = std::move(dy);
  return g;
}

//! Which pre-activations are positive: a finite difference whose two evaluations see another
//! pattern than the point itself crossed a ReLU kink and measures nothing.
std::vector<bool> sign_pattern(const reference_pass& r) {
  std::vector<bool> s;
  for (const auto& layer : r.z)
    for (double v : layer) s.push_back(v > 0);
  return s;
}

double smallest_magnitude(const reference_pass& r) {
  double m = std::numeric_limits<double>::infinity();
  for (const auto& layer : r.z)
    for (double v : layer) m = std::min(m, std::abs(v));
  return m;
}

std::vector<double> uniform_vector(std::size_t count, dafuse::counter_rng& rng) {
  std::vector<double> v(count);
  for (double& e : v) e = rng.uniform<double>(-1.0, 1.0);
  return v;
}

//! A stack's random parameters, input x: [in, n] and loss weights R: [out, n].
template <class Stack>
struct problem {
  static constexpr index_t n = 6;
  dafuse::counter_rng rng{20240601, dafuse::rng_stream::user};
  std::vector<double> params = uniform_vector(Stack::param_count, rng);
  std::vector<double> x = uniform_vector(Stack::in * n, rng);
  std::vector<double> weights = uniform_vector(Stack::out * n, rng);

  matrix_view<const double> x_view() const { return {x.data(), Stack::in, n}; }
};

//! The library's scratch for `cols` samples, carved from a vector filled with NaN so that any
//! value read before it is written shows up, and a GEMM workspace sized for every product of the
//! stack on `cols` samples (`threads` = 0: OpenMP's maximum).
template <class Stack, class T>
struct scratch_block {
  std::vector<T> storage;
  host::stack_scratch<Stack, T> s;
  host::gemm_workspace<T> ws;
  explicit scratch_block(index_t cols, int threads = 0)
      : storage(static_cast<std::size_t>(host::stack_scratch<Stack, T>::elements(cols)),
                std::numeric_limits<T>::quiet_NaN()),
        s(storage.data(), cols),
        ws(largest_dimension(cols), largest_dimension(cols), largest_dimension(cols), threads) {}
  scratch_block(const scratch_block&) = delete;
  scratch_block& operator=(const scratch_block&) = delete;

  //! δy of the last layer = R (backward turns it into δz in place, so write it before each call).
  void set_output_gradient(const std::vector<double>& r) {
    const matrix_view<T> dy = s.output_gradient();
    for (index_t i = 0; i < dy.size(); ++i) dy.data[i] = T(r[std::size_t(i)]);
  }

 private:
  // Every product's m, n and k is a layer width or the sample count.
  static index_t largest_dimension(index_t cols) {
    return std::max({Stack::in, Stack::max_width, cols});
  }
};

template <class Stack>
std::vector<double> fd_parameter_gradient(const problem<Stack>& pb, double h, int* skipped) {
  const std::vector<bool> pattern = sign_pattern(naive_forward<Stack>(pb.params, pb.x, pb.n));
  std::vector<double> fd(pb.params.size(), std::numeric_limits<double>::quiet_NaN());
  for (std::size_t p = 0; p < pb.params.size(); ++p) {
    std::vector<double> plus = pb.params, minus = pb.params;
    plus[p] += h;
    minus[p] -= h;
    const reference_pass rp = naive_forward<Stack>(plus, pb.x, pb.n);
    const reference_pass rm = naive_forward<Stack>(minus, pb.x, pb.n);
    if (sign_pattern(rp) != pattern || sign_pattern(rm) != pattern) {
      ++*skipped;
      continue;
    }
    fd[p] = (weighted_sum(rp, pb.weights) - weighted_sum(rm, pb.weights)) / (2 * h);
  }
  return fd;
}

template <class Stack>
std::vector<double> fd_input_gradient(const problem<Stack>& pb, double h, int* skipped) {
  const std::vector<bool> pattern = sign_pattern(naive_forward<Stack>(pb.params, pb.x, pb.n));
  std::vector<double> fd(pb.x.size(), std::numeric_limits<double>::quiet_NaN());
  for (std::size_t k = 0; k < pb.x.size(); ++k) {
    std::vector<double> plus = pb.x, minus = pb.x;
    plus[k] += h;
    minus[k] -= h;
    const reference_pass rp = naive_forward<Stack>(pb.params, plus, pb.n);
    const reference_pass rm = naive_forward<Stack>(pb.params, minus, pb.n);
    if (sign_pattern(rp) != pattern || sign_pattern(rm) != pattern) {
      ++*skipped;
      continue;
    }
    fd[k] = (weighted_sum(rp, pb.weights) - weighted_sum(rm, pb.weights)) / (2 * h);
  }
  return fd;
}

//! Largest |a − b| over entries where b is not NaN, relative to the largest |b| there.
double max_relative_error_where_defined(const std::vector<double>& a,
                                        const std::vector<double>& b) {
  std::vector<double> ax, bx;
  for (std::size_t i = 0; i < b.size(); ++i)
    if (!std::isnan(b[i])) {
      ax.push_back(a[i]);
      bx.push_back(b[i]);
    }
  REQUIRE(!bx.empty());
  return dafuse::test::max_relative_error(std::span(ax), std::span(bx));
}

}  // namespace

}  // namespace nn_dense_test

// doctest names the types from the global namespace.
TYPE_TO_STRING_AS("mlp<5,7,4,3,tanh>::stack<false>", nn_dense_test::tanh_logits);
TYPE_TO_STRING_AS("mlp<5,7,4,3,tanh>::stack<true>", nn_dense_test::tanh_features);
TYPE_TO_STRING_AS("sigmoid, leaky_relu_t{0.2f}, identity", nn_dense_test::sigmoid_leaky);
TYPE_TO_STRING_AS("mlp<5,7,4,3,relu>::stack<false>", nn_dense_test::relu_logits);
TYPE_TO_STRING_AS("mlp<5,7,4,3,relu>::stack<true>", nn_dense_test::relu_features);
TYPE_TO_STRING_AS("mlp<5,6,3,leaky_relu>::stack<true>", nn_dense_test::leaky_features);
TYPE_TO_STRING_AS("linear<5,3>::stack<false>", nn_dense_test::one_linear);

namespace nn_dense_test {

// ---- Structure
// -----------------------------------------------------------------------------------

TEST_CASE("an mlp used as a feature extractor activates every layer") {
  using stack = nn::mlp<6, 8, 5, nn::relu>::stack<true>;
  CHECK(stack::depth == 2);
  CHECK(std::is_same_v<activation_of<stack, 0>, nn::relu_t>);
  CHECK(std::is_same_v<activation_of<stack, 1>, nn::relu_t>);
  CHECK(stack::layer<0>::in == 6);
  CHECK(stack::layer<0>::out == 8);
  CHECK(stack::layer<1>::in == 8);
  CHECK(stack::layer<1>::out == 5);
  CHECK(stack::in == 6);
  CHECK(stack::out == 5);
}

TEST_CASE("an mlp used for logits keeps its last layer linear") {
  using stack = nn::mlp<6, 8, 5, nn::relu>::stack<false>;
  CHECK(stack::depth == 2);
  CHECK(std::is_same_v<activation_of<stack, 0>, nn::relu_t>);
  CHECK(std::is_same_v<activation_of<stack, 1>, nn::identity_t>);

  using deep = nn::mlp<5, 7, 4, 3, nn::tanh>::stack<false>;
  CHECK(deep::depth == 3);
  CHECK(std::is_same_v<activation_of<deep, 0>, nn::tanh_t>);
  CHECK(std::is_same_v<activation_of<deep, 1>, nn::tanh_t>);
  CHECK(std::is_same_v<activation_of<deep, 2>, nn::identity_t>);

  // A two-width mlp is one layer: activated or not by its role alone.
  using single = nn::mlp<4, 2, nn::sigmoid>;
  CHECK(std::is_same_v<activation_of<single::stack<true>, 0>, nn::sigmoid_t>);
  CHECK(std::is_same_v<activation_of<single::stack<false>, 0>, nn::identity_t>);
}

TEST_CASE("an mlp keeps the value of a parameterised activation") {
  using stack = nn::mlp<4, 3, 2, nn::leaky_relu_t{0.2f}>::stack<true>;
  CHECK(stack::layer<0>::act.negative_slope == 0.2f);
  CHECK(stack::layer<1>::act.negative_slope == 0.2f);
}

TEST_CASE("layer_stack counts parameters and offsets of weights and activations") {
  using stack = nn::mlp<6, 8, 5, nn::relu>::stack<true>;
  // W then b per layer: 6·8 + 8 = 56, 8·5 + 5 = 45.
  CHECK(stack::layer<0>::weight_count == 48);
  CHECK(stack::layer<0>::param_count == 56);
  CHECK(stack::param_count == 101);
  CHECK(stack::param_offset<0>() == 0);
  CHECK(stack::param_offset<1>() == 56);
  CHECK(stack::activation_offset<0>() == 0);
  CHECK(stack::activation_offset<1>() == 8);
  CHECK(stack::activation_count == 13);
  CHECK(stack::max_width == 8);

  // 5·7 + 7 = 42, 7·4 + 4 = 32, 4·3 + 3 = 15.
  CHECK(tanh_logits::param_count == 89);
  CHECK(tanh_logits::param_offset<1>() == 42);
  CHECK(tanh_logits::param_offset<2>() == 74);
  CHECK(tanh_logits::activation_offset<1>() == 7);
  CHECK(tanh_logits::activation_offset<2>() == 11);
  CHECK(tanh_logits::activation_count == 14);
  CHECK(tanh_logits::max_width == 7);
}

TEST_CASE("linear is one identity layer whatever its role") {
  using as_logits = nn::linear<5, 3>::stack<false>;
  using as_features = nn::linear<5, 3>::stack<true>;
  CHECK(std::is_same_v<as_logits, as_features>);
  CHECK(as_logits::depth == 1);
  CHECK(std::is_same_v<activation_of<as_logits, 0>, nn::identity_t>);
  CHECK(as_logits::param_count == 18);
  CHECK(as_logits::in == 5);
  CHECK(as_logits::out == 3);
  CHECK(nn::linear<5, 3>::in == 5);
  CHECK(nn::linear<5, 3>::out == 3);
}

// ---- Numerics of the host backend ------------------------------------------------------------

TEST_CASE_TEMPLATE("host forward of a layer stack matches a naive triple loop",
                   Stack,
                   tanh_logits,
                   tanh_features,
                   sigmoid_leaky,
                   relu_logits,
                   relu_features,
                   leaky_features,
                   one_linear) {
  const problem<Stack> pb;
  scratch_block<Stack, double> sb(pb.n);
  host::forward(pb.params.data(), pb.x_view(), sb.s, sb.ws);
  const reference_pass ref = naive_forward<Stack>(pb.params, pb.x, pb.n);
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    (
        [&] {
          const matrix_view<double> y = sb.s.outputs[I];
          REQUIRE(y.rows == Stack::template layer<I>::out);
          REQUIRE(y.cols == pb.n);
          INFO("layer " << I);
          CHECK(dafuse::test::max_relative_error(std::span(y.data, std::size_t(y.size())),
                                                 std::span(ref.y[I])) < 1e-14);
        }(),
        ...);
  }
  (std::make_index_sequence<Stack::depth>{});
  const matrix_view<double> out = sb.s.output();
  CHECK(out.data == sb.s.outputs[Stack::depth - 1].data);
}

TEST_CASE_TEMPLATE("host forward in float matches the double reference",
                   Stack,
                   tanh_logits,
                   sigmoid_leaky) {
  const problem<Stack> pb;
  const std::vector<float> params(pb.params.begin(), pb.params.end());
  const std::vector<float> x(pb.x.begin(), pb.x.end());
  scratch_block<Stack, float> sb(pb.n);
  host::forward(params.data(), matrix_view<const float>{x.data(), Stack::in, pb.n}, sb.s, sb.ws);
  const reference_pass ref = naive_forward<Stack>(pb.params, pb.x, pb.n);
  const matrix_view<float> y = sb.s.output();
  CHECK(dafuse::test::max_relative_error(std::span(y.data, std::size_t(y.size())),
                                         std::span(ref.y.back())) < 1e-5);
}

TEST_CASE_TEMPLATE("host backward parameter gradients match finite differences",
                   Stack,
                   tanh_logits,
                   tanh_features,
                   sigmoid_leaky,
                   relu_logits,
                   relu_features,
                   leaky_features,
                   one_linear) {
  const problem<Stack> pb;
  scratch_block<Stack, double> sb(pb.n);
  host::forward(pb.params.data(), pb.x_view(), sb.s, sb.ws);
  sb.set_output_gradient(pb.weights);
  // NaN first: backward must overwrite every gradient, not add to it.
  std::vector<double> grads(pb.params.size(), std::numeric_limits<double>::quiet_NaN());
  const double norm_sq = host::backward(pb.params.data(), grads.data(), pb.x_view(), sb.s, sb.ws);

  int skipped = 0;
  const std::vector<double> fd = fd_parameter_gradient(pb, 1e-6, &skipped);
  CHECK(skipped <= int(pb.params.size()) / 20);
  for (double g : grads) REQUIRE(std::isfinite(g));
  CHECK(max_relative_error_where_defined(grads, fd) < 1e-6);

  double sum_sq = 0;
  for (double g : grads) sum_sq += g * g;
  CHECK(norm_sq == doctest::Approx(sum_sq).epsilon(1e-12));
  CHECK(norm_sq > 0);
}

TEST_CASE_TEMPLATE("host backward input gradient matches finite differences",
                   Stack,
                   tanh_logits,
                   tanh_features,
                   sigmoid_leaky,
                   relu_logits,
                   relu_features,
                   leaky_features,
                   one_linear) {
  const problem<Stack> pb;
  scratch_block<Stack, double> sb(pb.n);
  host::forward(pb.params.data(), pb.x_view(), sb.s, sb.ws);
  sb.set_output_gradient(pb.weights);
  std::vector<double> grads(pb.params.size());
  std::vector<double> dx(pb.x.size(), std::numeric_limits<double>::quiet_NaN());
  host::backward(pb.params.data(), grads.data(), pb.x_view(), sb.s, sb.ws,
                 matrix_view<double>{dx.data(), Stack::in, pb.n}, 1.0);

  int skipped = 0;
  const std::vector<double> fd = fd_input_gradient(pb, 1e-6, &skipped);
  CHECK(skipped <= int(pb.x.size()) / 10);
  for (double g : dx) REQUIRE(std::isfinite(g));
  CHECK(max_relative_error_where_defined(dx, fd) < 1e-6);
}

TEST_CASE_TEMPLATE("host backward alpha scales only the input gradient and accumulate adds to it",
                   Stack,
                   tanh_logits,
                   sigmoid_leaky,
                   relu_features,
                   one_linear) {
  const problem<Stack> pb;
  scratch_block<Stack, double> sb(pb.n);
  host::forward(pb.params.data(), pb.x_view(), sb.s, sb.ws);
  const matrix_view<const double> x = pb.x_view();
  auto run = [&](std::vector<double>& grads, std::vector<double>& dx, double alpha,
                 bool accumulate) {
    sb.set_output_gradient(pb.weights);
    return host::backward(pb.params.data(), grads.data(), x, sb.s, sb.ws,
                          matrix_view<double>{dx.data(), Stack::in, pb.n}, alpha, accumulate);
  };

  std::vector<double> grads1(pb.params.size()), dx1(pb.x.size());
  const double norm1 = run(grads1, dx1, 1.0, false);

  // α = −0.7 (a reversal with λ = 0.7 folded in): δx scales, ∂L/∂θ and its norm do not. Bitwise:
  // ∂L/∂θ comes from the same products (their split and order depend on shapes alone) and from
  // row_sums, whose order does not depend on where `grads` lies.
  std::vector<double> grads2(pb.params.size()), dx2(pb.x.size(), 123.0);
  const double norm2 = run(grads2, dx2, -0.7, false);
  CHECK(norm2 == norm1);
  for (std::size_t i = 0; i < grads1.size(); ++i) REQUIRE(grads2[i] == grads1[i]);
  for (std::size_t i = 0; i < dx1.size(); ++i)
    CHECK(dx2[i] == doctest::Approx(-0.7 * dx1[i]).epsilon(1e-13));

  // accumulate: what is there plus α·δx.
  std::vector<double> grads3(pb.params.size()), dx3(pb.x.size());
  dafuse::counter_rng rng(5, dafuse::rng_stream::user);
  const std::vector<double> existing = uniform_vector(dx3.size(), rng);
  dx3 = existing;
  run(grads3, dx3, -0.7, true);
  for (std::size_t i = 0; i < dx1.size(); ++i)
    CHECK(dx3[i] == doctest::Approx(existing[i] - 0.7 * dx1[i]).epsilon(1e-13));

  // Twice with accumulate: the classifier's and the discriminator's contributions to δh add up.
  std::vector<double> dx4(pb.x.size(), 0.0);
  run(grads3, dx4, 1.0, true);
  run(grads3, dx4, -0.7, true);
  for (std::size_t i = 0; i < dx1.size(); ++i)
    CHECK(dx4[i] == doctest::Approx(0.3 * dx1[i]).epsilon(1e-13));
}

TEST_CASE("host backward of a relu stack matches finite differences away from the kinks") {
  // The seeded problem has no pre-activation within 1e-4 of the kink (required below); a step of
  // 1e-7 in one parameter or input moves every pre-activation by far less than that, so no
  // evaluation crosses a kink and every entry of the finite difference is meaningful.
  using stack = relu_logits;
  const problem<stack> pb;
  const reference_pass ref = naive_forward<stack>(pb.params, pb.x, pb.n);
  REQUIRE(smallest_magnitude(ref) > 1e-4);
  // Both sides of the kink occur, so the test covers dead and live units.
  const std::vector<bool> pattern = sign_pattern(ref);
  CHECK(std::count(pattern.begin(), pattern.end(), true) > 0);
  CHECK(std::count(pattern.begin(), pattern.end(), false) > 0);

  scratch_block<stack, double> sb(pb.n);
  host::forward(pb.params.data(), pb.x_view(), sb.s, sb.ws);
  sb.set_output_gradient(pb.weights);
  std::vector<double> grads(pb.params.size()), dx(pb.x.size());
  const double norm_sq = host::backward(pb.params.data(), grads.data(), pb.x_view(), sb.s, sb.ws,
                                        matrix_view<double>{dx.data(), stack::in, pb.n});

  int skipped = 0;
  const std::vector<double> fd_params = fd_parameter_gradient(pb, 1e-7, &skipped);
  const std::vector<double> fd_x = fd_input_gradient(pb, 1e-7, &skipped);
  CHECK(skipped == 0);
  CHECK(max_relative_error_where_defined(grads, fd_params) < 1e-6);
  CHECK(max_relative_error_where_defined(dx, fd_x) < 1e-6);
  double sum_sq = 0;
  for (double g : grads) sum_sq += g * g;
  CHECK(norm_sq == doctest::Approx(sum_sq).epsilon(1e-12));
}

TEST_CASE("stack_scratch leading(n) runs the first n samples of a larger scratch") {
  using stack = tanh_logits;
  const problem<stack> pb;
  constexpr index_t m = 4;
  scratch_block<stack, double> full(pb.n);
  scratch_block<stack, double> small(pb.n);
  const host::stack_scratch<stack, double> lead = small.s.leading(m);
  CHECK(lead.cols == m);
  CHECK(lead.output().cols == m);

  host::forward(pb.params.data(), pb.x_view(), full.s, full.ws);
  host::forward(pb.params.data(), matrix_view<const double>{pb.x.data(), stack::in, m}, lead,
                small.ws);
  const matrix_view<double> a = full.s.output(), b = lead.output();
  for (index_t j = 0; j < m; ++j)
    for (index_t i = 0; i < stack::out; ++i) CHECK(b(i, j) == a(i, j));

  // Backward on the leading samples equals the gradient of the loss restricted to them.
  for (index_t j = 0; j < m; ++j)
    for (index_t i = 0; i < stack::out; ++i)
      lead.output_gradient()(i, j) = pb.weights[std::size_t(j * stack::out + i)];
  std::vector<double> grads(pb.params.size());
  host::backward(pb.params.data(), grads.data(),
                 matrix_view<const double>{pb.x.data(), stack::in, m}, lead, small.ws);
  std::vector<double> fd(pb.params.size());
  const std::vector<double> x_lead(pb.x.begin(), pb.x.begin() + stack::in * m);
  const std::vector<double> w_lead(pb.weights.begin(), pb.weights.begin() + stack::out * m);
  constexpr double h = 1e-6;
  for (std::size_t p = 0; p < pb.params.size(); ++p) {
    std::vector<double> plus = pb.params, minus = pb.params;
    plus[p] += h;
    minus[p] -= h;
    fd[p] = (weighted_sum(naive_forward<stack>(plus, x_lead, m), w_lead) -
             weighted_sum(naive_forward<stack>(minus, x_lead, m), w_lead)) /
            (2 * h);
  }
  CHECK(dafuse::test::max_relative_error(std::span(grads), std::span(fd)) < 1e-6);
}

TEST_CASE("stack_scratch carves outputs then gradients from one block") {
  using stack = tanh_logits;  // outputs 7, 4, 3 per sample
  constexpr index_t cols = 6;
  CHECK(host::stack_scratch<stack, double>::elements(cols) == 2 * 14 * cols);
  CHECK(host::stack_scratch<stack, double>::elements(cols, false) == 14 * cols);
  std::vector<double> block(host::stack_scratch<stack, double>::elements(cols));
  const host::stack_scratch<stack, double> s(block.data(), cols);
  CHECK(s.outputs[0].data == block.data());
  CHECK(s.outputs[1].data == block.data() + 7 * cols);
  CHECK(s.outputs[2].data == block.data() + 11 * cols);
  CHECK(s.gradients[0].data == block.data() + 14 * cols);
  CHECK(s.gradients[2].data == block.data() + 25 * cols);
  CHECK(s.gradients[2].data + s.gradients[2].size() == block.data() + block.size());
  CHECK(s.outputs[1].rows == 4);
  CHECK(s.gradients[1].cols == cols);
}

TEST_CASE("stack_scratch writes the gradient of a layer without activation over its output") {
  // Layer 0's y is read by layer 1's weight gradient before layer 1 writes δy_0, and f' = 1 reads
  // nothing: δy_0 takes y_0's place. Layer 1 (tanh: f' reads y_1) and the last layer (the
  // stack's output) keep their own.
  using stack = nn::layer_stack<nn::dense<3, 5, nn::identity>, nn::dense<5, 4, nn::tanh>,
                                nn::dense<4, 2, nn::identity>>;
  using scratch = host::stack_scratch<stack, double>;
  static_assert(scratch::gradient_replaces_output<0> && !scratch::gradient_replaces_output<1> &&
                !scratch::gradient_replaces_output<2>);
  constexpr index_t cols = 6;
  CHECK(scratch::elements(cols) == (11 + 6) * cols);
  std::vector<double> block(scratch::elements(cols));
  const scratch s(block.data(), cols);
  CHECK(s.gradients[0].data == s.outputs[0].data);
  CHECK(s.gradients[1].data == block.data() + 11 * cols);
  CHECK(s.gradients[2].data == block.data() + 15 * cols);
}

TEST_CASE("host forward and backward split across threads match naive loops") {
  // 256 → 256 → 16 on 600 samples: the products of layer 0 pass gemm_parallel_flops
  // (2·256·256·600 ≈ 7.9e7 > 2^26), so with 4 threads their columns are split into blocks of
  // 152, 152, 152, 144; the last layer's products stay on one thread.
  using stack = nn::layer_stack<nn::dense<256, 256, nn::tanh>, nn::dense<256, 16, nn::identity>>;
  constexpr index_t n = 600;
  static_assert(2.0 * 256 * 256 * n > host::gemm_parallel_flops);
  dafuse::counter_rng rng(77, dafuse::rng_stream::user);
  std::vector<double> params = uniform_vector(stack::param_count, rng);
  for (double& p : params) p *= 0.25;  // keeps tanh away from saturation
  const std::vector<double> x = uniform_vector(stack::in * n, rng);
  const std::vector<double> weights = uniform_vector(stack::out * n, rng);
  const std::vector<double> existing = uniform_vector(x.size(), rng);
  const matrix_view<const double> xv{x.data(), stack::in, n};

  for (int threads : {1, 4}) {
    INFO("threads = " << threads);
    scratch_block<stack, double> sb(n, threads);
    REQUIRE(sb.ws.threads() == threads);
    host::forward(params.data(), xv, sb.s, sb.ws);
    const reference_pass ref = naive_forward<stack>(params, x, n);
    const matrix_view<double> y0 = sb.s.outputs[0], y1 = sb.s.output();
    CHECK(dafuse::test::max_relative_error(std::span(y0.data, std::size_t(y0.size())),
                                           std::span(ref.y[0])) < 1e-13);
    CHECK(dafuse::test::max_relative_error(std::span(y1.data, std::size_t(y1.size())),
                                           std::span(ref.y[1])) < 1e-13);

    sb.set_output_gradient(weights);
    std::vector<double> grads(params.size(), std::numeric_limits<double>::quiet_NaN());
    std::vector<double> dx = existing;
    const double norm_sq = host::backward(params.data(), grads.data(), xv, sb.s, sb.ws,
                                          matrix_view<double>{dx.data(), stack::in, n}, -0.7, true);
    const reference_gradients g = naive_backward<stack>(params, x, n, weights);
    CHECK(dafuse::test::max_relative_error(std::span(grads), std::span(g.params)) < 1e-12);
    std::vector<double> expected_dx(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) expected_dx[i] = existing[i] - 0.7 * g.x[i];
    CHECK(dafuse::test::max_relative_error(std::span(dx), std::span(expected_dx)) < 1e-12);
    double sum_sq = 0;
    for (double v : g.params) sum_sq += v * v;
    CHECK(norm_sq == doctest::Approx(sum_sq).epsilon(1e-12));
  }
}

//! Forward and backward of `Stack` on n samples in fp64 against the naive loops, on 2 and 3
//! threads with room for `partial_room` partial sums: `require_split(ws, threads)` first checks
//! that the workspace splits the products as the test means them to be split.
template <class Stack, class RequireSplit>
void check_split_stack(index_t n,
                       std::uint64_t seed,
                       index_t partial_room,
                       RequireSplit&& require_split) {
  dafuse::counter_rng rng(seed, dafuse::rng_stream::user);
  std::vector<double> params = uniform_vector(Stack::param_count, rng);
  for (double& p : params) p *= 0.1;
  const std::vector<double> x = uniform_vector(Stack::in * n, rng);
  const std::vector<double> weights = uniform_vector(Stack::out * n, rng);
  const matrix_view<const double> xv{x.data(), Stack::in, n};
  const reference_pass ref = naive_forward<Stack>(params, x, n);
  const reference_gradients g = naive_backward<Stack>(params, x, n, weights);

  for (int threads : {2, 3}) {
    INFO("threads = " << threads);
    scratch_block<Stack, double> sb(n, threads);
    if (partial_room > 0) sb.ws.reserve_partial_sums(partial_room);
    require_split(sb.ws, threads);
    host::forward(params.data(), xv, sb.s, sb.ws);
    for (std::size_t l = 0; l < Stack::depth; ++l) {
      const matrix_view<double> y = sb.s.outputs[l];
      CHECK(dafuse::test::max_relative_error(std::span(y.data, std::size_t(y.size())),
                                             std::span(ref.y[l])) < 1e-13);
    }
    sb.set_output_gradient(weights);
    std::vector<double> grads(params.size(), std::numeric_limits<double>::quiet_NaN());
    std::vector<double> dx(x.size());
    host::backward(params.data(), grads.data(), xv, sb.s, sb.ws,
                   matrix_view<double>{dx.data(), Stack::in, n});
    CHECK(dafuse::test::max_relative_error(std::span(grads), std::span(g.params)) < 1e-12);
    CHECK(dafuse::test::max_relative_error(std::span(dx), std::span(g.x)) < 1e-12);
  }
}

TEST_CASE("host forward and backward with products split by W's columns match naive loops") {
  // 512 → 512 → 256 → 8 on 64 samples: layers 0 and 1 pass gemm_parallel_flops with fewer
  // samples than inputs, so with room for partial sums each thread takes a block of W's columns
  // in all three products (layer_split): the forward sums its block of terms, and the partial
  // sums are added, and the bias and activation applied, by blocks of columns.
  using stack = nn::layer_stack<nn::dense<512, 512, nn::tanh>, nn::dense<512, 256, nn::relu>,
                                nn::dense<256, 8, nn::identity>>;
  constexpr index_t n = 64;
  check_split_stack<stack>(n, 78, 512 * n, [](const host::gemm_workspace<double>& ws, int) {
    REQUIRE(ws.split_layer(512, 512, n).forward.along == host::split_along::depth);
    REQUIRE(ws.split_layer(256, 512, n).forward.along == host::split_along::depth);
  });
}

TEST_CASE("host forward and backward with products split by rows of C match naive loops") {
  // 512 → 1024 → 512 → 8 on 40 samples without room for partial sums: the forward products of
  // layers 0 and 1 and layer 1's input gradient (2·1024·512·40 ≈ 4.2e7 FLOP each) split C by its
  // rows, so each thread's block starts part-way down C: the bias, f and f' a finisher applies
  // to it must be the block's own rows of b and of y.
  using stack = nn::layer_stack<nn::dense<512, 1024, nn::tanh>, nn::dense<1024, 512, nn::relu>,
                                nn::dense<512, 8, nn::identity>>;
  constexpr index_t n = 40;
  check_split_stack<stack>(n, 79, 0, [](const host::gemm_workspace<double>& ws, int threads) {
    REQUIRE(ws.split_layer(1024, 512, n).forward.along == host::split_along::rows);
    REQUIRE(ws.split_layer(1024, 512, n).forward.threads == threads);
    REQUIRE(ws.split_layer(512, 1024, n).input_gradient.along == host::split_along::rows);
    REQUIRE(ws.split_layer(512, 1024, n).input_gradient.threads == threads);
  });
}

TEST_CASE(
    "host forward and backward split by W's columns in blocks of part tiles match naive loops") {
  // 512 → 400 → 256 → 8 on 100 samples: layer 1's 400 inputs split 200 + 200 on two threads and
  // 136 + 136 + 128 on three (whole cache lines of 8 doubles, not whole 32-row tiles), so its
  // input gradient's first block ends part-way through a register tile and the next starts there.
  using stack = nn::layer_stack<nn::dense<512, 400, nn::tanh>, nn::dense<400, 256, nn::relu>,
                                nn::dense<256, 8, nn::identity>>;
  constexpr index_t n = 100;
  check_split_stack<stack>(n, 80, 512 * n, [](const host::gemm_workspace<double>& ws, int threads) {
    const host::layer_split s = ws.split_layer(256, 400, n);
    REQUIRE(s.forward.along == host::split_along::depth);
    REQUIRE(s.forward.threads == threads);
    REQUIRE(s.forward.per % 32 != 0);
  });
}

//! row_sums' order, one row at a time: m(i, 0), then groups of four columns as ((a + b) + (c + d)),
//! then the columns left one by one.
template <class T>
T reference_row_sum(const std::vector<T>& m, index_t rows, index_t cols, index_t i) {
  if (cols == 0) return T(0);
  T s = m[std::size_t(i)];
  const auto at = [&](index_t j) { return m[std::size_t(i + j * rows)]; };
  index_t j = 1;
  for (; j < ((cols - 1) & ~index_t(3)); j += 4)
    s = s + ((at(j) + at(j + 1)) + (at(j + 2) + at(j + 3)));
  for (; j < cols; ++j) s = s + at(j);
  return s;
}

TEST_CASE_TEMPLATE("row_sums adds every row in one order, wherever the output lies",
                   T,
                   float,
                   double) {
  // Eigen's rowwise sum gave the rows before the output's first aligned packet another order, so
  // its bits depended on where the output lay and on the packet width (AVX2 against AVX-512):
  // every offset from a 64-byte boundary and column counts around the groups of four are
  // covered; the values span magnitudes so that a different order changes the last bits.
  dafuse::counter_rng rng{20261201, dafuse::rng_stream::user};
  for (const index_t rows : {1, 3, 15, 16, 17, 31, 64, 100, 256, 1030})
    for (const index_t cols : {0, 1, 2, 4, 5, 6, 7, 9, 63, 64, 65, 128}) {
      std::vector<T> m(std::size_t(rows * cols));
      for (T& v : m)
        v = T(rng.uniform<double>(-1.0, 1.0) * std::exp2(rng.uniform<double>(-12, 12)));
      const host::matrix_map<T> map(m.data(), rows, cols);
      std::vector<T> expected(static_cast<std::size_t>(rows));
      for (index_t i = 0; i < rows; ++i)
        expected[std::size_t(i)] = reference_row_sum(m, rows, cols, i);
      for (index_t offset = 0; offset < 16; ++offset) {
        std::vector<T> buffer(std::size_t(rows + 32));
        void* p = buffer.data();
        std::size_t space = buffer.size() * sizeof(T);
        T* const got = static_cast<T*>(std::align(64, sizeof(T), p, space)) + offset;
        host::row_sums(map, got);
        CAPTURE(rows);
        CAPTURE(cols);
        CAPTURE(offset);
        REQUIRE(std::equal(got, got + rows, expected.begin(),
                           [](T a, T b) { return std::memcmp(&a, &b, sizeof(T)) == 0; }));
      }
    }
}

}  // namespace nn_dense_test
