// SPDX-License-Identifier: Apache-2.0
// Tests for backend/host/conv.hpp and the image layers of backend/host/dense.hpp's forward and
// backward: against a naive direct convolution / pooling loop, central finite differences in
// double, and PyTorch vectors (tools/make_conv_vectors.py) for conv→pool→conv→pool→flatten→dense.
#include <dafuse/backend/host/conv.hpp>
#include "../check.hpp"
#include "../torch_vectors.hpp"

#include <dafuse/backend/host/dense.hpp>
#include <dafuse/backend/host/gemm.hpp>
#include <dafuse/core/buffer.hpp>
#include <dafuse/core/rng.hpp>
#include <dafuse/nn/conv2d.hpp>
#include <dafuse/nn/lenet.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <memory>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

namespace backend_conv_test {

namespace {

namespace nn = dafuse::nn;
namespace host = dafuse::backend::host;
using dafuse::index_t;
using dafuse::matrix_view;

// ---- Stacks under test -------------------------------------------------------------------------

// Smooth activations (tanh, sigmoid) so that finite differences see no kink; stride, padding,
// three input channels, an odd size the pool floors, and a dense layer after flatten.
using small_net = nn::conv_net<nn::image<7, 9, 3>,
                               nn::conv2d<3, 4, 3, 1, 1, nn::tanh>,
                               nn::max_pool2d<2>,
                               nn::conv2d<4, 5, 2, 2, 1, nn::sigmoid>,
                               nn::flatten,
                               nn::dense<2 * 3 * 5, 3, nn::tanh>>;
// A pooling first (its input gradient is the stack's) and a linear convolution last.
using pool_first = nn::conv_net<nn::image<6, 6, 2>,
                                nn::max_pool2d<3>,
                                nn::conv2d<2, 3, 2, 1, 0, nn::identity>,
                                nn::flatten>;
// A convolution whose patch matrix fills the chunk with one sample (5·5·8 values a window, 28·28
// windows): the products run chunk by chunk.
using chunked = nn::conv_net<nn::image<32, 32, 8>,
                             nn::conv2d<8, 6, 5, 1, 0, nn::tanh>,
                             nn::max_pool2d<4>,
                             nn::flatten,
                             nn::dense<7 * 7 * 6, 2, nn::identity>>;
// Sixteen channels into a stride-1 convolution: its input gradient runs as a convolution itself
// (nn::transposed_conv2d); the first convolution's, with two channels, through col2im.
using wide_channels = nn::conv_net<nn::image<6, 5, 2>,
                                   nn::conv2d<2, 16, 3, 1, 1, nn::tanh>,
                                   nn::conv2d<16, 3, 3, 1, 0, nn::sigmoid>,
                                   nn::flatten>;
// Sixteen channels into the first convolution: the stack's input gradient through the transposed
// convolution, with α and accumulation.
using wide_first =
    nn::conv_net<nn::image<4, 4, 16>, nn::conv2d<16, 2, 3, 1, 1, nn::tanh>, nn::flatten>;
// tools/make_conv_vectors.py's stack.
using torch_net = nn::conv_net<nn::image<12, 12, 2>,
                               nn::conv2d<2, 6, 5, 1, 2>,
                               nn::max_pool2d<2>,
                               nn::conv2d<6, 8, 3, 1, 1>,
                               nn::max_pool2d<2>,
                               nn::flatten,
                               nn::dense<72, 10, nn::tanh>>;
// ReLU, as the LeNet-like network uses.
using relu_net = nn::conv_net<nn::image<8, 8, 1>,
                              nn::conv2d<1, 4, 3, 1, 1>,
                              nn::max_pool2d<2>,
                              nn::conv2d<4, 6, 3, 1, 1>,
                              nn::max_pool2d<2>,
                              nn::flatten,
                              nn::dense<24, 5, nn::relu>>;

// ---- A naive reference -------------------------------------------------------------------------

//! Layer l's outputs for x: [in, n] by direct loops over every output value: a convolution as
//! Σ_{kh,kw,c} W(o, kh, kw, c)·x(oh·S − P + kh, ow·S − P + kw, c) + b(o), then f; a max-pool as the
//! max over its window; a dense layer as W·x + b, then f.
template <class Stack>
std::vector<std::vector<double>> naive_forward(const std::vector<double>& params,
                                               const std::vector<double>& x,
                                               index_t n) {
  std::vector<std::vector<double>> ys;
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    (
        [&] {
          using L = typename Stack::template layer<I>;
          const std::vector<double>& in = I == 0 ? x : ys.back();
          const double* w = params.data() + Stack::template param_offset<I>();
          std::vector<double> y(std::size_t(L::out * n));
          for (index_t s = 0; s < n; ++s) {
            const double* xs = in.data() + s * L::in;
            double* out = y.data() + s * L::out;
            if constexpr (nn::kind_of<L>() == nn::layer_kind::conv2d) {
              for (index_t oh = 0; oh < L::out_height; ++oh)
                for (index_t ow = 0; ow < L::out_width; ++ow)
                  for (index_t o = 0; o < L::out_channels; ++o) {
                    double z = w[L::weight_count + o];
                    for (index_t kh = 0; kh < L::kernel; ++kh)
                      for (index_t kw = 0; kw < L::kernel; ++kw)
                        for (index_t c = 0; c < L::in_channels; ++c) {
                          const index_t ih = oh * L::stride - L::padding + kh;
                          const index_t iw = ow * L::stride - L::padding + kw;
                          if (ih < 0 || ih >= L::in_height || iw < 0 || iw >= L::in_width) continue;
                          z += w[o +
                                 L::out_channels * (c + L::in_channels * (kw + L::kernel * kh))] *
                               xs[(ih * L::in_width + iw) * L::in_channels + c];
                        }
                    out[(oh * L::out_width + ow) * L::out_channels + o] = L::act(z);
                  }
            } else if constexpr (nn::kind_of<L>() == nn::layer_kind::max_pool2d) {
              for (index_t oh = 0; oh < L::out_height; ++oh)
                for (index_t ow = 0; ow < L::out_width; ++ow)
                  for (index_t c = 0; c < L::channels; ++c) {
                    double m = -std::numeric_limits<double>::infinity();
                    for (index_t kh = 0; kh < L::kernel; ++kh)
                      for (index_t kw = 0; kw < L::kernel; ++kw)
                        m = std::max(
                            m, xs[((oh * L::kernel + kh) * L::in_width + ow * L::kernel + kw) *
                                      L::channels +
                                  c]);
                    out[(oh * L::out_width + ow) * L::channels + c] = m;
                  }
            } else {
              for (index_t i = 0; i < L::out; ++i) {
                double z = w[L::weight_count + i];
                for (index_t k = 0; k < L::in; ++k) z += w[k * L::out + i] * xs[k];
                out[i] = L::act(z);
              }
            }
          }
          ys.push_back(std::move(y));
        }(),
        ...);
  }
  (std::make_index_sequence<Stack::depth>{});
  return ys;
}

std::vector<double> uniform_vector(std::size_t count, dafuse::counter_rng& rng) {
  std::vector<double> v(count);
  for (double& e : v) e = rng.uniform<double>(-1.0, 1.0);
  return v;
}

//! Random parameters (scaled by 1/√fan-in so that activations stay in their curved range), input
//! x: [in, n] and loss weights R: [out, n] for L = Σ R·y.
template <class Net>
struct problem {
  using stack = typename Net::template stack<true>;
  index_t n = 5;
  dafuse::counter_rng rng{20261204, dafuse::rng_stream::user};
  std::vector<double> params, x, weights;
  explicit problem(index_t samples = 5) : n(samples) {
    params = uniform_vector(stack::param_count, rng);
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (
          [&] {
            using L = typename stack::template layer<I>;
            if constexpr (L::param_count > 0)
              for (index_t k = 0; k < L::param_count; ++k)
                params[std::size_t(stack::template param_offset<I>() + k)] *=
                    1.5 / std::sqrt(double(L::fan_in));
          }(),
          ...);
    }
    (std::make_index_sequence<stack::depth>{});
    x = uniform_vector(std::size_t(stack::in * n), rng);
    weights = uniform_vector(std::size_t(stack::out * n), rng);
  }
  double loss(const std::vector<double>& p, const std::vector<double>& in) const {
    const auto ys = naive_forward<stack>(p, in, n);
    double l = 0;
    for (std::size_t i = 0; i < weights.size(); ++i) l += weights[i] * ys.back()[i];
    return l;
  }
};

//! The library's scratch (filled with NaN, so a value read before it is written shows) and a
//! GEMM workspace for every product of the stack, with one convolution part per thread of the
//! workspace (as the step), or `parts` of them.
template <class Stack, class T>
struct scratch_block {
  host::gemm_workspace<T> ws;
  std::vector<T> storage;
  host::stack_scratch<Stack, T> s;
  // The scratch starts on a 64-byte line, as a step's does: Eigen's vectorised activations give
  // the values before a map's first aligned packet to scalar code, whose bits differ, so a
  // scratch that lay elsewhere on each run would give other bits (AVX2's 32-byte packets showed
  // it).
  explicit scratch_block(index_t cols, int threads = 0, int parts = 0)
      : ws(4096, 4096, 4096, threads),
        storage(std::size_t(host::stack_scratch<Stack, T>::elements(
                    cols, true, parts > 0 ? parts : ws.threads())) +
                    64 / sizeof(T),
                std::numeric_limits<T>::quiet_NaN()),
        s(line_aligned(storage), cols, true, parts > 0 ? parts : ws.threads()) {}
  static T* line_aligned(std::vector<T>& v) {
    void* p = v.data();
    std::size_t space = v.size() * sizeof(T);
    return static_cast<T*>(std::align(64, sizeof(T), p, space));
  }
  void set_output_gradient(const std::vector<double>& r) {
    const matrix_view<T> dy = s.output_gradient();
    for (index_t i = 0; i < dy.size(); ++i) dy.data[i] = T(r[std::size_t(i)]);
  }
};

template <class T>
std::vector<T> cast(const std::vector<double>& v) {
  return std::vector<T>(v.begin(), v.end());
}

double max_relative_error(const std::vector<double>& a, const std::vector<double>& b) {
  return dafuse::test::max_relative_error(std::span(a), std::span(b));
}

//! The library's forward, then backward from δy = R: ∂L/∂θ and ∂L/∂x in double.
template <class Net>
struct library_gradients {
  std::vector<double> params, x, y;
  double norm_sq = 0;
};
template <class Net>
library_gradients<Net> run_library(const problem<Net>& pb, int threads = 0, int parts = 0) {
  using stack = typename Net::template stack<true>;
  scratch_block<stack, double> sb(pb.n, threads, parts);
  const matrix_view<const double> x{pb.x.data(), stack::in, pb.n};
  host::forward(pb.params.data(), x, sb.s, sb.ws);
  library_gradients<Net> g;
  g.y.assign(sb.s.output().data, sb.s.output().data + sb.s.output().size());
  sb.set_output_gradient(pb.weights);
  g.params.assign(pb.params.size(), std::numeric_limits<double>::quiet_NaN());
  g.x.assign(pb.x.size(), std::numeric_limits<double>::quiet_NaN());
  g.norm_sq = host::backward(pb.params.data(), g.params.data(), x, sb.s, sb.ws,
                             matrix_view<double>{g.x.data(), stack::in, pb.n});
  return g;
}

//! Central differences of loss(v) at every `stride`-th value of v (the others NaN).
template <class Loss>
std::vector<double> central_differences(const std::vector<double>& v,
                                        Loss loss,
                                        std::size_t stride) {
  std::vector<double> fd(v.size(), std::numeric_limits<double>::quiet_NaN());
  const double h = 1e-6;
  for (std::size_t k = 0; k < v.size(); k += stride) {
    std::vector<double> plus = v, minus = v;
    plus[k] += h;
    minus[k] -= h;
    fd[k] = (loss(plus) - loss(minus)) / (2 * h);
  }
  return fd;
}
//! The naive loss's central differences at every `stride`-th parameter, or input value.
template <class Net>
std::vector<double> fd_parameters(const problem<Net>& pb, std::size_t stride = 1) {
  return central_differences(
      pb.params, [&](const std::vector<double>& p) { return pb.loss(p, pb.x); }, stride);
}
template <class Net>
std::vector<double> fd_input(const problem<Net>& pb, std::size_t stride = 1) {
  return central_differences(
      pb.x, [&](const std::vector<double>& x) { return pb.loss(pb.params, x); }, stride);
}

//! Largest |a − b| where b is defined, relative to the largest |b| there.
double error_where_defined(const std::vector<double>& a, const std::vector<double>& b) {
  std::vector<double> ax, bx;
  for (std::size_t i = 0; i < b.size(); ++i)
    if (!std::isnan(b[i])) {
      ax.push_back(a[i]);
      bx.push_back(b[i]);
    }
  REQUIRE(!bx.empty());
  return max_relative_error(ax, bx);
}

}  // namespace

}  // namespace backend_conv_test

// doctest names the types from the global namespace.
TYPE_TO_STRING_AS("conv(tanh) pool conv(sigmoid, stride 2) dense", backend_conv_test::small_net);
TYPE_TO_STRING_AS("pool conv(linear)", backend_conv_test::pool_first);
TYPE_TO_STRING_AS("conv 16->2 first", backend_conv_test::wide_first);
TYPE_TO_STRING_AS("conv 2->16, conv 16->3 (transposed input gradient)",
                  backend_conv_test::wide_channels);
TYPE_TO_STRING_AS("conv 32x32x8 chunked", backend_conv_test::chunked);
TYPE_TO_STRING_AS("conv(relu) pool conv(relu) pool dense", backend_conv_test::relu_net);

namespace backend_conv_test {

TEST_CASE("im2col lays out each window's (kh, kw, c) values with zeros over the padding") {
  // 3 × 3 image, 2 channels, 2 × 2 kernel, padding 1, stride 2: 2 × 2 windows.
  using L = nn::conv_net<nn::image<3, 3, 2>, nn::conv2d<2, 1, 2, 2, 1>,
                         nn::flatten>::stack<true>::layer<0>;
  static_assert(L::out_height == 2 && L::out_width == 2 && L::patch == 8);
  std::vector<float> x(18);
  for (std::size_t i = 0; i < x.size(); ++i)
    x[i] = float(i + 1);  // (h, w, c) at 1 + (3h + w)·2 + c
  std::vector<float> p(8 * 4, -1.0f);
  host::im2col<L>(x.data(), 1, p.data());
  // Window (0, 0) covers rows −1, 0 and columns −1, 0: only (0, 0) is inside.
  const std::vector<float> w00{0, 0, 0, 0, 0, 0, 1, 2};
  // Window (1, 1) covers rows 1, 2 and columns 1, 2.
  const std::vector<float> w11{9, 10, 11, 12, 15, 16, 17, 18};
  CHECK(std::vector<float>(p.begin(), p.begin() + 8) == w00);
  CHECK(std::vector<float>(p.begin() + 24, p.end()) == w11);
}

TEST_CASE_TEMPLATE("host forward of a conv stack matches a direct convolution loop",
                   Net,
                   small_net,
                   pool_first,
                   chunked,
                   relu_net,
                   wide_channels) {
  using stack = typename Net::template stack<true>;
  const problem<Net> pb(3);
  const auto ref = naive_forward<stack>(pb.params, pb.x, pb.n);
  const auto g = run_library(pb);
  CHECK(max_relative_error(g.y, ref.back()) < 1e-12);

  // fp32 on the AVX-512 kernel where the build targets it.
  scratch_block<stack, float> sb(pb.n);
  const std::vector<float> pf = cast<float>(pb.params), xf = cast<float>(pb.x);
  host::forward(pf.data(), matrix_view<const float>{xf.data(), stack::in, pb.n}, sb.s, sb.ws);
  const std::vector<double> yf(sb.s.output().data, sb.s.output().data + sb.s.output().size());
  CHECK(max_relative_error(yf, ref.back()) < 1e-5);
}

TEST_CASE("max-pooling records the first maximum of each window and routes gradients to it") {
  using L = nn::conv_net<nn::image<2, 4, 1>, nn::max_pool2d<2>, nn::flatten>::stack<true>::layer<0>;
  // Two windows: [1 5; 2 5] (a tie: the first 5, position 1) and [3 0; 4 −1] (position 2).
  const std::vector<double> x{1, 5, 3, 0, 2, 5, 4, -1};
  std::vector<double> y(2), idx(2);
  host::max_pool_forward<L>(matrix_view<const double>{x.data(), 8, 1}, y.data(), idx.data());
  CHECK(y == std::vector<double>{5, 4});
  CHECK(idx == std::vector<double>{1, 2});
  std::vector<double> dx(8, 7.0);
  const std::vector<double> dy{0.5, -2.0};
  host::max_pool_backward<L>(dy.data(), idx.data(), 1, dx.data(), 1.0, false,
                             [](index_t) { return 1.0; });
  CHECK(dx == std::vector<double>{0, 0.5, 0, 0, 0, 0, -2.0, 0});
  // A NaN in a window wins, as in PyTorch.
  const std::vector<double> xn{1, 5, 3, 0, std::nan(""), 5, 4, -1};
  host::max_pool_forward<L>(matrix_view<const double>{xn.data(), 8, 1}, y.data(), idx.data());
  CHECK(std::isnan(y[0]));
  CHECK(idx[0] == 2);
}

TEST_CASE(
    "max-pooling's backward finds each argmax again in its input, as the stored indices have it, "
    "in place too") {
  // 7 × 5 × 3 pooled by 2: the last row and column are in no window. Values from a small set, so
  // that windows hold ties, and a NaN.
  using L = nn::conv_net<nn::image<7, 5, 3>, nn::max_pool2d<2>, nn::flatten>::stack<true>::layer<0>;
  constexpr index_t n = 5;
  dafuse::counter_rng rng(45, dafuse::rng_stream::user);
  std::vector<float> x(std::size_t(L::in * n)), dy(std::size_t(L::out * n));
  for (float& v : x) v = float(rng.below(4)) - 1.0f;
  x[40] = std::nanf("");
  for (float& v : dy) v = rng.uniform<float>(-1.0f, 1.0f);
  std::vector<float> y(dy.size()), idx(dy.size());
  const matrix_view<const float> xv{x.data(), L::in, n};
  const dafuse::test::thread_count threads(2);
  host::max_pool_forward<L>(xv, y.data(), idx.data());
  // f' of a ReLU below, read from x: the in-place pass must read it before it writes.
  const auto d = [&](index_t i) { return x[std::size_t(i)] > 0 ? 1.0f : 0.0f; };
  std::vector<float> stored(x.size(), 9.0f), found(x.size(), 9.0f);
  host::max_pool_backward<L>(dy.data(), idx.data(), n, stored.data(), -0.5f, false, d);
  host::max_pool_backward<L>(xv, dy.data(), found.data(), -0.5f, false, d);
  CHECK(found == stored);
  std::vector<float> in_place = x;
  const std::vector<float> x_copy = x;
  host::max_pool_backward<L>(matrix_view<const float>{in_place.data(), L::in, n}, dy.data(),
                             in_place.data(), -0.5f, false,
                             [&](index_t i) { return x_copy[std::size_t(i)] > 0 ? 1.0f : 0.0f; });
  CHECK(in_place == stored);
  // Accumulating: added to what δx holds.
  std::vector<float> stored_sum(x.size(), 0.25f), found_sum(x.size(), 0.25f);
  host::max_pool_backward<L>(dy.data(), idx.data(), n, stored_sum.data(), 2.0f, true, d);
  host::max_pool_backward<L>(xv, dy.data(), found_sum.data(), 2.0f, true, d);
  CHECK(found_sum == stored_sum);
}

TEST_CASE("stack_scratch writes a gradient over its output where nothing reads the output after") {
  // LeNet's G_f: conv(ReLU) → pool → conv(ReLU) → pool → dense(ReLU) → dense(ReLU). δy of each
  // image layer replaces its y (below a pooling, or a pooling's own, which has no activation);
  // the dense layers' δy keep their own storage (f' reads y; the last y is the stack's output).
  using stack = nn::digits_lenet::stack<true>;
  using scratch = host::stack_scratch<stack, float>;
  static_assert(scratch::gradient_replaces_output<0> && scratch::gradient_replaces_output<1> &&
                scratch::gradient_replaces_output<2> && scratch::gradient_replaces_output<3>);
  static_assert(!scratch::gradient_replaces_output<4> && !scratch::gradient_replaces_output<5>);
  static_assert(scratch::gradient_count == 100 + 100);
  constexpr index_t cols = 3;
  constexpr int parts = 2;
  static_assert(scratch::elements(cols, true, parts) ==
                (stack::activation_count + 200) * cols + host::conv_scratch_elements<stack>(parts));
  static_assert(scratch::elements(cols, false, parts) ==
                stack::activation_count * cols + host::conv_scratch_elements<stack>(parts));
  // Two patch matrices, and one partial gradient: part 0 sums into ∂L/∂W itself.
  static_assert(host::conv_scratch_elements<stack>(parts) ==
                2 * host::conv_patch_room<stack> + host::conv_partial_room<stack>);
  static_assert(host::conv_partial_room<stack> == 48 * 800 + 48);
  std::vector<float> block(std::size_t(scratch::elements(cols, true, parts)));
  const scratch s(block.data(), cols, true, parts);
  for (std::size_t l = 0; l < 4; ++l) CHECK(s.gradients[l].data == s.outputs[l].data);
  CHECK(s.gradients[4].data == block.data() + stack::activation_count * cols);
  CHECK(s.gradients[5].data == s.gradients[4].data + 100 * cols);
  CHECK(s.conv.patches(0) == s.gradients[5].data + 100 * cols);
  CHECK(s.conv.partial(1) == s.conv.patches(0) + 2 * host::conv_patch_room<stack>);
}

TEST_CASE_TEMPLATE("host backward of a conv stack matches finite differences",
                   Net,
                   small_net,
                   pool_first,
                   relu_net,
                   wide_channels,
                   wide_first) {
  static_assert(wide_channels::stack<true>::layer<1>::transposed_input_gradient);
  const problem<Net> pb;
  const auto g = run_library(pb);
  for (double v : g.params) REQUIRE(std::isfinite(v));
  for (double v : g.x) REQUIRE(std::isfinite(v));
  CHECK(error_where_defined(g.params, fd_parameters(pb)) < 1e-6);
  CHECK(error_where_defined(g.x, fd_input(pb)) < 1e-6);
  double sum_sq = 0;
  for (double v : g.params) sum_sq += v * v;
  CHECK(g.norm_sq == doctest::Approx(sum_sq).epsilon(1e-12));
}

TEST_CASE("host backward of a conv stack run chunk by chunk matches finite differences") {
  static_assert(chunked::stack<true>::layer<0>::chunk_samples == 1);
  const problem<chunked> pb(3);  // three chunks
  const auto g = run_library(pb);
  CHECK(error_where_defined(g.params, fd_parameters(pb, 7)) < 1e-6);
  CHECK(error_where_defined(g.x, fd_input(pb, 97)) < 1e-6);
  // The same on one thread: the split of the products changes nothing beyond rounding.
  const auto one = run_library(pb, 1);
  CHECK(max_relative_error(one.params, g.params) < 1e-12);
  CHECK(max_relative_error(one.x, g.x) < 1e-12);
}

TEST_CASE_TEMPLATE(
    "conv stacks dealt in parts give one part's values, and the same bits on every run",
    Net,
    small_net,
    chunked,
    relu_net,
    wide_channels,
    wide_first) {
  // Each part runs whole chunks of its samples on one thread's packing buffers and sums its own
  // partial ∂L/∂W (conv.hpp); three parts over seven samples leave them uneven (2, 2, 3).
  const problem<Net> pb(7);
  const auto one = run_library(pb, 3, 1);
  const auto three = run_library(pb, 3, 3);
  CHECK(max_relative_error(three.y, one.y) < 1e-13);
  CHECK(max_relative_error(three.params, one.params) < 1e-12);
  CHECK(max_relative_error(three.x, one.x) < 1e-12);
  CHECK(three.norm_sq == doctest::Approx(one.norm_sq).epsilon(1e-12));
  const auto again = run_library(pb, 3, 3);
  CHECK(again.y == three.y);
  CHECK(again.params == three.params);
  CHECK(again.x == three.x);
  // (The norm's sums run over the caller's gradient vector, whose alignment Eigen's reduction
  // follows: equal to the last bits only where it lies alike, as in a step.)
  CHECK(again.norm_sq == doctest::Approx(three.norm_sq).epsilon(1e-15));
  // More parts than samples: the extra parts take none.
  const problem<Net> two(2);
  CHECK(max_relative_error(run_library(two, 3, 3).params, run_library(two, 3, 1).params) < 1e-12);
}

TEST_CASE_TEMPLATE(
    "host backward of a conv stack scales its input gradient by alpha and accumulates",
    Net,
    small_net,
    pool_first,
    wide_first) {
  using stack = typename Net::template stack<true>;
  const problem<Net> pb;
  const auto g = run_library(pb);
  scratch_block<stack, double> sb(pb.n);
  const matrix_view<const double> x{pb.x.data(), stack::in, pb.n};
  host::forward(pb.params.data(), x, sb.s, sb.ws);
  std::vector<double> grads(pb.params.size());
  std::vector<double> dx(pb.x.size(), 0.25);
  sb.set_output_gradient(pb.weights);
  host::backward(pb.params.data(), grads.data(), x, sb.s, sb.ws,
                 matrix_view<double>{dx.data(), stack::in, pb.n}, -0.7, true);
  for (std::size_t i = 0; i < dx.size(); ++i)
    CHECK(dx[i] == doctest::Approx(0.25 - 0.7 * g.x[i]).epsilon(1e-12));
  CHECK(max_relative_error(grads, g.params) < 1e-14);
}

TEST_CASE_TEMPLATE("a conv, pool, conv, pool, flatten, dense stack matches PyTorch",
                   T,
                   float,
                   double) {
  using stack = torch_net::stack<true>;
  namespace test = dafuse::test;
  const std::vector<float> params = test::load_vector("conv_stack_params");
  const std::vector<float> x = test::load_vector("conv_stack_x");
  const std::vector<float> r = test::load_vector("conv_stack_r");
  const std::vector<float> y_ref = test::load_vector("conv_stack_y");
  const std::vector<float> g_ref = test::load_vector("conv_stack_param_grads");
  const std::vector<float> dx_ref = test::load_vector("conv_stack_input_grads");
  constexpr index_t n = 4;
  REQUIRE(params.size() == std::size_t(stack::param_count));
  REQUIRE(x.size() == std::size_t(stack::in * n));
  REQUIRE(y_ref.size() == std::size_t(stack::out * n));

  scratch_block<stack, T> sb(n);
  const std::vector<T> p(params.begin(), params.end()), xt(x.begin(), x.end());
  const matrix_view<const T> xv{xt.data(), stack::in, n};
  host::forward(p.data(), xv, sb.s, sb.ws);
  const matrix_view<T> dy = sb.s.output_gradient();
  for (index_t i = 0; i < dy.size(); ++i) dy.data[i] = T(r[std::size_t(i)]);
  const auto as_double = [](const auto* v, std::size_t count) {
    return std::vector<double>(v, v + count);
  };
  const std::vector<double> y = as_double(sb.s.output().data, y_ref.size());
  std::vector<T> grads(p.size()), dx(xt.size());
  host::backward(p.data(), grads.data(), xv, sb.s, sb.ws, matrix_view<T>{dx.data(), stack::in, n});
  const double tolerance = std::is_same_v<T, float> ? 1e-5 : 1e-6;  // the files hold fp32 values
  CHECK(max_relative_error(y, as_double(y_ref.data(), y_ref.size())) < tolerance);
  CHECK(max_relative_error(as_double(grads.data(), grads.size()),
                           as_double(g_ref.data(), g_ref.size())) < tolerance);
  CHECK(max_relative_error(as_double(dx.data(), dx.size()),
                           as_double(dx_ref.data(), dx_ref.size())) < tolerance);
}

}  // namespace backend_conv_test
