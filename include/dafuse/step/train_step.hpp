// SPDX-License-Identifier: Apache-2.0
//! @file step/train_step.hpp
//! @brief `train_step`: one statically composed DANN training step, run by its system's executor.
//!
//! One call of `run()` does, on the batch the loader placed in `input()` (B source columns, then
//! B target columns when the head draws them): G_f forward on all rows; G_y forward on the source
//! rows (all rows when the head reads them) and softmax cross-entropy on the source rows; the
//! head's forward and loss (DANN: G_d on h and BCE, source = 0, target = 1); the backward of the
//! head into δh (DANN: the reversal's −λ folded into G_d's input gradient), of G_y and of G_f;
//! the squared norms of the gradients as they are produced; then one pass that clips and updates
//! every parameter. Nothing is allocated after construction.
//!
//! The step composes: slot contracts (step_types), rates from the schedule, the loss-scale and
//! clip decisions, the order of the phases and the report. Where memory lives and how each phase
//! runs is its executor's (backend/executor.hpp), picked by the system (backend/select.hpp).
//!
//! With a loss scaler the loss gradient is multiplied by S; the gradients' squared norms,
//! accumulated as they are written, are divided by S² (so clipping sees unscaled norms and a
//! non-finite norm is the overflow check), and 1/S joins the clip scale that the update pass
//! multiplies each gradient by: unscaling, the overflow check and clipping cost no pass of their
//! own, and the step always unscales before it clips.
#pragma once
#include <dafuse/config.hpp>

#include <dafuse/backend/executor.hpp>
#include <dafuse/backend/select.hpp>
#include <dafuse/core/error.hpp>
#include <dafuse/core/meta.hpp>
#include <dafuse/core/profiler.hpp>
#include <dafuse/nn/dann_net.hpp>
#include <dafuse/policy/arguments.hpp>
#include <dafuse/policy/clip.hpp>
#include <dafuse/policy/precision.hpp>
#include <dafuse/policy/schedule.hpp>
#include <dafuse/step/step_types.hpp>

#include <array>
#include <cmath>
#include <cstdint>
#include <new>
#include <span>
#include <string>
#include <type_traits>

namespace dafuse {

namespace detail {
//! A step's 7th argument, checked: anything but a system says so once, and the step is then
//! built for the default system (so that nothing else is reported).
template <class System>
struct system_asserts {
  static_assert(system::system_policy<System>,
                "dafuse: train_step's 7th argument, when given, is where the step runs: a system "
                "such as system::omp (the default) or system::cpp; the policies are the six "
                "before it, <Net, Loader, Precision, Clip, Head, Optim>");
};
template <class System>
struct system_check {
  static constexpr bool reported = sizeof(system_asserts<System>) > 0;
  static constexpr bool valid = system::system_policy<System> && reported;  // as in slot_check
  using type = std::conditional_t<valid, System, backend::default_system>;
};
}  // namespace detail

//! The six policy slots, in order (step_types checks each where the alias is written), and
//! System: where memory lives and the phases run, system::omp (OpenMP threads) unless given;
//! system::cpp runs everything on the calling thread.
template <class Net,
          class Loader,
          class Precision,
          class Clip,
          class Head,
          class Optim,
          class System = backend::default_system>
class train_step : public checked_step_types<Net, Loader, Precision, Clip, Head, Optim> {
  using types = checked_step_types<Net, Loader, Precision, Clip, Head, Optim>;
  using module = nn::dann_module;

 public:
  using system_type = typename detail::system_check<System>::type;  //!< where it all runs
  using executor_type = backend::executor<system_type, types>;      //!< runs the phases there
  using typename types::clip_type;
  using typename types::head_type;
  using typename types::loss_scale_type;
  using typename types::net_type;
  using typename types::schedule_type;
  using typename types::value_type;
  using types::can_implement;
  using types::draws_target_rows;
  using types::sparse_input;
  using types::trained_param_count;
  using types::trains_discriminator;
  using sparse_batch_slots = dafuse::sparse_batch_slots<value_type>;  //!< a sparse batch's slots
  using inference = dafuse::inference;                                //!< where infer() writes

  //! Sizes and allocates everything once, and initialises the parameters from args.seed.
  explicit train_step(const fit_args& args) try : args_(checked(args)), exec_(args_) {
    initialize_parameters(args_.seed);
  } catch (const std::bad_alloc&) {
    // The buffers are sized by the batch: name it rather than let a bare bad_alloc through.
    throw error("train_step: cannot allocate the step's buffers for fit_args.batch = " +
                std::to_string(args.batch) + " (and eval_chunk = " +
                std::to_string(args.eval_chunk) + "): out of memory; use a smaller batch");
  }

  //! Draws fresh parameters from `seed` and clears the optimizer state and step count.
  void initialize_parameters(std::uint64_t seed) {
    exec_.initialize(seed, args_.init);
    step_index_ = 0;
    loss_scale_ = {loss_scale_type::initial(args_), 0};
  }

  //! Rows the step reads per call: B source then B target (B only when the head draws no target
  //! rows).
  index_t feature_rows() const { return types::rows_for(args_.batch); }

  //! The batch the loader fills: [input_width, feature_rows()], source columns first.
  matrix_view<value_type> input() requires(!sparse_input) { return exec_.input(); }

  //! Where a sparse batch goes (sparse_input only): feature_rows() samples, source first, in CSR
  //! form (see sparse_batch_slots in backend/executor.hpp).
  sparse_batch_slots sparse_batch() requires sparse_input { return exec_.sparse_batch(); }
  //! The source rows' class labels: [B], each in [0, class_count).
  std::span<std::int32_t> source_labels() { return exec_.source_labels(); }

  //! One training step on input() and source_labels(): forward, losses, backward, clip, update.
  step_report run() {
    step_report report;
    exec_.run([&] { report = train_once(); });
    return report;
  }

  //! Forward and backward only: fills gradients() for the current parameters with reversal
  //! weight λ and returns the losses; no parameter changes. Used by run() and by gradient checks.
  step_report compute_gradients(double lambda) {
    step_report report;
    exec_.run([&] { report = gradients_of_batch(lambda); });
    return report;
  }

  //! Runs G_f and G_y (in evaluation chunks of fit_args::eval_chunk samples) on `n` rows stored
  //! row-major at `rows` ([n, input_width]) and writes what `out` asks for. Validators read the
  //! probabilities and features; nothing is trained.
  template <class In>
  void infer(const In* rows, index_t n, inference out) requires(!sparse_input) {
    exec_.infer(rows, n, out);
  }
  //! The same for the samples of a sparse matrix (sparse_input only): `rows` is [input_width, n],
  //! one sample per column, e.g. data::sparse_columns() of a CSR data set.
  void infer(sparse_matrix_view<const value_type> rows, inference out) requires sparse_input {
    exec_.infer(rows, out);
  }

  //! Predicted class of each of `n` rows stored row-major at `rows` ([n, input_width] floats).
  template <class In>
  void predict(const In* rows, index_t n, std::int32_t* classes) requires(!sparse_input) {
    infer(rows, n, inference{.classes = classes});
  }
  //! Predicted class of each sample of a sparse matrix (sparse_input only).
  void predict(sparse_matrix_view<const value_type> rows,
               std::int32_t* classes) requires sparse_input {
    infer(rows, inference{.classes = classes});
  }

  std::span<value_type> parameters() { return exec_.parameters(); }
  std::span<const value_type> parameters() const { return exec_.parameters(); }
  //! Raw gradients of the last compute_gradients()/run(), before clipping and still multiplied
  //! by the loss scale (report.loss_scale; 1 without a loss scaler).
  std::span<const value_type> gradients() const { return exec_.gradients(); }
  //! The loss scaler's S and its count of finite steps; S is what the next step scales by.
  const loss_scale_state& loss_scale() const { return loss_scale_; }
  //! Squared norms of the last gradients, per module.
  const grad_norms& norms() const { return norms_; }
  //! The optimizer's per-parameter state ([state_per_param · param_count], Optim's layout), e.g.
  //! SGD's momentum buffer; saved and restored by checkpoints (train/checkpoint.hpp).
  std::span<value_type> optimizer_state() { return exec_.optimizer_state(); }
  std::span<const value_type> optimizer_state() const { return exec_.optimizer_state(); }
  //! Continues from step `step_index` with loss scaler state `scale` (the schedules and the
  //! optimizer's bias corrections read the step index): with parameters() and optimizer_state()
  //! written back, the next run() is the one an uninterrupted run would take.
  void resume_at(index_t step_index, const loss_scale_state& scale) {
    if (step_index < 0)
      fail("train_step::resume_at", "step_index", "a count >= 0", std::to_string(step_index));
    if (!(scale.scale > 0) || !std::isfinite(scale.scale))
      fail("train_step::resume_at", "loss scale", "a finite value > 0",
           std::to_string(scale.scale));
    step_index_ = step_index;
    loss_scale_ = scale;
  }
  //! Bytes of every buffer the step owns (parameters, gradients, optimizer state, batch,
  //! activations and scratch; not the GEMM packing buffers): what benchmarks compare between
  //! executions, exactly and independent of the allocator.
  std::size_t memory_bytes() const { return exec_.memory_bytes(); }
  //! Steps taken since initialisation.
  index_t step_index() const { return step_index_; }
  //! Times every later run() into `p` (phases forward, backward, update); nullptr stops it. The
  //! step does not own `p`. Without a profiler each phase costs one pointer test.
  void set_profiler(profiler* p) { profiler_ = p; }
  const fit_args& args() const { return args_; }

 private:
  // run() with the executor's threads held.
  step_report train_once() {
    const step_rates rates = types::rates(args_, step_index_);
    step_report report = gradients_of_batch(rates.lambda);
    report.lr = rates.lr;
    profile_scope timing(profiler_, phase::update);
    // A non-finite gradient (an fp16 overflow, a NaN that reached the batch) would corrupt every
    // parameter it touches: skip the update instead and say so; the schedule still advances and
    // a dynamic loss scaler backs off.
    const bool overflow = !std::isfinite(report.grad_norm);
    loss_scale_type::update(loss_scale_, overflow, args_);
    if (overflow) {
      report.skipped = true;
      ++step_index_;
      return report;
    }
    // Clip on the unscaled norms, then fold the unscaling 1/S into each module's scale.
    clip_scales clip = clip_type::scales(norms_, args_);
    const double unscale = 1.0 / report.loss_scale;
    clip.task *= unscale;
    clip.discriminator *= unscale;
    const double lr = rates.lr;
    // Without a discriminator G_d is not trained: an empty range.
    exec_.update({module_update{net_type::features_offset, net_type::classifier_offset, clip.task,
                                lr * double(args_.lr_mult.features)},
                  module_update{net_type::classifier_offset, net_type::discriminator_offset,
                                clip.task, lr * double(args_.lr_mult.classifier)},
                  module_update{net_type::discriminator_offset, trained_param_count,
                                clip.discriminator, lr * double(args_.lr_mult.discriminator)}},
                 clip.limit, step_index_);
    ++step_index_;
    return report;
  }

  // compute_gradients() with the executor's threads held: the phases of the forward, the losses
  // and the backward, in order. The head runs G_d and its loss, and writes δh (head_type::forward,
  // head_type::backward); G_y's input gradient is then added to δh's source columns.
  step_report gradients_of_batch(double lambda) {
    exec_.prepare_batch();
    profile_scope forward_timing(profiler_, phase::forward);
    exec_.prepare_weights();
    step_report report;
    report.lambda = lambda;
    report.loss_scale = loss_scale_.scale;
    exec_.template forward<module::features>();
    exec_.template forward<module::classifier>();
    report.label_loss = exec_.label_loss(loss_scale_.scale);
    norms_ = {};
    if constexpr (trains_discriminator) {
      const domain_loss_result d = head_type::forward(exec_, loss_scale_.scale);
      report.domain_loss = d.loss;
      report.domain_accuracy = d.accuracy;
    }
    // Everything from here is backward: the forward pass ends with the last loss.
    forward_timing.stop();
    profile_scope backward_timing(profiler_, phase::backward);
    if constexpr (trains_discriminator)
      norms_.discriminator_sq = head_type::backward(exec_, lambda);
    // Added to δh when the head wrote it, written fresh otherwise.
    norms_.classifier_sq =
        exec_.template backward<module::classifier>(1.0, /*accumulate=*/trains_discriminator);
    norms_.features_sq = exec_.template backward<module::features>(1.0, false);
    // The gradients hold S·∂L/∂θ: the norms clipping and the report see are unscaled.
    if constexpr (loss_scale_type::scales) {
      const double inverse_sq = 1.0 / (loss_scale_.scale * loss_scale_.scale);
      norms_.features_sq *= inverse_sq;
      norms_.classifier_sq *= inverse_sq;
      norms_.discriminator_sq *= inverse_sq;
    }
    report.grad_norm = norms_.global();
    report.task_grad_norm = norms_.task();
    report.discriminator_grad_norm = norms_.discriminator();
    return report;
  }

  static const fit_args& checked(const fit_args& a) {
    if (const status s = can_implement(a); !s) throw error(s.message);
    return a;
  }

  fit_args args_;
  executor_type exec_;
  grad_norms norms_;
  loss_scale_state loss_scale_;
  index_t step_index_ = 0;
  profiler* profiler_ = nullptr;  // set_profiler(): times the phases of run(), not owned
};

}  // namespace dafuse
