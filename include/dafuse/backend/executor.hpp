// SPDX-License-Identifier: Apache-2.0
//! @file backend/executor.hpp
//! @brief The dispatch point between a step and where it runs: `executor<System, Step>` and the
//! types every executor's interface shares.
//!
//! A step composes (slot contracts, rates, loss-scale and clip decisions, the order of phases,
//! the report); an executor owns the memory and runs each phase on its system. One
//! specialisation per kind of system: backend/host/executor.hpp for the systems whose memory the
//! host reads (Thrust's OpenMP and CPP systems), backend/device/executor.hpp for those it does not
//! (system::cuda, backend/cuda/executor.cuh; system::omp_device, its CPU stand-in).
//! `Step` is the step's description (step/step_types.hpp): its network, precision, optimizer and
//! the types they derive.
//!
//! An executor provides, with T = Step::value_type:
//!   executor(const fit_args&)            every buffer sized once; nothing allocated after
//!   initialize(seed, init)               fresh parameters, zero optimizer state
//!   input() / sparse_batch(), source_labels()   where a loader writes the next batch
//!   read(part, host span), write(part, host span)   copies of the parameters, gradients or
//!                                        optimizer state (every system)
//!   parameters(), gradients(), optimizer_state()     spans of them (host systems only)
//!   memory_bytes()
//!   queue_step(rules, phases)            one training step: begin_step, phases(exec, weights, S,
//!                                        profiler), decide_step, the update
//!                                        (backend/step_control.hpp); run at once on a host,
//!                                        queued on a device
//!   queue_gradients(rules, λ, phases)    the same without the update: compute_gradients
//!   report(), position(), set_position(step, scale), norms(), tallies(), set_profiler(p)
//!   prepare_batch(), prepare_weights()   the batch checked and readied, and the weights
//!   forward<M>(), backward<M>(input_scale, accumulate) -> ‖∂L/∂θ_M‖²
//!   label_loss(scale), domain_loss(scale), head_view()
//!   infer(rows, n, inference) / infer(sparse rows, inference)
#pragma once
#include <dafuse/config.hpp>
#include <dafuse/core/meta.hpp>

#include <array>
#include <cstdint>
#include <limits>
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

//! A head's loss (a discriminator's BCE, or a discrepancy) and how well a discriminator separates
//! the domains (0 for a head without one).
struct domain_loss_result {
  double loss = 0;      //!< mean BCE on the logits (source 0, target 1)
  double accuracy = 0;  //!< fraction of rows on the right side of 0
};

//! A part of a step's state, for the copies every executor offers (read, write).
enum class state_part {
  parameters,       //!< [param_count]
  gradients,        //!< [param_count]
  optimizer_state,  //!< [state_per_param · param_count]
};

//! What one step reports: its losses before the update, the gradient norm before clipping, and
//! the scheduled values it used.
struct step_report {
  double label_loss = 0;  //!< L_y: mean softmax cross-entropy over the source rows
  //! The head's loss before its weight λ: L_d, the mean BCE over source and target rows, for a
  //! head with G_d; the discrepancy for head::coral and head::mmd, the class confusion for
  //! head::mcc; 0 for source_only.
  double domain_loss = 0;
  double grad_norm = 0;       //!< ‖∂L/∂θ‖ over all trained parameters, before clipping
  double task_grad_norm = 0;  //!< the same over G_f and G_y
  double discriminator_grad_norm = 0;  //!< the same over G_d (0 without it)
  //! Fraction of the 2B rows G_d puts on the right side of 0 (source < 0 < target) before the
  //! update: ½ means the features fool it, 1 that the domains are apart (0 without G_d).
  double domain_accuracy = 0;
  bool skipped = false;   //!< no update: the gradients were not finite (parameters untouched)
  double lambda = 0;      //!< λ of the reversal this step
  double lr = 0;          //!< learning rate this step
  double loss_scale = 1;  //!< S the loss was scaled by this step (1 without a loss scaler)
};

//! What the update does after a step's backward: nothing (non-finite gradients), or each module's
//! range, gradient scale (clip and unscale together) and learning rate, and the clamp bound.
struct update_plan {
  bool skipped = false;                    //!< no update: the gradients were not finite
  std::array<module_update, 3> modules{};  //!< G_f, G_y, G_d
  double clip_limit = std::numeric_limits<double>::infinity();  //!< clip::value's bound
};

namespace backend {

//! Runs a step's phases on `System`. The primary template is never used: each system has a
//! specialisation.
template <class System, class Step>
class executor {
  static_assert(dependent_false<System>,
                "dafuse: no executor for this system; system::omp and system::cpp have the host "
                "executor (backend/default_system.hpp), system::omp_device includes its own with "
                "<dafuse/backend/omp_device/executor.hpp>, system::cuda with "
                "<dafuse/backend/cuda/executor.cuh> (nvcc); or name a system that has one");
};

}  // namespace backend
}  // namespace dafuse
