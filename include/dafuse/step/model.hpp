// SPDX-License-Identifier: Apache-2.0
//! @file step/model.hpp
//! @brief `model<Net>`: a trained network for inference only, independent of how it was trained.
//!
//! A model holds a network's parameters (fp32, in the flat layout of nn/dann_net.hpp) and runs
//! G_f and G_y on the host: no optimizer state, gradients, batch or loader, and one type per
//! network whatever the step's policies were. Build one from any step of the same network
//! (`model_of(step)`), or load one from a model file (train/model_file.hpp). A model lives in
//! host memory wherever its step trained (it is what leaves training), and its layers run
//! through the host backend's forward (backend/host/inference.hpp), chunk by chunk of rows: its
//! logits are an fp32 step's, and a mixed-precision step's to that precision's rounding.
//!
//! A model may carry the preprocessing its training rows went through (data/preprocessing.hpp:
//! standardize's statistics, l2, log1p, binarize), set by the trainer or read from a model file:
//! then logits and predict take raw rows and apply it first, chunk by chunk, bit for bit as the
//! training rows were transformed. model_of(step) carries none (the step saw transformed rows).
#pragma once
#include <dafuse/config.hpp>

#include <dafuse/backend/host/inference.hpp>
#include <dafuse/core/buffer.hpp>
#include <dafuse/core/error.hpp>
#include <dafuse/core/meta.hpp>
#include <dafuse/data/preprocessing.hpp>
#include <dafuse/nn/dann_net.hpp>
#include <dafuse/nn/loss.hpp>

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

 public:
  using net_type = Net;
  static constexpr index_t input_width = Net::input_width;      //!< width of a data row
  static constexpr index_t feature_width = Net::feature_width;  //!< width of h
  static constexpr index_t class_count = Net::class_count;      //!< number of classes
  static constexpr bool sparse_input = Net::sparse_input;       //!< rows are CSR samples
  static constexpr index_t param_count = Net::param_count;      //!< G_f, G_y and G_d
  //! Rows run through the network at a time: bounds the activations' memory at
  //! chunk_rows · (the layers' widths) floats.
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

  //! The preprocessing applied to every row before the network (empty: rows are read as given).
  const data::preprocessing& preprocessing() const { return preprocessing_; }
  //! Makes the model read raw rows: `p` (checked against the input width and form) runs on each
  //! row first. A model file saves and loads it with the weights.
  void set_preprocessing(data::preprocessing p) {
    p.check(input_width, sparse_input, "model::set_preprocessing");
    preprocessing_ = std::move(p);
  }

  //! Class logits of `n` rows stored row-major at `rows` ([n, input_width]), written row-major
  //! to `out` ([n, class_count]).
  void logits(const float* rows, index_t n, float* out) const requires(!sparse_input) {
    check_count(n);
    // Raw rows are copied a chunk at a time and preprocessed there: [chunk_rows, input_width].
    std::vector<float> chunk(preprocessing_.empty()
                                 ? 0
                                 : std::size_t(std::min(chunk_rows, n)) * std::size_t(input_width));
    for (index_t first = 0; first < n; first += chunk_rows) {
      const index_t m = std::min(chunk_rows, n - first);
      const float* x = rows + first * input_width;
      if (!preprocessing_.empty()) {
        std::copy(x, x + m * input_width, chunk.begin());
        preprocessing_.apply(chunk.data(), m, input_width);
        x = chunk.data();
      }
      // Row-major [m, input_width] is column-major [input_width, m]: one sample a column.
      backend::host::network_logits<Net>(
          params_.data(), matrix_view<const float>{x, input_width, m}, out + first * class_count);
    }
  }

  //! The same for the samples of a sparse matrix ([input_width, n], one sample a column, e.g.
  //! data::sparse_columns() of a CSR data set).
  void logits(sparse_matrix_view<const float> rows, float* out) const requires sparse_input {
    if (rows.rows != input_width)
      fail("model::logits", "sparse rows", std::to_string(input_width) + " features",
           std::to_string(rows.rows));
    check_count(rows.cols);
    backend::host::check_sparse_columns("model::logits", rows);
    std::vector<float> values;  // a chunk's preprocessed values, when there is preprocessing
    for (index_t first = 0; first < rows.cols; first += chunk_rows) {
      const index_t m = std::min(chunk_rows, rows.cols - first);
      const index_t begin = rows.col_begin(first);
      sparse_matrix_view<const float> chunk{rows.offsets + first, rows.indices + begin,
                                            rows.values + begin, input_width, m};
      if (!preprocessing_.empty()) {
        values.assign(chunk.values, chunk.values + chunk.nnz());
        preprocessing_.apply_sparse(chunk.offsets, values.data(), m);
        chunk.values = values.data();
      }
      backend::host::network_logits<Net>(params_.data(), chunk, out + first * class_count);
    }
  }

  //! Predicted class (the largest logit, first on ties) of each of `n` dense rows.
  void predict(const float* rows, index_t n, std::int32_t* classes) const requires(!sparse_input) {
    check_count(n);
    std::vector<float> z(std::size_t(n) * std::size_t(class_count));
    logits(rows, n, z.data());
    argmax_rows(z, n, classes);
  }
  //! Predicted class of each sample of a sparse matrix.
  void predict(sparse_matrix_view<const float> rows,
               std::int32_t* classes) const requires sparse_input {
    check_count(rows.cols);
    std::vector<float> z(std::size_t(rows.cols) * std::size_t(class_count));
    logits(rows, z.data());
    argmax_rows(z, rows.cols, classes);
  }

 private:
  static void check_count(index_t n) {
    if (n < 0) fail("model", "rows", "a count >= 0", std::to_string(n));
  }

  static void argmax_rows(const std::vector<float>& z, index_t n, std::int32_t* classes) {
    for (index_t i = 0; i < n; ++i)
      classes[i] = nn::argmax(z.data() + i * class_count, class_count);
  }

  std::vector<float> params_;
  data::preprocessing preprocessing_;
};

//! The model of a trained step: `auto m = dafuse::model_of(step);`.
template <class Step>
model<typename Step::net_type> model_of(const Step& step) {
  return model<typename Step::net_type>(step);
}

}  // namespace dafuse
