// SPDX-License-Identifier: Apache-2.0
//! @file policy/precision.hpp
//! @brief The precision slot: storage, product and accumulation types of a step.
#pragma once
#include <dafuse/config.hpp>

#include <concepts>
#include <type_traits>

namespace dafuse::precision {

//! Single precision everywhere, no loss scaling: the baseline of every comparison.
struct fp32 {
  using precision_tag = void;     //!< fills the precision slot
  using compute_type = float;     //!< activations and products
  using master_type = float;      //!< parameters and optimizer state
  using accumulate_type = float;  //!< sums inside products
};

//! Double precision everywhere: the reference the gradient checks run in (finite differences
//! need it), and a way to rule out rounding when a run misbehaves. Slow; not for training.
struct fp64 {
  using precision_tag = void;      //!< fills the precision slot
  using compute_type = double;     //!< activations and products
  using master_type = double;      //!< parameters and optimizer state
  using accumulate_type = double;  //!< sums inside products
};

}  // namespace dafuse::precision

namespace dafuse {

//! A precision policy: names its storage, compute and accumulation types.
template <class P>
concept precision_policy = requires {
  typename P::precision_tag;
  typename P::compute_type;
  typename P::master_type;
  typename P::accumulate_type;
}
&&std::is_floating_point_v<typename P::master_type>;

static_assert(precision_policy<precision::fp32>);
static_assert(precision_policy<precision::fp64>);

}  // namespace dafuse
