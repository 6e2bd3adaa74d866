// SPDX-License-Identifier: Apache-2.0
//! @file step/model.hpp
//! @brief `model<Net>`: a trained network for inference only, independent of how it was trained.
//!
//! A model holds a network's parameters (fp32, in the flat layout of nn/dann_net.hpp) and runs
//! G_f and G_y on the host: no optimizer state, gradients, batch or loader, and one type per
//! network whatever the step's policies were. Build one from any step of the same network
//! (`model_of(step)`), or load one from a model file (train/model_file.hpp). Each layer is one
//! product y = f(W·x + b) over a chunk of rows (Eigen's GEMM; a sparse first layer adds the
//! columns of W its non-zeros name), so its logits equal the step's to rounding.
#pragma once
#include <dafuse/config.hpp>
#include <dafuse/core/buffer.hpp>
#include <dafuse/core/error.hpp>
#include <dafuse/core/meta.hpp>
#include <dafuse/nn/dann_net.hpp>
#include <dafuse/nn/loss.hpp>

#include <Eigen/Core>

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace dafuse {

template <class Net>
class model {
  static_assert(nn::is_dann_net<Net>::value,
                "dafuse: model<Net> takes a network type such as nn::dann_net<G_f, G_y, G_d>, the "
                "first argument of the train_step it was trained with");
  using matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic>;

 public:
  using net_type = Net;
  static constexpr index_t input_width = Net::input_width;      //!< width of a data row
  static constexpr index_t feature_width = Net::feature_width;  //!< width of h
  static constexpr index_t class_count = Net::class_count;      //!< number of classes
  static constexpr bool sparse_input = Net::sparse_input;       //!< rows are CSR samples
  static constexpr index_t param_count = Net::param_count;      //!< G_f, G_y and G_d
  //! Rows run through the network at a time: bounds the activations' memory at
  //! chunk_rows · (widest layer) floats per layer.
  static constexpr index_t chunk_rows = 1024;

  //! All parameters zero (fill them from a model file or parameters()).
  model() : params_(std::size_t(param_count), 0.0f) {}

  //! The parameters of `step`, a train_step or eager_step of the same network, as fp32.
  template <class Step>
    requires std::same_as<typename Step::net_type, Net>
  explicit model(const Step& step) : model() {
    const auto p = step.parameters();
    if (p.size() != params_.size())
      fail("model", "step parameters", std::to_string(params_.size()) + " values",
           std::to_string(p.size()));
    std::transform(p.begin(), p.end(), params_.begin(), [](auto v) { return float(v); });
  }

  //! The flat parameter buffer: G_f, G_y, G_d, each layer's W (column-major [out, in]) then b.
  std::span<float> parameters() { return params_; }
  std::span<const float> parameters() const { return params_; }

  //! Class logits of `n` rows stored row-major at `rows` ([n, input_width]), written row-major
  //! to `out` ([n, class_count]).
  void logits(const float* rows, index_t n, float* out) const requires(!sparse_input) {
    check_rows(n);
    for (index_t first = 0; first < n; first += chunk_rows) {
      const index_t m = std::min(chunk_rows, n - first);
      matrix x = Eigen::Map<const matrix>(rows + first * input_width, input_width, m);
      run<typename Net::feature_stack, 0>(Net::features_offset, x);
      run<typename Net::classifier_stack, 0>(Net::classifier_offset, x);
      Eigen::Map<matrix>(out + first * class_count, class_count, m) = x;
    }
  }

  //! The same for the samples of a sparse matrix ([input_width, n], one sample a column, e.g.
  //! data::sparse_columns() of a CSR data set).
  void logits(sparse_matrix_view<const float> rows, float* out) const requires sparse_input {
    if (rows.rows != input_width)
      fail("model::logits", "sparse rows", std::to_string(input_width) + " features",
           std::to_string(rows.rows));
    check_rows(rows.cols);
    for (index_t first = 0; first < rows.cols; first += chunk_rows) {
      const index_t m = std::min(chunk_rows, rows.cols - first);
      matrix x = sparse_first_layer(rows, first, m);
      if constexpr (Net::feature_stack::depth > 1)
        run<typename Net::feature_stack, 1>(Net::features_offset, x);
      run<typename Net::classifier_stack, 0>(Net::classifier_offset, x);
      Eigen::Map<matrix>(out + first * class_count, class_count, m) = x;
    }
  }

  //! Predicted class (the largest logit, first on ties) of each of `n` dense rows.
  void predict(const float* rows, index_t n, std::int32_t* classes) const requires(!sparse_input) {
    std::vector<float> z(std::size_t(n) * class_count);
    logits(rows, n, z.data());
    argmax_rows(z, n, classes);
  }
  //! Predicted class of each sample of a sparse matrix.
  void predict(sparse_matrix_view<const float> rows,
               std::int32_t* classes) const requires sparse_input {
    std::vector<float> z(std::size_t(rows.cols) * class_count);
    logits(rows, z.data());
    argmax_rows(z, rows.cols, classes);
  }

 private:
  static void check_rows(index_t n) {
    if (n < 0) fail("model", "rows", "a count >= 0", std::to_string(n));
  }

  static void argmax_rows(const std::vector<float>& z, index_t n, std::int32_t* classes) {
    for (index_t i = 0; i < n; ++i) classes[i] = nn::argmax(z.data() + i * class_count, class_count);
  }

  // Layer I of a stack: W at p (column-major [out, in]) then b.
  template <class Stack, std::size_t I>
  static auto weights(const float* p) {
    using L = typename Stack::template layer<I>;
    return Eigen::Map<const matrix>(p + Stack::template param_offset<I>(), L::out, L::in);
  }
  template <class Stack, std::size_t I>
  static auto bias(const float* p) {
    using L = typename Stack::template layer<I>;
    return Eigen::Map<const Eigen::VectorXf>(p + Stack::template param_offset<I>() + L::weight_count,
                                             L::out);
  }

  // x ← f(W·x + b) for layers I… of Stack (a module starting at `offset` of the flat buffer).
  template <class Stack, std::size_t I>
  void run(index_t offset, matrix& x) const {
    using L = typename Stack::template layer<I>;
    const float* p = params_.data() + offset;
    matrix y = weights<Stack, I>(p) * x;
    y.colwise() += bias<Stack, I>(p);
    activate<L>(y);
    x = std::move(y);
    if constexpr (I + 1 < Stack::depth) run<Stack, I + 1>(offset, x);
  }

  template <class L>
  static void activate(matrix& y) {
    if constexpr (!L::act.is_identity) {
      y = y.unaryExpr([](float z) { return float(L::act(z)); });
    }
  }

  // G_f's first layer on samples [first, first + m) of a sparse matrix: b plus, for each
  // non-zero v at feature j, v times column j of W.
  matrix sparse_first_layer(const sparse_matrix_view<const float>& rows,
                            index_t first,
                            index_t m) const {
    using stack = typename Net::feature_stack;
    using L = typename stack::template layer<0>;
    const float* p = params_.data() + Net::features_offset;
    const auto w = weights<stack, 0>(p);
    matrix y = bias<stack, 0>(p).replicate(1, m);
    for (index_t c = 0; c < m; ++c) {
      const index_t begin = rows.col_begin(first + c), end = rows.col_begin(first + c + 1);
      for (index_t k = begin; k < end; ++k) {
        const std::int32_t j = rows.indices[k];
        if (j < 0 || j >= input_width)
          fail("model::logits", "sparse rows",
               "feature indices in [0, " + std::to_string(input_width) + ")",
               std::to_string(j) + " in sample " + std::to_string(first + c));
        y.col(c) += rows.values[k] * w.col(j);
      }
    }
    activate<L>(y);
    return y;
  }

  std::vector<float> params_;
};

//! The model of a trained step: `auto m = dafuse::model_of(step);`.
template <class Step>
model<typename Step::net_type> model_of(const Step& step) {
  return model<typename Step::net_type>(step);
}

}  // namespace dafuse
