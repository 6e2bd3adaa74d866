// SPDX-License-Identifier: Apache-2.0
// dafuse-train's registry: the built-in families, in --list order.
#include "registry.hpp"

namespace dafuse_train {

std::vector<model_entry> all_models() {
  std::vector<model_entry> all;
  for (auto family : {digits_models(), digits_cnn_models(), moons_models(), amazon_models()})
    all.insert(all.end(), family.begin(), family.end());
  return all;
}

const compiled_entry* compiled_network() {
  return nullptr;
}

}  // namespace dafuse_train
