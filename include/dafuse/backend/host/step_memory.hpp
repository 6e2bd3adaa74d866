// SPDX-License-Identifier: Apache-2.0
//! @file backend/host/step_memory.hpp
//! @brief `step_memory`: what every host execution of a step owns alike — parameters, gradients,
//! optimizer state, the batch slots and the labels — allocated once on a host system.
#pragma once
#include <dafuse/backend/executor.hpp>
#include <dafuse/config.hpp>
#include <dafuse/core/buffer.hpp>
#include <dafuse/core/meta.hpp>
#include <dafuse/nn/dann_net.hpp>
#include <dafuse/nn/init.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>

namespace dafuse::backend::host {

//! The step's state and batch slots in `System`'s host memory, for batches of B rows per domain
//! (Step::rows_for(B) rows in all). The fused executor and the eager step both hold one.
template <class Step, class System>
class step_memory {
 public:
  using value_type = typename Step::value_type;
  using net_type = typename Step::net_type;
  static constexpr index_t input_width = Step::input_width;
  static constexpr bool sparse_input = Step::sparse_input;

  step_memory() = default;
  //! Parameters, gradients and optimizer state zeroed; the batch slots sized for B rows per
  //! domain: a sparse batch with room for `nonzeros` non-zeros (fit_args::sparse_nonzeros), or
  //! with 0 for the densest possible one (input_width non-zeros a row, 5 MB for the Amazon
  //! reviews' 5000 features and 128 rows, whose real batches hold about 12 000).
  explicit step_memory(index_t batch, index_t nonzeros = 0)
      : rows_(Step::rows_for(batch)),
        params_(net_type::param_count, value_type(0)),
        grads_(net_type::param_count, value_type(0)),
        optim_state_(net_type::param_count * Step::optim_type::state_per_param, value_type(0)),
        labels_(batch, 0) {
    if constexpr (sparse_input) {
      sparse_offsets_ = buffer<std::int32_t, System>(rows_ + 1, 0);
      const index_t densest = input_width * rows_;
      const index_t room = nonzeros > 0 ? std::min(nonzeros, densest) : densest;
      sparse_indices_ = buffer<std::int32_t, System>(room);
      sparse_values_ = buffer<value_type, System>(room);
    } else {
      input_ = buffer<value_type, System>(input_width * rows_);
    }
  }

  //! Draws fresh parameters from `seed` (nn::initialize_parameters) and zeroes the optimizer
  //! state.
  void initialize(std::uint64_t seed, nn::weight_init init) {
    nn::initialize_parameters<net_type>(params_.data(), seed, init);
    optim_state_.fill(value_type(0));
  }

  //! Rows per batch: B source, then B target when the head draws target rows.
  index_t rows() const { return rows_; }

  //! The dense batch: [input_width, rows()], source columns first.
  matrix_view<value_type> input() requires(!sparse_input) {
    return input_.matrix(input_width, rows_);
  }
  //! The sparse batch's CSR arrays (backend/executor.hpp says what they hold).
  sparse_batch_slots<value_type> sparse_batch() requires sparse_input {
    return {{sparse_offsets_.data(), std::size_t(rows_ + 1)},
            {sparse_indices_.data(), sparse_indices_.size()},
            {sparse_values_.data(), sparse_values_.size()}};
  }
  //! The source rows' class labels: [B].
  std::span<std::int32_t> source_labels() { return {labels_.data(), labels_.size()}; }

  std::span<value_type> parameters() { return {params_.data(), params_.size()}; }
  std::span<const value_type> parameters() const { return {params_.data(), params_.size()}; }
  std::span<value_type> gradients() { return {grads_.data(), grads_.size()}; }
  std::span<const value_type> gradients() const { return {grads_.data(), grads_.size()}; }
  std::span<value_type> optimizer_state() { return {optim_state_.data(), optim_state_.size()}; }
  std::span<const value_type> optimizer_state() const {
    return {optim_state_.data(), optim_state_.size()};
  }
  //! The sparse batch's arrays as a read-only CSR view over its rows().
  sparse_matrix_view<const value_type> sparse_view() const requires sparse_input {
    return {sparse_offsets_.data(), sparse_indices_.data(), sparse_values_.data(), input_width,
            rows_};
  }
  //! Non-zeros the sparse batch's arrays have room for.
  std::size_t sparse_capacity() const { return sparse_values_.size(); }

  //! Bytes of every buffer held here.
  std::size_t memory_bytes() const {
    const auto bytes = [](const auto& b) { return b.size() * sizeof(*b.data()); };
    return bytes(params_) + bytes(grads_) + bytes(optim_state_) + bytes(input_) +
           bytes(sparse_offsets_) + bytes(sparse_indices_) + bytes(sparse_values_) + bytes(labels_);
  }

 private:
  index_t rows_ = 0;
  buffer<value_type, System> params_;       // [param_count]: G_f, G_y, G_d
  buffer<value_type, System> grads_;        // [param_count], same layout
  buffer<value_type, System> optim_state_;  // [state_per_param · param_count]
  buffer<std::int32_t, System> labels_;     // [B]
  buffer<value_type, System> input_;        // [input_width, rows] (dense input)
  // A sparse batch: CSR offsets, feature indices and values, room for the densest.
  buffer<std::int32_t, System> sparse_offsets_, sparse_indices_;
  buffer<value_type, System> sparse_values_;
};

}  // namespace dafuse::backend::host
