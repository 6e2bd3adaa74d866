// SPDX-License-Identifier: Apache-2.0
//! @file backend/executor.hpp
//! @brief The dispatch point between a step and where it runs: `executor<System, Step>` and the
//! types every executor's interface shares.
//!
//! A step composes (slot contracts, rates, loss-scale and clip decisions, the order of phases,
//! the report); an executor owns the memory and runs each phase on its system. One
//! specialisation per system: backend/host/executor.hpp for Thrust's OpenMP and CPP systems.
//! `Step` is the step's description (step/step_types.hpp): its network, precision, optimizer and
//! the types they derive.
//!
//! An executor provides, with T = Step::value_type:
//!   executor(const fit_args&)            every buffer sized once; nothing allocated after
//!   initialize(seed, init)               fresh parameters, zero optimizer state
//!   input() / sparse_batch(), source_labels()   where a loader writes the next batch
//!   parameters(), gradients(), optimizer_state(), memory_bytes()
//!   run(phases)                          runs `phases()` with the executor's threads held
//!   prepare_batch()                      checks the batch and readies it and the weights
//!   forward<M>(cols), backward<M>(cols, input_scale, accumulate) -> ‖∂L/∂θ_M‖²
//!   label_loss(scale), domain_loss(scale, source_cols)
//!   update(modules, clip_limit, step_index)
//!   infer(rows, n, inference) / infer(sparse rows, inference)
#pragma once
#include <dafuse/config.hpp>
#include <dafuse/core/meta.hpp>

#include <cstdint>
#include <span>

namespace dafuse {

//! Where `infer` writes its results for n samples; a null pointer skips that output. Each
//! sample's values are contiguous: the arrays are column-major [width, n], in host memory.
struct inference {
  std::int32_t* classes = nullptr;  //!< [n]: the class with the largest logit
  float* probabilities = nullptr;   //!< [class_count, n]: softmax of G_y's logits
  float* features = nullptr;        //!< [feature_width, n]: G_f's output h
};

//! Where a sparse batch goes: `rows` samples, source first, in CSR form: sample c's non-zeros
//! are values[k] at feature indices[k] for k in [offsets[c], offsets[c + 1]), offsets[0] = 0,
//! features ascending within a sample. The spans hold room for input_width non-zeros per sample.
template <class T>
struct sparse_batch_slots {
  std::span<std::int32_t> offsets;  //!< [rows + 1]
  std::span<std::int32_t> indices;  //!< feature of each non-zero
  std::span<T> values;              //!< value of each non-zero
};

//! What the update does to the parameters [begin, end) of one module: each gradient is
//! multiplied by `scale` (clip and unscale together) and clamped, then the optimizer steps with
//! learning rate `lr`.
struct module_update {
  index_t begin = 0;  //!< first parameter
  index_t end = 0;    //!< one past the last (begin == end: the module is not trained)
  double scale = 1;   //!< the module's gradient multiplier
  double lr = 0;      //!< the module's learning rate this step
};

//! A discriminator loss and how well the discriminator separates the domains.
struct domain_loss_result {
  double loss = 0;      //!< mean BCE on the logits (source 0, target 1)
  double accuracy = 0;  //!< fraction of rows on the right side of 0
};

namespace backend {

//! Runs a step's phases on `System`. The primary template is never used: each system has a
//! specialisation.
template <class System, class Step>
class executor {
  static_assert(dependent_false<System>,
                "dafuse: no executor for this system; include <dafuse/backend/host/executor.hpp> "
                "for system::omp and system::cpp (backend/select.hpp does), or name a system "
                "that has one");
};

}  // namespace backend
}  // namespace dafuse
