// SPDX-License-Identifier: Apache-2.0
//! @file backend/host/inference.hpp
//! @brief G_y(G_f(x)) of a network's fp32 parameters on the host: what `model<Net>` runs.
//!
//! The layers run through the step's own forward (dense.hpp: the fp32 product kernel, the bias
//! and activation on each finished block), so a model's logits are those of an fp32 step with
//! the same weights. Scratch is allocated per call: inference is not a training step's loop.
#pragma once
#include <dafuse/config.hpp>

#include <dafuse/backend/host/dense.hpp>
#include <dafuse/backend/host/gemm.hpp>
#include <dafuse/core/buffer.hpp>
#include <dafuse/core/error.hpp>
#include <dafuse/core/meta.hpp>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace dafuse::backend::host {

//! Checks a sparse matrix's columns before a product reads them: offsets non-decreasing and every
//! feature index in [0, width). `where` names the caller; a failure names the sample.
inline void check_sparse_columns(const char* where, const sparse_matrix_view<const float>& x) {
  for (index_t c = 0; c < x.cols; ++c) {
    if (x.offsets[c + 1] < x.offsets[c])
      fail(where, "sparse rows", "non-decreasing offsets",
           "offsets[" + std::to_string(c + 1) + "] = " + std::to_string(x.offsets[c + 1]) +
               " < offsets[" + std::to_string(c) + "] = " + std::to_string(x.offsets[c]));
    for (index_t k = x.col_begin(c), end = x.col_begin(c + 1); k < end; ++k)
      if (x.indices[k] < 0 || x.indices[k] >= x.rows)
        fail(where, "sparse rows", "feature indices in [0, " + std::to_string(x.rows) + ")",
             std::to_string(x.indices[k]) + " in sample " + std::to_string(c));
  }
}

//! Class logits [class_count, x.cols] (column-major, one sample a column) into `out`, from the
//! fp32 parameters at `params` (Net's flat layout). `x` is a dense [input_width, n] matrix_view
//! or, for a network with a sparse first layer, a sparse_matrix_view with checked columns.
template <class Net, class Input>
void network_logits(const float* params, const Input& x, float* out) {
  using features = typename Net::feature_stack;
  using classifier = typename Net::classifier_stack;
  const index_t n = x.cols;
  if (n == 0) return;
  std::vector<float> block(std::size_t(stack_scratch<features, float>::elements(n, false) +
                                       stack_scratch<classifier, float>::elements(n, false)));
  const stack_scratch<features, float> f(block.data(), n, false);
  const stack_scratch<classifier, float> y(
      block.data() + stack_scratch<features, float>::elements(n, false), n, false);
  const index_t widest =
      std::max({features::max_product_side, classifier::max_product_side, features::in});
  gemm_workspace<float> products(widest, n, widest);
  forward<features>(params + Net::features_offset, x, f, products);
  forward<classifier>(params + Net::classifier_offset, matrix_view<const float>(f.output()), y,
                      products);
  std::copy_n(y.output().data, std::size_t(Net::class_count * n), out);
}

}  // namespace dafuse::backend::host
