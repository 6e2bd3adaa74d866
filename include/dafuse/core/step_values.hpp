// SPDX-License-Identifier: Apache-2.0
//! @file core/step_values.hpp
//! @brief What a step's phases pass between each other on any system: scalars that may live in
//! the step's memory (`step_scalar`), and the K values one index adds to a sum (`sum_terms`).
//!
//! A device step queues its phases once and replays them, so a value that a phase computes (a
//! loss) or that changes from step to step (λ, the loss scale S) reaches the next phase as a
//! handle to the step's memory, read when the phase runs, not as a number known when it was
//! queued. A host step's phases run at once and pass constants; code written over step_scalar
//! (the heads' functors) serves both.
#pragma once
#include <dafuse/config.hpp>
#include <dafuse/core/meta.hpp>

namespace dafuse {

//! factor · *value, a value in the step's memory that a phase reads when it runs (λ, the loss
//! scale S, a loss), or the constant `factor` when value is null.
struct step_scalar {
  const double* value = nullptr;  //!< the step's memory, or null for a constant
  double factor = 1;              //!< multiplies *value (or is the constant)

  step_scalar() = default;
  //! A constant.
  DAFUSE_HOST_DEVICE constexpr step_scalar(double constant) : factor(constant) {}
  //! factor · *v, v in the step's memory.
  DAFUSE_HOST_DEVICE constexpr step_scalar(const double* v, double f) : value(v), factor(f) {}
  DAFUSE_HOST_DEVICE constexpr step_scalar operator-() const { return {value, -factor}; }
  //! The same handle times `by`.
  DAFUSE_HOST_DEVICE constexpr step_scalar scaled(double by) const { return {value, factor * by}; }
  DAFUSE_HOST_DEVICE constexpr bool constant() const { return value == nullptr; }
  //! The value (in a phase, or on a system whose memory the host reads).
  DAFUSE_HOST_DEVICE double get() const { return value ? factor * *value : factor; }
};

//! K values that a function computes for one index, to be added up over the indices (map_sum).
template <int K>
struct sum_terms {
  double terms[K];
};

//! out[k] = Σ_i f(i).terms[k] over i in [0, n), added in index order on the calling thread: the
//! map_sum of the systems that run on the CPU (the host executor's head view, system::omp_device).
template <int K, class F>
void sequential_map_sum(index_t n, const F& f, double* out) {
  double s[K] = {};
  for (index_t i = 0; i < n; ++i) {
    const sum_terms<K> v = f(i);
    for (int k = 0; k < K; ++k) s[k] += v.terms[k];
  }
  for (int k = 0; k < K; ++k) out[k] = s[k];
}

}  // namespace dafuse
