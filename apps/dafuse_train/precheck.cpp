// SPDX-License-Identifier: Apache-2.0
#include "precheck.hpp"

#include <dafuse/core/error.hpp>
#include <dafuse/data/dataset.hpp>
#include <dafuse/data/npy.hpp>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace dafuse_train {
namespace {

namespace df = dafuse;

bool is_npy(const std::string& path) {
  return path.size() > 4 && path.compare(path.size() - 4, 4, ".npy") == 0;
}

// The rows of one domain as the program reads them (run_data.cpp's load_dense and load_sparse).
struct rows_of {
  std::string origin;     // the features file, or the CSR prefix
  std::size_t rows = 0;   // shape[0], or indptr's length - 1
  std::size_t width = 0;  // features per row (dense only; 0: not known from the headers)
  std::string shape;      // the features' shape, for messages
};

// A dense features file's rows and width from its header: images [N, H, W(, C)] and rows
// [N, d] alike are N rows of the product of the other dimensions (make_dataset's messages).
rows_of dense_rows(const std::string& path) {
  if (!is_npy(path))
    throw df::error(path +
                    ": features: expected an NPY file (this model reads dense rows), found "
                    "another path");
  const df::data::npy_header h = df::data::read_npy_header(path);
  if (h.shape.empty())
    df::fail(path, "features shape", "at least one dimension [rows, ...]", "a 0-d array");
  rows_of r{path, h.shape[0], 1, df::data::detail::shape_text(h.shape)};
  for (std::size_t d = 1; d < h.shape.size(); ++d) r.width *= h.shape[d];
  if (r.rows == 0 || r.width == 0)
    df::fail(path, "features shape", "at least one row and one feature",
             std::to_string(r.rows) + " rows of width " + std::to_string(r.width));
  return r;
}

// A CSR prefix's rows from its indptr header (the loader checks the triple's values).
rows_of sparse_rows(const std::string& prefix) {
  if (is_npy(prefix))
    throw df::error(prefix +
                    ": features: expected a CSR prefix P with P_indptr.npy, P_indices.npy and "
                    "P_data.npy (this model reads sparse rows), found an NPY file");
  const std::string indptr = prefix + "_indptr.npy";
  const df::data::npy_header h = df::data::read_npy_header(indptr);
  if (h.shape.size() != 1 || h.shape[0] == 0)
    df::fail(indptr, "shape", "one dimension [rows + 1]", df::data::detail::shape_text(h.shape));
  for (const char* part : {"_indices.npy", "_data.npy"}) {
    const df::data::npy_header p = df::data::read_npy_header(prefix + part);
    if (p.shape.size() != 1)
      df::fail(prefix + part, "shape", "one dimension [nnz]",
               df::data::detail::shape_text(p.shape));
  }
  return {prefix, h.shape[0] - 1, 0, "CSR"};
}

// The features' width is the network's input width, --features' first number.
void check_width(const rows_of& r, const module_text& features, std::string_view side) {
  const long width = features.widths.front();
  if (r.width != 0 && r.width != std::size_t(width))
    df::fail(
        r.origin, "feature width",
        std::to_string(width) + " (--features " + joined(features.widths, ",") + ": the " +
            "network reads rows of " + std::to_string(width) + " features)",
        std::to_string(r.width) + " (" + std::string(side) + " features of shape " + r.shape + ")");
}

// The labels file `labels` holds one class in [0, K) per row of `r` (any integer dtype whose
// values fit int32, as the program reads them); K is --classifier's last width.
void check_labels(const std::string& labels, const rows_of& r, const module_text& classifier) {
  const std::vector<std::int32_t> y = df::data::load_labels(labels, r.rows, r.origin);
  const long classes = classifier.widths.back();
  for (std::size_t i = 0; i < y.size(); ++i)
    if (y[i] < 0 || y[i] >= classes)
      df::fail(labels, "labels[" + std::to_string(i) + "]",
               "a class in [0, " + std::to_string(classes) + ") (--classifier " +
                   joined(classifier.widths, ",") + ": " + std::to_string(classes) +
                   " classes; the labels of " + r.origin + ")",
               std::to_string(y[i]));
}

}  // namespace

void check_network_data(const config& c) {
  const network_text& n = c.network;
  // The labels as run_model and load_sparse require them: a CSR prefix's own P_labels.npy when
  // none is given (required for the source and the test set, optional for the target).
  const auto labels_of = [&](const std::string& features, const std::string& given, bool required) {
    if (!given.empty() || !n.sparse) return given;
    const std::string own = features + "_labels.npy";
    return required || std::filesystem::exists(own) ? own : std::string();
  };
  if (c.source_labels.empty() && !n.sparse)
    throw usage_error("--source-labels: expected the source labels (an int32 NPY file)");
  if (!c.target_test.empty() && c.target_test_labels.empty() && !n.sparse)
    throw usage_error(
        "--target-test-labels: expected the test set's labels (an int32 NPY file): a test set "
        "is there to be scored");
  const auto read = [&](const std::string& features) {
    return n.sparse ? sparse_rows(features) : dense_rows(features);
  };
  const rows_of source = read(c.source);
  check_labels(labels_of(c.source, c.source_labels, true), source, n.classifier);
  const rows_of target = read(c.target);
  const std::string target_labels = labels_of(c.target, c.target_labels, false);
  if (!target_labels.empty()) check_labels(target_labels, target, n.classifier);
  check_width(source, n.features, "source");
  // A source-only step draws no target rows and reads them only to score labelled ones.
  if (n.head != "source_only" || !target_labels.empty()) check_width(target, n.features, "target");
  if (!c.target_test.empty()) {
    const rows_of test = read(c.target_test);
    check_labels(labels_of(c.target_test, c.target_test_labels, true), test, n.classifier);
    check_width(test, n.features, "target test");
  }
}

}  // namespace dafuse_train
