// SPDX-License-Identifier: Apache-2.0
//! @file backend/host/dense.hpp
//! @brief Forward and backward of a layer stack over Eigen maps of the step's buffers.
//!
//! Shapes: a stack's input x is [in, n] (one sample per column), layer l's output y_l is
//! [out_l, n]. Per layer: z = W·x + b, y = f(z). Backward from δy_l (the gradient of the loss with
//! respect to y_l): δz = δy ⊙ f'(y); ∂L/∂W = δz·xᵀ; ∂L/∂b = Σ_columns δz; δx = Wᵀ·δz.
//! The bias and activation are applied to each block of the forward product's output, and f' to
//! each block of the input gradient the layer above writes, by the thread that wrote the block
//! while it is in that core's cache (finish_forward, finish_output_gradient); the squared norm of
//! each gradient block is accumulated right after the block is written, so clipping needs no
//! second pass over the gradients.
#pragma once
#include <dafuse/config.hpp>

#include <dafuse/backend/host/conv.hpp>
#include <dafuse/backend/host/gemm.hpp>
#include <dafuse/backend/host/sparse.hpp>
#include <dafuse/backend/host/tuning.hpp>
#include <dafuse/core/buffer.hpp>
#include <dafuse/core/error.hpp>
#include <dafuse/core/meta.hpp>
#include <dafuse/nn/activation.hpp>
#include <dafuse/nn/conv2d.hpp>

#include <Eigen/Core>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>

namespace dafuse::backend::host {

template <class T>
using matrix_map = Eigen::Map<Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic>>;
template <class T>
using const_matrix_map = Eigen::Map<const Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic>>;
template <class T>
using vector_map = Eigen::Map<Eigen::Matrix<T, Eigen::Dynamic, 1>>;
template <class T>
using const_vector_map = Eigen::Map<const Eigen::Matrix<T, Eigen::Dynamic, 1>>;
//! A block of a column-major matrix: [rows, cols] with its columns `ld` values apart.
template <class T>
using strided_matrix_map =
    Eigen::Map<Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic>, 0, Eigen::OuterStride<>>;
template <class T>
using const_strided_matrix_map =
    Eigen::Map<const Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic>, 0, Eigen::OuterStride<>>;

template <class T>
matrix_map<T> map(matrix_view<T> v) {
  return {v.data, v.rows, v.cols};
}
template <class T>
const_matrix_map<T> map(matrix_view<const T> v) {
  return {v.data, v.rows, v.cols};
}

//! The per-layer outputs and output gradients of one stack for a batch of `cols` samples,
//! carved from a block of `elements(cols)` values that the step owns; for a stack with
//! convolutions (nn/conv2d.hpp) also, for each of `parts` parts (conv.hpp: the threads the step's
//! products were sized for), a patch matrix and a partial weight gradient.
//!
//! Layout, per sample: every y_l, then the δy_l that do not take the place of their y_l
//! (gradient_replaces_output), then the convolutions' scratch. A stack where no gradient takes the
//! place of its output has y_l and δy_l at the same offsets in their halves.
template <class Stack, class T>
struct stack_scratch {
  std::array<matrix_view<T>, Stack::depth> outputs;    //!< y_l: [out_l, cols]
  std::array<matrix_view<T>, Stack::depth> gradients;  //!< δy_l, then δz_l in place
  conv_scratch<T> conv;                                //!< the convolutions' parts (conv.hpp)
  index_t cols = 0;                                    //!< samples

  //! Whether δy_l is written over y_l: nothing reads y_l once δy_l is written when layer l has no
  //! activation (the layer above reads y_l as its input, for its weight gradient, before it writes
  //! its input gradient, and f' = 1 reads nothing) or when layer l + 1 is a max-pooling (its
  //! backward reads each window of y_l, f' at the argmax included, before it writes the window's
  //! δ). Not the last layer: its y is the stack's output, which other modules read.
  template <std::size_t l>
  static constexpr bool gradient_replaces_output = [] {
    if constexpr (l + 1 >= Stack::depth) {
      return false;
    } else {
      using layer = typename Stack::template layer<l>;
      return std::remove_cvref_t<decltype(layer::act)>::is_identity ||
             nn::kind_of<typename Stack::template layer<l + 1>>() == nn::layer_kind::max_pool2d;
    }
  }();
  //! Offset of δy_l in the per-sample gradient block (the δy that have their own storage).
  template <std::size_t l>
  static constexpr index_t gradient_offset() {
    return [&]<std::size_t... J>(std::index_sequence<J...>) {
      return ((gradient_replaces_output<J> ? index_t(0) : Stack::template layer<J>::out) + ... +
              index_t(0));
    }
    (std::make_index_sequence<l>{});
  }
  //! Gradient values a sample keeps apart from the outputs.
  static constexpr index_t gradient_count = gradient_offset<Stack::depth>();

  //! Values needed for `cols` samples and `parts` convolution parts; without gradients for
  //! inference-only scratch.
  static constexpr index_t elements(index_t cols, bool with_gradients = true, int parts = 1) {
    return (Stack::activation_count + (with_gradients ? gradient_count : 0)) * cols +
           conv_scratch_elements<Stack>(parts);
  }

  stack_scratch() = default;
  stack_scratch(T* block, index_t columns, bool with_gradients = true, int parts = 1)
      : cols(columns) {
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      ((outputs[I] = {block + Stack::template activation_offset<I>() * cols,
                      Stack::template layer<I>::out, cols}),
       ...);
      if (with_gradients)
        ((gradients[I] =
              gradient_replaces_output<I>
                  ? outputs[I]
                  : matrix_view<T>{block + (Stack::activation_count + gradient_offset<I>()) * cols,
                                   Stack::template layer<I>::out, cols}),
         ...);
    }
    (std::make_index_sequence<Stack::depth>{});
    if constexpr (Stack::patch_elements > 0)
      conv = conv_scratch<T>::template of<Stack>(
          block + (Stack::activation_count + (with_gradients ? gradient_count : 0)) * cols, parts);
  }

  //! Output of the last layer, [out, cols].
  matrix_view<T> output() const { return outputs[Stack::depth - 1]; }
  //! Gradient with respect to the last layer's output, [out, cols].
  matrix_view<T> output_gradient() const { return gradients[Stack::depth - 1]; }
  //! The first `n` samples' part of this scratch (columns are samples).
  stack_scratch leading(index_t n) const {
    stack_scratch s = *this;
    s.cols = n;
    for (std::size_t i = 0; i < Stack::depth; ++i) {
      s.outputs[i].cols = n;
      s.gradients[i].cols = n;
    }
    return s;
  }
};

//! The input and the scratch must describe the same samples and x must be [Stack::in, n].
//! `Input` is a dense matrix_view or a sparse_matrix_view (a sparse first layer).
template <class Stack, class T, class Input>
void check_columns(const Input& x, const stack_scratch<Stack, T>& s) {
  if (x.cols != s.cols || x.rows != Stack::in)
    fail("layer stack", "input",
         "[" + std::to_string(Stack::in) + ", " + std::to_string(s.cols) + "] to match its scratch",
         "[" + std::to_string(x.rows) + ", " + std::to_string(x.cols) + "]");
}

//! Partial sums the dense layers of `Stack` can ask of a products' workspace
//! (reserve_partial_sums) over at most `samples` columns: layer_split divides a layer's products
//! by W's columns only for fewer samples than inputs, the forward then adding an [out, n] partial
//! sum per extra thread. 0 without dense layers.
template <class Stack>
constexpr index_t dense_partial_sums(index_t samples) {
  return [&]<std::size_t... I>(std::index_sequence<I...>) {
    const auto of = [&](auto layer) -> index_t {
      using L = typename decltype(layer)::type;
      if constexpr (nn::kind_of<L>() == nn::layer_kind::dense)
        return L::out * std::min(samples, L::in - 1);
      else
        return 0;
    };
    return std::max({index_t(0), of(std::type_identity<typename Stack::template layer<I>>{})...});
  }
  (std::make_index_sequence<Stack::depth>{});
}

//! y = W·x for a layer's dense input x: [in, n], split among threads as the layer's other products
//! are (layer_split: by W's columns, when that pays), each finished block of y passed to `finish`
//! (partition.hpp's finishers: forward() adds the bias and applies the activation there).
template <class Layer, class T, class Products, class Finish = no_finish>
void input_product(Products& ws, const T* w, matrix_view<const T> x, T* y, Finish&& finish = {}) {
  ws.template product<op::none, op::none>(
      Layer::out, x.cols, Layer::in, T(1), w, Layer::out, x.data, Layer::in, T(0), y, Layer::out,
      std::forward<Finish>(finish), ws.split_layer(Layer::out, Layer::in, x.cols).forward);
}

//! y = W·x for a sparse input: one scaled column of W per non-zero (backend/host/sparse.hpp),
//! then `finish` on all of y.
template <class Layer, class T, class Products, class Finish = no_finish>
void input_product(
    Products&, const T* w, sparse_matrix_view<const T> x, T* y, Finish&& finish = {}) {
  sparse_input_product<Products>(w, Layer::out, x, y);
  finish(y, Layer::out, x.cols, Layer::out);
}

//! The same for a sparse batch dealt among threads by feature (sparse.hpp): each thread finishes
//! its share of y's columns.
template <class Layer, class T, class Products, class Finish = no_finish>
void input_product(
    Products&, const T* w, const dealt_sparse_batch<T>& x, T* y, Finish&& finish = {}) {
  sparse_input_product<Products>(w, Layer::out, x, y, finish);
}

//! Whether a stack's input is sparse data (one thread's view, or dealt among threads): it has no
//! input gradient.
template <class Input, class T>
inline constexpr bool is_sparse_input = std::is_same_v<Input, sparse_matrix_view<const T>> ||
                                        std::is_same_v<Input, dealt_sparse_batch<T>>;

//! A product finisher (partition.hpp) for a gradient: rounds a finished block of ∂L/∂W (or ∂L/∂b)
//! to the stored format and returns its squared norm. The thread that wrote the block runs it while
//! the block is in its own cache: one core reading every gradient after the product would fetch
//! the other core's half of each.
//! Gradients are stored in the narrow format too: a scaled fp16 gradient that does not fit becomes
//! ±Inf here, and the norm reports the overflow. The step's norm is then a sum of per-block norms:
//! the same for a given thread count, but not to the last bit across thread counts (nor is a
//! clipping scale computed from it). Without rounding it only sums squares, which the blocked
//! kernels then do from their registers as they store ∂L/∂W (partition.hpp's squares_finisher).
template <class Products>
struct finish_gradient {
  static constexpr bool sums_squares = !Products::rounds;
  template <class T>
  double operator()(T* block, index_t rows, index_t cols, index_t ld) const {
    const auto finish = [](auto&& dw) {
      if constexpr (Products::rounds) dw = dw.unaryExpr([](T v) { return Products::round(v); });
      return double(dw.squaredNorm());
    };
    // A block of whole columns is one contiguous run, which Eigen vectorises across columns (a
    // 15-row gradient would leave each column to scalar code).
    if (ld == rows) return finish(vector_map<T>(block, rows * cols));
    return finish(strided_matrix_map<T>(block, rows, cols, Eigen::OuterStride<>(ld)));
  }
};

//! out(i) = Σ_j m(i, j), every row in one order, whatever the packet width and wherever m and out
//! lie:
//!   s = m(i, 0);  s += (m(i, j) + m(i, j+1)) + (m(i, j+2) + m(i, j+3)) for j = 1, 5, … while
//!   j < (cols − 1) & ~3;  then s += m(i, j) for the columns left.
//! That is the order of Eigen 3.4's vectorised `m.rowwise().sum()`, the one the demo's headline
//! was measured with (adversarial training amplifies the last bits; docs/benchmarks.md, "Each
//! block finished where it was written"). Eigen itself gives the rows before `out`'s first aligned
//! packet and after its last one to scalar code with another order, so its sums depended on where
//! the gradient buffer lay and on the packet's width: a bias gradient then differed between two
//! calls on AVX2 (docs/testing.md, "Every instruction set"). Rows go `row_block` at a time, so
//! four lines of each column are in flight, not one (a column-major m's columns are 4 KiB apart
//! for a 1024-row m).
template <class T>
void row_sums(const matrix_map<T>& m, T* out) {
  const index_t rows = m.rows(), cols = m.cols(), ld = m.outerStride();
  if (cols == 0) {
    std::fill(out, out + rows, T(0));
    return;
  }
  const index_t quads_end = (cols - 1) & ~index_t(3);
  const T* col = m.data();
  const auto sum_rows = [&](index_t r0, auto rows_in_block) {
    constexpr index_t count = decltype(rows_in_block)::value;
    T s[count];
    for (index_t r = 0; r < count; ++r) s[r] = col[r0 + r];
    index_t j = 1;
    for (; j < quads_end; j += 4) {
      const T* c = col + j * ld + r0;
      for (index_t r = 0; r < count; ++r)
        s[r] = s[r] + ((c[r] + c[r + ld]) + (c[r + 2 * ld] + c[r + 3 * ld]));
    }
    for (; j < cols; ++j)
      for (index_t r = 0; r < count; ++r) s[r] = s[r] + col[j * ld + r0 + r];
    for (index_t r = 0; r < count; ++r) out[r0 + r] = s[r];
  };
  // Blocks of a fixed row count, so that each compiles to whole vectors; each row's sum is the
  // same sequence of additions whichever block holds it.
  constexpr index_t lanes = index_t(64 / sizeof(T));
  constexpr index_t row_block = detail::row_sums_packets * lanes;
  index_t r0 = 0;
  for (; r0 + row_block <= rows; r0 += row_block)
    sum_rows(r0, std::integral_constant<index_t, row_block>{});
  for (; r0 + lanes <= rows; r0 += lanes) sum_rows(r0, std::integral_constant<index_t, lanes>{});
  for (; r0 < rows; ++r0) sum_rows(r0, std::integral_constant<index_t, 1>{});
}

//! Writes ∂L/∂b = Σ_columns δz (row_sums' order), rounded to the stored format, and
//! returns its squared norm.
template <class Layer, class T, class Products>
double bias_gradient(const matrix_map<T>& dz, T* gw) {
  T* db = gw + Layer::weight_count;
  row_sums(dz, db);
  return finish_gradient<Products>{}(db, Layer::out, 1, Layer::out);
}

//! ∂L/∂W = δz·xᵀ ([out, n]·[n, in]) and ∂L/∂b for a dense input; returns their squared norm.
template <class Layer, class T, class Products>
double weight_gradient(Products& ws, const matrix_map<T>& dz, matrix_view<const T> x, T* gw) {
  const double weight_sq = ws.template product<op::none, op::transpose>(
      Layer::out, Layer::in, x.cols, T(1), dz.data(), Layer::out, x.data, Layer::in, T(0), gw,
      Layer::out, finish_gradient<Products>{},
      ws.split_layer(Layer::out, Layer::in, x.cols).weight_gradient);
  return bias_gradient<Layer, T, Products>(dz, gw) + weight_sq;
}

//! The same for a sparse input: only the columns of ∂L/∂W at used features are written (they
//! must hold zeros on entry; the others stay zero), and only those are rounded and summed when
//! the view lists them (all of them when it does not).
template <class Layer, class T, class Products>
double weight_gradient(Products&, const matrix_map<T>& dz, sparse_matrix_view<const T> x, T* gw) {
  sparse_weight_gradient<Products>(dz.data(), Layer::out, x, gw);
  double norm_sq = bias_gradient<Layer, T, Products>(dz, gw);
  const finish_gradient<Products> finish;
  if (x.used_rows == nullptr) return norm_sq + finish(gw, Layer::out, Layer::in, Layer::out);
  return finish_used_columns(gw, Layer::out, x, finish, norm_sq);
}

//! The same for a dealt batch: each thread writes, rounds and sums its features' columns.
template <class Layer, class T, class Products>
double weight_gradient(Products&, const matrix_map<T>& dz, const dealt_sparse_batch<T>& x, T* gw) {
  const double weight_sq =
      sparse_weight_gradient<Products>(dz.data(), Layer::out, x, gw, finish_gradient<Products>{});
  return bias_gradient<Layer, T, Products>(dz, gw) + weight_sq;
}

//! A contiguous block of values as one Eigen array.
template <class T>
using flat_map = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>;

//! Activations Eigen evaluates in SIMD registers (its vectorised logistic and tanh, a max):
//! the scalar std::exp of a sigmoid cost more than every product of the moons network together.
template <class Activation, class Act = std::remove_cvref_t<Activation>>
inline constexpr bool has_vector_form =
    std::is_same_v<Act, nn::sigmoid_t> || std::is_same_v<Act, nn::tanh_t> ||
    std::is_same_v<Act, nn::relu_t> || std::is_same_v<Act, nn::identity_t>;

//! f(z) for an Eigen array expression z (Act has a vector form).
template <class Activation, class Z, class Act = std::remove_cvref_t<Activation>>
auto activate_vector(const Z& z) {
  using T = typename Z::Scalar;
  if constexpr (std::is_same_v<Act, nn::sigmoid_t>)
    return z.logistic();
  else if constexpr (std::is_same_v<Act, nn::tanh_t>)
    return z.tanh();
  else if constexpr (std::is_same_v<Act, nn::relu_t>)
    return z.max(T(0));
  else
    return z;
}

//! δy ⊙ f'(y) from f's output y, for Eigen array expressions (Act has a vector form).
template <class Activation, class D, class Y, class Act = std::remove_cvref_t<Activation>>
auto derivative_vector(const D& dy, const Y& y) {
  using T = typename D::Scalar;
  if constexpr (std::is_same_v<Act, nn::sigmoid_t>)
    return dy * (y * (T(1) - y));
  else if constexpr (std::is_same_v<Act, nn::tanh_t>)
    return dy * (T(1) - y * y);
  else if constexpr (std::is_same_v<Act, nn::relu_t>)
    return (y > T(0)).select(dy, T(0));
  else
    return dy;
}

//! f(offset, count) over the contiguous runs of a [rows, cols] block whose columns lie `ld`
//! values apart: the whole block as one run when its columns are contiguous (ld = rows), else one
//! run per column. A flat run lets Eigen fill whole vectors: a layer of 15 units (moons) fills no
//! 16-float vector column by column, so Eigen would evaluate a column-wise logistic one scalar at
//! a time.
template <class F>
void for_each_run(index_t rows, index_t cols, index_t ld, F&& f) {
  if (ld == rows) {
    f(index_t(0), rows * cols);
  } else {
    for (index_t j = 0; j < cols; ++j) f(j * ld, rows);
  }
}

//! y = f(y + b) on a [rows, cols] block of a layer's outputs (columns `ld` apart), b the block's
//! rows of the bias, each value rounded to the stored format (one rounding).
template <class Layer, class Products, class T>
void add_bias_and_activate(T* y, index_t rows, index_t cols, index_t ld, const T* b) {
  using act = std::remove_cvref_t<decltype(Layer::act)>;
  strided_matrix_map<T> block(y, rows, cols, Eigen::OuterStride<>(ld));
  const const_vector_map<T> bias(b, rows);
  if constexpr (!Products::rounds && has_vector_form<act>) {
    block.colwise() += bias;
    if constexpr (!act::is_identity)
      for_each_run(rows, cols, ld, [&](index_t offset, index_t count) {
        flat_map<T> z(y + offset, count);
        z = activate_vector<act>(z);
      });
  } else {
    block = (block.colwise() + bias).unaryExpr([](T z) { return Products::round(Layer::act(z)); });
  }
}

//! δz = δy ⊙ f'(y) on a [rows, cols] block of a layer's output gradient δy (columns `ld` apart),
//! in place, f' read from the layer's outputs y (the same block of them), rounded to the stored
//! format (δy arrives unrounded: it is a sum).
template <class Layer, class Products, class T>
void multiply_by_derivative(T* dy, const T* y, index_t rows, index_t cols, index_t ld) {
  using act = std::remove_cvref_t<decltype(Layer::act)>;
  strided_matrix_map<T> d(dy, rows, cols, Eigen::OuterStride<>(ld));
  if constexpr (!act::is_identity) {
    if constexpr (!Products::rounds && has_vector_form<act>) {
      for_each_run(rows, cols, ld, [&](index_t offset, index_t count) {
        flat_map<T> dc(dy + offset, count);
        dc = derivative_vector<act>(
            dc, Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>(y + offset, count));
      });
    } else {
      d = d.binaryExpr(
          const_strided_matrix_map<T>(y, rows, cols, Eigen::OuterStride<>(ld)),
          [](T g, T v) { return Products::round(g * Layer::act.derivative_from_output(v)); });
    }
  } else if constexpr (Products::rounds) {
    d = d.unaryExpr([](T g) { return Products::round(g); });
  }
}

//! The finishers (partition.hpp) that run those two passes on each block of a product's C as soon
//! as the thread that wrote the block has finished it, while the block is in that core's cache,
//! rather than as a pass of their own after the product. A pass of its own ran on one thread
//! while the other waited, and drew the other core's half of C across (which that core then drew
//! back for the next product): see docs/benchmarks.md, "Each block finished where it was written".
//! A block's place in C, and so its rows of b or of y, is its offset from C's first value.
//!
//! After a layer's forward product: C is the layer's y = W·x.
template <class Layer, class Products, class T>
struct finish_forward {
  const T* c;     //!< C's first value
  const T* bias;  //!< b: [Layer::out]
  double operator()(T* block, index_t rows, index_t cols, index_t ld) const {
    add_bias_and_activate<Layer, Products>(block, rows, cols, ld, bias + (block - c) % ld);
    return 0.0;
  }
};

//! After the input-gradient product of the layer above `Layer`: C is `Layer`'s δy.
template <class Layer, class Products, class T>
struct finish_output_gradient {
  const T* c;  //!< C's first value
  const T* y;  //!< `Layer`'s outputs, laid out as C
  double operator()(T* block, index_t rows, index_t cols, index_t ld) const {
    multiply_by_derivative<Layer, Products>(block, y + (block - c), rows, cols, ld);
    return 0.0;
  }
};

//! Backward through image layer l of `Stack` (nn/conv2d.hpp), its δz in s.gradients[l]: a
//! convolution's ∂L/∂W, ∂L/∂b (their squared norm added to norm_sq) and input gradient, or a
//! max-pooling's input gradient. Below layer 0 the input gradient is the stack's (α, accumulate,
//! when asked for); above it, it is the layer below's δy, multiplied by its f' here (to its δz).
template <class Stack, std::size_t l, class T, class Products, class Input>
void backward_image_layer(const T* w,
                          T* gw,
                          const Input& x,
                          const stack_scratch<Stack, T>& s,
                          Products& ws,
                          matrix_view<T> input_gradient,
                          T alpha,
                          bool accumulate,
                          double& norm_sq) {
  using layer = typename Stack::template layer<l>;
  const index_t n = s.cols;
  const T* dz = s.gradients[l].data;
  if constexpr (nn::kind_of<layer>() == nn::layer_kind::conv2d) {
    const matrix_view<const T> in = [&] {
      if constexpr (l == 0)
        return matrix_view<const T>(x);
      else
        return matrix_view<const T>(s.outputs[l - 1]);
    }();
    // ∂L/∂W, and ∂L/∂b = Σ over samples and pixels of δz viewed as [C_out, n·pixels]: W then b
    // as one [C_out, P + 1] block for the norm.
    norm_sq += conv_weight_gradient<layer>(ws, dz, in, gw, s.conv, finish_gradient<Products>{});
    if constexpr (l > 0) {
      using below = typename Stack::template layer<l - 1>;
      T* dy = s.gradients[l - 1].data;
      conv_input_gradient<layer>(
          ws, w, dz, n, dy, T(1), false, s.conv,
          finish_output_gradient<below, Products, T>{dy, s.outputs[l - 1].data});
    } else if (input_gradient.data != nullptr) {
      conv_input_gradient<layer>(ws, w, dz, n, input_gradient.data, alpha, accumulate, s.conv);
    }
  } else {  // max-pooling: no parameters; each window's argmax found again in its input
    if constexpr (l > 0) {
      using below = typename Stack::template layer<l - 1>;
      const T* y = s.outputs[l - 1].data;
      // δy of the layer below, written over its y when stack_scratch says so.
      max_pool_backward<layer>(matrix_view<const T>(s.outputs[l - 1]), dz, s.gradients[l - 1].data,
                               T(1), false,
                               [y](index_t i) { return below::act.derivative_from_output(y[i]); });
    } else if (input_gradient.data != nullptr) {
      max_pool_backward<layer>(matrix_view<const T>(x), dz, input_gradient.data, alpha, accumulate,
                               [](index_t) { return T(1); });
    }
  }
}

//! Forward through image layer i of `Stack` (nn/conv2d.hpp) into s.outputs[i]. A function of its
//! own, not a branch of forward()'s fold: clang 14 checks a discarded `if constexpr` branch of a
//! lambda in a fold, where these static_asserts and the dense view of x would not hold.
template <class Stack, std::size_t i, class T, class Products, class Input>
void forward_image_layer(
    const T* w, const T* b, const Input& x, const stack_scratch<Stack, T>& s, Products& ws) {
  using layer = typename Stack::template layer<i>;
  T* y = s.outputs[i].data;
  static_assert(i > 0 || !is_sparse_input<Input, T>,
                "dafuse: an image layer (nn::conv2d, nn::max_pool2d) reads dense input; "
                "nn::sparse_input cannot wrap an nn::conv_net");
  const matrix_view<const T> in = [&] {
    if constexpr (i == 0)
      return matrix_view<const T>(x);
    else
      return matrix_view<const T>(s.outputs[i - 1]);
  }();
  if constexpr (nn::kind_of<layer>() == nn::layer_kind::conv2d)
    // y = f(W·X̂ + b) a chunk of samples at a time (conv.hpp), b and f applied to each
    // finished block.
    conv_forward<layer>(ws, w, in, y, s.conv, [b](T* c) {
      return finish_forward<layer, Products, T>{c, b};
    });
  else
    max_pool_forward<layer>(in, y, static_cast<T*>(nullptr));
}

//! y_l for every layer of `Stack` on x: [in, n], using the stack's parameters at `params`.
//! `Products` runs the matrix products and rounds stored values (a gemm_workspace<T> for plain
//! precision, a mixed_products<F> for bf16/fp16).
//! `weights`, when given, is where the products read the weights (the same layout as params; the
//! biases still come from params): the master copy of a mixed-precision step whose products
//! round their own operands (products.hpp).
template <class Stack, class T, class Products, class Input>
void forward(const T* params,
             const Input& x,
             const stack_scratch<Stack, T>& s,
             Products& ws,
             const T* weights = nullptr) {
  check_columns(x, s);
  if (weights == nullptr) weights = params;
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    (
        [&] {
          using layer = typename Stack::template layer<I>;
          const T* w = weights + Stack::template param_offset<I>();
          const T* b = params + Stack::template param_offset<I>() + layer::weight_count;
          T* y = s.outputs[I].data;
          constexpr nn::layer_kind kind = nn::kind_of<layer>();
          if constexpr (kind != nn::layer_kind::dense) {
            forward_image_layer<Stack, I>(w, b, x, s, ws);
          } else {
            // y = f(W·x + b): [out, in]·[in, n], the bias and activation applied to each block of
            // the product as it is finished.
            const finish_forward<layer, Products, T> finish{y, b};
            if constexpr (I == 0)
              input_product<layer>(ws, w, x, y, finish);
            else
              input_product<layer>(ws, w, matrix_view<const T>(s.outputs[I - 1]), y, finish);
          }
        }(),
        ...);
  }
  (std::make_index_sequence<Stack::depth>{});
}

//! Backward through `Stack` given δy of its last layer in s.output_gradient().
//! Writes ∂L/∂θ for the stack's parameters at `grads` and returns their squared L2 norm.
//! When `input_gradient` is given, also writes δx (scaled by `alpha`) into it, adding to what is
//! there when `accumulate` is set: that is how the reversal's −λ and the sum of the classifier's
//! and the discriminator's contributions to δh cost no extra pass. `weights` as in forward().
template <class Stack, class T, class Products, class Input>
double backward(const T* params,
                T* grads,
                const Input& x,
                const stack_scratch<Stack, T>& s,
                Products& ws,
                matrix_view<T> input_gradient = {},
                T alpha = T(1),
                bool accumulate = false,
                const T* weights = nullptr) {
  check_columns(x, s);
  if (weights == nullptr) weights = params;
  double norm_sq = 0;
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    // Layers last to first: fold over the reversed index sequence.
    (
        [&] {
          constexpr std::size_t l = Stack::depth - 1 - I;
          using layer = typename Stack::template layer<l>;
          matrix_map<T> dz = map(s.gradients[l]);
          // δz = δy ⊙ f'(y). Below the last layer the input-gradient product of the layer above
          // has done it as it wrote δy (finish_output_gradient).
          if constexpr (l == Stack::depth - 1)
            multiply_by_derivative<layer, Products>(dz.data(), s.outputs[l].data, layer::out,
                                                    s.cols, layer::out);
          const T* w = weights + Stack::template param_offset<l>();
          T* gw = grads + Stack::template param_offset<l>();
          const index_t n = s.cols;
          constexpr nn::layer_kind kind = nn::kind_of<layer>();
          if constexpr (kind != nn::layer_kind::dense) {
            backward_image_layer<Stack, l>(w, gw, x, s, ws, input_gradient, alpha, accumulate,
                                           norm_sq);
            return;
          } else {
            if constexpr (l == 0)
              norm_sq += weight_gradient<layer>(ws, dz, x, gw);
            else
              norm_sq += weight_gradient<layer>(ws, dz, matrix_view<const T>(s.outputs[l - 1]), gw);
            // δx = α·Wᵀ·δz: [in, out]·[out, n]
            const auto split = ws.split_layer(layer::out, layer::in, n).input_gradient;
            if constexpr (l > 0) {
              T* dy = s.gradients[l - 1].data;
              ws.template product<op::transpose, op::none>(
                  layer::in, n, layer::out, T(1), w, layer::out, dz.data(), layer::out, T(0), dy,
                  layer::in,
                  finish_output_gradient<typename Stack::template layer<l - 1>, Products, T>{
                      dy, s.outputs[l - 1].data},
                  split);
            } else if constexpr (is_sparse_input<Input, T>) {
              if (input_gradient.data != nullptr)
                fail("layer stack", "input gradient", "none for a sparse input (it is data)",
                     "a buffer to write it to");
            } else if (input_gradient.data != nullptr) {
              ws.template product<op::transpose, op::none>(
                  layer::in, n, layer::out, alpha, w, layer::out, dz.data(), layer::out,
                  accumulate ? T(1) : T(0), input_gradient.data, layer::in, no_finish{}, split);
            }
          }
        }(),
        ...);
  }
  (std::make_index_sequence<Stack::depth>{});
  return norm_sq;
}

}  // namespace dafuse::backend::host
