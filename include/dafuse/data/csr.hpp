// SPDX-License-Identifier: Apache-2.0
//! @file data/csr.hpp
//! @brief Sparse rows in compressed sparse row (CSR) form, as scipy.sparse.csr_matrix stores them.
#pragma once
#include <dafuse/config.hpp>
#include <dafuse/core/error.hpp>
#include <dafuse/core/file.hpp>
#include <dafuse/core/meta.hpp>
#include <dafuse/data/dataset.hpp>
#include <dafuse/data/npy.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

// On disk a CSR matrix is three 1-D NPY arrays, scipy's own fields (the layout of
// ../shared/data/amazon_reviews, whose README describes it):
//
//   <prefix>_indptr.npy   int32   [rows + 1]   row i is entries indptr[i] .. indptr[i+1])
//   <prefix>_indices.npy  int32   [nnz]        column of each entry
//   <prefix>_data.npy     float32 [nnz]        value of each entry
//
// Other dtypes are converted as they are read: offsets and columns of any integer type whose
// values fit int32 (scipy uses int64 for large matrices), values of any float or integer type
// (float64, scipy's default for float data, rounds to float32). The column count is not stored
// (scipy keeps it in the matrix object, not in these arrays), so the caller passes it: 5000 for the
// Amazon reviews counts.

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

namespace detail {

//! Names the source of each CSR field in messages: one origin for a matrix built in memory, the
//! three files for one loaded from disk.
struct csr_origins {
  std::string indptr;   //!< where indptr came from
  std::string indices;  //!< where indices came from
  std::string values;   //!< where values came from
};

//! Checks the shape and offsets of `m`, everything that indexing its rows relies on: after this,
//! indptr[i] .. indptr[i+1] is a valid range of indices and values for every row i.
inline void check_csr_structure(const csr_matrix& m, const csr_origins& o) {
  if (m.rows < 0) fail(o.indptr, "rows", "a non-negative row count", std::to_string(m.rows));
  if (m.cols < 0) fail(o.indices, "cols", "a non-negative column count", std::to_string(m.cols));
  const std::size_t rows = std::size_t(m.rows);
  if (m.indptr.size() != rows + 1)
    fail(o.indptr, "indptr size", std::to_string(rows + 1) + " (rows + 1)",
         std::to_string(m.indptr.size()));
  if (m.indptr[0] != 0) fail(o.indptr, "indptr[0]", "0", std::to_string(m.indptr[0]));
  for (std::size_t i = 0; i < rows; ++i)
    if (m.indptr[i + 1] < m.indptr[i])
      fail(o.indptr, "indptr[" + std::to_string(i + 1) + "] (end of row " + std::to_string(i) + ")",
           "non-decreasing offsets: at least indptr[" + std::to_string(i) +
               "] = " + std::to_string(m.indptr[i]),
           std::to_string(m.indptr[i + 1]));
  // Loaded from files, say which file holds the values the other two must agree with.
  const std::string in_values = o.values == o.indices ? "" : " in " + o.values;
  if (m.indices.size() != m.values.size())
    fail(o.indices, "indices size",
         std::to_string(m.values.size()) + " (one per value" + in_values + ")",
         std::to_string(m.indices.size()));
  // indptr is non-decreasing from 0 here, so its last entry is its largest.
  if (std::size_t(m.indptr[rows]) != m.values.size())
    fail(o.indptr, "indptr[" + std::to_string(rows) + "] (nnz)",
         std::to_string(m.values.size()) + " (the number of values" + in_values + ")",
         std::to_string(m.indptr[rows]));
}

//! Checks columns and values row by row; needs check_csr_structure first.
inline void check_csr_entries(const csr_matrix& m, const csr_origins& o) {
  for (index_t i = 0; i < m.rows; ++i) {
    const std::size_t begin = std::size_t(m.indptr[std::size_t(i)]);
    const std::size_t end = std::size_t(m.indptr[std::size_t(i) + 1]);
    for (std::size_t p = begin; p < end; ++p) {
      const std::int32_t c = m.indices[p];
      // Built only on failure: this loop runs once per non-zero.
      const auto field = [&]() {
        return "indices[" + std::to_string(p) + "] (row " + std::to_string(i) + ")";
      };
      if (c < 0 || c >= m.cols)
        fail(o.indices, field(), "a column in [0, " + std::to_string(m.cols) + ")",
             std::to_string(c));
      if (p > begin && c <= m.indices[p - 1])
        fail(
            o.indices, field(),
            "columns strictly ascending within the row: greater than indices[" +
                std::to_string(p - 1) + "] = " + std::to_string(m.indices[p - 1]),
            std::to_string(c) + (c == m.indices[p - 1]
                                     ? " (a duplicate column: scipy's sum_duplicates() merges them)"
                                     : " (unsorted: scipy's sort_indices() sorts them)"));
      if (!std::isfinite(m.values[p]))
        fail(o.values,
             "values[" + std::to_string(p) + "] (row " + std::to_string(i) + ", column " +
                 std::to_string(c) + ")",
             "a finite value", std::to_string(m.values[p]));
    }
  }
}

//! Everything check_csr checks, with each field's origin named.
inline void validate_csr(const csr_matrix& m, const csr_origins& o) {
  check_csr_structure(m, o);
  check_csr_entries(m, o);
}

//! Fails unless the header of `where` has one dimension, [what].
inline void check_vector_shape(const npy_header& h, std::string_view where, std::string_view what) {
  if (h.shape.size() != 1)
    fail(where, "shape", "one dimension [" + std::string(what) + "]",
         std::to_string(h.shape.size()) + " dimensions");
}

//! A 1-D NPY array of integers (any integer dtype whose values fit int32) named `name` in
//! messages ("indptr[7]"); the shape is checked before the values are read.
inline std::vector<std::int32_t> load_index_vector(const std::filesystem::path& path,
                                                   std::string_view what,
                                                   std::string_view name) {
  constexpr std::string_view fix = "a.astype(np.int32)";
  const dafuse::detail::input_file f(path, path.string());
  const npy_header h = read_npy_header(f, fix);
  check_vector_shape(h, f.where(), what);
  return std::move(read_npy_values_as_int32(f, h, name, fix).values);
}

//! A 1-D NPY array of values (any float or integer dtype, converted to float32).
inline std::vector<float> load_value_vector(const std::filesystem::path& path,
                                            std::string_view what) {
  const dafuse::detail::input_file f(path, path.string());
  const npy_header h = read_npy_header(f, npy_float_fix);
  check_vector_shape(h, f.where(), what);
  return std::move(read_npy_values_as_float(f, h).values);
}

//! `prefix` + `suffix`, appended to the file name ("data/dvd_train" + "_data.npy").
inline std::filesystem::path with_suffix(const std::filesystem::path& prefix,
                                         std::string_view suffix) {
  std::filesystem::path p = prefix;
  p += suffix;
  return p;
}

}  // namespace detail

//! Checks that `m` is a canonical CSR matrix: indptr has rows + 1 non-decreasing offsets from 0
//! to nnz, one index per value, every column in [0, cols) and strictly ascending within its row
//! (no duplicates), every value finite. Each failure is a dafuse::error naming `origin`, the
//! field (with the row, and the column for values), what was expected and what was found.
inline void check_csr(const csr_matrix& m, const std::string& origin) {
  detail::validate_csr(m, {origin, origin, origin});
}

//! Loads a CSR matrix of `cols` columns from three 1-D NPY files: `indptr` int32 [rows + 1],
//! `indices` int32 [nnz] and `data` float32 [nnz] (other integer and float dtypes converted: see
//! the top of this file), then checks it as check_csr does. Messages name the file each field
//! came from.
inline csr_matrix load_csr(const std::filesystem::path& indptr,
                           const std::filesystem::path& indices,
                           const std::filesystem::path& data,
                           index_t cols) {
  csr_matrix m;
  m.indptr = detail::load_index_vector(indptr, "rows + 1", "indptr");
  if (m.indptr.empty()) fail(indptr.string(), "shape", "at least one entry [rows + 1]", "[0]");
  m.rows = index_t(m.indptr.size()) - 1;
  m.cols = cols;
  m.indices = detail::load_index_vector(indices, "nnz", "indices");
  m.values = detail::load_value_vector(data, "nnz");
  detail::validate_csr(m, {indptr.string(), indices.string(), data.string()});
  return m;
}

//! Loads `<prefix>_indptr.npy`, `<prefix>_indices.npy` and `<prefix>_data.npy` (the layout of
//! ../shared/data/amazon_reviews, e.g. prefix ".../amazon_reviews/dvd_train", cols 5000).
inline csr_matrix load_csr(const std::filesystem::path& prefix, index_t cols) {
  return load_csr(detail::with_suffix(prefix, "_indptr.npy"),
                  detail::with_suffix(prefix, "_indices.npy"),
                  detail::with_suffix(prefix, "_data.npy"), cols);
}

//! Sparse rows of one domain on the host: the sparse counterpart of `dataset`, with the same
//! labels and the same checks. `origin` names the files, so every later error can point at them.
struct sparse_dataset {
  std::string origin;                //!< e.g. ".../amazon_reviews/dvd_train" (used in messages)
  domain side = domain::source;      //!< source or target
  csr_matrix features;               //!< [rows, width], canonical CSR (check_csr holds)
  std::vector<std::int32_t> labels;  //!< [rows], or empty when unlabelled
  //! The file the labels came from, if any: label errors name it (see dataset::labels_origin).
  std::string labels_origin{};

  bool has_labels() const { return !labels.empty(); }
  index_t rows() const { return features.rows; }
  index_t width() const { return features.cols; }
};

//! Builds a sparse data set from a CSR matrix and labels ([rows], or empty for none). Rejects
//! malformed matrices (see check_csr), empty sets and a label count that is not the row count.
inline sparse_dataset make_sparse_dataset(std::string origin,
                                          domain side,
                                          csr_matrix features,
                                          std::vector<std::int32_t> labels = {}) {
  check_csr(features, origin);
  if (features.rows == 0 || features.cols == 0)
    fail(origin, "features shape", "at least one row and one feature",
         std::to_string(features.rows) + " rows of width " + std::to_string(features.cols));
  if (!labels.empty() && index_t(labels.size()) != features.rows)
    fail(origin, "labels", std::to_string(features.rows) + " labels (one per feature row)",
         std::to_string(labels.size()));
  return sparse_dataset{std::move(origin), side, std::move(features), std::move(labels), {}};
}

//! Loads the CSR triple at `prefix` (see load_csr) with `cols` columns and, when `labels_path`
//! is not empty, int32 labels of shape [rows]. The data set's origin is `prefix`.
inline sparse_dataset load_sparse_dataset(const std::filesystem::path& prefix,
                                          const std::filesystem::path& labels_path,
                                          domain side,
                                          index_t cols) {
  csr_matrix x = load_csr(prefix, cols);
  std::vector<std::int32_t> y = load_labels(labels_path, std::size_t(x.rows),
                                            detail::with_suffix(prefix, "_indptr.npy").string());
  sparse_dataset d = make_sparse_dataset(prefix.string(), side, std::move(x), std::move(y));
  d.labels_origin = labels_path.string();
  return d;
}

//! Checks every label is a class in [0, classes).
inline void check_labels(const sparse_dataset& d, index_t classes) {
  detail::check_label_range(d.origin, d.labels_origin, d.labels, classes);
}

//! Checks the rows have the width a network reads.
inline void check_width(const sparse_dataset& d, index_t width) {
  detail::check_row_width(d.origin, d.width(), width);
}

// Transforms that keep the sparsity pattern: each maps 0 to 0, so only stored values change.
// None is fitted on anything (no statistics from the source), so source and target are treated
// alike and a transform can be applied to each domain on its own. The arithmetic of each is a
// detail function that data::preprocessing shares, so a model reads raw rows bit for bit alike.

namespace detail {
//! Scales a sparse row's `n` stored values at `v` to unit L2 norm; a row of zeros stays zero.
inline void l2_normalize_values(float* v, std::size_t n) {
  double sq = 0;
  for (std::size_t p = 0; p < n; ++p) sq += double(v[p]) * double(v[p]);
  if (sq == 0) return;
  // Divide in double: 1/norm of a row of tiny values may not fit in a float.
  const double norm = std::sqrt(sq);
  for (std::size_t p = 0; p < n; ++p) v[p] = float(double(v[p]) / norm);
}
//! log1p_values' arithmetic: log(1 + v) in float.
inline float log1p_value(float v) {
  return std::log1p(v);
}
//! binarize_values' rule: 1 for a non-zero value, 0 for a stored zero.
inline float nonzero_value(float v) {
  return v != 0.0f ? 1.0f : 0.0f;
}
}  // namespace detail

//! Scales each row to unit L2 norm; rows of zeros stay zero. Per row: fitted on nothing.
inline void l2_normalize_rows(sparse_dataset& d) {
  csr_matrix& m = d.features;
  for (index_t i = 0; i < m.rows; ++i) {
    const std::size_t begin = std::size_t(m.indptr[std::size_t(i)]);
    const std::size_t end = std::size_t(m.indptr[std::size_t(i) + 1]);
    detail::l2_normalize_values(m.values.data() + begin, end - begin);
  }
}

//! Replaces each value v by log(1 + v), damping large counts. Per value: fitted on nothing.
//! Needs every value > -1 (counts are ≥ 0); otherwise nothing is changed and the first offending
//! value is reported.
inline void log1p_values(sparse_dataset& d) {
  csr_matrix& m = d.features;
  for (index_t i = 0; i < m.rows; ++i)
    for (auto p = std::size_t(m.indptr[std::size_t(i)]);
         p < std::size_t(m.indptr[std::size_t(i) + 1]); ++p)
      if (!(m.values[p] > -1.0f))
        fail(d.origin,
             "values[" + std::to_string(p) + "] (row " + std::to_string(i) + ", column " +
                 std::to_string(m.indices[p]) + ")",
             "a value > -1 for log1p", std::to_string(m.values[p]));
  for (float& v : m.values) v = detail::log1p_value(v);
}

//! Replaces each non-zero value by 1 (word present or not); stored zeros stay 0. Per value:
//! fitted on nothing.
inline void binarize_values(sparse_dataset& d) {
  for (float& v : d.features.values) v = detail::nonzero_value(v);
}

//! The non-zeros of a dense row-major [rows, cols] array as a CSR matrix (exact zeros are left
//! out; NaN is kept, being non-zero).
inline csr_matrix to_csr(const float* dense_rows, index_t rows, index_t cols) {
  constexpr auto int32_max = index_t(std::numeric_limits<std::int32_t>::max());
  if (rows < 0 || cols < 0)
    fail("to_csr", "shape", "non-negative rows and cols",
         std::to_string(rows) + " x " + std::to_string(cols));
  if (cols > int32_max + 1)
    fail("to_csr", "cols", "at most 2^31 (int32 column indices)", std::to_string(cols));
  csr_matrix m;
  m.rows = rows;
  m.cols = cols;
  m.indptr.reserve(std::size_t(rows) + 1);
  m.indptr.push_back(0);
  for (index_t i = 0; i < rows; ++i) {
    const float* r = dense_rows + i * cols;
    for (index_t k = 0; k < cols; ++k) {
      if (r[k] == 0.0f) continue;
      if (index_t(m.values.size()) == int32_max)
        fail("to_csr", "nnz", "at most 2^31 - 1 non-zeros (int32 offsets)", "more");
      m.indices.push_back(std::int32_t(k));
      m.values.push_back(r[k]);
    }
    m.indptr.push_back(std::int32_t(m.values.size()));
  }
  return m;
}

//! `m` as a dense row-major [rows, cols] array. Checks the structure of `m` first (not its
//! values, so NaN comes through as NaN).
inline std::vector<float> to_dense(const csr_matrix& m) {
  detail::check_csr_structure(m, {"to_dense", "to_dense", "to_dense"});
  if (m.cols != 0 && std::size_t(m.rows) > std::numeric_limits<std::size_t>::max() / sizeof(float) /
                                               std::size_t(m.cols))
    fail("to_dense", "shape", "rows x cols that fits in memory",
         std::to_string(m.rows) + " x " + std::to_string(m.cols));
  std::vector<float> out(std::size_t(m.rows) * std::size_t(m.cols), 0.0f);
  for (index_t i = 0; i < m.rows; ++i) {
    float* r = out.data() + i * m.cols;
    for (auto p = std::size_t(m.indptr[std::size_t(i)]);
         p < std::size_t(m.indptr[std::size_t(i) + 1]); ++p) {
      const std::int32_t c = m.indices[p];
      if (c < 0 || c >= m.cols)
        fail("to_dense", "indices[" + std::to_string(p) + "] (row " + std::to_string(i) + ")",
             "a column in [0, " + std::to_string(m.cols) + ")", std::to_string(c));
      r[c] = m.values[p];
    }
  }
  return out;
}

}  // namespace dafuse::data
