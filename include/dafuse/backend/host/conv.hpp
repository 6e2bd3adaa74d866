// SPDX-License-Identifier: Apache-2.0
//! @file backend/host/conv.hpp
//! @brief Convolution and max-pooling of NHWC images on the host: im2col products on the GEMM
//! kernels for conv2d's forward, weight and input gradients (col2im), and max-pooling with argmax.
//!
//! Shapes (nn/conv2d.hpp): x: [H·W·C_in, n] (one HWC sample a column), y: [Ho·Wo·C_out, n] (NHWC),
//! W: [C_out, P] column-major with P = K·K·C_in, a patch's rows ordered (kh, kw, c).
//! With the patch matrix X̂: [P, n·Ho·Wo] (one output pixel's window a column, im2col):
//!   forward       Y = W·X̂ (+ b, f by the caller's finisher);
//!   weight grad   ∂L/∂W = δZ·X̂ᵀ, ∂L/∂b = Σ_pixels δZ;
//!   input grad    δX̂ = Wᵀ·δZ, then δx = col2im(δX̂) (each window's values added back where they
//!                 were read).
//! X̂ is built for `chunk_samples` samples at a time, in a workspace of Layer::patch_elements
//! values (about 1 MiB of fp32, so a chunk's patches stay in L2 between im2col and the product).
#pragma once
#include <dafuse/config.hpp>

#include <dafuse/backend/host/partition.hpp>
#include <dafuse/backend/host/team.hpp>
#include <dafuse/core/buffer.hpp>
#include <dafuse/core/meta.hpp>
#include <dafuse/nn/conv2d.hpp>

#include <algorithm>
#include <cmath>

namespace dafuse::backend::host {

//! X̂'s columns for `count` samples of x (HWC, Layer::in values each, contiguous) into
//! `patches`: [Layer::patch, count·Layer::pixels]; zeros where a window covers the padding.
//! Within a window row, the pixels kw = 0…K−1 are consecutive, so the part inside the image is
//! one run of the input (channels last). The rows of output pixels are dealt among the threads
//! (run_on_team); each writes its own columns.
template <class Layer, class T>
void im2col(const T* x, index_t count, T* patches) {
  constexpr index_t H = Layer::in_height, W = Layer::in_width, C = Layer::in_channels;
  constexpr index_t K = Layer::kernel, S = Layer::stride, P = Layer::padding;
  constexpr index_t Ho = Layer::out_height, Wo = Layer::out_width;
  const index_t rows = count * Ho;
  run_on_team(rows > 1 ? available_threads() : 1, [&](int me, int team, auto&&) {
    for (index_t r = me; r < rows; r += team) {
      const index_t s = r / Ho, oh = r % Ho;
      const T* xs = x + s * Layer::in;
      for (index_t ow = 0; ow < Wo; ++ow) {
        T* dst = patches + ((s * Ho + oh) * Wo + ow) * Layer::patch;
        // iw = ow·S − P + kw lies in [0, W) for kw in [lo, hi).
        const index_t lo = std::max<index_t>(0, P - ow * S);
        const index_t hi = std::min<index_t>(K, W + P - ow * S);
        for (index_t kh = 0; kh < K; ++kh) {
          T* row = dst + kh * K * C;
          const index_t ih = oh * S - P + kh;
          if (ih < 0 || ih >= H) {
            std::fill_n(row, K * C, T(0));
            continue;
          }
          std::fill_n(row, lo * C, T(0));
          std::copy_n(xs + (ih * W + ow * S - P + lo) * C, (hi - lo) * C, row + lo * C);
          std::fill_n(row + hi * C, (K - hi) * C, T(0));
        }
      }
    }
  });
}

//! δx += α·col2im(δX̂) for `count` samples: each value of `patches` ([Layer::patch,
//! count·Layer::pixels]) added to the input value its window read (padding reads nothing).
//! Windows overlap within a sample, so the samples (not rows) are dealt among the threads.
template <class Layer, class T>
void col2im_add(const T* patches, index_t count, T alpha, T* dx) {
  constexpr index_t H = Layer::in_height, W = Layer::in_width, C = Layer::in_channels;
  constexpr index_t K = Layer::kernel, S = Layer::stride, P = Layer::padding;
  constexpr index_t Ho = Layer::out_height, Wo = Layer::out_width;
  run_on_team(count > 1 ? available_threads() : 1, [&](int me, int team, auto&&) {
    for (index_t s = me; s < count; s += team) {
      T* xs = dx + s * Layer::in;
      for (index_t oh = 0; oh < Ho; ++oh)
        for (index_t ow = 0; ow < Wo; ++ow) {
          const T* src = patches + ((s * Ho + oh) * Wo + ow) * Layer::patch;
          const index_t lo = std::max<index_t>(0, P - ow * S);
          const index_t hi = std::min<index_t>(K, W + P - ow * S);
          for (index_t kh = 0; kh < K; ++kh) {
            const index_t ih = oh * S - P + kh;
            if (ih < 0 || ih >= H) continue;
            T* to = xs + (ih * W + ow * S - P + lo) * C;
            const T* from = src + (kh * K + lo) * C;
            for (index_t j = 0; j < (hi - lo) * C; ++j) to[j] += alpha * from[j];
          }
        }
    }
  });
}

//! y = W·X̂ for x: [Layer::in, n], chunk by chunk of samples, `finish` run on each finished block
//! of y ([C_out, pixels] columns; dense.hpp's finish_forward adds b and applies f).
template <class Layer, class T, class Products, class MakeFinish>
void conv_forward(
    Products& ws, const T* w, matrix_view<const T> x, T* y, T* patches, MakeFinish&& make_finish) {
  constexpr index_t chunk = Layer::chunk_samples;
  for (index_t s0 = 0; s0 < x.cols; s0 += chunk) {
    const index_t count = std::min(chunk, x.cols - s0);
    im2col<Layer>(x.data + s0 * Layer::in, count, patches);
    T* yc = y + s0 * Layer::out;
    // [C_out, P]·[P, count·pixels]
    ws.template product<op::none, op::none>(
        Layer::out_channels, count * Layer::pixels, Layer::patch, T(1), w, Layer::out_channels,
        patches, Layer::patch, T(0), yc, Layer::out_channels, make_finish(yc));
  }
}

//! ∂L/∂W = δZ·X̂ᵀ into gw ([C_out, P]) from δz: [Layer::out, n] and the layer's input x, summed
//! over the chunks (the first writes, the rest add).
template <class Layer, class T, class Products>
void conv_weight_gradient(Products& ws, const T* dz, matrix_view<const T> x, T* gw, T* patches) {
  constexpr index_t chunk = Layer::chunk_samples;
  for (index_t s0 = 0; s0 < x.cols; s0 += chunk) {
    const index_t count = std::min(chunk, x.cols - s0);
    im2col<Layer>(x.data + s0 * Layer::in, count, patches);
    // [C_out, count·pixels]·[count·pixels, P]
    ws.template product<op::none, op::transpose>(
        Layer::out_channels, Layer::patch, count * Layer::pixels, T(1), dz + s0 * Layer::out,
        Layer::out_channels, patches, Layer::patch, s0 == 0 ? T(0) : T(1), gw, Layer::out_channels);
  }
}

//! δx = α·(∂L/∂x) (+ δx when `accumulate`) for δz: [Layer::out, n], δx: [Layer::in, n].
//! With Layer::transposed_input_gradient (stride 1, C_in ≥ 16): as the forward of
//! nn::transposed_conv2d<Layer> on δz with the kernel flipped (and scaled by α), a product of
//! K·K·C_out terms written straight into δx. Otherwise col2im(Wᵀ·δZ), a product of only C_out terms
//! whose result is scattered back.
template <class Layer, class T, class Products>
void conv_input_gradient(
    Products& ws, const T* w, const T* dz, index_t n, T* dx, T alpha, bool accumulate, T* patches) {
  if constexpr (Layer::transposed_input_gradient) {
    using transposed = nn::transposed_conv2d<Layer>;
    constexpr index_t K = Layer::kernel, Ci = Layer::in_channels, Co = Layer::out_channels;
    // W' [C_in, K, K, C_out] column-major after the patch chunk.
    T* flipped = patches + transposed::forward_patch_elements;
    for (index_t kh = 0; kh < K; ++kh)
      for (index_t kw = 0; kw < K; ++kw)
        for (index_t o = 0; o < Co; ++o)
          for (index_t c = 0; c < Ci; ++c)
            flipped[c + Ci * (o + Co * (kw + K * kh))] =
                alpha * w[o + Co * (c + Ci * ((K - 1 - kw) + K * (K - 1 - kh)))];
    constexpr index_t chunk = transposed::chunk_samples;
    for (index_t s0 = 0; s0 < n; s0 += chunk) {
      const index_t count = std::min(chunk, n - s0);
      im2col<transposed>(dz + s0 * Layer::out, count, patches);
      // [C_in, K·K·C_out]·[K·K·C_out, count·H·W]
      ws.template product<op::none, op::none>(Ci, count * transposed::pixels, transposed::patch,
                                              T(1), flipped, Ci, patches, transposed::patch,
                                              accumulate ? T(1) : T(0), dx + s0 * Layer::in, Ci);
    }
    return;
  }
  if (!accumulate) std::fill_n(dx, Layer::in * n, T(0));
  constexpr index_t chunk = Layer::chunk_samples;
  for (index_t s0 = 0; s0 < n; s0 += chunk) {
    const index_t count = std::min(chunk, n - s0);
    // [P, C_out]·[C_out, count·pixels]
    ws.template product<op::transpose, op::none>(
        Layer::patch, count * Layer::pixels, Layer::out_channels, T(1), w, Layer::out_channels,
        dz + s0 * Layer::out, Layer::out_channels, T(0), patches, Layer::patch);
    col2im_add<Layer>(patches, count, alpha, dx + s0 * Layer::in);
  }
}

//! y = max over each K × K window of x, channel by channel, for x: [Layer::in, n]; `indices`
//! (when not null): [Layer::out, n], the window position kh·K + kw of each maximum, the first one
//! on ties and a NaN where there is one (as PyTorch's max_pool2d on the CPU).
template <class Layer, class T>
void max_pool_forward(matrix_view<const T> x, T* y, T* indices) {
  constexpr index_t W = Layer::in_width, C = Layer::channels, K = Layer::kernel;
  constexpr index_t Ho = Layer::out_height, Wo = Layer::out_width;
  // Samples dealt among the threads.
  run_on_team(x.cols > 1 ? available_threads() : 1, [&](int me, int team, auto&&) {
    for (index_t s = me; s < x.cols; s += team) {
      const T* xs = x.data + s * Layer::in;
      for (index_t oh = 0; oh < Ho; ++oh)
        for (index_t ow = 0; ow < Wo; ++ow) {
          const index_t o = (s * Ho * Wo + oh * Wo + ow) * C;
          T* best = y + o;
          const T* first = xs + (oh * K * W + ow * K) * C;
          std::copy_n(first, C, best);
          T* at = indices ? indices + o : nullptr;
          if (at) std::fill_n(at, C, T(0));
          for (index_t kh = 0; kh < K; ++kh)
            for (index_t kw = kh == 0 ? 1 : 0; kw < K; ++kw) {
              const T* v = xs + ((oh * K + kh) * W + ow * K + kw) * C;
              for (index_t c = 0; c < C; ++c)
                if (v[c] > best[c] || std::isnan(v[c])) {
                  best[c] = v[c];
                  if (at) at[c] = T(kh * K + kw);
                }
            }
        }
    }
  });
}

//! δx = α·(δy routed to each window's argmax) ⊙ d(x) (+ δx when `accumulate`), for δy: [Layer::out,
//! n], δx: [Layer::in, n]; `derivative(i)` is f'(·) of the layer below at its output i of the
//! batch (what makes δx that layer's δz), 1 for the stack's input. Windows do not overlap, so
//! each input receives at most one value.
template <class Layer, class T, class Derivative>
void max_pool_backward(
    const T* dy, const T* indices, index_t n, T* dx, T alpha, bool accumulate, Derivative&& d) {
  constexpr index_t W = Layer::in_width, C = Layer::channels, K = Layer::kernel;
  constexpr index_t Ho = Layer::out_height, Wo = Layer::out_width;
  // Samples dealt among the threads; each clears and fills its own part of δx.
  run_on_team(n > 1 ? available_threads() : 1, [&](int me, int team, auto&&) {
    for (index_t s = me; s < n; s += team) {
      if (!accumulate) std::fill_n(dx + s * Layer::in, Layer::in, T(0));
      for (index_t oh = 0; oh < Ho; ++oh)
        for (index_t ow = 0; ow < Wo; ++ow) {
          const index_t o = (s * Ho * Wo + oh * Wo + ow) * C;
          for (index_t c = 0; c < C; ++c) {
            const auto pos = index_t(indices[o + c]);
            const index_t i = s * Layer::in + ((oh * K + pos / K) * W + ow * K + pos % K) * C + c;
            dx[i] += alpha * dy[o + c] * d(i);
          }
        }
    }
  });
}

}  // namespace dafuse::backend::host
