// SPDX-License-Identifier: Apache-2.0
//! @file data/csr.hpp
//! @brief Sparse rows in compressed sparse row (CSR) form, as scipy.sparse.csr_matrix stores them.
#pragma once
#include <dafuse/config.hpp>
#include <dafuse/core/meta.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace dafuse::data {

//! A [rows, cols] sparse matrix on the host: row i's non-zeros are
//! values[indptr[i] .. indptr[i+1]) at columns indices[indptr[i] .. indptr[i+1]), the columns
//! strictly ascending within a row (scipy's canonical form).
struct csr_matrix {
  index_t rows = 0;                   //!< samples
  index_t cols = 0;                   //!< features per sample
  std::vector<std::int32_t> indptr;   //!< [rows + 1], indptr[0] = 0, non-decreasing
  std::vector<std::int32_t> indices;  //!< [nnz], each in [0, cols)
  std::vector<float> values;          //!< [nnz]

  index_t nnz() const { return index_t(values.size()); }
  //! Non-zeros in row i.
  index_t row_nnz(index_t i) const {
    return index_t(indptr[std::size_t(i) + 1]) - index_t(indptr[std::size_t(i)]);
  }
};

}  // namespace dafuse::data
