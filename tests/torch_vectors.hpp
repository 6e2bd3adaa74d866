// Reading PyTorch reference vectors (tests/data/torch, made by the tools/make_*_vectors.py
// scripts) into a step: names, the parameter layout, the batch.
#pragma once
#include <dafuse/data/npy.hpp>

#include "check.hpp"

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace dafuse::test {

inline std::filesystem::path torch_vectors_dir() {
  return source_dir() / "tests" / "data" / "torch";
}

//! tests/data/torch/<name>.npy as floats.
inline std::vector<float> load_vector(const std::string& name) {
  return data::load_npy<float>(torch_vectors_dir() / (name + ".npy")).values;
}

//! tests/data/torch/<name>.npy as int32 values.
inline std::vector<std::int32_t> load_int_vector(const std::string& name) {
  return data::load_npy<std::int32_t>(torch_vectors_dir() / (name + ".npy")).values;
}

//! PyTorch flattens each weight row-major [out, in]; dafuse stores it column-major [out, in].
//! Biases are the same in both. PyTorch's tensors follow each other; dafuse starts each module at
//! its aligned offset (nn::dann_net::module_alignment) with zeros between. Converts a flat PyTorch
//! parameter vector of Net to dafuse's layout; `shapes` holds (out, in) per weight and (n, 1) per
//! bias, in parameter order.
template <class Net>
std::vector<float> to_dafuse_layout(const std::vector<float>& torch_flat,
                                    const std::vector<std::int32_t>& shapes) {
  // A weight and a bias per layer, module by module.
  const std::size_t module_tensors[] = {2 * Net::feature_stack::depth,
                                        2 * Net::classifier_stack::depth,
                                        2 * Net::discriminator_stack::depth};
  const std::size_t module_offsets[] = {Net::features_offset, Net::classifier_offset,
                                        Net::discriminator_offset};
  std::vector<float> out(std::size_t(Net::param_count), 0.0f);
  std::size_t from = 0, t = 0;
  for (std::size_t module = 0; module < 3; ++module) {
    std::size_t to = module_offsets[module];
    for (const std::size_t end = t + module_tensors[module]; t < end; ++t) {
      REQUIRE(2 * t + 1 < shapes.size());
      const std::size_t rows = std::size_t(shapes[2 * t]), cols = std::size_t(shapes[2 * t + 1]);
      for (std::size_t r = 0; r < rows; ++r)
        for (std::size_t c = 0; c < cols; ++c)
          out[to + c * rows + r] = torch_flat[from + r * cols + c];
      from += rows * cols;
      to += rows * cols;
    }
  }
  REQUIRE(2 * t == shapes.size());
  REQUIRE(from == torch_flat.size());
  return out;
}

//! Loads <prefix>x_source, <prefix>x_target and <prefix>y_source into the step's batch: source
//! rows are columns 0..B-1 and target rows the next B; a row-major [B, d] array is the
//! column-major [d, B] block the step reads.
template <class Step>
void load_torch_batch(Step& step, const std::string& prefix) {
  const std::vector<float> xs = load_vector(prefix + "x_source"),
                           xt = load_vector(prefix + "x_target");
  auto x = step.input();
  REQUIRE(std::size_t(x.size()) == xs.size() + xt.size());
  std::copy(xs.begin(), xs.end(), x.data);
  std::copy(xt.begin(), xt.end(), x.data + xs.size());
  const std::vector<std::int32_t> ys = load_int_vector(prefix + "y_source");
  REQUIRE(ys.size() == step.source_labels().size());
  std::copy(ys.begin(), ys.end(), step.source_labels().begin());
}

}  // namespace dafuse::test
