// SPDX-License-Identifier: Apache-2.0
//! @file data/images.hpp
//! @brief Image domains from NPY files: [N, H, W] or [N, H, W, C] uint8 or float as rows in [0, 1].
#pragma once
#include <dafuse/config.hpp>
#include <dafuse/core/error.hpp>
#include <dafuse/core/file.hpp>
#include <dafuse/data/dataset.hpp>
#include <dafuse/data/npy.hpp>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace dafuse::data {

//! Loads images `[N, H, W]` (grey) or `[N, H, W, C]` (channels last) as N rows of H·W(·C)
//! features, row-major as stored, and when `labels_path` is not empty int32 labels `[N]`.
//!
//! With `scale_to_unit` (the default) every feature ends in [0, 1]: uint8 pixels are divided by
//! 255 (in float, as numpy's `x.astype(np.float32) / 255`), float pixels (float32, or float64
//! rounded to float32 as it is read) are checked to lie in [0, 1] already and kept as they are,
//! so data scaled once is never scaled twice. Without it, all are kept as stored (uint8 255
//! becomes 255.0f). Other dtypes and ranks are errors.
inline dataset load_image_dataset(const std::filesystem::path& images_path,
                                  const std::filesystem::path& labels_path,
                                  domain side,
                                  bool scale_to_unit = true) {
  // The dtype decides the scaling, so the header is read here with npy.hpp's reader rather than
  // through load_npy_as_float, which forgets it; the data is converted as it is read.
  const dafuse::detail::input_file f(images_path, images_path.string());
  const std::string& where = f.where();
  const npy_header h = detail::read_npy_header(f, detail::npy_float_fix);
  if (h.shape.size() != 3 && h.shape.size() != 4)
    fail(where, "shape", "images [N, H, W] or [N, H, W, C]", detail::shape_text(h.shape));
  if (h.type != dtype::uint8 && !is_float(h.type))
    fail(where, "descr", "'|u1' (uint8) or float ('<f4', '<f8') images",
         detail::dtype_text(h) + "; convert with x.astype(np.float32)");
  host_array<float> x;
  if (h.type == dtype::uint8) {
    const std::size_t count = detail::checked_count(h, f.size(), where);
    x = {h.shape, dafuse::detail::allocate_values<float>(count, where,
                                                         detail::values_text(h, dtype::float32))};
    const float divisor = scale_to_unit ? 255.0f : 1.0f;
    detail::read_npy_as_float(f, h, count, x.values.data(),
                              [divisor](auto v) { return float(v) / divisor; });
  } else {
    x = detail::read_npy_values_as_float(f, h);
    const std::size_t count = x.values.size();
    if (scale_to_unit) {
      for (std::size_t i = 0; i < count; ++i) {
        const float v = x.values[i];
        if (!(v >= 0.0f && v <= 1.0f))
          fail(where, "value" + detail::index_text(h.shape, i),
               "float32 pixels in [0, 1] (pass scale_to_unit = false to keep other values as "
               "they are)",
               std::to_string(v));
      }
    }
  }

  std::vector<std::int32_t> y = load_labels(labels_path, h.shape[0], where);
  dataset d = make_dataset(where, side, std::move(x), std::move(y));
  d.labels_origin = labels_path.string();
  return d;
}

}  // namespace dafuse::data
