// Two Gaussian blobs a domain, for the training tests: class i mod 2 of row i sets the first
// coordinate's mean, x[i][k] = spread · N(0, 1) + (k = 0 ? mean of the class : 0) + shift.
#pragma once
#include <dafuse/config.hpp>
#include <dafuse/core/rng.hpp>
#include <dafuse/data/dataset.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace dafuse::test {

struct blob_shape {
  std::uint64_t seed;     //!< the counter_rng's seed (its stream: synthetic_data)
  float spread = 1.f;     //!< standard deviation of every coordinate
  float class0_mean = 0;  //!< first coordinate's mean for the even rows (class 0)
  float class1_mean = 2;  //!< and for the odd rows (class 1)
};

//! `rows` × `width` blobs of `shape` for `side`, moved by `shift`, named `name`; the rng draws
//! from the stream's sub-stream `sub` (by default the domain).
inline data::dataset blobs(const blob_shape& shape,
                           data::domain side,
                           index_t rows,
                           index_t width,
                           float shift,
                           std::string name,
                           std::uint32_t sub) {
  counter_rng rng(shape.seed, rng_stream::synthetic_data, sub);
  data::host_array<float> x{{std::size_t(rows), std::size_t(width)},
                            std::vector<float>(std::size_t(rows * width))};
  std::vector<std::int32_t> y(static_cast<std::size_t>(rows));
  for (index_t i = 0; i < rows; ++i) {
    y[std::size_t(i)] = std::int32_t(i % 2);
    const float mean = i % 2 ? shape.class1_mean : shape.class0_mean;
    for (index_t k = 0; k < width; ++k)
      x.values[std::size_t(i * width + k)] =
          shape.spread * rng.normal<float>() + (k == 0 ? mean : 0.f) + shift;
  }
  return data::make_dataset(std::move(name), side, std::move(x), std::move(y));
}

}  // namespace dafuse::test
