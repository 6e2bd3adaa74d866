// A plain forward pass of a layer stack in double, by explicit loops: the reference that layer,
// head and whole-step tests compare the library's kernels with.
#pragma once
#include <dafuse/core/meta.hpp>

#include <cstddef>
#include <utility>
#include <vector>

namespace dafuse::test {

//! Every layer's pre-activation z and output y, [out_l, n] column-major, by explicit loops.
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
          for (dafuse::index_t j = 0; j < n; ++j)
            for (dafuse::index_t i = 0; i < layer::out; ++i) {
              double acc = b[i];
              for (dafuse::index_t k = 0; k < layer::in; ++k)
                acc += w[k * layer::out + i] * in[std::size_t(j * layer::in + k)];
              z[std::size_t(j * layer::out + i)] = acc;
              y[std::size_t(j * layer::out + i)] = layer::act(acc);
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
