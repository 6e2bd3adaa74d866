// SPDX-License-Identifier: Apache-2.0
#include "run_data.hpp"

#include <dafuse/core/error.hpp>
#include <dafuse/data/images.hpp>
#include <dafuse/data/npy.hpp>
#include <dafuse/data/transform.hpp>

#include <bit>
#include <cstddef>
#include <cstdio>
#include <filesystem>
#include <utility>

namespace dafuse_train {

namespace df = dafuse;

namespace {

bool is_npy_file(const std::string& path) {
  return path.size() > 4 && path.compare(path.size() - 4, 4, ".npy") == 0;
}

// "(N, 16, 16) or (N, 16, 16, 1)": the NPY shapes that hold images of `image`.
std::string image_shapes_text(const image_shape& image) {
  const std::string hw = std::to_string(image.height) + ", " + std::to_string(image.width);
  const std::string hwc = "(N, " + hw + ", " + std::to_string(image.channels) + ")";
  return image.channels == 1 ? "(N, " + hw + ") or " + hwc : hwc;
}

// Says on stderr that the NPY file `path` was converted on load, when its dtype is not the one
// trained on (`as`): "X.npy: float64 converted to float32". uint8 features are left unsaid
// (read as before: images scaled by 1/255), and so is a file whose header cannot be read.
void note_conversion(const std::string& path, df::data::dtype as) {
  df::data::npy_header h;
  try {
    h = df::data::read_npy_header(path);
  } catch (const df::error&) {
    return;
  }
  const bool big = h.byte_order != std::endian::little;
  if ((h.type == as && !big) ||
      (as == df::data::dtype::float32 && h.type == df::data::dtype::uint8))
    return;
  std::fprintf(stderr, "%s: %s%s converted to %s\n", path.c_str(),
               std::string(df::data::name_of(h.type)).c_str(), big ? " (big-endian)" : "",
               std::string(df::data::name_of(as)).c_str());
}

}  // namespace

df::data::dataset load_dense(const std::string& features,
                             const std::string& labels,
                             df::data::domain side) {
  if (!is_npy_file(features))
    throw df::error(features +
                    ": features: expected an NPY file (this model reads dense rows), "
                    "found another path");
  // Only the header is read here (however long it is): uint8 images are scaled by 1/255.
  const df::data::npy_header h = [&] {
    try {
      return df::data::read_npy_header(features);
    } catch (const df::error&) {
      return df::data::npy_header{};  // load_dataset reports it
    }
  }();
  if (h.type == df::data::dtype::uint8 && (h.shape.size() == 3 || h.shape.size() == 4))
    return df::data::load_image_dataset(features, labels, side);
  return df::data::load_dataset(features, labels, side);
}

void check_image_file(const std::string& features,
                      const image_shape& image,
                      std::string_view model) {
  if (!is_npy_file(features)) return;
  df::data::npy_header h;
  try {
    h = df::data::read_npy_header(features);
  } catch (const df::error&) {
    return;
  }
  const std::vector<std::size_t>& s = h.shape;
  const auto is = [&](std::size_t d, long v) { return s.size() > d && s[d] == std::size_t(v); };
  const bool grey = s.size() == 3 && image.channels == 1;
  const bool channels_last = s.size() == 4 && is(3, image.channels);
  if (!((grey || channels_last) && is(1, image.height) && is(2, image.width)))
    throw df::error(features + ": shape: expected images " + image_shapes_text(image) + " (model " +
                    std::string(model) + " reads " + std::to_string(image.height) + " x " +
                    std::to_string(image.width) + " x " + std::to_string(image.channels) +
                    " images, channels last), found " + df::data::detail::shape_text(s));
}

df::data::sparse_dataset load_sparse(const std::string& prefix,
                                     std::string labels,
                                     df::data::domain side,
                                     long width,
                                     bool labels_required) {
  if (is_npy_file(prefix))
    throw df::error(prefix +
                    ": features: expected a CSR prefix P with P_indptr.npy, "
                    "P_indices.npy and P_data.npy (this model reads sparse rows), found "
                    "an NPY file");
  if (labels.empty() && (labels_required || std::filesystem::exists(prefix + "_labels.npy")))
    labels = prefix + "_labels.npy";
  return df::data::load_sparse_dataset(prefix, labels, side, df::index_t(width));
}

void note_conversions(const config& c, bool sparse) {
  using df::data::dtype;
  for (const auto& [x, y] : {std::pair{c.source, c.source_labels},
                             {c.target, c.target_labels},
                             {c.target_test, c.target_test_labels}}) {
    if (x.empty()) continue;
    if (sparse) {
      note_conversion(x + "_data.npy", dtype::float32);
      note_conversion(x + "_indptr.npy", dtype::int32);
      note_conversion(x + "_indices.npy", dtype::int32);
      const std::string labels = y.empty() ? x + "_labels.npy" : y;
      if (std::filesystem::exists(labels)) note_conversion(labels, dtype::int32);
    } else {
      note_conversion(x, dtype::float32);
      if (!y.empty()) note_conversion(y, dtype::int32);
    }
  }
}

df::data::preprocessing preprocess(const std::vector<std::string>& steps,
                                   run_data<df::data::dataset>& d) {
  using df::data::preprocess_kind;
  df::data::preprocessing fitted;
  std::vector<df::data::dataset*> all{&d.source, &d.target};
  if (d.target_test) all.push_back(&*d.target_test);
  for (const std::string& s : steps) {
    if (s == "none" || s.empty()) continue;
    if (s == "standardize") {
      df::data::standardize t;
      t.fit(d.source, d.target);
      for (df::data::dataset* x : all) t.apply(*x);
      fitted.add_standardize(t.statistics(df::data::domain::target));
    } else if (s == "l2") {
      for (df::data::dataset* x : all) df::data::l2_normalize_rows(*x);
      fitted.add(preprocess_kind::l2);
    } else if (s == "log1p") {
      df::data::log1p t;
      for (df::data::dataset* x : all) t.apply(*x);
      fitted.add(preprocess_kind::log1p);
    } else if (s == "binarize") {
      df::data::binarize t;
      for (df::data::dataset* x : all) t.apply(*x);
      fitted.add(preprocess_kind::binarize, t.threshold);
    } else {
      throw usage_error("--preprocess: expected none, standardize, l2, log1p or binarize, found '" +
                        s + "'");
    }
  }
  return fitted;
}

df::data::preprocessing preprocess(const std::vector<std::string>& steps,
                                   run_data<df::data::sparse_dataset>& d) {
  using df::data::preprocess_kind;
  df::data::preprocessing fitted;
  std::vector<df::data::sparse_dataset*> all{&d.source, &d.target};
  if (d.target_test) all.push_back(&*d.target_test);
  for (const std::string& s : steps) {
    if (s == "none" || s.empty()) continue;
    for (df::data::sparse_dataset* x : all) {
      if (s == "l2")
        df::data::l2_normalize_rows(*x);
      else if (s == "log1p")
        df::data::log1p_values(*x);
      else if (s == "binarize")
        df::data::binarize_values(*x);
      else
        throw usage_error(
            "--preprocess: expected none, l2, log1p or binarize for CSR data, found '" + s + "'");
    }
    fitted.add(s == "l2"      ? preprocess_kind::l2
               : s == "log1p" ? preprocess_kind::log1p
                              : preprocess_kind::binarize_nonzero);
  }
  return fitted;
}

}  // namespace dafuse_train
