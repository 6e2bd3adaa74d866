// SPDX-License-Identifier: Apache-2.0
//! @file backend/host/sparse_checks.hpp
//! @brief The checks of a step's CSR batch in host memory: offsets and feature indices.
#pragma once
#include <dafuse/config.hpp>
#include <dafuse/core/error.hpp>
#include <dafuse/core/meta.hpp>

#include <cstddef>
#include <cstdint>
#include <string>

namespace dafuse::backend::host {

//! The error for a feature index out of range at entry k of a step's CSR batch; `step` names
//! the caller.
[[noreturn]] inline void fail_sparse_index(const char* step,
                                           index_t k,
                                           std::int32_t feature,
                                           index_t width) {
  fail(step, "sparse_batch().indices[" + std::to_string(k) + "]",
       "a feature in [0, " + std::to_string(width) + ")", std::to_string(feature));
}

//! Checks that each of the `nnz` feature indices of a step's CSR batch is in [0, width); names
//! the first that is not. One pass the compiler vectorises, and a second only to find the culprit.
inline void check_sparse_indices(const char* step,
                                 const std::int32_t* indices,
                                 index_t nnz,
                                 index_t width) {
  bool in_range = true;
  for (index_t k = 0; k < nnz; ++k) in_range &= std::uint32_t(indices[k]) < std::uint32_t(width);
  if (in_range) return;
  for (index_t k = 0; k < nnz; ++k)
    if (indices[k] < 0 || indices[k] >= width) fail_sparse_index(step, k, indices[k], width);
}

//! Checks the offsets of a step's CSR batch of `rows` samples whose arrays hold `capacity`
//! non-zeros: offsets[0] = 0, non-decreasing, none past the capacity.
inline void check_sparse_offsets(const char* step,
                                 const std::int32_t* offsets,
                                 index_t rows,
                                 std::size_t capacity) {
  if (offsets[0] != 0) fail(step, "sparse_batch().offsets[0]", "0", std::to_string(offsets[0]));
  for (index_t c = 0; c < rows; ++c)
    if (offsets[c + 1] < offsets[c] || index_t(offsets[c + 1]) > index_t(capacity))
      fail(step, "sparse_batch().offsets[" + std::to_string(c + 1) + "]",
           "a non-decreasing offset <= " + std::to_string(capacity),
           std::to_string(offsets[c + 1]));
}

}  // namespace dafuse::backend::host
