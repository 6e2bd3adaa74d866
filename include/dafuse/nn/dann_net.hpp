// SPDX-License-Identifier: Apache-2.0
//! @file nn/dann_net.hpp
//! @brief A DANN network: feature extractor G_f, label classifier G_y, domain discriminator G_d.
//!
//! Ganin et al., JMLR 2016, figure 1: h = G_f(x); class logits G_y(h); G_d, whose input and
//! output the adaptation head fixes (head::dann: one domain logit G_d(R_λ(h)), R_λ the gradient
//! reversal of nn/grad_reversal.hpp; head::cdan: G_d reads softmax(G_y(h)) ⊗ h). All parameters
//! live in one flat buffer in the order G_f, G_y, G_d, each layer's W (column-major [out, in]) then
//! b, so clipping and the optimizer update are one pass over contiguous memory. Each module starts
//! on a multiple of module_alignment values; the few values of padding before G_y and G_d belong to
//! no layer and stay zero (see module_alignment).
#pragma once
#include <dafuse/config.hpp>
#include <dafuse/core/meta.hpp>
#include <dafuse/core/rng.hpp>
#include <dafuse/nn/dense.hpp>
#include <dafuse/nn/init.hpp>

#include <algorithm>
#include <cstdint>
#include <type_traits>

namespace dafuse::nn {

//! The three modules of a DANN network, as a step and its executor name them.
enum class dann_module { features, classifier, discriminator };

template <class Features, class Classifier, class Discriminator>
struct dann_net {
  static_assert(module_spec<Features>,
                "dafuse: dann_net's first argument (feature extractor) must be a module such as "
                "nn::mlp<In, Hidden..., Out, nn::relu> or nn::linear<In, Out>");
  static_assert(module_spec<Classifier>,
                "dafuse: dann_net's second argument (label classifier) must be a module such as "
                "nn::linear<Features, Classes>");
  static_assert(module_spec<Discriminator>,
                "dafuse: dann_net's third argument (domain discriminator) must be a module such "
                "as nn::mlp<Features, Hidden, 1, nn::relu>");
  static_assert(Classifier::in == Features::out,
                "dafuse: the label classifier's input width must equal the feature extractor's "
                "output width");
  static_assert(Classifier::out >= 2,
                "dafuse: the label classifier needs at least two outputs (one logit per class)");
  static_assert(!reads_sparse_input<Classifier> && !reads_sparse_input<Discriminator>,
                "dafuse: only the feature extractor can read sparse input (nn::sparse_input); the "
                "classifier and the discriminator read the dense features");

  using feature_stack = typename Features::template stack<true>;              //!< G_f, activated
  using classifier_stack = typename Classifier::template stack<false>;        //!< G_y, logits
  using discriminator_stack = typename Discriminator::template stack<false>;  //!< G_d, a logit

  static constexpr index_t input_width = feature_stack::in;  //!< width of a data row
  //! The data rows are sparse (CSR): G_f is an nn::sparse_input module.
  static constexpr bool sparse_input = reads_sparse_input<Features>;
  static constexpr index_t feature_width = feature_stack::out;   //!< width of h
  static constexpr index_t class_count = classifier_stack::out;  //!< number of classes

  //! Each module's first parameter sits at a multiple of this many values: 64 bytes of fp32, one
  //! cache line and one AVX-512 vector, so that no 16-value load or store of a column whose
  //! length is a multiple of 16 touches two lines (docs/benchmarks.md, "Each module on a 64-byte
  //! boundary").
  static constexpr index_t module_alignment = 16;

  //! First parameter of each module in the flat buffer.
  static constexpr index_t features_offset = 0;
  static constexpr index_t classifier_offset =
      round_up(feature_stack::param_count, module_alignment);
  static constexpr index_t discriminator_offset =
      round_up(classifier_offset + classifier_stack::param_count, module_alignment);
  //! Parameters of G_f and G_y with the padding after each: what a source-only step trains.
  static constexpr index_t task_param_count = discriminator_offset;
  static constexpr index_t param_count = discriminator_offset + discriminator_stack::param_count;

  //! Module M's layer stack.
  template <dann_module M>
  using stack = std::conditional_t<
      M == dann_module::features,
      feature_stack,
      std::conditional_t<M == dann_module::classifier, classifier_stack, discriminator_stack>>;
  //! First parameter of module M in the flat buffer.
  template <dann_module M>
  static constexpr index_t offset = M == dann_module::features     ? features_offset
                                    : M == dann_module::classifier ? classifier_offset
                                                                   : discriminator_offset;
};

template <class T>
struct is_dann_net : std::false_type {};
template <class F, class Y, class D>
struct is_dann_net<dann_net<F, Y, D>> : std::true_type {};

//! Draws a network's initial parameters from `seed` into `params` ([Net::param_count], host
//! memory): G_f, then G_y, then G_d, from one stream, with the padding between modules zero.
//! Every execution initialises through here, so equal seeds give equal weights.
template <class Net, class T>
void initialize_parameters(T* params, std::uint64_t seed, weight_init init) {
  std::fill_n(params, Net::param_count, T(0));
  counter_rng rng(seed, rng_stream::init);
  initialize<typename Net::feature_stack>(params + Net::features_offset, rng, init);
  initialize<typename Net::classifier_stack>(params + Net::classifier_offset, rng, init);
  initialize<typename Net::discriminator_stack>(params + Net::discriminator_offset, rng, init);
}

}  // namespace dafuse::nn
