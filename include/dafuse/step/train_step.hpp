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
//! runs is its executor's (backend/executor.hpp), picked by the system
//! (backend/default_system.hpp).
//!
//! With a loss scaler the loss gradient is multiplied by S; the gradients' squared norms,
//! accumulated as they are written, are divided by S² (so clipping sees unscaled norms and a
//! non-finite norm is the overflow check), and 1/S joins the clip scale that the update pass
//! multiplies each gradient by: unscaling, the overflow check and clipping cost no pass of their
//! own, and the step always unscales before it clips.
#pragma once
#include <dafuse/config.hpp>

#include <dafuse/backend/default_system.hpp>
#include <dafuse/backend/executor.hpp>
#include <dafuse/core/error.hpp>
#include <dafuse/core/meta.hpp>
#include <dafuse/core/profiler.hpp>
#include <dafuse/data/dataset.hpp>
#include <dafuse/nn/dann_net.hpp>
#include <dafuse/policy/arguments.hpp>
#include <dafuse/policy/clip.hpp>
#include <dafuse/policy/precision.hpp>
#include <dafuse/policy/schedule.hpp>
#include <dafuse/step/step_types.hpp>

#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
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

//! A step's decisions, as one trivially copyable value of `DAFUSE_HOST_DEVICE` functions: λ and
//! the learning rate from the schedule, the unscaled norms, the overflow skip, the loss scaler's
//! update and the clip scales. The host executor's steps call them inline; a device executor
//! calls them in a kernel of one thread, on the state it keeps in device memory, so that a step
//! needs no host round trip. `Types` is the step's step_types.
template <class Types>
struct step_rules {
  fit_args args;  //!< the run's numbers

  //! λ and the learning rate of step `step_index`.
  DAFUSE_HOST_DEVICE step_rates rates(index_t step_index) const {
    return scheduled_rates<typename Types::head_type>(args, step_index);
  }
  //! out[0, backward_weight_count<head>) = the weights the head's backward takes at step
  //! `step_index` (λ, or each term's of a sum of heads); each is `lambda` when it is not NaN.
  DAFUSE_HOST_DEVICE void backward_weights(index_t step_index, double lambda, double* out) const {
    write_backward_weights<typename Types::head_type>(args, progress{step_index, args.steps},
                                                      lambda, out);
  }
  //! The gradients hold S·∂L/∂θ: the squared norms divided by S², which clipping and the report
  //! see.
  DAFUSE_HOST_DEVICE grad_norms unscaled(grad_norms n, double loss_scale) const {
    if constexpr (Types::loss_scale_type::scales) {
      const double inverse_sq = 1.0 / (loss_scale * loss_scale);
      n.features_sq *= inverse_sq;
      n.classifier_sq *= inverse_sq;
      n.discriminator_sq *= inverse_sq;
    }
    return n;
  }
  //! The update after a backward whose unscaled norms are `n`, with learning rate `lr`; updates
  //! the loss scaler's state `s` (whose S the gradients were scaled by). A non-finite gradient (an
  //! fp16 overflow, a NaN that reached the batch) would corrupt every parameter it touches: the
  //! update is skipped instead, and a dynamic loss scaler backs off.
  DAFUSE_HOST_DEVICE update_plan plan(const grad_norms& n, loss_scale_state& s, double lr) const {
    using net = typename Types::net_type;
    const double used_scale = s.scale;
    const bool overflow = !std::isfinite(n.global());
    Types::loss_scale_type::update(s, overflow, args);
    update_plan p;
    if (overflow) {
      p.skipped = true;
      return p;
    }
    // Clip on the unscaled norms, then fold the unscaling 1/S into each module's scale.
    clip_scales clip = Types::clip_type::scales(n, args);
    const double unscale = 1.0 / used_scale;
    clip.task *= unscale;
    clip.discriminator *= unscale;
    // Without a discriminator G_d is not trained: an empty range.
    p.modules[0] = {net::features_offset, net::classifier_offset, clip.task,
                    lr * double(args.lr_mult.features)};
    p.modules[1] = {net::classifier_offset, net::discriminator_offset, clip.task,
                    lr * double(args.lr_mult.classifier)};
    p.modules[2] = {net::discriminator_offset, Types::trained_param_count, clip.discriminator,
                    lr * double(args.lr_mult.discriminator)};
    p.clip_limit = clip.limit;
    return p;
  }
};

namespace detail {
//! Whether an executor queues steps on a device (backend/device/executor.hpp) rather than
//! running them on the caller's threads.
template <class Exec>
inline constexpr bool queues_steps = requires {
  requires Exec::queues_steps;
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
  //! The host reads the step's memory: parameters(), input() and the other spans are host memory.
  //! On a device system they are not (input() and source_labels() are device memory, for
  //! loaders on the device) and the state moves through read_*/write_* copies.
  static constexpr bool host_memory = system_type::host_accessible;
  //! Steps are queued on a device (their decisions made there, their reports read when asked)
  //! rather than run on the caller's threads: enqueue(), last_report(), tallies().
  static constexpr bool device_queue = detail::queues_steps<executor_type>;
  using inference = dafuse::inference;  //!< where infer() writes

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
    exec_.set_position(0, {loss_scale_type::initial(args_), 0});
  }

  //! Rows the step reads per call: B source then B target (B only when the head draws no target
  //! rows).
  index_t feature_rows() const { return types::rows_for(args_.batch); }

  //! The batch the loader fills: [input_width, feature_rows()], source columns first (in the
  //! system's memory: device memory on system::cuda).
  matrix_view<value_type> input() requires(!sparse_input) { return exec_.input(); }

  //! Where a sparse batch goes (sparse_input only): feature_rows() samples, source first, in CSR
  //! form (see sparse_batch_slots in backend/executor.hpp).
  sparse_batch_slots sparse_batch() requires sparse_input { return exec_.sparse_batch(); }
  //! The source rows' class labels: [B], each in [0, class_count).
  std::span<std::int32_t> source_labels() { return exec_.source_labels(); }

  //! One training step on input() and source_labels(): forward, losses, backward, clip, update.
  //! Returns its report (on a device system that waits for the step: enqueue() does not).
  step_report run() {
    enqueue();
    return exec_.report();
  }

  //! One training step, as run(), without waiting for it or reading its report: on a device
  //! system the step is queued (replaying the step's CUDA graph, captured on the first call);
  //! last_report() reads it when asked. On a host system it runs at once.
  void enqueue() { exec_.queue_step(rules(), step_phases{}); }
  //! The report of the last step taken (waits for it on a device system).
  step_report last_report() const { return exec_.report(); }

  //! What a training loop checks of the steps taken, read when it asks: steps skipped for
  //! non-finite gradients so far, the last of them in a row, and the first step (counted from 1)
  //! whose loss was not finite (-1: none).
  auto tallies() const { return exec_.tallies(); }

  //! loader::resident on a device system: copies `source` and (when the head draws target rows)
  //! `target` into device memory once; every later step draws its batch there, as
  //! data::batcher<loader::resident> would for args().seed from batch `first_batch` on, within the
  //! step's queued work (no host work per step). fit does this for device steps.
  void load_resident(const data::dataset& source,
                     const data::dataset& target,
                     std::uint64_t first_batch = 0) requires device_queue {
    exec_.load_resident(source, target, draws_target_rows, args_.seed, first_batch);
  }

  //! The executor, for settings of its own (e.g. capture_graphs on a device system).
  executor_type& executor() { return exec_; }

  //! Forward and backward only: fills gradients() for the current parameters with reversal
  //! weight λ and returns the losses; no parameter changes. Used by run() and by gradient checks.
  step_report compute_gradients(double lambda) {
    exec_.queue_gradients(rules(), lambda, step_phases{});
    return exec_.report();
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

  //! The parameters ([param_count], Net's layout) as a span of host memory: host systems only
  //! (read_parameters and write_parameters copy them on every system).
  std::span<value_type> parameters() {
    static_assert(host_memory,
                  "dafuse: parameters() is a span of host memory, which a step on "
                  "a device system (system::cuda) does not have: copy them with "
                  "read_parameters(span) and write_parameters(span)");
    if constexpr (host_memory)
      return exec_.parameters();
    else
      return {};
  }
  std::span<const value_type> parameters() const {
    static_assert(host_memory,
                  "dafuse: parameters() is a span of host memory, which a step on "
                  "a device system (system::cuda) does not have: copy them with "
                  "read_parameters(span) and write_parameters(span)");
    if constexpr (host_memory)
      return exec_.parameters();
    else
      return {};
  }
  //! Raw gradients of the last compute_gradients()/run(), before clipping and still multiplied
  //! by the loss scale (report.loss_scale; 1 without a loss scaler). Host systems only
  //! (read_gradients copies them on every system).
  std::span<const value_type> gradients() const {
    static_assert(host_memory,
                  "dafuse: gradients() is a span of host memory, which a step on a "
                  "device system (system::cuda) does not have: copy them with "
                  "read_gradients(span)");
    if constexpr (host_memory)
      return exec_.gradients();
    else
      return {};
  }
  //! The loss scaler's S and its count of finite steps; S is what the next step scales by.
  loss_scale_state loss_scale() const { return exec_.position().scale; }
  //! Squared norms of the last gradients, per module (unscaled).
  grad_norms norms() const { return exec_.norms(); }
  //! The optimizer's per-parameter state ([state_per_param · param_count], Optim's layout), e.g.
  //! SGD's momentum buffer; saved and restored by checkpoints (train/checkpoint.hpp). Host
  //! systems only (read_optimizer_state and write_optimizer_state copy it on every system).
  std::span<value_type> optimizer_state() {
    static_assert(host_memory,
                  "dafuse: optimizer_state() is a span of host memory, which a step "
                  "on a device system (system::cuda) does not have: copy it with "
                  "read_optimizer_state(span) and write_optimizer_state(span)");
    if constexpr (host_memory)
      return exec_.optimizer_state();
    else
      return {};
  }
  std::span<const value_type> optimizer_state() const {
    static_assert(host_memory,
                  "dafuse: optimizer_state() is a span of host memory, which a step "
                  "on a device system (system::cuda) does not have: copy it with "
                  "read_optimizer_state(span) and write_optimizer_state(span)");
    if constexpr (host_memory)
      return exec_.optimizer_state();
    else
      return {};
  }

  // Copies of the state between the step's memory and host memory, on every system: what
  // checkpoints, fit and validators use. Each span must hold exactly the part's values.

  //! Values in parameters, and in the gradients: param_count.
  static constexpr index_t parameter_count() { return net_type::param_count; }
  //! Values in the optimizer state: state_per_param · param_count.
  static constexpr index_t optimizer_state_size() {
    return net_type::param_count * types::optim_type::state_per_param;
  }
  //! Copies the parameters into `to` ([parameter_count()] host values).
  void read_parameters(std::span<value_type> to) const { exec_.read(state_part::parameters, to); }
  //! Sets the parameters from `from` ([parameter_count()] host values).
  void write_parameters(std::span<const value_type> from) {
    exec_.write(state_part::parameters, from);
  }
  //! Copies the last gradients (as gradients() describes them) into `to`.
  void read_gradients(std::span<value_type> to) const { exec_.read(state_part::gradients, to); }
  //! Copies the optimizer state into `to` ([optimizer_state_size()] host values).
  void read_optimizer_state(std::span<value_type> to) const {
    exec_.read(state_part::optimizer_state, to);
  }
  //! Sets the optimizer state from `from`.
  void write_optimizer_state(std::span<const value_type> from) {
    exec_.write(state_part::optimizer_state, from);
  }
  //! Continues from step `step_index` with loss scaler state `scale` (the schedules and the
  //! optimizer's bias corrections read the step index): with parameters() and optimizer_state()
  //! written back, the next run() is the one an uninterrupted run would take.
  void resume_at(index_t step_index, const loss_scale_state& scale) {
    if (step_index < 0)
      fail("train_step::resume_at", "step_index", "a count >= 0", std::to_string(step_index));
    if (!(scale.scale > 0) || !std::isfinite(scale.scale))
      fail("train_step::resume_at", "loss scale", "a finite value > 0",
           std::to_string(scale.scale));
    exec_.set_position(step_index, scale);
  }
  //! Bytes of every buffer the step owns (parameters, gradients, optimizer state, batch,
  //! activations and scratch; not the GEMM packing buffers): what benchmarks compare between
  //! executions, exactly and independent of the allocator.
  std::size_t memory_bytes() const { return exec_.memory_bytes(); }
  //! Steps taken since initialisation.
  index_t step_index() const { return exec_.position().step; }
  //! Times every later run() into `p` (phases forward, backward, update); nullptr stops it. The
  //! step does not own `p`. Without a profiler each phase costs one pointer test.
  void set_profiler(profiler* p) { exec_.set_profiler(p); }
  const fit_args& args() const { return args_; }

 private:
  step_rules<types> rules() const { return {args_}; }

  //! What the phases of one step produce, in the executor's scalar type: doubles on a host
  //! system, handles of values in device memory on a device system.
  template <class S>
  struct figures {
    S label_loss = S(0.0), domain_loss = S(0.0), domain_accuracy = S(0.0);
    S features_sq = S(0.0), classifier_sq = S(0.0), discriminator_sq = S(0.0);
  };

  // What an executor's queue_step runs: phases() over it, with the head's weights, S and the
  // profiler (the host's; nullptr on a device).
  struct step_phases {
    template <class Weight, class Scalar>
    auto operator()(executor_type& e, Weight weights, Scalar loss_scale, profiler* timing) const {
      return phases(e, weights, loss_scale, timing);
    }
  };

  // The phases of the forward, the losses and the backward, in order, over any executor: G_f, G_y,
  // the label loss, the head's forward and loss (G_d), the head's backward into δh
  // (head_type::backward: G_d with the reversal's −λ), G_y's backward with its input gradient
  // added to δh's source columns, G_f's backward. `lambda` and `loss_scale` are values (a host
  // system) or handles of device values (a device system, which queues the phases once and
  // replays them).
  // `lambda` is what the head's backward takes: λ, or one weight per term of a sum of heads.
  template <class Exec, class Weight, class Scalar>
  static auto phases(Exec& exec, Weight lambda, Scalar loss_scale, profiler* timing) {
    using S = decltype(exec.label_loss(loss_scale));
    figures<S> f;
    exec.prepare_batch();
    profile_scope forward_timing(timing, phase::forward);
    exec.prepare_weights();
    exec.template forward<module::features>();
    exec.template forward<module::classifier>();
    f.label_loss = exec.label_loss(loss_scale);
    // The head runs on the executor's view (head/view.hpp), the same for its forward and backward.
    auto&& head_view = exec.head_view();
    if constexpr (types::head_has_loss) {
      const auto d = head_type::forward(head_view, loss_scale);
      f.domain_loss = d.loss;
      f.domain_accuracy = d.accuracy;
    }
    // Everything from here is backward: the forward pass ends with the last loss.
    forward_timing.stop();
    profile_scope backward_timing(timing, phase::backward);
    // The head writes δh (G_d through the reversal, or a discrepancy's gradient) and/or the
    // target rows' δz; it returns its trained parameters' squared gradient norm (0 without G_d).
    if constexpr (types::head_has_loss) f.discriminator_sq = head_type::backward(head_view, lambda);
    // Added to δh when the head wrote it, written fresh otherwise.
    f.classifier_sq = exec.template backward<module::classifier>(
        Scalar(1.0), /*accumulate=*/types::head_writes_features);
    f.features_sq = exec.template backward<module::features>(Scalar(1.0), false);
    return f;
  }

  static const fit_args& checked(const fit_args& a) {
    if (const status s = can_implement(a); !s) throw error(s.message);
    return a;
  }

  fit_args args_;
  executor_type exec_;
};

}  // namespace dafuse
