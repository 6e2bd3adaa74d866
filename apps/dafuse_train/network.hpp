// SPDX-License-Identifier: Apache-2.0
// dafuse-train's networks from the command line (--features, --classifier, ...): the description,
// its checks, and the C++ step type it stands for, which jit.cpp compiles once and caches.
#pragma once
#include <string>
#include <vector>

namespace dafuse_train {

//! One module of a network given on the command line: widths (input first) and the activation
//! of its hidden layers (and of every layer in G_f).
struct module_text {
  std::vector<long> widths;
  std::string activation = "relu";  //!< identity, relu, leaky_relu, sigmoid, tanh
  float negative_slope = 0.01f;     //!< leaky_relu's slope (PyTorch's default)
  bool given = false;               //!< on the command line (else the default)
  bool activation_given = false;    //!< ":ACTIVATION" was written
};

//! A network and the step's policies, as the command line or a --network file gives them.
struct network_text {
  module_text features, classifier, discriminator;
  bool sparse = false;             //!< G_f reads CSR rows (nn::sparse_input)
  std::string precision = "fp32";  //!< fp32, bf16
  std::string clip = "none";       //!< none, global_norm
  std::string head = "dann";  //!< dann, source_only, cdan, cdan_e, coral, mmd, mmd_linear, mcc,
                              //!< cdan_e+mcc, mdd
  std::string optim = "sgd";  //!< sgd, adam, adamw
  std::string schedule = "ganin";  //!< ganin, tllib, constant: λ and the learning rate over p
  bool given() const { return features.given || classifier.given || discriminator.given; }
};

//! The widths with `separator` between them ("256,128" with ",").
std::string joined(const std::vector<long>& widths, const char* separator);

//! Reads "W0,W1,...[:ACTIVATION]" for `option` (--features, ...); ACTIVATION is identity, relu,
//! leaky_relu, leaky_relu=SLOPE, sigmoid or tanh. Throws usage_error naming the option.
module_text parse_module(const std::string& option, const std::string& text);

//! Reads a --network file: one "key = value" a line (features, classifier, discriminator, sparse,
//! precision, clip, head, optim, schedule; '#' starts a comment) into `n`, over what it held.
void read_network_file(const std::string& path, network_text& n);

//! Checks the network and fills the defaults (G_d: linear from the features, or from
//! features × classes for CDAN); throws usage_error naming the option and what was expected.
void complete_network(network_text& n);

//! The C++ of the step type: `df::train_step<df::nn::dann_net<...>, ...>`.
std::string step_type_text(const network_text& n);

//! One line for --list and the JSON: "256-64 relu, 10 classes, 64-1 discriminator; fp32, dann".
std::string network_description(const network_text& n);

}  // namespace dafuse_train
