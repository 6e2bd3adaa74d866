// SPDX-License-Identifier: Apache-2.0
//! @file data/dataset.hpp
//! @brief A data set of one domain: feature rows, optional labels, where they came from.
#pragma once
#include <dafuse/config.hpp>
#include <dafuse/core/error.hpp>
#include <dafuse/core/file.hpp>
#include <dafuse/core/meta.hpp>
#include <dafuse/data/npy.hpp>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dafuse::data {

//! Which side of the adaptation a data set is on.
enum class domain { source, target };

//! Dense rows of one domain on the host: features row-major [rows, width], labels [rows] or
//! none (unlabelled target). `origin` names the files, so every later error can point at them.
struct dataset {
  std::string origin;                //!< e.g. "data/mnist_images.npy" (used in messages)
  domain side = domain::source;      //!< source or target
  index_t rows = 0;                  //!< samples
  index_t width = 0;                 //!< features per sample
  std::vector<float> features;       //!< [rows, width], row-major
  std::vector<std::int32_t> labels;  //!< [rows], or empty when unlabelled
  //! The file the labels came from, when read from one ("data/mnist_labels.npy"): label errors
  //! name it; empty for labels from memory (errors then name `origin`).
  std::string labels_origin{};

  bool has_labels() const { return !labels.empty(); }
  const float* row(index_t i) const { return features.data() + i * width; }
};

//! Builds a data set from arrays: features [N, d1, d2, ...] are flattened to [N, d1·d2·…];
//! labels, when given, must be [N]. Rejects empty sets and non-finite features.
inline dataset make_dataset(std::string origin,
                            domain side,
                            host_array<float> features,
                            std::vector<std::int32_t> labels = {}) {
  if (features.shape.empty())
    fail(origin, "features shape", "at least one dimension [rows, ...]", "a 0-d array");
  dataset d;
  d.origin = std::move(origin);
  d.side = side;
  d.rows = index_t(features.shape[0]);
  d.width = features.shape.size() == 1 ? 1 : index_t(features.row_size());
  if (d.rows == 0 || d.width == 0)
    fail(d.origin, "features shape", "at least one row and one feature",
         std::to_string(d.rows) + " rows of width " + std::to_string(d.width));
  if (features.values.size() != std::size_t(d.rows) * std::size_t(d.width))
    fail(d.origin, "features",
         std::to_string(std::size_t(d.rows) * std::size_t(d.width)) + " values for " +
             std::to_string(d.rows) + " rows of width " + std::to_string(d.width),
         std::to_string(features.values.size()));
  if (!labels.empty() && index_t(labels.size()) != d.rows)
    fail(d.origin, "labels", std::to_string(d.rows) + " labels (one per feature row)",
         std::to_string(labels.size()));
  for (std::size_t i = 0; i < features.values.size(); ++i)
    if (!std::isfinite(features.values[i]))
      fail(d.origin,
           "features[" + std::to_string(i / d.width) + "][" + std::to_string(i % d.width) + "]",
           "a finite value", std::to_string(features.values[i]));
  d.features = std::move(features.values);
  d.labels = std::move(labels);
  return d;
}

//! Int32 labels of shape [rows] from `labels_path`, one per row of the features read from
//! `features_origin` (named in the error when the counts differ); none when the path is empty.
//! Every loader (dense, image, sparse) reads its labels here. Any integer dtype is read (numpy's
//! default int64 too) when every value fits int32; the first that does not is refused as
//! `labels[i]` with its value. Float labels are refused: labels are class indices, and the
//! message says so and gives the fix (`y.astype(np.int32)`). The shape is checked from the header
//! before any value is read.
inline std::vector<std::int32_t> load_labels(const std::filesystem::path& labels_path,
                                             std::size_t rows,
                                             const std::string& features_origin) {
  if (labels_path.empty()) return {};
  constexpr std::string_view fix = "y.astype(np.int32)";
  const dafuse::detail::input_file f(labels_path, labels_path.string());
  const npy_header h = detail::read_npy_header(f, fix);
  if (h.shape.size() != 1)
    fail(f.where(), "shape", "one dimension [N]", std::to_string(h.shape.size()) + " dimensions");
  if (h.shape[0] != rows)
    fail(f.where(), "shape", "[" + std::to_string(rows) + "] to match " + features_origin,
         "[" + std::to_string(h.shape[0]) + "]");
  return std::move(detail::read_npy_values_as_int32(f, h, "labels", fix).values);
}

//! Loads features (any float or integer NPY, converted to float as load_npy_as_float converts:
//! float64 rounds to float32) and, when `labels_path` is not empty, integer labels of shape [N]
//! (see load_labels).
inline dataset load_dataset(const std::filesystem::path& features_path,
                            const std::filesystem::path& labels_path,
                            domain side) {
  host_array<float> x = load_npy_as_float(features_path);
  // A 0-d features array is reported by make_dataset; its labels are not compared.
  std::vector<std::int32_t> y = x.shape.empty()
                                    ? std::vector<std::int32_t>{}
                                    : load_labels(labels_path, x.shape[0], features_path.string());
  dataset d = make_dataset(features_path.string(), side, std::move(x), std::move(y));
  d.labels_origin = labels_path.string();
  return d;
}

namespace detail {
//! Every label of the data set from `origin` is a class in [0, classes) (dense and sparse sets);
//! a bad one is named by its index in the labels file `labels_origin` when there is one.
inline void check_label_range(const std::string& origin,
                              const std::string& labels_origin,
                              const std::vector<std::int32_t>& labels,
                              index_t classes) {
  for (std::size_t i = 0; i < labels.size(); ++i)
    if (labels[i] < 0 || labels[i] >= classes)
      fail(labels_origin.empty() ? origin : labels_origin, "labels[" + std::to_string(i) + "]",
           "a class in [0, " + std::to_string(classes) + ")" +
               (labels_origin.empty() ? "" : " (the labels of " + origin + ")"),
           std::to_string(labels[i]));
}
//! The data set from `origin` has rows of `found` features where the network reads `width`.
inline void check_row_width(const std::string& origin, index_t found, index_t width) {
  if (found != width)
    fail(origin, "feature width", std::to_string(width) + " (the network's input width)",
         std::to_string(found));
}
}  // namespace detail

//! Checks every label is a class in [0, classes).
inline void check_labels(const dataset& d, index_t classes) {
  detail::check_label_range(d.origin, d.labels_origin, d.labels, classes);
}

//! Checks the rows have the width a network reads.
inline void check_width(const dataset& d, index_t width) {
  detail::check_row_width(d.origin, d.width, width);
}

namespace detail {
//! Scales the `width` values at `r` to unit L2 norm: r · float(1 / ||r||), the norm summed in
//! double in index order; a row of zeros stays zero. Shared with data::preprocessing, so that a
//! model applies it to raw rows bit for bit as l2_normalize_rows did to the training rows.
inline void l2_normalize_row(float* r, index_t width) {
  double sq = 0;
  for (index_t k = 0; k < width; ++k) sq += double(r[k]) * double(r[k]);
  if (sq == 0) return;
  const float inv = float(1.0 / std::sqrt(sq));
  for (index_t k = 0; k < width; ++k) r[k] *= inv;
}
}  // namespace detail

//! Scales each row to unit L2 norm (rows of zeros stay zero). A per-row transform: nothing is
//! fitted, so source and target are treated alike.
inline void l2_normalize_rows(dataset& d) {
  for (index_t i = 0; i < d.rows; ++i)
    detail::l2_normalize_row(d.features.data() + i * d.width, d.width);
}

}  // namespace dafuse::data
