// SPDX-License-Identifier: Apache-2.0
//! @file nn/conv2d.hpp
//! @brief Convolutional feature extractors with static shapes: `image`, `conv2d`, `max_pool2d`,
//! `flatten` and the module `conv_net` that chains them into dense layers.
//!
//! Layout: NHWC. A sample is one column of the step's [in, n] batch, its H·W·C values stored
//! row by row with the channels of a pixel together (what data/images.hpp loads for [N, H, W] and
//! [N, H, W, C] files). Why: a convolution runs as a product on the column-major fp32 GEMM,
//! Y[C_out, pixels] = W[C_out, K·K·C_in] · P[K·K·C_in, pixels], P holding one output pixel's patch
//! a column (im2col). With channels last, each of a patch's K rows of K·C_in values is one
//! contiguous run of the input, and Y's columns (one pixel's C_out channels) are the NHWC output
//! that the next layer reads in place: no transposition on either side. NCHW would need one per
//! layer.
//!
//! A conv2d's weights are W: [C_out, K, K, C_in] column-major (element (o, kh, kw, c) at
//! o + C_out·(c + C_in·(kw + K·kh))), then its bias b: [C_out]. PyTorch's Conv2d weight
//! [C_out, C_in, K, K] maps onto it by permuting to (C_out, kh, kw, C_in); a dense layer after
//! nn::flatten reads the HWC order (PyTorch's Flatten of NCHW reads CHW: permute its columns).
#pragma once
#include <dafuse/config.hpp>
#include <dafuse/core/meta.hpp>
#include <dafuse/nn/activation.hpp>
#include <dafuse/nn/dense.hpp>

#include <algorithm>
#include <cstddef>
#include <tuple>
#include <type_traits>
#include <utility>

namespace dafuse::nn {

//! An input image's static shape: Height × Width × Channels, stored HWC (channels fastest).
template <index_t Height, index_t Width, index_t Channels = 1>
struct image {
  static_assert(Height > 0 && Width > 0 && Channels > 0,
                "dafuse: nn::image<Height, Width, Channels> needs positive sizes");
  static constexpr index_t height = Height;                     //!< rows of pixels
  static constexpr index_t width = Width;                       //!< pixels a row
  static constexpr index_t channels = Channels;                 //!< values a pixel
  static constexpr index_t values = Height * Width * Channels;  //!< values a sample
};

//! A 2-D convolution InChannels → OutChannels with a square Kernel, Stride and zero Padding on
//! every side, followed by the activation `Act` (ReLU unless told: a convolution of a feature
//! extractor is followed by one, and max-pooling after it equals pooling before it, both being
//! monotone). Output size: ⌊(H + 2·Padding − Kernel) / Stride⌋ + 1, as PyTorch's Conv2d.
template <index_t InChannels,
          index_t OutChannels,
          index_t Kernel,
          index_t Stride = 1,
          index_t Padding = 0,
          auto Act = relu>
struct conv2d {
  static_assert(InChannels > 0 && OutChannels > 0,
                "dafuse: nn::conv2d needs positive channel counts");
  static_assert(Kernel > 0 && Stride > 0 && Padding >= 0,
                "dafuse: nn::conv2d needs Kernel > 0, Stride > 0 and Padding >= 0");
  static_assert(Padding < Kernel,
                "dafuse: nn::conv2d's Padding must be smaller than its Kernel (an output pixel "
                "would see only padding)");
  static_assert(activation<std::remove_cvref_t<decltype(Act)>>,
                "dafuse: the last argument of nn::conv2d must be an activation such as nn::relu");
  static_assert(detail::valid_slope(Act),
                "dafuse: nn::leaky_relu_t needs negative_slope > 0 (its derivative is read from "
                "the output's sign); use nn::relu for a slope of 0");
  static constexpr index_t in_channels = InChannels;    //!< C_in
  static constexpr index_t out_channels = OutChannels;  //!< C_out
  static constexpr index_t kernel = Kernel;             //!< K (K × K windows)
  static constexpr index_t stride = Stride;             //!< step between windows
  static constexpr index_t padding = Padding;           //!< zeros added on each side
  static constexpr auto act = Act;                      //!< applied to W ⋆ x + b
};

//! Max-pooling over non-overlapping K × K windows (stride K), as nn.MaxPool2d(K); rows and
//! columns beyond the last whole window are dropped (⌊H / K⌋ outputs).
template <index_t K>
struct max_pool2d {
  static_assert(K > 0, "dafuse: nn::max_pool2d<K> needs K > 0");
  static constexpr index_t kernel = K;  //!< window side and stride
};

//! Between the image layers and the dense layers of a conv_net: from there on a sample is a
//! vector of H·W·C values (HWC order; no copy, the layout already is one).
struct flatten {};

//! What a layer of a stack computes; the backends dispatch on it.
enum class layer_kind { dense, conv2d, max_pool2d };

//! Layer kind of L: a dense layer unless it says otherwise.
template <class L>
constexpr layer_kind kind_of() {
  if constexpr (requires { L::kind; })
    return L::kind;
  else
    return layer_kind::dense;
}

//! Samples whose patch matrix [patch, samples·pixels] fills about 2^18 values (1 MiB of fp32, a
//! Zen 4 core's L2): a convolution's products run on such chunks so the patches are read from
//! cache.
constexpr index_t chunk_samples_for(index_t patch, index_t pixels) {
  return std::max<index_t>(1, (index_t(1) << 18) / (patch * pixels));
}

//! A conv2d resolved on an input of H × W × Conv::in_channels: what a layer_stack holds.
template <index_t H, index_t W, class Conv>
struct conv2d_layer {
  static constexpr layer_kind kind = layer_kind::conv2d;
  static constexpr index_t in_height = H;                      //!< input rows
  static constexpr index_t in_width = W;                       //!< input columns
  static constexpr index_t in_channels = Conv::in_channels;    //!< C_in
  static constexpr index_t out_channels = Conv::out_channels;  //!< C_out
  static constexpr index_t kernel = Conv::kernel;              //!< K
  static constexpr index_t stride = Conv::stride;              //!< S
  static constexpr index_t padding = Conv::padding;            //!< P
  static_assert(H + 2 * padding >= kernel && W + 2 * padding >= kernel,
                "dafuse: nn::conv2d's kernel is larger than its padded input image");
  static constexpr index_t out_height = (H + 2 * padding - kernel) / stride + 1;  //!< output rows
  static constexpr index_t out_width = (W + 2 * padding - kernel) / stride + 1;   //!< output cols
  static constexpr index_t pixels = out_height * out_width;        //!< output pixels a sample
  static constexpr index_t patch = kernel * kernel * in_channels;  //!< values a window: fan-in
  static constexpr index_t in = H * W * in_channels;               //!< input values a sample
  static constexpr index_t out = pixels * out_channels;            //!< output values a sample
  static constexpr auto act = Conv::act;                           //!< activation
  static constexpr index_t fan_in = patch;                         //!< as PyTorch counts it
  static constexpr index_t fan_out = kernel * kernel * out_channels;
  static constexpr index_t weight_rows = out_channels;  //!< W as a matrix: [C_out, patch]
  static constexpr index_t weight_cols = patch;
  static constexpr index_t weight_count = out_channels * patch;      //!< elements of W
  static constexpr index_t bias_count = out_channels;                //!< elements of b
  static constexpr index_t param_count = weight_count + bias_count;  //!< W then b
  //! Samples a chunk of the products (chunk_samples_for).
  static constexpr index_t chunk_samples = chunk_samples_for(patch, pixels);
  //! Values of one chunk's patch matrix.
  static constexpr index_t forward_patch_elements = patch * pixels * chunk_samples;
  //! Whether the input gradient runs as a convolution itself (transposed_conv2d; stride 1): a
  //! product [C_in, K·K·C_out]·[K·K·C_out, pixels], K·K·C_out terms, in place of Wᵀ·δZ (C_out
  //! terms) and col2im. Its C_in rows fill the fp32 kernel's register tiles only from 16 on
  //! (LeNet's conv2: 32): below that Wᵀ·δZ, with K·K·C_in rows, is the better product.
  static constexpr bool transposed_input_gradient = stride == 1 && in_channels >= 16;
  //! Its workspace: the patch matrix chunk and the flipped weights.
  static constexpr index_t input_gradient_elements = [] {
    if constexpr (transposed_input_gradient) {
      constexpr index_t t_patch = kernel * kernel * out_channels, t_pixels = H * W;
      return t_patch * t_pixels * chunk_samples_for(t_patch, t_pixels) + out_channels * patch;
    } else {
      return index_t(0);
    }
  }();
  //! The workspace this layer asks of its stack.
  static constexpr index_t patch_elements =
      std::max(forward_patch_elements, input_gradient_elements);
  //! The longest side of a product the layer runs (a chunk's output pixels: the forward's
  //! columns and ∂L/∂W's terms; the transposed input gradient's columns; a window's values), for
  //! the products' workspace.
  static constexpr index_t product_side = [] {
    index_t side = std::max({patch, chunk_samples * pixels, kernel * kernel * out_channels});
    if constexpr (transposed_input_gradient) {
      constexpr index_t t_patch = kernel * kernel * out_channels, t_pixels = H * W;
      side = std::max(side, chunk_samples_for(t_patch, t_pixels) * t_pixels);
    }
    return side;
  }();
  static constexpr index_t index_count = 0;  //!< no argmax indices
};

//! For a stride-1 conv2d_layer L, the convolution that maps δz (an Ho × Wo × C_out image) to δx:
//! δx(i, j, c) = Σ_{kh,kw,o} W(o, kh, kw, c)·δz(i + P − kh, j + P − kw, o), i.e. padding K − 1 − P
//! and the kernel W'(c, kh', kw', o) = W(o, K − 1 − kh', K − 1 − kw', c), C_out → C_in channels.
template <class L>
using transposed_conv2d = conv2d_layer<
    L::out_height,
    L::out_width,
    conv2d<L::out_channels, L::in_channels, L::kernel, 1, L::kernel - 1 - L::padding, identity>>;

//! A max_pool2d<K> resolved on an input of H × W × C.
template <index_t H, index_t W, index_t C, index_t K>
struct max_pool2d_layer {
  static constexpr layer_kind kind = layer_kind::max_pool2d;
  static_assert(K <= H && K <= W, "dafuse: nn::max_pool2d's window is larger than its input image");
  static constexpr index_t in_height = H;                //!< input rows
  static constexpr index_t in_width = W;                 //!< input columns
  static constexpr index_t channels = C;                 //!< channels (pooled one by one)
  static constexpr index_t kernel = K;                   //!< window side and stride
  static constexpr index_t out_height = H / K;           //!< output rows
  static constexpr index_t out_width = W / K;            //!< output columns
  static constexpr index_t in = H * W * C;               //!< input values a sample
  static constexpr index_t out = (H / K) * (W / K) * C;  //!< output values a sample
  static constexpr auto act = identity;                  //!< none (the layer below's is applied)
  static constexpr index_t weight_count = 0;             //!< no parameters
  static constexpr index_t bias_count = 0;
  static constexpr index_t param_count = 0;
  static constexpr index_t weight_rows = 0;
  static constexpr index_t weight_cols = 0;
  static constexpr index_t patch_elements = 0;
  //! One argmax a output value (its window position, a small integer stored exactly in T).
  static constexpr index_t index_count = out;
};

namespace detail {
// The shape a conv_net has reached: an image H × W × C, or (Flat) a vector of Width values.
template <index_t H, index_t W, index_t C, bool Flat, index_t Width = H* W* C>
struct net_shape {
  static constexpr index_t height = H, width = W, channels = C, values = Width;
  static constexpr bool flat = Flat;
};

template <class... L>
struct layer_list {};

// One spec applied to a shape: the resolved layer (appended to the list) and the next shape.
template <class Shape, class Spec>
struct resolve {
  static_assert(dependent_false<Spec>,
                "dafuse: nn::conv_net takes nn::conv2d, nn::max_pool2d, nn::flatten and, after "
                "nn::flatten, nn::dense layers");
};
template <class Shape, index_t Ci, index_t Co, index_t K, index_t S, index_t P, auto A>
struct resolve<Shape, conv2d<Ci, Co, K, S, P, A>> {
  static_assert(!Shape::flat, "dafuse: nn::conv2d after nn::flatten; image layers come first");
  static_assert(Ci == Shape::channels,
                "dafuse: nn::conv2d's InChannels must equal the channels of its input (the "
                "image's Channels, or the previous nn::conv2d's OutChannels)");
  using layer = conv2d_layer<Shape::height, Shape::width, conv2d<Ci, Co, K, S, P, A>>;
  using next = net_shape<layer::out_height, layer::out_width, Co, false>;
  template <class... Done>
  using append = layer_list<Done..., layer>;
};
template <class Shape, index_t K>
struct resolve<Shape, max_pool2d<K>> {
  static_assert(!Shape::flat, "dafuse: nn::max_pool2d after nn::flatten; image layers come first");
  using layer = max_pool2d_layer<Shape::height, Shape::width, Shape::channels, K>;
  using next = net_shape<layer::out_height, layer::out_width, Shape::channels, false>;
  template <class... Done>
  using append = layer_list<Done..., layer>;
};
template <class Shape>
struct resolve<Shape, flatten> {
  static_assert(!Shape::flat, "dafuse: nn::flatten appears twice in one nn::conv_net");
  using next = net_shape<Shape::height, Shape::width, Shape::channels, true>;
  template <class... Done>
  using append = layer_list<Done...>;  // a view, not a layer
};
template <class Shape, index_t In, index_t Out, auto A>
struct resolve<Shape, dense<In, Out, A>> {
  static_assert(Shape::flat,
                "dafuse: put nn::flatten between the image layers and the first nn::dense of an "
                "nn::conv_net");
  static_assert(In == Shape::values,
                "dafuse: a dense layer's input width must equal the width before it (after "
                "nn::flatten: height · width · channels of the last image layer)");
  using layer = dense<In, Out, A>;
  using next = net_shape<1, 1, Out, true, Out>;
  template <class... Done>
  using append = layer_list<Done..., layer>;
};

template <class Shape, class Done, class... Rest>
struct resolve_all {
  using shape = Shape;
  using layers = Done;
};
template <class Shape, class... Done, class First, class... Rest>
struct resolve_all<Shape, layer_list<Done...>, First, Rest...> {
  using step = resolve<Shape, First>;
  using rest = resolve_all<typename step::next, typename step::template append<Done...>, Rest...>;
  using shape = typename rest::shape;
  using layers = typename rest::layers;
};

// The same layer with activation A (the last layer of a stack of logits is linear).
template <class L, auto A>
struct with_activation {
  using type = L;  // max-pooling has no activation of its own
};
template <index_t In, index_t Out, auto B, auto A>
struct with_activation<dense<In, Out, B>, A> {
  using type = dense<In, Out, A>;
};
template <index_t H,
          index_t W,
          index_t Ci,
          index_t Co,
          index_t K,
          index_t S,
          index_t P,
          auto B,
          auto A>
struct with_activation<conv2d_layer<H, W, conv2d<Ci, Co, K, S, P, B>>, A> {
  using type = conv2d_layer<H, W, conv2d<Ci, Co, K, S, P, A>>;
};

template <bool ActivateOutput, class List>
struct make_conv_stack;
template <bool ActivateOutput, class... L>
struct make_conv_stack<ActivateOutput, layer_list<L...>> {
  using last = std::tuple_element_t<sizeof...(L) - 1, std::tuple<L...>>;
  using last_layer =
      std::conditional_t<ActivateOutput, last, typename with_activation<last, identity>::type>;
  template <std::size_t... I>
  static auto make(std::index_sequence<I...>)
      -> layer_stack<std::tuple_element_t<I, std::tuple<L...>>..., last_layer>;
  using type = decltype(make(std::make_index_sequence<sizeof...(L) - 1>{}));
};

template <class T>
inline constexpr bool is_image = false;
template <index_t H, index_t W, index_t C>
inline constexpr bool is_image<image<H, W, C>> = true;
}  // namespace detail

//! A convolutional module: the input image's shape, then conv2d and max_pool2d layers,
//! nn::flatten, and dense layers, e.g. the LeNet-like feature extractor of the DANN paper's digit
//! experiments on 16 × 16 images (padding 2 keeps 16 × 16 through the first convolution, so the
//! flattened width is the paper's 4·4·48 = 768 on 28 × 28 without padding):
//!
//!     nn::conv_net<nn::image<16, 16, 1>,
//!                  nn::conv2d<1, 32, 5, 1, 2>, nn::max_pool2d<2>,
//!                  nn::conv2d<32, 48, 5, 1, 2>, nn::max_pool2d<2>,
//!                  nn::flatten, nn::dense<768, 100, nn::relu>, nn::dense<100, 100, nn::relu>>
//!
//! Shapes are checked where the alias is written. As a feature extractor every layer keeps its
//! activation; as a classifier or discriminator the last one is linear (as nn::mlp).
template <class Image, class... Layers>
struct conv_net {
  static_assert(detail::is_image<Image>,
                "dafuse: nn::conv_net's first argument must be the input's shape, "
                "nn::image<Height, Width, Channels>");
  static_assert(sizeof...(Layers) > 0, "dafuse: nn::conv_net needs at least one layer");

 private:
  using resolved =
      detail::resolve_all<detail::net_shape<Image::height, Image::width, Image::channels, false>,
                          detail::layer_list<>,
                          Layers...>;
  static_assert(resolved::shape::flat,
                "dafuse: nn::conv_net must end with nn::flatten (and dense layers after it): the "
                "modules after it read vectors");

 public:
  using image_type = Image;                                //!< input shape
  static constexpr index_t in = Image::values;             //!< input width (H·W·C)
  static constexpr index_t out = resolved::shape::values;  //!< output width
  //! The layers, with the last one activated (feature extractor) or linear (logits).
  template <bool ActivateOutput>
  using stack = typename detail::make_conv_stack<ActivateOutput, typename resolved::layers>::type;
};

//! Whether a layer stack holds image layers (conv2d, max_pool2d).
template <class Stack>
inline constexpr bool has_image_layers = []<std::size_t... I>(std::index_sequence<I...>) {
  return ((kind_of<typename Stack::template layer<I>>() != layer_kind::dense) || ...);
}
(std::make_index_sequence<Stack::depth>{});

}  // namespace dafuse::nn
