// SPDX-License-Identifier: Apache-2.0
//! @file nn/dense.hpp
//! @brief Dense layers with compile-time widths: `dense`, `layer_stack`, `mlp` and `linear`.
//!
//! These types only describe structure (widths, activations, where each layer's parameters sit in
//! the step's flat parameter buffer); the backends run them. A layer In → Out owns a column-major
//! weight matrix W: [Out, In] followed by a bias b: [Out], and computes y = f(W·x + b).
#pragma once
#include <dafuse/config.hpp>
#include <dafuse/core/meta.hpp>
#include <dafuse/nn/activation.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <numeric>
#include <tuple>
#include <type_traits>
#include <utility>

namespace dafuse::nn {

namespace detail {
//! A leaky ReLU's derivative is read from its output's sign, which needs a positive slope.
template <class A>
constexpr bool valid_slope(const A& act) {
  if constexpr (std::is_same_v<A, leaky_relu_t>)
    return act.negative_slope > 0;
  else
    return true;
}
}  // namespace detail

//! One dense layer In → Out followed by the activation object `Act`.
template <index_t In, index_t Out, auto Act>
struct dense {
  static_assert(In > 0 && Out > 0, "dafuse: nn::dense widths must be positive");
  static_assert(activation<std::remove_cvref_t<decltype(Act)>>,
                "dafuse: the last argument of a layer must be an activation such as nn::relu");
  static_assert(detail::valid_slope(Act),
                "dafuse: nn::leaky_relu_t needs negative_slope > 0 (its derivative is read from "
                "the output's sign); use nn::relu for a slope of 0");
  static constexpr index_t in = In;                       //!< input width
  static constexpr index_t out = Out;                     //!< output width
  static constexpr auto act = Act;                        //!< activation applied to W·x + b
  static constexpr index_t weight_count = In * Out;       //!< elements of W
  static constexpr index_t param_count = In * Out + Out;  //!< W then b
  static constexpr index_t bias_count = Out;              //!< elements of b
  static constexpr index_t fan_in = In;                   //!< inputs a unit reads
  static constexpr index_t fan_out = Out;                 //!< units an input feeds
  static constexpr index_t weight_rows = Out;             //!< W as a matrix: [Out, In]
  static constexpr index_t weight_cols = In;
};

//! The longest side of the products a layer runs beyond its width (nn/conv2d.hpp: a chunk's
//! patch columns): 0 for others.
template <class L>
constexpr index_t product_side_of() {
  if constexpr (requires { L::product_side; })
    return L::product_side;
  else
    return 0;
}
//! Values of scratch a layer asks of its stack besides its outputs (nn/conv2d.hpp's image layers:
//! a patch matrix, shared by the stack's layers; argmax indices, per sample, for an execution
//! that keeps them): none for others.
template <class L>
constexpr index_t patch_elements_of() {
  if constexpr (requires { L::patch_elements; })
    return L::patch_elements;
  else
    return 0;
}
template <class L>
constexpr index_t index_count_of() {
  if constexpr (requires { L::index_count; })
    return L::index_count;
  else
    return 0;
}

//! Layers applied in order; knows where each layer's parameters start in a flat buffer.
template <class... Layers>
struct layer_stack {
  static_assert(sizeof...(Layers) > 0, "dafuse: a layer stack needs at least one layer");
  static constexpr std::size_t depth = sizeof...(Layers);  //!< number of layers
  template <std::size_t I>
  using layer = std::tuple_element_t<I, std::tuple<Layers...>>;        //!< the I-th layer
  static constexpr index_t in = layer<0>::in;                          //!< input width
  static constexpr index_t out = layer<depth - 1>::out;                //!< output width
  static constexpr index_t param_count = (Layers::param_count + ...);  //!< all parameters
  static constexpr index_t max_width = std::max({Layers::out...});     //!< widest layer output
  //! The longest side of any product the stack runs: max_width, or a convolution's longer chunk
  //! products (nn/conv2d.hpp), which its products' workspace must hold.
  static constexpr index_t max_product_side = std::max({max_width, product_side_of<Layers>()...});
  static constexpr index_t activation_count = (Layers::out + ...);  //!< outputs per sample
  //! Values of the patch matrix the stack's convolutions share (nn/conv2d.hpp); 0 without.
  static constexpr index_t patch_elements = std::max({patch_elements_of<Layers>()...});
  //! Argmax indices a sample (max-pooling layers, nn/conv2d.hpp), for an execution that keeps
  //! them (eager_step; the fused step finds them again in the pooling's input); 0 without.
  static constexpr index_t index_count = (index_count_of<Layers>() + ...);
  //! Offset of layer I's weights in the stack's parameter block; its bias follows them.
  template <std::size_t I>
  static constexpr index_t param_offset() {
    constexpr std::array<index_t, depth> counts{Layers::param_count...};
    return std::accumulate(counts.begin(), counts.begin() + I, index_t{0});
  }
  //! Offset of layer I's output in a per-sample activation block (outputs stacked in order).
  template <std::size_t I>
  static constexpr index_t activation_offset() {
    constexpr std::array<index_t, depth> widths{Layers::out...};
    return std::accumulate(widths.begin(), widths.begin() + I, index_t{0});
  }
  //! Offset of layer I's argmax indices in a per-sample index block.
  template <std::size_t I>
  static constexpr index_t index_offset() {
    constexpr std::array<index_t, depth> counts{index_count_of<Layers>()...};
    return std::accumulate(counts.begin(), counts.begin() + I, index_t{0});
  }

 private:
  template <std::size_t... I>
  static constexpr bool chained(std::index_sequence<I...>) {
    return ((layer<I>::out == layer<I + 1>::in) && ...);
  }
  static_assert(chained(std::make_index_sequence<depth - 1>{}),
                "dafuse: each layer's input width must equal the previous layer's output width");
};

namespace detail {
template <bool Cond, auto A, auto B>
struct select_value {
  static constexpr auto value = A;
};
template <auto A, auto B>
struct select_value<false, A, B> {
  static constexpr auto value = B;
};

template <auto... Spec>
struct mlp_spec {
  static constexpr std::size_t width_count = sizeof...(Spec) - 1;
  static constexpr auto parts = std::tuple{Spec...};
  static constexpr auto act = std::get<width_count>(parts);
  template <std::size_t... I>
  static constexpr bool all_widths(std::index_sequence<I...>) {
    return (std::is_integral_v<std::remove_cvref_t<decltype(std::get<I>(parts))>> && ...);
  }
  template <std::size_t I>
  static constexpr index_t width = static_cast<index_t>(std::get<I>(parts));
};

template <class Spec, bool ActivateOutput, class Seq>
struct make_mlp_stack;
template <class Spec, bool ActivateOutput, std::size_t... I>
struct make_mlp_stack<Spec, ActivateOutput, std::index_sequence<I...>> {
  using type = layer_stack<
      dense<Spec::template width<I>,
            Spec::template width<I + 1>,
            select_value<(I + 2 == Spec::width_count && !ActivateOutput), identity, Spec::act>::
                value>...>;
};
}  // namespace detail

//! A multi-layer perceptron: widths, then the activation of its hidden layers.
//! `mlp<784, 256, 10, nn::relu>` is 784 → 256 → 10 with ReLU after the hidden layer.
//!
//! Whether the last layer is activated depends on the role the mlp plays in a network, so the
//! type reads as the architecture does: as the **feature extractor** its output is a learned
//! representation and is activated too; as a **classifier or discriminator** its output are logits
//! and the last layer stays linear (the losses take logits; see nn/loss.hpp).
template <auto... Spec>
struct mlp {
  static_assert(sizeof...(Spec) >= 3,
                "dafuse: nn::mlp takes at least two widths and an activation, e.g. "
                "nn::mlp<784, 256, 10, nn::relu>");

 private:
  using spec = detail::mlp_spec<Spec...>;
  static_assert(spec::all_widths(std::make_index_sequence<spec::width_count>{}),
                "dafuse: nn::mlp takes widths first and the activation last, e.g. "
                "nn::mlp<784, 256, 10, nn::relu>");
  static_assert(activation<std::remove_cvref_t<decltype(spec::act)>>,
                "dafuse: the last argument of nn::mlp must be an activation such as nn::relu");

 public:
  static constexpr index_t in = spec::template width<0>;                       //!< input width
  static constexpr index_t out = spec::template width<spec::width_count - 1>;  //!< output width
  //! The layers, with the last one activated (feature extractor) or linear (logits).
  template <bool ActivateOutput>
  using stack = typename detail::
      make_mlp_stack<spec, ActivateOutput, std::make_index_sequence<spec::width_count - 1>>::type;
};

//! One affine layer In → Out (no activation whatever its role).
template <index_t In, index_t Out>
struct linear {
  static constexpr index_t in = In;    //!< input width
  static constexpr index_t out = Out;  //!< output width
  template <bool>
  using stack = layer_stack<dense<In, Out, identity>>;  //!< a single linear layer
};

//! What dann_net needs of a module description (mlp, linear, or a user's own).
template <class M>
concept module_spec = requires {
  typename M::template stack<true>;
  typename M::template stack<false>;
  { M::in } -> std::convertible_to<index_t>;
  { M::out } -> std::convertible_to<index_t>;
};

//! A module whose input is sparse: rows of a CSR data set (bag-of-words counts, one-hot
//! features), e.g. `nn::sparse_input<nn::mlp<5000, 100, nn::relu>>`. Its first layer multiplies
//! only the non-zeros and writes weight gradients only for the features a batch uses
//! (backend/host/sparse.hpp); the rest of the module is unchanged. Only the feature extractor
//! of a dann_net can take sparse input.
template <class Module>
struct sparse_input : Module {
  static_assert(module_spec<Module>,
                "dafuse: nn::sparse_input<M> wraps a module such as nn::mlp<5000, 100, nn::relu>");
  static constexpr bool sparse = true;  //!< the first layer reads CSR rows
};

//! Whether a module reads sparse input (nn::sparse_input).
template <class M>
inline constexpr bool reads_sparse_input = requires {
  requires M::sparse;
};

}  // namespace dafuse::nn
