// SPDX-License-Identifier: Apache-2.0
//! @file backend/host/conv.hpp
//! @brief Convolution and max-pooling of NHWC images on the host: im2col products on the GEMM
//! kernels for conv2d's forward, weight and input gradients (col2im), and max-pooling.
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
//!
//! Threads: the samples are dealt among `parts` (the step's threads) in contiguous ranges, and
//! each part runs whole chunks — its own im2col, its own products on one thread's packing buffers,
//! in its own patch buffer — rather than every thread taking a slice of each chunk's product (a
//! product of 48 rows split two ways, a hand-over per chunk). ∂L/∂W is summed by part 0 into ∂L/∂W
//! itself and by each other part into its own partial, and the partials are added in part order, so
//! the values depend on the number of parts (fixed when the step is built) and not on which threads
//! run them.
#pragma once
#include <dafuse/config.hpp>

#include <dafuse/backend/host/partition.hpp>
#include <dafuse/backend/host/team.hpp>
#include <dafuse/core/buffer.hpp>
#include <dafuse/core/meta.hpp>
#include <dafuse/nn/conv2d.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <utility>

namespace dafuse::backend::host {

//! The most parts a convolution is dealt in (more threads share them).
inline constexpr int max_conv_parts = 64;

//! Values of `Stack`'s patch matrix, one a part: Stack::patch_elements on a 64-byte boundary.
template <class Stack>
inline constexpr index_t conv_patch_room = round_up(Stack::patch_elements, 16);

//! Values of a partial [C_out, P + 1] (∂L/∂W, ∂L/∂b) of `Stack`'s largest convolution, on a 64-byte
//! boundary; 0 without convolutions.
template <class Stack>
inline constexpr index_t conv_partial_room = []<std::size_t... I>(std::index_sequence<I...>) {
  return round_up(std::max({index_t(0), (nn::kind_of<typename Stack::template layer<I>>() ==
                                                 nn::layer_kind::conv2d
                                             ? Stack::template layer<I>::param_count
                                             : index_t(0))...}),
                  16);
}
(std::make_index_sequence<Stack::depth>{});

//! Values of `Stack`'s convolution scratch for `parts` parts: a patch matrix for each part, then
//! a partial weight gradient for each part but the first, which sums into ∂L/∂W itself
//! (conv_weight_gradient). 0 without convolutions.
template <class Stack>
constexpr index_t conv_scratch_elements(int parts) {
  if constexpr (Stack::patch_elements == 0) {
    return 0;
  } else {
    parts = std::max(parts, 1);
    return parts * conv_patch_room<Stack> + (parts - 1) * conv_partial_room<Stack>;
  }
}

//! Where a stack's convolutions work: `parts` patch matrices of `patch_room` values from `data`,
//! then the partial gradients of parts 1 … parts − 1, `partial_room` values each.
template <class T>
struct conv_scratch {
  T* data = nullptr;
  index_t patch_room = 0;    //!< values a patch matrix
  index_t partial_room = 0;  //!< values a partial gradient
  int parts = 1;             //!< patch matrices

  //! Part p's patch matrix, and (p ≥ 1) its partial ∂L/∂W (then ∂L/∂b).
  T* patches(int p) const { return data + p * patch_room; }
  T* partial(int p) const { return data + parts * patch_room + (p - 1) * partial_room; }
  //! The scratch of `Stack` carved at `block` (conv_scratch_elements<Stack>(parts) values).
  template <class Stack>
  static conv_scratch of(T* block, int parts) {
    return {block, conv_patch_room<Stack>, conv_partial_room<Stack>, std::max(parts, 1)};
  }
};

namespace detail {
//! Parts a product set runs n samples in: the scratch's regions, at most one per thread of its
//! packing buffers and per sample.
template <class Products, class T>
int conv_parts(const Products& ws, const conv_scratch<T>& scratch, index_t n) {
  return int(std::max<index_t>(1, std::min<index_t>({index_t(scratch.parts), index_t(ws.threads()),
                                                     n, index_t(max_conv_parts)})));
}
//! Part p's samples of n: [first, end), contiguous, as even as whole samples allow.
inline std::pair<index_t, index_t> part_samples(int p, int parts, index_t n) {
  return {n * p / parts, n * (p + 1) / parts};
}
//! One part's product: on one thread with part p's packing buffers, or (a single part) split
//! among the threads as the workspace splits it.
template <op OpA, op OpB, class Products, class T, class Finish = no_finish>
void part_product(Products& ws,
                  int parts,
                  int p,
                  index_t m,
                  index_t n,
                  index_t k,
                  T alpha,
                  const T* a,
                  index_t lda,
                  const T* b,
                  index_t ldb,
                  T beta,
                  T* c,
                  index_t ldc,
                  Finish&& finish = {}) {
  if (parts == 1)
    ws.template product<OpA, OpB>(m, n, k, alpha, a, lda, b, ldb, beta, c, ldc,
                                  std::forward<Finish>(finish));
  else
    ws.template product_on<OpA, OpB>(p, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc,
                                     std::forward<Finish>(finish));
}
//! job(p, first, end) for each part's samples: on the team (each thread its parts), or, for a
//! single part, on the calling thread (its products and im2col then split among the threads).
template <class Job>
void for_each_part(int parts, index_t n, Job&& job) {
  if (parts == 1) {
    job(0, index_t(0), n);
    return;
  }
  run_on_team(parts, [&](int me, int team, auto&&) {
    for (int p = me; p < parts; p += team) {
      const auto [first, end] = part_samples(p, parts, n);
      job(p, first, end);
    }
  });
}
}  // namespace detail

//! X̂'s columns for output rows r = first, first + step, … < count·Ho of `count` samples of x
//! (HWC, Layer::in values each, contiguous) into `patches`: [Layer::patch, count·Layer::pixels];
//! zeros where a window covers the padding. Within a window row, the pixels kw = 0…K−1 are
//! consecutive, so the part inside the image is one run of the input (channels last).
template <class Layer, class T>
void im2col_rows(const T* x, index_t count, T* patches, index_t first, index_t step) {
  constexpr index_t H = Layer::in_height, W = Layer::in_width, C = Layer::in_channels;
  constexpr index_t K = Layer::kernel, S = Layer::stride, P = Layer::padding;
  constexpr index_t Ho = Layer::out_height, Wo = Layer::out_width;
  const index_t rows = count * Ho;
  for (index_t r = first; r < rows; r += step) {
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
}

//! X̂ for `count` samples (im2col_rows of every output row), the rows dealt among the threads
//! (run_on_team); each writes its own columns.
template <class Layer, class T>
void im2col(const T* x, index_t count, T* patches) {
  const index_t rows = count * Layer::out_height;
  run_on_team(rows > 1 ? available_threads() : 1,
              [&](int me, int team, auto&&) { im2col_rows<Layer>(x, count, patches, me, team); });
}

//! δx += α·col2im(δX̂) for samples s = first, first + step, … < count: each value of `patches`
//! ([Layer::patch, count·Layer::pixels]) added to the input value its window read (padding reads
//! nothing). Windows overlap within a sample, so samples (not rows) are the unit of work.
template <class Layer, class T>
void col2im_add_samples(
    const T* patches, index_t count, T alpha, T* dx, index_t first, index_t step) {
  constexpr index_t H = Layer::in_height, W = Layer::in_width, C = Layer::in_channels;
  constexpr index_t K = Layer::kernel, S = Layer::stride, P = Layer::padding;
  constexpr index_t Ho = Layer::out_height, Wo = Layer::out_width;
  for (index_t s = first; s < count; s += step) {
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
}

//! col2im_add_samples of every sample, the samples dealt among the threads.
template <class Layer, class T>
void col2im_add(const T* patches, index_t count, T alpha, T* dx) {
  run_on_team(count > 1 ? available_threads() : 1, [&](int me, int team, auto&&) {
    col2im_add_samples<Layer>(patches, count, alpha, dx, me, team);
  });
}

//! y = W·X̂ for x: [Layer::in, n], each part's samples chunk by chunk, `finish` (made by
//! make_finish(y)) run on each finished block of y ([C_out, pixels] columns; dense.hpp's
//! finish_forward adds b and applies f).
template <class Layer, class T, class Products, class MakeFinish>
void conv_forward(Products& ws,
                  const T* w,
                  matrix_view<const T> x,
                  T* y,
                  const conv_scratch<T>& scratch,
                  MakeFinish&& make_finish) {
  constexpr index_t chunk = Layer::chunk_samples;
  const int parts = detail::conv_parts(ws, scratch, x.cols);
  const auto finish = make_finish(y);
  detail::for_each_part(parts, x.cols, [&](int p, index_t first, index_t end) {
    T* patches = scratch.patches(p);
    for (index_t s0 = first; s0 < end; s0 += chunk) {
      const index_t count = std::min(chunk, end - s0);
      const T* xc = x.data + s0 * Layer::in;
      if (parts == 1)
        im2col<Layer>(xc, count, patches);
      else
        im2col_rows<Layer>(xc, count, patches, 0, 1);
      // [C_out, P]·[P, count·pixels]
      detail::part_product<op::none, op::none>(ws, parts, p, Layer::out_channels,
                                               count * Layer::pixels, Layer::patch, T(1), w,
                                               Layer::out_channels, patches, Layer::patch, T(0),
                                               y + s0 * Layer::out, Layer::out_channels, finish);
    }
  });
}

//! out(i) = Σ_j m(i, j) for a column-major m: [rows, cols], the columns added four at a time as
//! (m(·, j) + m(·, j+1)) + (m(·, j+2) + m(·, j+3)), then one at a time: the same order whatever
//! the alignment of m and out (Eigen's rowwise sum peels by alignment, which would make a part's
//! bias sums depend on where its partial lies).
template <class T>
void column_sums(const T* m, index_t rows, index_t cols, T* out) {
  std::fill_n(out, rows, T(0));
  index_t j = 0;
  for (; j + 4 <= cols; j += 4) {
    const T *c0 = m + j * rows, *c1 = c0 + rows, *c2 = c1 + rows, *c3 = c2 + rows;
    for (index_t i = 0; i < rows; ++i) out[i] += (c0[i] + c1[i]) + (c2[i] + c3[i]);
  }
  for (; j < cols; ++j)
    for (index_t i = 0; i < rows; ++i) out[i] += m[j * rows + i];
}

//! ∂L/∂W = δZ·X̂ᵀ and ∂L/∂b = Σ_pixels δZ into gw ([C_out, P], then b: [C_out]) from δz:
//! [Layer::out, n] and the layer's input x; returns the sum of `finish`'s shares on gw's blocks
//! (dense.hpp's finish_gradient: their squared norm). Each part sums its chunks (the first
//! writes, the rest add) into gw (part 0) or its partial; the partials are then added to gw in
//! part order, each thread a block of its columns, which it finishes.
template <class Layer, class T, class Products, class Finish>
double conv_weight_gradient(Products& ws,
                            const T* dz,
                            matrix_view<const T> x,
                            T* gw,
                            const conv_scratch<T>& scratch,
                            Finish&& finish) {
  constexpr index_t chunk = Layer::chunk_samples, Co = Layer::out_channels;
  constexpr index_t columns = Layer::patch + 1;  // W's columns, then b
  const index_t n = x.cols;
  const int parts = detail::conv_parts(ws, scratch, n);
  const auto part_sums = [&](int p, index_t first, index_t end) {
    T* target = p == 0 ? gw : scratch.partial(p);
    T* patches = scratch.patches(p);
    for (index_t s0 = first; s0 < end; s0 += chunk) {
      const index_t count = std::min(chunk, end - s0);
      const T* xc = x.data + s0 * Layer::in;
      if (parts == 1)
        im2col<Layer>(xc, count, patches);
      else
        im2col_rows<Layer>(xc, count, patches, 0, 1);
      // [C_out, count·pixels]·[count·pixels, P]
      detail::part_product<op::none, op::transpose>(
          ws, parts, p, Co, Layer::patch, count * Layer::pixels, T(1), dz + s0 * Layer::out, Co,
          patches, Layer::patch, s0 == first ? T(0) : T(1), target, Co);
    }
    // δz of the part's samples viewed as [C_out, samples·pixels].
    column_sums(dz + first * Layer::out, Co, (end - first) * Layer::pixels,
                target + Layer::weight_count);
  };
  if (parts == 1) {
    part_sums(0, 0, n);
    return finish(gw, Co, columns, Co);
  }
  std::array<double, max_conv_parts> shares{};
  const detail::product_split blocks =
      detail::product_split::even(split_along::columns, columns, parts, 1);
  run_on_team(parts, [&](int me, int team, auto&& sync) {
    for (int p = me; p < parts; p += team) {
      const auto [first, end] = detail::part_samples(p, parts, n);
      part_sums(p, first, end);
    }
    sync();
    for (int r = me; r < blocks.threads; r += team) {
      const auto [c0, c1] = blocks.range(r);
      if (c1 <= c0) continue;
      T* to = gw + c0 * Co;
      const index_t values = (c1 - c0) * Co;
      for (int p = 1; p < parts; ++p) {
        const T* from = scratch.partial(p) + c0 * Co;
        for (index_t i = 0; i < values; ++i) to[i] += from[i];
      }
      shares[std::size_t(r)] = finish(to, Co, c1 - c0, Co);
    }
  });
  double sum = 0.0;
  for (int r = 0; r < blocks.threads; ++r) sum += shares[std::size_t(r)];
  return sum;
}

//! δx = α·(∂L/∂x) (+ δx when `accumulate`) for δz: [Layer::out, n], δx: [Layer::in, n], each
//! part's samples chunk by chunk, `finish` run on each finished block of δx (dense.hpp's
//! finish_output_gradient: f' of the layer below).
//! With Layer::transposed_input_gradient (stride 1, C_in ≥ 16): as the forward of
//! nn::transposed_conv2d<Layer> on δz with the kernel flipped (and scaled by α), a product of
//! K·K·C_out terms written straight into δx. Otherwise col2im(Wᵀ·δZ), a product of only C_out terms
//! whose result is scattered back.
template <class Layer, class T, class Products, class Finish = no_finish>
void conv_input_gradient(Products& ws,
                         const T* w,
                         const T* dz,
                         index_t n,
                         T* dx,
                         T alpha,
                         bool accumulate,
                         const conv_scratch<T>& scratch,
                         Finish&& finish = {}) {
  const int parts = detail::conv_parts(ws, scratch, n);
  if constexpr (Layer::transposed_input_gradient) {
    using transposed = nn::transposed_conv2d<Layer>;
    constexpr index_t K = Layer::kernel, Ci = Layer::in_channels, Co = Layer::out_channels;
    // W' [C_in, K, K, C_out] column-major after part 0's patch chunk, read by every part.
    T* flipped = scratch.patches(0) + transposed::forward_patch_elements;
    for (index_t kh = 0; kh < K; ++kh)
      for (index_t kw = 0; kw < K; ++kw)
        for (index_t o = 0; o < Co; ++o)
          for (index_t c = 0; c < Ci; ++c)
            flipped[c + Ci * (o + Co * (kw + K * kh))] =
                alpha * w[o + Co * (c + Ci * ((K - 1 - kw) + K * (K - 1 - kh)))];
    constexpr index_t chunk = transposed::chunk_samples;
    detail::for_each_part(parts, n, [&](int p, index_t first, index_t end) {
      T* patches = scratch.patches(p);
      for (index_t s0 = first; s0 < end; s0 += chunk) {
        const index_t count = std::min(chunk, end - s0);
        const T* dzc = dz + s0 * Layer::out;
        if (parts == 1)
          im2col<transposed>(dzc, count, patches);
        else
          im2col_rows<transposed>(dzc, count, patches, 0, 1);
        // [C_in, K·K·C_out]·[K·K·C_out, count·H·W]
        detail::part_product<op::none, op::none>(
            ws, parts, p, Ci, count * transposed::pixels, transposed::patch, T(1),
            static_cast<const T*>(flipped), Ci, patches, transposed::patch,
            accumulate ? T(1) : T(0), dx + s0 * Layer::in, Ci, finish);
      }
    });
    return;
  }
  constexpr index_t chunk = Layer::chunk_samples;
  detail::for_each_part(parts, n, [&](int p, index_t first, index_t end) {
    T* patches = scratch.patches(p);
    if (!accumulate) std::fill(dx + first * Layer::in, dx + end * Layer::in, T(0));
    for (index_t s0 = first; s0 < end; s0 += chunk) {
      const index_t count = std::min(chunk, end - s0);
      // [P, C_out]·[C_out, count·pixels]
      detail::part_product<op::transpose, op::none>(
          ws, parts, p, Layer::patch, count * Layer::pixels, Layer::out_channels, T(1), w,
          Layer::out_channels, dz + s0 * Layer::out, Layer::out_channels, T(0), patches,
          Layer::patch);
      T* dxc = dx + s0 * Layer::in;
      if (parts == 1)
        col2im_add<Layer>(patches, count, alpha, dxc);
      else
        col2im_add_samples<Layer>(patches, count, alpha, dxc, 0, 1);
      finish(dxc, Layer::in, count, Layer::in);
    }
  });
}

//! y = max over each K × K window of x, channel by channel, for x: [Layer::in, n]; `indices`
//! (when not null): [Layer::out, n], the window position kh·K + kw of each maximum, the first one
//! on ties and a NaN where there is one (as PyTorch's max_pool2d on the CPU).
template <class Layer, class T>
void max_pool_forward(matrix_view<const T> x, T* y, T* indices) {
  constexpr index_t W = Layer::in_width, C = Layer::channels, K = Layer::kernel;
  constexpr index_t Ho = Layer::out_height, Wo = Layer::out_width;
  // Samples dealt among the threads in contiguous ranges, as a convolution's parts take them.
  run_on_team(x.cols > 1 ? available_threads() : 1, [&](int me, int team, auto&&) {
    const auto [first, end] = detail::part_samples(me, team, x.cols);
    for (index_t s = first; s < end; ++s) {
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
//! n], δx: [Layer::in, n], the argmax read from the `indices` max_pool_forward stored (eager_step
//! keeps them, as PyTorch does); `derivative(i)` is f'(·) of the layer below at its output i of the
//! batch (what makes δx that layer's δz), 1 for the stack's input. Windows do not overlap, so
//! each input receives at most one value.
template <class Layer, class T, class Derivative>
void max_pool_backward(
    const T* dy, const T* indices, index_t n, T* dx, T alpha, bool accumulate, Derivative&& d) {
  constexpr index_t W = Layer::in_width, C = Layer::channels, K = Layer::kernel;
  constexpr index_t Ho = Layer::out_height, Wo = Layer::out_width;
  // Samples dealt among the threads in contiguous ranges; each clears and fills its part of δx.
  run_on_team(n > 1 ? available_threads() : 1, [&](int me, int team, auto&&) {
    const auto [first, end] = detail::part_samples(me, team, n);
    for (index_t s = first; s < end; ++s) {
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

//! The same with each window's argmax found again in x, the pooling's input, as max_pool_forward
//! finds it (first on ties, a NaN where there is one): no indices are kept between the passes. dx
//! may be x itself (not with `accumulate`): each window's values, and d at its argmax, are read
//! before its gradient is written over them, so the gradient can take the place of an input that
//! nothing reads afterwards (stack_scratch, backend/host/dense.hpp). Inputs in no window (the rows
//! and columns past the last whole one) get 0.
template <class Layer, class T, class Derivative>
void max_pool_backward(
    matrix_view<const T> x, const T* dy, T* dx, T alpha, bool accumulate, Derivative&& d) {
  constexpr index_t W = Layer::in_width, C = Layer::channels, K = Layer::kernel;
  constexpr index_t H = Layer::in_height, Ho = Layer::out_height, Wo = Layer::out_width;
  run_on_team(x.cols > 1 ? available_threads() : 1, [&](int me, int team, auto&&) {
    const auto [first, end] = detail::part_samples(me, team, x.cols);
    std::array<T, C> best, g;
    std::array<index_t, C> at;  // the argmax's offset in the sample
    for (index_t s = first; s < end; ++s) {
      const T* xs = x.data + s * Layer::in;
      T* dxs = dx + s * Layer::in;
      if (!accumulate) {
        for (index_t ih = 0; ih < H; ++ih)
          if (ih < Ho * K)
            std::fill_n(dxs + (ih * W + Wo * K) * C, (W - Wo * K) * C, T(0));
          else
            std::fill_n(dxs + ih * W * C, W * C, T(0));
      }
      for (index_t oh = 0; oh < Ho; ++oh)
        for (index_t ow = 0; ow < Wo; ++ow) {
          const index_t o = (s * Ho * Wo + oh * Wo + ow) * C;
          const index_t origin = (oh * K * W + ow * K) * C;
          for (index_t c = 0; c < C; ++c) {
            best[c] = xs[origin + c];
            at[c] = origin + c;
          }
          for (index_t kh = 0; kh < K; ++kh)
            for (index_t kw = kh == 0 ? 1 : 0; kw < K; ++kw) {
              const index_t v = ((oh * K + kh) * W + ow * K + kw) * C;
              for (index_t c = 0; c < C; ++c)
                if (xs[v + c] > best[c] || std::isnan(xs[v + c])) {
                  best[c] = xs[v + c];
                  at[c] = v + c;
                }
            }
          for (index_t c = 0; c < C; ++c) g[c] = alpha * dy[o + c] * d(s * Layer::in + at[c]);
          if (!accumulate)
            for (index_t kh = 0; kh < K; ++kh)
              std::fill_n(dxs + ((oh * K + kh) * W + ow * K) * C, K * C, T(0));
          for (index_t c = 0; c < C; ++c) dxs[at[c]] += g[c];
        }
    }
  });
}

}  // namespace dafuse::backend::host
