// A plain forward pass of a layer stack in double, by explicit loops: the reference that layer,
// head and whole-step tests compare the library's kernels with.
#pragma once
#include <dafuse/core/meta.hpp>
#include <dafuse/nn/conv2d.hpp>

#include <algorithm>
#include <cstddef>
#include <limits>
#include <utility>
#include <vector>

namespace dafuse::test {

//! Every layer's pre-activation z and output y, [out_l, n] column-major, by explicit loops. A
//! convolution (nn/conv2d.hpp, NHWC) is Σ_{kh,kw,c} W(o, kh, kw, c)·x(oh·S − P + kh, ow·S − P + kw,
//! c) + b(o) at each output pixel, zero outside the image; a max-pool takes each window's
//! maximum (z = y); a dense layer is W·x + b.
struct reference_pass {
  std::vector<std::vector<double>> z, y;
};

template <class Stack>
reference_pass naive_forward(const std::vector<double>& params,
                             const std::vector<double>& x,
                             dafuse::index_t n) {
  reference_pass r;
  std::vector<double> in = x;
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    (
        [&] {
          using layer = typename Stack::template layer<I>;
          const double* w = params.data() + Stack::template param_offset<I>();
          const double* b = w + layer::weight_count;
          std::vector<double> z(static_cast<std::size_t>(layer::out * n));
          std::vector<double> y(z.size());
          for (dafuse::index_t j = 0; j < n; ++j) {
            const double* xj = in.data() + j * layer::in;
            double* zj = z.data() + j * layer::out;
            if constexpr (dafuse::nn::kind_of<layer>() == dafuse::nn::layer_kind::conv2d) {
              using L = layer;
              for (dafuse::index_t oh = 0; oh < L::out_height; ++oh)
                for (dafuse::index_t ow = 0; ow < L::out_width; ++ow)
                  for (dafuse::index_t o = 0; o < L::out_channels; ++o) {
                    double acc = b[o];
                    for (dafuse::index_t kh = 0; kh < L::kernel; ++kh)
                      for (dafuse::index_t kw = 0; kw < L::kernel; ++kw) {
                        const dafuse::index_t ih = oh * L::stride - L::padding + kh;
                        const dafuse::index_t iw = ow * L::stride - L::padding + kw;
                        if (ih < 0 || ih >= L::in_height || iw < 0 || iw >= L::in_width) continue;
                        for (dafuse::index_t c = 0; c < L::in_channels; ++c)
                          acc += w[o +
                                   L::out_channels * (c + L::in_channels * (kw + L::kernel * kh))] *
                                 xj[(ih * L::in_width + iw) * L::in_channels + c];
                      }
                    zj[(oh * L::out_width + ow) * L::out_channels + o] = acc;
                  }
            } else if constexpr (dafuse::nn::kind_of<layer>() ==
                                 dafuse::nn::layer_kind::max_pool2d) {
              using L = layer;
              for (dafuse::index_t oh = 0; oh < L::out_height; ++oh)
                for (dafuse::index_t ow = 0; ow < L::out_width; ++ow)
                  for (dafuse::index_t c = 0; c < L::channels; ++c) {
                    double m = -std::numeric_limits<double>::infinity();
                    for (dafuse::index_t kh = 0; kh < L::kernel; ++kh)
                      for (dafuse::index_t kw = 0; kw < L::kernel; ++kw)
                        m = std::max(
                            m, xj[((oh * L::kernel + kh) * L::in_width + ow * L::kernel + kw) *
                                      L::channels +
                                  c]);
                    zj[(oh * L::out_width + ow) * L::channels + c] = m;
                  }
            } else {
              for (dafuse::index_t i = 0; i < layer::out; ++i) {
                double acc = b[i];
                for (dafuse::index_t k = 0; k < layer::in; ++k)
                  acc += w[k * layer::out + i] * xj[k];
                zj[i] = acc;
              }
            }
            for (dafuse::index_t i = 0; i < layer::out; ++i)
              y[std::size_t(j * layer::out + i)] = layer::act(zj[i]);
          }
          in = y;
          r.z.push_back(std::move(z));
          r.y.push_back(std::move(y));
        }(),
        ...);
  }
  (std::make_index_sequence<Stack::depth>{});
  return r;
}

}  // namespace dafuse::test
