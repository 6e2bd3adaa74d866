// SPDX-License-Identifier: Apache-2.0
// dafuse-train's registry: the step types compiled into the program, by name. Each family of
// networks lives in its own translation unit (models_*.cpp), so they compile in parallel; a
// network given on the command line is compiled into a program of its own (jit.hpp).
#pragma once
#include "config.hpp"

#include <span>
#include <string_view>
#include <vector>

namespace dafuse_train {

//! The run-time defaults a model trains with when the command line does not say otherwise (those
//! of the example the network comes from).
struct model_defaults {
  long steps = 3000;
  long batch = 64;
  double lr = 0.01;
  double momentum = 0.9;
  double lambda_max = 1.0;
};

//! The image a convolutional G_f reads (nn::image<H, W, C>); all zero for rows of features.
struct image_shape {
  long height = 0, width = 0, channels = 0;
  constexpr bool given() const { return height > 0; }
};

//! One pre-instantiated step type.
struct model_entry {
  std::string_view name;                          //!< --model NAME
  std::string_view description;                   //!< network and policies, for --list
  long input_width;                               //!< features per row the data must have
  long classes;                                   //!< label range [0, classes)
  bool sparse;                                    //!< reads CSR data (nn::sparse_input)
  model_defaults defaults;                        //!< the example's run-time values
  int (*run)(const config&, const model_entry&);  //!< loads the data, trains, reports
  image_shape image{};                            //!< the images G_f reads (conv nets only)
};

//! A network given on the command line, compiled into a program of its own (jit.cpp).
struct compiled_entry {
  model_entry model;
  std::string_view step_type;  //!< the step type's C++ (step_type_text)
};

//! The models of each family (defined in models_*.cpp).
std::span<const model_entry> digits_models();
std::span<const model_entry> digits_cnn_models();
std::span<const model_entry> moons_models();
std::span<const model_entry> amazon_models();

//! Every model, in --list order (registry.cpp).
std::vector<model_entry> all_models();

//! The network given on the command line that this program was compiled for (jit.cpp), or
//! nullptr in dafuse-train itself.
const compiled_entry* compiled_network();

}  // namespace dafuse_train
