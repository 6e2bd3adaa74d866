// SPDX-License-Identifier: Apache-2.0
//! @file backend/step_control.hpp
//! @brief A step's decisions and state between its phases, on every system: the control block,
//! the start of a step (its rates and the head's weights) and its end (the report, the tallies
//! and the update's plan), as `DAFUSE_HOST_DEVICE` functors of one index. The device executor
//! queues them as kernels of one thread; the host executor calls them at once. So a step's report
//! is assembled in one place.
#pragma once
#include <dafuse/backend/executor.hpp>
#include <dafuse/config.hpp>
#include <dafuse/core/meta.hpp>
#include <dafuse/core/step_values.hpp>
#include <dafuse/head/head_base.hpp>
#include <dafuse/policy/clip.hpp>
#include <dafuse/policy/precision.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>

namespace dafuse::backend {

//! Steps taken and the loss scaler's state.
struct step_position {
  index_t step = 0;
  loss_scale_state scale{};
};
//! Skipped steps so far, the last of them in a row, and the first step (from 1) whose loss was not
//! finite (-1: none): what a training loop checks.
struct step_tally {
  index_t skipped = 0, skipped_in_a_row = 0, first_nonfinite = -1;
};

//! One module's part of the update: parameters [begin, end) have their gradients multiplied by
//! `scale`, then the optimizer steps with `coefficients` (the module's learning rate).
template <class Optim, class T>
struct module_rule {
  index_t begin = 0, end = 0;                               //!< parameters [begin, end)
  T scale = T(1);                                           //!< clip and unscale
  typename Optim::template coefficients<T> coefficients{};  //!< with the module's learning rate
};

//! Where a step stands and what its phases produced, in the step's memory: the step count and the
//! loss scaler, this step's rates and weights, the sums the phases write, the plan the update
//! reads, the last report and the tallies a training loop reads when it asks. On a device it is
//! written and read by kernels of one thread (begin_step, decide_step) and by the phases' sums,
//! and copied to the host only when a report or the position is asked for; the host executor
//! calls the same two functors at once. `Weights`: how many weights the head's backward takes.
template <class Optim, class T, std::size_t Weights = 1>
struct step_control {
  index_t step = 0;               //!< steps taken
  std::int64_t batches = 0;       //!< batches the resident loader has drawn (resident_loader.hpp)
  loss_scale_state scale{};       //!< the loss scaler: S and its count of finite steps
  double lambda = 0, lr = 0;      //!< this step's λ and learning rate
  double used_scale = 1;          //!< the S this step's losses are scaled by
  double label_loss_sum = 0;      //!< Σ of the source columns' cross-entropies
  double bad_label = 0;           //!< c + 1 for a source column c with a label out of range
  double domain_loss_sum = 0;     //!< Σ of the rows' BCE
  double domain_right = 0;        //!< rows G_d puts on the right side of 0
  double weight_sum = 0;          //!< Σ of CDAN+E's weights before normalisation
  double norm_sq[3] = {0, 0, 0};  //!< raw ‖∂L/∂θ‖² of G_f, G_y, G_d (scaled by S²)
  int skip = 1;                   //!< the update does nothing
  int clamp = 0;                  //!< clip::value's bound applies
  T bound = T(0);                 //!< that bound
  module_rule<Optim, T> modules[3]{};  //!< G_f, G_y, G_d
  step_report report{};                //!< the last step's report
  grad_norms norms{};                  //!< its unscaled squared norms
  index_t skipped_total = 0;           //!< steps skipped for non-finite gradients
  index_t skipped_in_a_row = 0;        //!< of them, the last ones in a row
  index_t first_nonfinite = -1;  //!< the first step (counted from 1) whose loss was not finite
  double refused_label = 0;      //!< bad_label of a step refused for a label out of range
  double weights[Weights] = {};  //!< what the head's backward takes: λ, or each term's weight

  step_position position() const { return {step, scale}; }
  //! Continues from step `at` with the loss scaler's state `s` (initialisation, resume): a
  //! training loop's tallies of non-finite losses and of skips in a row start again.
  void restart(index_t at, loss_scale_state s) {
    step = at;
    scale = s;
    first_nonfinite = -1;
    skipped_in_a_row = 0;
  }
  step_tally tally() const { return {skipped_total, skipped_in_a_row, first_nonfinite}; }
};

//! The start of a queued step: λ, the head's backward weights and the learning rate of the step
//! count, from `rules` (the step's decisions), or λ = `lambda` when it is not NaN
//! (compute_gradients).
template <class Rules, class Control>
struct begin_step {
  Rules rules;
  Control* c;
  double lambda;
  DAFUSE_HOST_DEVICE void operator()(index_t) const {
    const step_rates r = rules.rates(c->step);
    c->lambda = lambda == lambda ? lambda : r.lambda;
    rules.backward_weights(c->step, lambda, c->weights);
    c->lr = r.lr;
    c->used_scale = c->scale.scale;
    c->bad_label = 0;
  }
};

//! What a step's phases produced, as handles of values in the step's memory (or constants): the
//! losses and the domain accuracy the report gives, and the raw squared gradient norms of G_f,
//! G_y and G_d (scaled by S²).
struct step_figures {
  step_scalar label_loss, domain_loss, domain_accuracy;
  step_scalar norm_sq[3];
};

//! The end of a queued step's phases: the report from the phases' figures, the unscaled norms, and,
//! with `update`, the rules' plan (overflow skip, loss scaler, clip, rates) for the update pass,
//! the optimizer's coefficients of each module, the tallies and the step count. A step refused for
//! a label out of range changes nothing but `refused_label`.
template <class Rules, class Optim, class T, std::size_t Weights = 1>
struct decide_step {
  Rules rules;
  step_control<Optim, T, Weights>* c;
  step_figures figures;  //!< what the phases produced
  bool update;           //!< a training step (false: compute_gradients)
  bool drew_batch;       //!< the resident loader drew this step's batch: count it
  DAFUSE_HOST_DEVICE void operator()(index_t) const {
    if (drew_batch) ++c->batches;
    step_report r{};
    r.label_loss = figures.label_loss.get();
    r.domain_loss = figures.domain_loss.get();
    r.domain_accuracy = figures.domain_accuracy.get();
    r.lambda = c->lambda;
    r.loss_scale = c->used_scale;
    const grad_norms n = rules.unscaled(
        grad_norms{figures.norm_sq[0].get(), figures.norm_sq[1].get(), figures.norm_sq[2].get()},
        c->used_scale);
    c->norms = n;
    r.grad_norm = n.global();
    r.task_grad_norm = n.task();
    r.discriminator_grad_norm = n.discriminator();
    c->skip = 1;
    if (c->bad_label != 0) {
      c->refused_label = c->bad_label;
      return;
    }
    if (update) {
      r.lr = c->lr;
      const update_plan p = rules.plan(n, c->scale, c->lr);
      r.skipped = p.skipped;
      if (!p.skipped) {
        c->skip = 0;
        for (int m = 0; m < 3; ++m)
          c->modules[m] = {p.modules[m].begin, p.modules[m].end, T(p.modules[m].scale),
                           Optim::template make<T>(rules.args, p.modules[m].lr, c->step)};
        c->clamp = p.clip_limit < HUGE_VAL;
        c->bound = c->clamp ? T(p.clip_limit) : T(0);
      }
      c->skipped_total += p.skipped ? 1 : 0;
      c->skipped_in_a_row = p.skipped ? c->skipped_in_a_row + 1 : 0;
      if (c->first_nonfinite < 0 &&
          !(r.label_loss - r.label_loss == 0 && r.domain_loss - r.domain_loss == 0))
        c->first_nonfinite = c->step + 1;
      ++c->step;
    }
    c->report = r;
  }
};

}  // namespace dafuse::backend
