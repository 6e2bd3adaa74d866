// SPDX-License-Identifier: Apache-2.0
//! @file backend/host/working_copy.hpp
//! @brief A mixed-precision host step's parameters as its passes compute with them: a copy of the
//! fp32 master parameters rounded to the 16-bit format, refreshed before every step and every
//! inference (users may write parameters() between them).
//!
//! Where the product kernel rounds its operands itself as it packs them (bf16 on AVX512-BF16),
//! the products give the same values from the master weights as from a rounded copy: then only
//! the biases are rounded into the copy, and the products read the master weights
//! (`products_read_master`). A sparse first layer reads W's columns itself, unrounded, so a
//! sparse step keeps the whole copy.
#pragma once
#include <dafuse/config.hpp>

#include <dafuse/backend/host/sparse_batch.hpp>
#include <dafuse/backend/host/team.hpp>
#include <dafuse/backend/host/update.hpp>
#include <dafuse/core/buffer.hpp>
#include <dafuse/core/meta.hpp>

#include <cstddef>
#include <span>
#include <utility>

namespace dafuse::backend::host {

//! The working copy of Step's parameters (Step::net_type's layout) on a host System, rounded by
//! Products::round. Holds nothing unless Step::mixed.
template <class Step, class System, class Products>
class working_copy {
  using Net = typename Step::net_type;
  using T = typename Step::value_type;
  static constexpr bool mixed = Step::mixed;

 public:
  //! Whether the products read the weights from the master copy (see the file's comment).
  static constexpr bool products_read_master = [] {
    if constexpr (mixed)
      return Products::rounds_operands && !Step::sparse_input;
    else
      return true;
  }();

  working_copy() {
    if constexpr (mixed) values_ = buffer<T, System>(Net::param_count, T(0));
  }

  //! The parameters as the step computes with them, given the `master` ones: `master` itself
  //! (fp32, fp64), or this copy rounded afresh from it — only its biases when
  //! products_read_master. Each thread rounds the weights whose gradient it writes and its
  //! products read (`weights`: the update's split; a dealt sparse batch's parts for its first
  //! layer), as the update does.
  template <class Sparse>
  const T* refresh(const T* master,
                   std::span<const weight_block> weights,
                   const Sparse& sparse_batch) {
    if constexpr (!mixed) {
      return master;
    } else {
      T* working = values_.data();
      const auto round_range = [&](index_t first, index_t last) {
        for (index_t i = first; i < last; ++i) working[i] = Products::round(master[i]);
      };
      if constexpr (products_read_master) {
        round_biases<typename Net::feature_stack>(Net::features_offset, round_range);
        round_biases<typename Net::classifier_stack>(Net::classifier_offset, round_range);
        round_biases<typename Net::discriminator_stack>(Net::discriminator_offset, round_range);
      } else if (sparse_batch.dealt()) {
        run_on_team(sparse_batch.parts(), [&](int t, int team, auto&&) {
          for_each_owned_run(weights, 0, Net::param_count, t, team, round_range);
        });
      } else {
        // As memory-bound as the update, and split as it is (a sparse step on one thread keeps
        // it there).
        for_each_owned_slice<System, T>(weights, 0, Net::param_count, round_range,
                                        !Step::sparse_input);
      }
      return working;
    }
  }

  //! Where the products read the weights, given refresh()'s result `working`.
  const T* product_weights(const T* master, const T* working) const {
    return products_read_master ? master : working;
  }

  //! Bytes held.
  std::size_t memory_bytes() const { return values_.size() * sizeof(T); }

 private:
  // Runs round_range(first, last) over each bias of `Stack`, whose parameters start at `offset`
  // (a layer's parameters after its weights: a dense layer's [out], a convolution's [C_out], none
  // for max-pooling).
  template <class Stack, class F>
  static void round_biases(index_t offset, const F& round_range) {
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      ((round_range(
           offset + Stack::template param_offset<I>() + Stack::template layer<I>::weight_count,
           offset + Stack::template param_offset<I>() + Stack::template layer<I>::param_count)),
       ...);
    }
    (std::make_index_sequence<Stack::depth>{});
  }

  buffer<T, System> values_;  // Net::param_count values when mixed, else none
};

}  // namespace dafuse::backend::host
