// SPDX-License-Identifier: Apache-2.0
//! @file step/step_types.hpp
//! @brief `step_types`: a step's slot contracts, the types and sizes its policies derive, its
//! run-time checks and its report — what train_step, eager_step and every executor share.
#pragma once
#include <dafuse/backend/executor.hpp>
#include <dafuse/config.hpp>
#include <dafuse/core/half.hpp>
#include <dafuse/core/meta.hpp>
#include <dafuse/head/head_base.hpp>
#include <dafuse/head/source_only.hpp>
#include <dafuse/nn/dann_net.hpp>
#include <dafuse/policy/arguments.hpp>
#include <dafuse/policy/clip.hpp>
#include <dafuse/policy/loader.hpp>
#include <dafuse/policy/optim.hpp>
#include <dafuse/policy/precision.hpp>
#include <dafuse/policy/schedule.hpp>

#include <cmath>
#include <string>
#include <type_traits>

namespace dafuse {

template <class Net, class Loader, class Precision, class Clip, class Head, class Optim>
struct step_types;

//! The messages of the slot checks: each failed one is reported where the user wrote the alias.
//! Kept out of slot_check: clang treats a class whose static_assert failed as broken, and
//! slot_check's `types` must stay usable.
template <class Net, class Loader, class Precision, class Clip, class Head, class Optim>
struct slot_asserts {
  static_assert(nn::is_dann_net<Net>::value,
                "dafuse: train_step's 1st argument must be the network, e.g. "
                "dann_net<features, classifier, discriminator>; the order is <Net, Loader, "
                "Precision, Clip, Head, Optim>");
  static_assert(loader_policy<Loader>,
                "dafuse: train_step's 2nd argument must be a loader policy such as loader::sync "
                "or loader::resident; the order is <Net, Loader, Precision, Clip, Head, Optim>");
  static_assert(precision_policy<Precision>,
                "dafuse: train_step's 3rd argument must be a precision policy such as "
                "precision::fp32 or precision::bf16; the order is <Net, Loader, Precision, Clip, "
                "Head, Optim>");
  static_assert(clip_policy<Clip>,
                "dafuse: train_step's 4th argument must be a clip policy such as clip::none or "
                "clip::global_norm; the order is <Net, Loader, Precision, Clip, Head, Optim>");
  static_assert(head_policy<Head>,
                "dafuse: train_step's 5th argument must be a head policy such as "
                "head::dann<schedule::ganin>, head::cdan<> or head::source_only<>; the order is "
                "<Net, Loader, Precision, Clip, Head, Optim>");
  static_assert(optim_policy<Optim>,
                "dafuse: train_step's 6th argument must be an optimizer policy such as "
                "optim::sgd; the order is <Net, Loader, Precision, Clip, Head, Optim>");
};

//! The slots of a step <Net, Loader, Precision, Clip, Head, Optim>, checked. A step whose check
//! fails is built from `types` = a set that fits (nn's smallest network, source_only, SGD), so
//! that the compiler reports the failed check and none of what would follow from it.
template <class Net, class Loader, class Precision, class Clip, class Head, class Optim>
struct slot_check {
  static constexpr bool reported =
      sizeof(slot_asserts<Net, Loader, Precision, Clip, Head, Optim>) > 0;
  static constexpr bool slots_valid = nn::is_dann_net<Net>::value && loader_policy<Loader> &&
                                      precision_policy<Precision> && clip_policy<Clip> &&
                                      head_policy<Head> && optim_policy<Optim>;
  // The head's own checks of the network's shapes (what G_d reads, its one logit); each failed
  // check says why in its own static_assert.
  static constexpr bool network_fits_head = [] {
    if constexpr (slots_valid)
      return head::check_contract<Head>() && Head::template check_network<Net>();
    else
      return true;
  }();
  //! The step can be built; naming `reported` instantiates the slot messages.
  // (`reported` last: clang cannot evaluate it when a message fired, and need not then.)
  static constexpr bool valid = slots_valid && network_fits_head && reported;
  using types = std::conditional_t<
      valid,
      step_types<Net, Loader, Precision, Clip, Head, Optim>,
      step_types<nn::dann_net<nn::linear<2, 2>, nn::linear<2, 2>, nn::linear<2, 1>>,
                 loader::sync,
                 precision::fp32,
                 clip::none,
                 head::source_only<>,
                 optim::sgd>>;
};

//! step_types of checked slots: train_step and eager_step derive from it.
template <class Net, class Loader, class Precision, class Clip, class Head, class Optim>
using checked_step_types = typename slot_check<Net, Loader, Precision, Clip, Head, Optim>::types;

//! What a step's slots derive: train_step and eager_step derive from it (through
//! checked_step_types); executors read it.
template <class Net, class Loader, class Precision, class Clip, class Head, class Optim>
struct step_types {
  using net_type = Net;                                         //!< the network
  using loader_type = Loader;                                   //!< how batches arrive
  using precision_type = Precision;                             //!< number formats
  using clip_type = Clip;                                       //!< gradient clipping
  using head_type = Head;                                       //!< adaptation head
  using optim_type = Optim;                                     //!< optimizer
  using schedule_type = typename Head::schedule_type;           //!< λ and lr schedule
  using value_type = typename Precision::master_type;           //!< parameters and activations
  using accumulate_type = typename Precision::accumulate_type;  //!< sums
  using loss_scale_type = typename Precision::loss_scale_type;  //!< how S is chosen
  //! Format every stored value is rounded to (fp32/fp64: none, bf16/fp16: a 16-bit one).
  static constexpr number_format compute_format = Precision::compute_format;
  static constexpr bool mixed = is_narrow<compute_format>;  //!< a 16-bit compute format
  using arguments = fit_args;                               //!< run-time values
  using feature_stack = typename Net::feature_stack;
  using classifier_stack = typename Net::classifier_stack;
  using discriminator_stack = typename Net::discriminator_stack;

  //! The batch holds B target rows after the B source rows.
  static constexpr bool draws_target_rows = Head::draws_target_rows;
  //! G_d is run and trained; what it reads is Head::discriminator_reads.
  static constexpr bool trains_discriminator =
      Head::discriminator_reads != discriminator_input::none;
  //! G_y runs on the target rows too (their softmax conditions the head).
  static constexpr bool classifier_reads_target = Head::classifier_reads_target;
  //! The head has a loss of its own: the step runs its forward and backward.
  static constexpr bool head_has_loss =
      trains_discriminator || Head::writes_feature_gradient || Head::writes_logit_gradient;
  //! The head's backward writes δh on all rows (G_y's backward then adds to it).
  static constexpr bool head_writes_features = Head::writes_feature_gradient;
  //! The head's backward writes the target rows' δz: G_y's backward runs on all rows.
  static constexpr bool head_writes_logits = Head::writes_logit_gradient;
  static constexpr index_t input_width = Net::input_width;
  //! The batch is sparse (G_f is an nn::sparse_input module): fill sparse_batch(), not input().
  static constexpr bool sparse_input = Net::sparse_input;
  static constexpr index_t class_count = Net::class_count;
  static constexpr index_t feature_width = Net::feature_width;  //!< width of G_f's output h
  //! Parameters this step trains: all of them with a discriminator, G_f + G_y without.
  static constexpr index_t trained_param_count =
      trains_discriminator ? Net::param_count : Net::task_param_count;

  //! Rows a step reads per call for batch B: B source then B target (B without target rows).
  static constexpr index_t rows_for(index_t batch) { return draws_target_rows ? 2 * batch : batch; }
  //! Rows G_y runs on: the B source rows, or all rows when the head reads its target outputs.
  static constexpr index_t classifier_rows_for(index_t batch) {
    return classifier_reads_target ? rows_for(batch) : batch;
  }
  //! Rows G_y's backward runs on: the B source rows, or all rows when the head writes the target
  //! rows' logit gradient.
  static constexpr index_t classifier_backward_rows_for(index_t batch) {
    return head_writes_logits ? rows_for(batch) : batch;
  }

  //! λ (the head's weight) and the learning rate of step `step_index`.
  static step_rates rates(const fit_args& a, index_t step_index) {
    return scheduled_rates<Head>(a, step_index);
  }

  //! Run-time checks of every slot's arguments; the message says which field and what to do.
  static status can_implement(const fit_args& a) {
    if (a.batch < 1)
      return {"fit_args.batch: expected at least 1 row per domain, found " +
              std::to_string(a.batch)};
    if (a.steps < 1)
      return {"fit_args.steps: expected at least 1 step, found " + std::to_string(a.steps)};
    if (!(a.lr > 0) || !std::isfinite(a.lr))
      return {"fit_args.lr: expected a finite learning rate > 0, found " + std::to_string(a.lr)};
    for (const float m : {a.lr_mult.features, a.lr_mult.classifier, a.lr_mult.discriminator})
      if (!(m >= 0) || !std::isfinite(m))
        return {"fit_args.lr_mult: expected finite multipliers >= 0, found " + std::to_string(m)};
    if (a.eval_chunk < 1)
      return {"fit_args.eval_chunk: expected at least 1, found " + std::to_string(a.eval_chunk)};
    if (a.sparse_nonzeros < 0)
      return {
          "fit_args.sparse_nonzeros: expected 0 (room for the densest batch) or a count of "
          "non-zeros, found " +
          std::to_string(a.sparse_nonzeros)};
    for (const status& s : {Clip::can_implement(a), Head::can_implement(a), Optim::can_implement(a),
                            loss_scale_type::can_implement(a)})
      if (!s) return s;
    return status::ok();
  }
};

}  // namespace dafuse
