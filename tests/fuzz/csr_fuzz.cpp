// SPDX-License-Identifier: Apache-2.0
// libFuzzer target for data/csr.hpp: the input is a CSR triple of NPY files. load_csr must either
// return a matrix every later reader can index safely or throw dafuse::error; anything else
// (another exception, a crash, a sanitizer report, a hang) is a finding.
//
// Input layout (tests/fuzz/make_corpus.py writes it):
//   bytes 0-1  cols, uint16 little-endian
//   bytes 2-3  n1, uint16 little-endian: length of the indptr file
//   bytes 4-5  n2, uint16 little-endian: length of the indices file
//   then       n1 bytes of <prefix>_indptr.npy, n2 bytes of <prefix>_indices.npy, and the rest is
//              <prefix>_data.npy (lengths past the end of the input are cut short)
#include <dafuse/data/csr.hpp>

#include "fuzz_file.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace {

namespace dd = dafuse::data;
using dafuse::fuzz::finding;

std::size_t read_u16(const std::uint8_t* data, std::size_t size, std::size_t at) {
  if (at + 2 > size) return 0;
  return std::size_t{data[at]} | std::size_t{data[at + 1]} << 8;
}

//! What a valid matrix guarantees, checked without trusting check_csr's own loop.
void check_invariants(const dd::csr_matrix& m) {
  if (m.indptr.size() != std::size_t(m.rows) + 1) finding("indptr size");
  if (m.indices.size() != m.values.size()) finding("indices size");
  for (dafuse::index_t i = 0; i < m.rows; ++i) {
    if (m.row_nnz(i) < 0) finding("negative row_nnz");
    const auto end = std::size_t(m.indptr[std::size_t(i) + 1]);
    if (end > m.values.size()) finding("row past nnz");
    for (auto p = std::size_t(m.indptr[std::size_t(i)]); p < end; ++p)
      if (m.indices[p] < 0 || m.indices[p] >= m.cols) finding("column out of range");
  }
}

void exercise(dd::csr_matrix m) {
  check_invariants(m);
  dd::check_csr(m, "fuzz");  // must accept what load_csr accepted

  // to_dense then to_csr drops stored zeros and nothing else. Bounded so the dense copy stays
  // small.
  if (m.rows * m.cols <= (1 << 20)) {
    const std::vector<float> dense = dd::to_dense(m);
    const dd::csr_matrix back = dd::to_csr(dense.data(), m.rows, m.cols);
    std::size_t stored_nonzero = 0;
    for (const float v : m.values) stored_nonzero += v != 0.0f;
    if (std::size_t(back.nnz()) != stored_nonzero) finding("to_dense/to_csr changed the non-zeros");
    dd::check_csr(back, "fuzz round trip");
  }

  dd::sparse_dataset d;
  try {
    d = dd::make_sparse_dataset("fuzz", dd::domain::source, std::move(m));
  } catch (const dafuse::error&) {
    return;  // an empty set
  }
  dd::l2_normalize_rows(d);
  dd::check_csr(d.features, "fuzz l2");  // finite in, finite out
  try {
    dd::log1p_values(d);  // values in [-1, 1] after normalising: -1 itself is rejected
  } catch (const dafuse::error&) {
  }
  dd::binarize_values(d);
  for (const float v : d.features.values)
    if (v != 0.0f && v != 1.0f) finding("binarize_values left a value other than 0 or 1");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto cols = dafuse::index_t(read_u16(data, size, 0));
  std::size_t at = std::min<std::size_t>(size, 6);
  const std::size_t n1 = std::min(read_u16(data, size, 2), size - at);
  const std::size_t n2 = std::min(read_u16(data, size, 4), size - at - n1);

  static const std::filesystem::path prefix = dafuse::fuzz::scratch_dir() / "m";
  static const std::filesystem::path indptr = prefix.string() + "_indptr.npy";
  static const std::filesystem::path indices = prefix.string() + "_indices.npy";
  static const std::filesystem::path values = prefix.string() + "_data.npy";
  dafuse::fuzz::write_file(indptr, data + at, n1);
  at += n1;
  dafuse::fuzz::write_file(indices, data + at, n2);
  at += n2;
  dafuse::fuzz::write_file(values, data + at, size - at);

  dd::csr_matrix m;
  try {
    m = dd::load_csr(prefix, cols);
  } catch (const dafuse::error&) {
    return 0;
  }
  exercise(std::move(m));
  return 0;
}
