// SPDX-License-Identifier: Apache-2.0
//! @file step/train_step.hpp
//! @brief `train_step`: one statically composed DANN training step, its workspace sized once.
//!
//! One call of `run()` does, on the batch the loader placed in `input()` (B source columns, then
//! B target columns): G_f forward on all rows; G_y forward on the source rows and softmax
//! cross-entropy; G_d forward on all rows and binary cross-entropy (source = 0, target = 1); the
//! backward of both, with the reversal's −λ folded into G_d's input gradient; the squared norms of
//! the gradients as they are produced; then one pass that clips and updates every parameter.
//! Nothing is allocated after construction.
//!
//! Mixed precision (policy/precision.hpp): the batch, a working copy of the weights, every layer
//! output, every δ and every parameter gradient are rounded to the 16-bit format as they are
//! written (where the bf16 kernel rounds its operands itself, only the biases of that copy are:
//! its products read the master weights). With a loss scaler the loss gradient is multiplied by S;
//! the gradients' squared norms, accumulated as they are written, are divided by S² (so clipping
//! sees unscaled norms and a non-finite norm is the overflow check), and 1/S joins the clip scale
//! that the update pass multiplies each gradient by: unscaling, the overflow check and clipping
//! cost no pass of their own, and the step always unscales before it clips.
#pragma once
#include <dafuse/config.hpp>

#include <dafuse/backend/host/dense.hpp>
#include <dafuse/backend/host/loss.hpp>
#include <dafuse/backend/host/products.hpp>
#include <dafuse/backend/host/update.hpp>
#include <dafuse/backend/select.hpp>
#include <dafuse/core/buffer.hpp>
#include <dafuse/core/error.hpp>
#include <dafuse/core/profiler.hpp>
#include <dafuse/core/rng.hpp>
#include <dafuse/nn/dann_net.hpp>
#include <dafuse/nn/grad_reversal.hpp>
#include <dafuse/nn/init.hpp>
#include <dafuse/nn/loss.hpp>
#include <dafuse/policy/arguments.hpp>
#include <dafuse/policy/clip.hpp>
#include <dafuse/policy/head.hpp>
#include <dafuse/policy/loader.hpp>
#include <dafuse/policy/optim.hpp>
#include <dafuse/policy/precision.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>

namespace dafuse {

namespace detail {
template <class T>
struct is_dann_net : std::false_type {};
template <class F, class Y, class D>
struct is_dann_net<nn::dann_net<F, Y, D>> : std::true_type {};

//! Draws a network's initial parameters from `seed`: G_f, then G_y, then G_d, from one stream,
//! and zeroes the padding between the modules (nn::dann_net::module_alignment). Every step type
//! initialises through here, so equal seeds give equal weights.
template <class Net, class T>
void initialize_network(T* params, std::uint64_t seed, nn::weight_init init) {
  std::fill_n(params, Net::param_count, T(0));
  counter_rng rng(seed, rng_stream::init);
  nn::initialize<typename Net::feature_stack>(params + Net::features_offset, rng, init);
  nn::initialize<typename Net::classifier_stack>(params + Net::classifier_offset, rng, init);
  nn::initialize<typename Net::discriminator_stack>(params + Net::discriminator_offset, rng, init);
}

//! The error for a feature index out of range at entry k of a step's CSR batch.
[[noreturn]] inline void fail_sparse_index(const char* step,
                                           index_t k,
                                           std::int32_t feature,
                                           index_t width) {
  fail(step, "sparse_batch().indices[" + std::to_string(k) + "]",
       "a feature in [0, " + std::to_string(width) + ")", std::to_string(feature));
}

//! Checks that each of the `nnz` feature indices of a step's CSR batch is in [0, width); names
//! the first that is not. One pass the compiler vectorises, and a second only to find the culprit.
inline void check_sparse_indices(const char* step,
                                 const std::int32_t* indices,
                                 index_t nnz,
                                 index_t width) {
  bool in_range = true;
  for (index_t k = 0; k < nnz; ++k) in_range &= std::uint32_t(indices[k]) < std::uint32_t(width);
  if (in_range) return;
  for (index_t k = 0; k < nnz; ++k)
    if (indices[k] < 0 || indices[k] >= width) fail_sparse_index(step, k, indices[k], width);
}

//! Checks the offsets of a step's CSR batch of `rows` samples whose arrays hold `capacity`
//! non-zeros: offsets[0] = 0, non-decreasing, none past the capacity. `step` names the caller.
inline void check_sparse_offsets(const char* step,
                                 const std::int32_t* offsets,
                                 index_t rows,
                                 std::size_t capacity) {
  if (offsets[0] != 0) fail(step, "sparse_batch().offsets[0]", "0", std::to_string(offsets[0]));
  for (index_t c = 0; c < rows; ++c)
    if (offsets[c + 1] < offsets[c] || index_t(offsets[c + 1]) > index_t(capacity))
      fail(step, "sparse_batch().offsets[" + std::to_string(c + 1) + "]",
           "a non-decreasing offset <= " + std::to_string(capacity),
           std::to_string(offsets[c + 1]));
}
}  // namespace detail

//! What one step reports: its losses before the update, the gradient norm before clipping, and
//! the scheduled values it used.
struct step_report {
  double label_loss = 0;      //!< L_y: mean softmax cross-entropy over the source rows
  double domain_loss = 0;     //!< L_d: mean BCE over source and target rows (0 without G_d)
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

template <class Net,
          class Loader,
          class Precision,
          class Clip,
          class Head,
          class Optim,
          class System = backend::default_system>
class train_step {
  // The contract of each slot, checked where the user wrote the alias.
  static_assert(detail::is_dann_net<Net>::value,
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
                "head::dann<schedule::ganin> or head::source_only<>; the order is <Net, Loader, "
                "Precision, Clip, Head, Optim>");
  static_assert(optim_policy<Optim>,
                "dafuse: train_step's 6th argument must be an optimizer policy such as "
                "optim::sgd; the order is <Net, Loader, Precision, Clip, Head, Optim>");
  static_assert(System::host_accessible,
                "dafuse: the host backend needs a host-accessible system (system::omp or "
                "system::cpp)");

 public:
  using net_type = Net;                                         //!< the network
  using loader_type = Loader;                                   //!< how batches arrive
  using precision_type = Precision;                             //!< number formats
  using clip_type = Clip;                                       //!< gradient clipping
  using head_type = Head;                                       //!< adversarial head
  using optim_type = Optim;                                     //!< optimizer
  using system_type = System;                                   //!< where memory lives
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

  static constexpr bool adversarial = Head::adversarial;  //!< runs G_d on target rows
  static constexpr index_t input_width = Net::input_width;
  //! The batch is sparse (G_f is an nn::sparse_input module): fill sparse_batch(), not input().
  static constexpr bool sparse_input = Net::sparse_input;
  static constexpr index_t class_count = Net::class_count;
  static constexpr index_t feature_width = Net::feature_width;  //!< width of G_f's output h
  //! Parameters this step trains: all of them with an adversarial head, G_f + G_y without.
  static constexpr index_t trained_param_count =
      adversarial ? Net::param_count : Net::task_param_count;

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
    for (const status& s : {Clip::can_implement(a), Head::can_implement(a), Optim::can_implement(a),
                            loss_scale_type::can_implement(a)})
      if (!s) return s;
    return status::ok();
  }

  //! Sizes and allocates everything once, and initialises the parameters from args.seed.
  explicit train_step(const fit_args& args) : args_(checked(args)) {
    const index_t b = args_.batch;
    const index_t rows = feature_rows();
    params_ = buffer<value_type, System>(Net::param_count);
    if constexpr (mixed)
      working_params_ = buffer<value_type, System>(Net::param_count, value_type(0));
    grads_ = buffer<value_type, System>(Net::param_count, value_type(0));
    optim_state_ =
        buffer<value_type, System>(Net::param_count * Optim::state_per_param, value_type(0));
    if constexpr (sparse_input) {
      // Room for the densest possible batch, so no batch can ever need more (5 MB for the
      // Amazon reviews' 5000 features and 128 rows).
      sparse_offsets_ = buffer<std::int32_t, System>(rows + 1, 0);
      sparse_indices_ = buffer<std::int32_t, System>(input_width * rows);
      sparse_values_ = buffer<value_type, System>(input_width * rows);
      used_features_ = buffer<std::int32_t, System>(input_width);
      previous_used_features_ = buffer<std::int32_t, System>(input_width);
      feature_marks_ = buffer<std::uint8_t, System>(input_width, 0);
      // On several threads the batch is dealt among them by feature, and each runs the first
      // layer's products on its own columns of W (backend/host/sparse.hpp).
      if (const int threads = std::min(backend::host::available_threads(), 64);
          std::is_same_v<System, system::omp> && threads > 1) {
        constexpr index_t out = feature_stack::template layer<0>::out;
        feature_parts_ = backend::host::sparse_feature_parts<value_type>(
            input_width, out, rows, input_width * rows, threads,
            backend::host::sparse_deal_block<value_type>(input_width, out, threads));
      }
    } else {
      input_ = buffer<value_type, System>(input_width * rows);
    }
    labels_ = buffer<std::int32_t, System>(b, 0);
    const index_t chunk = args_.eval_chunk;
    workspace_ = buffer<value_type, System>(
        stack_scratch<feature_stack>::elements(rows) +
        stack_scratch<classifier_stack>::elements(b) +
        (adversarial ? stack_scratch<discriminator_stack>::elements(rows) : 0) +
        (sparse_input ? 0 : input_width * chunk) +
        stack_scratch<feature_stack>::elements(chunk, false) +
        stack_scratch<classifier_stack>::elements(chunk, false));
    value_type* cursor = workspace_.data();
    auto carve = [&](index_t n) {
      value_type* p = cursor;
      cursor += n;
      return p;
    };
    features_ = {carve(stack_scratch<feature_stack>::elements(rows)), rows};
    classifier_ = {carve(stack_scratch<classifier_stack>::elements(b)), b};
    if constexpr (adversarial)
      discriminator_ = {carve(stack_scratch<discriminator_stack>::elements(rows)), rows};
    eval_input_ = {carve(sparse_input ? 0 : input_width * chunk), input_width, chunk};
    eval_features_ = {carve(stack_scratch<feature_stack>::elements(chunk, false)), chunk, false};
    eval_classifier_ = {carve(stack_scratch<classifier_stack>::elements(chunk, false)), chunk,
                        false};
    // One set of GEMM packing buffers for the largest product of the step.
    const index_t widest = std::max({feature_stack::max_width, classifier_stack::max_width,
                                     discriminator_stack::max_width, input_width});
    const index_t longest = std::max(rows, chunk);
    gemm_ = products_type(widest, std::max(widest, longest), std::max(widest, longest));
    // Partial sums for the forward products that layer_split divides by W's columns: [out, rows]
    // per extra thread. (Evaluation chunks wider than a batch keep the split by rows.)
    gemm_.reserve_partial_sums(widest * rows);
    std::size_t next = 0;
    add_weight_blocks<feature_stack>(Net::features_offset, rows, next);
    add_weight_blocks<classifier_stack>(Net::classifier_offset, b, next);
    add_weight_blocks<discriminator_stack>(Net::discriminator_offset, rows, next);
    holds_team_ = std::is_same_v<System, system::omp> &&
                  std::any_of(weight_blocks_.begin(), weight_blocks_.end(),
                              [](const auto& w) { return w.split.threads > 1; });
    initialize_parameters(args_.seed);
  }

  //! Draws fresh parameters from `seed` and clears the optimizer state and step count.
  void initialize_parameters(std::uint64_t seed) {
    detail::initialize_network<Net>(params_.data(), seed, args_.init);
    optim_state_.fill(value_type(0));
    step_index_ = 0;
    loss_scale_ = {loss_scale_type::initial(args_), 0};
  }

  //! Rows the step reads per call: B source then B target (B only without an adversarial head).
  index_t feature_rows() const { return adversarial ? 2 * args_.batch : args_.batch; }

  //! The batch the loader fills: [input_width, feature_rows()], source columns first.
  matrix_view<value_type> input() requires(!sparse_input) {
    return input_.matrix(input_width, feature_rows());
  }

  //! Where a sparse batch goes (sparse_input only): feature_rows() samples, source first, in CSR
  //! form: sample c's non-zeros are values[k] at feature indices[k] for k in
  //! [offsets[c], offsets[c + 1]), offsets[0] = 0, features ascending within a sample. The spans
  //! hold room for input_width non-zeros per sample.
  struct sparse_batch_slots {
    std::span<std::int32_t> offsets;  //!< [feature_rows() + 1]
    std::span<std::int32_t> indices;  //!< feature of each non-zero
    std::span<value_type> values;     //!< value of each non-zero
  };
  sparse_batch_slots sparse_batch() requires sparse_input {
    return {{sparse_offsets_.data(), std::size_t(feature_rows() + 1)},
            {sparse_indices_.data(), sparse_indices_.size()},
            {sparse_values_.data(), sparse_values_.size()}};
  }
  //! The source rows' class labels: [B], each in [0, class_count).
  std::span<std::int32_t> source_labels() { return {labels_.data(), labels_.size()}; }

  //! One training step on input() and source_labels(): forward, losses, backward, clip, update.
  //! A step whose products split among threads runs in one OpenMP team held throughout
  //! (backend/host/team.hpp).
  step_report run() {
    step_report report;
    backend::host::with_thread_team(holds_team_, [&] { report = train_once(); });
    return report;
  }

  //! Forward and backward only: fills gradients() for the current parameters with reversal
  //! weight λ and returns the losses; no parameter changes. Used by run() and by gradient checks.
  step_report compute_gradients(double lambda) {
    step_report report;
    backend::host::with_thread_team(holds_team_, [&] { report = gradients_of_batch(lambda); });
    return report;
  }

  //! Where `infer` writes its results for n samples; a null pointer skips that output. Each
  //! sample's values are contiguous: the arrays are column-major [width, n].
  struct inference {
    std::int32_t* classes = nullptr;  //!< [n]: the class with the largest logit
    float* probabilities = nullptr;   //!< [class_count, n]: softmax of G_y's logits
    float* features = nullptr;        //!< [feature_width, n]: G_f's output h
  };

  //! Runs G_f and G_y (in evaluation chunks of fit_args::eval_chunk samples) on `n` rows stored
  //! row-major at `rows` ([n, input_width]) and writes what `out` asks for. Validators read the
  //! probabilities and features; nothing is trained.
  template <class In>
  void infer(const In* rows, index_t n, inference out) requires(!sparse_input) {
    const value_type* p = working_parameters();
    for (index_t first = 0; first < n; first += eval_input_.cols) {
      const index_t count = std::min(eval_input_.cols, n - first);
      const In* src = rows + first * input_width;
      value_type* dst = eval_input_.data;
      for (index_t k = 0; k < count * input_width; ++k)
        dst[k] = products_type::round(value_type(src[k]));
      infer_chunk(p, matrix_view<const value_type>{dst, input_width, count}, first, out);
    }
  }

  //! The same for the samples of a sparse matrix (sparse_input only): `rows` is [input_width, n],
  //! one sample per column, e.g. data::sparse_columns() of a CSR data set.
  void infer(sparse_matrix_view<const value_type> rows, inference out) requires sparse_input {
    if (rows.rows != input_width)
      fail("train_step::infer", "sparse rows", std::to_string(input_width) + " features",
           std::to_string(rows.rows));
    const value_type* p = working_parameters();
    for (index_t first = 0; first < rows.cols; first += eval_features_.cols) {
      const index_t count = std::min(eval_features_.cols, rows.cols - first);
      const index_t begin = rows.col_begin(first);
      const sparse_matrix_view<const value_type> x{rows.offsets + first, rows.indices + begin,
                                                   rows.values + begin, input_width, count};
      infer_chunk(p, x, first, out);
    }
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

  std::span<value_type> parameters() { return {params_.data(), params_.size()}; }
  std::span<const value_type> parameters() const { return {params_.data(), params_.size()}; }
  //! Raw gradients of the last compute_gradients()/run(), before clipping and still multiplied
  //! by the loss scale (report.loss_scale; 1 without a loss scaler).
  std::span<const value_type> gradients() const { return {grads_.data(), grads_.size()}; }
  //! The loss scaler's S and its count of finite steps; S is what the next step scales by.
  const loss_scale_state& loss_scale() const { return loss_scale_; }
  //! Squared norms of the last gradients, per module.
  const grad_norms& norms() const { return norms_; }
  //! The optimizer's per-parameter state ([state_per_param · param_count], Optim's layout), e.g.
  //! SGD's momentum buffer; saved and restored by checkpoints (train/checkpoint.hpp).
  std::span<value_type> optimizer_state() { return {optim_state_.data(), optim_state_.size()}; }
  std::span<const value_type> optimizer_state() const {
    return {optim_state_.data(), optim_state_.size()};
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
    step_index_ = step_index;
    loss_scale_ = scale;
  }
  //! Bytes of every buffer the step owns (parameters, gradients, optimizer state, batch,
  //! activations and scratch; not the GEMM packing buffers): what benchmarks compare between
  //! executions, exactly and independent of the allocator.
  std::size_t memory_bytes() const {
    const auto bytes = [](const auto& b) { return b.size() * sizeof(*b.data()); };
    return bytes(params_) + bytes(working_params_) + bytes(grads_) + bytes(optim_state_) +
           bytes(input_) + bytes(sparse_offsets_) + bytes(sparse_indices_) + bytes(sparse_values_) +
           bytes(used_features_) + bytes(previous_used_features_) + bytes(feature_marks_) +
           bytes(labels_) + bytes(workspace_) + feature_parts_.memory_bytes();
  }
  //! Steps taken since initialisation.
  index_t step_index() const { return step_index_; }
  //! Times every later run() into `p` (phases forward, backward, update); nullptr stops it. The
  //! step does not own `p`. Without a profiler each phase costs one pointer test.
  void set_profiler(profiler* p) { profiler_ = p; }
  const fit_args& args() const { return args_; }

 private:
  // run() on the calling thread and its held team.
  step_report train_once() {
    const step_rates rates = scheduled_rates<schedule_type>(args_, step_index_, adversarial);
    const double lambda = rates.lambda, lr = rates.lr;
    step_report report = gradients_of_batch(lambda);
    report.lr = lr;
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
    clip_scales clip = Clip::scales(norms_, args_);
    const double unscale = 1.0 / report.loss_scale;
    clip.task *= unscale;
    clip.discriminator *= unscale;
    using region = backend::host::update_region<Optim, value_type>;
    const auto module_region = [&](index_t begin, index_t end, double scale, float lr_mult) {
      return region{begin, end, value_type(scale),
                    Optim::template make<value_type>(args_, lr * double(lr_mult), step_index_)};
    };
    const std::array<region, 3> regions{
        module_region(Net::features_offset, Net::classifier_offset, clip.task,
                      args_.lr_mult.features),
        module_region(Net::classifier_offset, Net::discriminator_offset, clip.task,
                      args_.lr_mult.classifier),
        // Without an adversarial head G_d is not trained: an empty range.
        module_region(Net::discriminator_offset, trained_param_count, clip.discriminator,
                      args_.lr_mult.discriminator)};
    // Each thread updates the weights whose gradients it wrote. A sparse step on one thread
    // runs no parallel region before its update, and keeps it (backend/host/update.hpp).
    backend::host::update_parameters<Optim, System>(
        params_.data(), grads_.data(), optim_state_.data(), Net::param_count, regions, clip.limit,
        !sparse_input || dealt(), weight_blocks_);
    ++step_index_;
    return report;
  }

  // compute_gradients() on the calling thread and its held team.
  step_report gradients_of_batch(double lambda) {
    if constexpr (sparse_input) {
      if (dealt()) return compute_gradients_on(deal_sparse_batch(), lambda);
      return compute_gradients_on(prepare_sparse_batch(), lambda);
    } else {
      // A sparse batch's values are rounded as the first layer reads them; a dense one here.
      if constexpr (mixed) round_in_place(input().data, input_width * feature_rows());
      return compute_gradients_on(matrix_view<const value_type>(input()), lambda);
    }
  }

  //! Records the weight matrices of `Stack`, whose parameters start at `offset`, from
  //! weight_blocks_[next] on: ∂L/∂W = δz·xᵀ is a [out, in] product over `columns` samples.
  template <class Stack>
  void add_weight_blocks(index_t offset, index_t columns, std::size_t& next) {
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (
          [&] {
            using layer = typename Stack::template layer<I>;
            namespace gen = backend::host;
            const index_t begin = offset + Stack::template param_offset<I>();
            if constexpr (I == 0 && sparse_input) {
              // Dealt by feature among the parts, or one thread's.
              const int parts = feature_parts_.parts();
              weight_blocks_[next++] = {
                  begin, layer::out, layer::in,
                  parts > 1 ? gen::detail::product_split{gen::split_along::columns, parts,
                                                         layer::in, feature_parts_.block()}
                            : gen::detail::product_split::one_thread(layer::out, layer::in),
                  parts > 1 ? feature_parts_.block() : 0};
            } else {
              weight_blocks_[next++] = {
                  begin, layer::out, layer::in,
                  gemm_.split_layer(layer::out, layer::in, columns).weight_gradient};
            }
          }(),
          ...);
    }
    (std::make_index_sequence<Stack::depth>{});
  }

  template <class Stack>
  using stack_scratch = backend::host::stack_scratch<Stack, value_type>;
  using products_type = backend::host::products_for<compute_format, value_type>;

  static void round_in_place(value_type* v, index_t n) {
    for (index_t i = 0; i < n; ++i) v[i] = products_type::round(v[i]);
  }

  // Whether the products read the weights from the master copy: a mixed-precision step whose
  // product kernel rounds its operands as it packs them (bf16 on AVX512-BF16) gets the same
  // products from the master weights as from a rounded copy, so only the biases need one. (A
  // sparse first layer's product reads W's columns itself, unrounded: it keeps the copy.)
  static constexpr bool products_read_master = [] {
    if constexpr (mixed)
      return products_type::rounds_operands && !sparse_input;
    else
      return true;
  }();

  // The parameters as the step computes with them: the master copy itself, or (mixed precision)
  // a copy rounded to the compute format, refreshed from the master copy on every call (users may
  // have written parameters() since the last step) — only its biases when products_read_master.
  // The products read their weights at product_weights(): the master copy or this one.
  const value_type* working_parameters() {
    if constexpr (!mixed) {
      return params_.data();
    } else {
      const value_type* master = params_.data();
      value_type* working = working_params_.data();
      const auto round_range = [&](index_t first, index_t last) {
        for (index_t i = first; i < last; ++i) working[i] = products_type::round(master[i]);
      };
      if constexpr (products_read_master) {
        round_biases<feature_stack>(Net::features_offset, round_range);
        round_biases<classifier_stack>(Net::classifier_offset, round_range);
        round_biases<discriminator_stack>(Net::discriminator_offset, round_range);
      } else if (dealt()) {
        // Each thread rounds the weights its part of the sparse layer reads, as the update.
        backend::host::run_on_team(feature_parts_.parts(), [&](int t, int team, auto&&) {
          backend::host::for_each_owned_run(weight_blocks_, 0, Net::param_count, t, team,
                                            round_range);
        });
      } else {
        // As memory-bound as the update, and as large: split among the threads in equal slices (a
        // sparse step on one thread keeps it there, as its update).
        backend::host::for_each_slice<System, value_type>(0, Net::param_count, round_range,
                                                          !sparse_input);
      }
      return working;
    }
  }
  // Where the products read the weights, given working_parameters()' result.
  const value_type* product_weights(const value_type* working) const {
    return products_read_master ? params_.data() : working;
  }
  // Runs round_range(first, last) over each bias of `Stack`, whose parameters start at `offset`.
  template <class Stack, class F>
  static void round_biases(index_t offset, const F& round_range) {
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      ((round_range(
           offset + Stack::template param_offset<I>() + Stack::template layer<I>::weight_count,
           offset + Stack::template param_offset<I>() + Stack::template layer<I>::weight_count +
               Stack::template layer<I>::out)),
       ...);
    }
    (std::make_index_sequence<Stack::depth>{});
  }

  // G_f and G_y on the x.cols samples of one evaluation chunk; writes `out` from sample `first`.
  template <class Input>
  void infer_chunk(const value_type* p, const Input& x, index_t first, const inference& out) {
    namespace gen = backend::host;
    const auto f = eval_features_.leading(x.cols);
    const auto y = eval_classifier_.leading(x.cols);
    const value_type* w = product_weights(p);
    gen::forward<feature_stack>(p + Net::features_offset, x, f, gemm_, w + Net::features_offset);
    const matrix_view<value_type> h = f.output();
    gen::forward<classifier_stack>(p + Net::classifier_offset, matrix_view<const value_type>(h), y,
                                   gemm_, w + Net::classifier_offset);
    const matrix_view<value_type> logits = y.output();
    for (index_t c = 0; c < x.cols; ++c) {
      const value_type* z = &logits(0, c);
      if (out.classes) out.classes[first + c] = nn::argmax(z, class_count);
      if (out.probabilities)
        nn::softmax(z, class_count, out.probabilities + (first + c) * class_count);
      if (out.features)
        std::copy_n(&h(0, c), feature_width, out.features + (first + c) * feature_width);
    }
  }

  // Checks the sparse batch, lists the features it uses, and clears the first layer's weight
  // gradient where the previous batch wrote it: the sparse weight gradient writes only the
  // columns of used features and needs zeros there; every other column stays zero.
  sparse_matrix_view<const value_type> prepare_sparse_batch() {
    const index_t rows = feature_rows();
    const std::int32_t* offsets = sparse_offsets_.data();
    const std::int32_t* indices = sparse_indices_.data();
    detail::check_sparse_offsets("train_step", offsets, rows, sparse_values_.size());
    constexpr index_t out = feature_stack::template layer<0>::out;
    value_type* dw = grads_.data() + Net::features_offset;  // layer 0's weights come first
    std::swap(used_features_, previous_used_features_);
    for (index_t k = 0; k < used_count_; ++k)
      std::fill_n(dw + index_t(previous_used_features_.data()[k]) * out, out, value_type(0));
    std::uint8_t* marks = feature_marks_.data();
    std::int32_t* used = used_features_.data();
    used_count_ = 0;
    for (index_t k = 0, nnz = offsets[rows]; k < nnz; ++k) {
      const std::int32_t j = indices[k];
      if (j < 0 || j >= input_width) {
        for (index_t u = 0; u < used_count_; ++u) marks[used[u]] = 0;
        used_count_ = 0;
        detail::fail_sparse_index("train_step", k, j, input_width);
      }
      if (!marks[j]) {
        marks[j] = 1;
        used[used_count_++] = j;
      }
    }
    for (index_t u = 0; u < used_count_; ++u) marks[used[u]] = 0;
    sparse_matrix_view<const value_type> x{offsets, indices, sparse_values_.data(), input_width,
                                           rows};
    x.used_rows = used;
    x.used_count = used_count_;
    return x;
  }

  // Whether the sparse batch is dealt among threads by feature (sparse_feature_parts).
  bool dealt() const { return feature_parts_.parts() > 1; }

  // The same checks, then the batch dealt among the threads by feature; each thread first clears
  // its columns of the weight gradient that the previous batch wrote.
  backend::host::dealt_sparse_batch<value_type> deal_sparse_batch() {
    const index_t rows = feature_rows();
    const std::int32_t* offsets = sparse_offsets_.data();
    const std::int32_t* indices = sparse_indices_.data();
    detail::check_sparse_offsets("train_step", offsets, rows, sparse_values_.size());
    detail::check_sparse_indices("train_step", indices, offsets[rows], input_width);
    constexpr index_t out = feature_stack::template layer<0>::out;
    value_type* dw = grads_.data() + Net::features_offset;  // layer 0's weights come first
    return feature_parts_.deal(
        sparse_matrix_view<const value_type>{offsets, indices, sparse_values_.data(), input_width,
                                             rows},
        [dw](index_t j) { std::fill_n(dw + j * out, out, value_type(0)); });
  }

  // Forward and backward on the batch x (dense or sparse); see compute_gradients().
  template <class Input>
  step_report compute_gradients_on(const Input& x, double lambda) {
    namespace gen = backend::host;
    const index_t b = args_.batch;
    profile_scope forward_timing(profiler_, phase::forward);
    const value_type* p = working_parameters();
    const value_type* w = product_weights(p);
    value_type* g = grads_.data();

    gen::forward<feature_stack>(p + Net::features_offset, x, features_, gemm_,
                                w + Net::features_offset);
    const matrix_view<value_type> h = features_.output();  // [feature_width, rows]
    const matrix_view<const value_type> h_source = h.middle_cols(0, b);

    step_report report;
    report.lambda = lambda;
    report.loss_scale = loss_scale_.scale;

    gen::forward<classifier_stack>(p + Net::classifier_offset, h_source, classifier_, gemm_,
                                   w + Net::classifier_offset);
    report.label_loss = label_loss_and_gradient();

    norms_ = {};
    if constexpr (adversarial) {
      gen::forward<discriminator_stack>(p + Net::discriminator_offset,
                                        matrix_view<const value_type>(h), discriminator_, gemm_,
                                        w + Net::discriminator_offset);
      domain_loss_and_gradient(report);
    }
    // Everything from here is backward: the forward pass ends with the last loss.
    forward_timing.stop();
    profile_scope backward_timing(profiler_, phase::backward);
    if constexpr (adversarial) {
      // G_d's input gradient is written straight into δh, scaled by the reversal's −λ.
      const nn::grad_reversal<value_type> reversal{value_type(lambda)};
      norms_.discriminator_sq = gen::backward<discriminator_stack>(
          p + Net::discriminator_offset, g + Net::discriminator_offset,
          matrix_view<const value_type>(h), discriminator_, gemm_, features_.output_gradient(),
          reversal.backward_scale(), /*accumulate=*/false, w + Net::discriminator_offset);
    }
    // G_y's input gradient is added to the source columns of δh (written fresh without G_d).
    norms_.classifier_sq = gen::backward<classifier_stack>(
        p + Net::classifier_offset, g + Net::classifier_offset, h_source, classifier_, gemm_,
        features_.output_gradient().middle_cols(0, b), value_type(1),
        /*accumulate=*/adversarial, w + Net::classifier_offset);
    norms_.features_sq = gen::backward<feature_stack>(
        p + Net::features_offset, g + Net::features_offset, x, features_, gemm_, {}, value_type(1),
        false, w + Net::features_offset);
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

  // Mean softmax cross-entropy over the B source columns; writes δz of G_y's logits.
  double label_loss_and_gradient() {
    const index_t b = args_.batch;
    const matrix_view<value_type> z = classifier_.output();
    const matrix_view<value_type> dz = classifier_.output_gradient();
    const std::int32_t* y = labels_.data();
    // δz = S/B · (softmax(z) − onehot(y)): the loss scale enters here and nowhere else. The
    // backward of G_y's last layer rounds δz to the stored format.
    const value_type scale = value_type(loss_scale_.scale / double(b));
    for (index_t c = 0; c < b; ++c)
      if (y[c] < 0 || y[c] >= class_count)
        fail("train_step", "source_labels()[" + std::to_string(c) + "]",
             "a class in [0, " + std::to_string(class_count) + ")", std::to_string(y[c]));
    return backend::host::softmax_cross_entropy(z.data, class_count, b, y, scale, dz.data) /
           double(b);
  }

  // Mean BCE on the discriminator's logit over all 2B columns (source 0, target 1); writes δz,
  // and counts the logits on the right side of 0 in the same pass (report.domain_accuracy).
  void domain_loss_and_gradient(step_report& report) {
    const index_t rows = feature_rows(), b = args_.batch;
    const value_type* z = discriminator_.output().data;
    value_type* dz = discriminator_.output_gradient().data;
    const value_type scale = value_type(loss_scale_.scale / double(rows));
    index_t right = 0;
    const double sum =
        backend::host::binary_cross_entropy_with_logits(z, rows, b, scale, dz, right);
    report.domain_loss = sum / double(rows);
    report.domain_accuracy = double(right) / double(rows);
  }

  fit_args args_;
  buffer<value_type, System> params_;  // [param_count]: G_f, G_y, G_d
  // Mixed precision: params_ rounded (only its biases are written when products_read_master),
  // else empty.
  buffer<value_type, System> working_params_;
  buffer<value_type, System> grads_;        // [param_count], same layout
  buffer<value_type, System> optim_state_;  // [state_per_param · param_count]
  buffer<value_type, System> input_;        // [input_width, rows] (dense input)
  // A sparse batch (sparse_input): CSR offsets, feature indices and values, room for the densest.
  buffer<std::int32_t, System> sparse_offsets_, sparse_indices_;
  buffer<value_type, System> sparse_values_;
  // Features the current and the previous sparse batch use, and a mark per feature (all 0
  // between calls) to list them without duplicates.
  buffer<std::int32_t, System> used_features_, previous_used_features_;
  buffer<std::uint8_t, System> feature_marks_;
  index_t used_count_ = 0;
  // The batch dealt among the threads by feature: a sparse step with more than one thread.
  backend::host::sparse_feature_parts<value_type> feature_parts_;
  buffer<std::int32_t, System> labels_;   // [B]
  buffer<value_type, System> workspace_;  // every scratch below, carved once
  stack_scratch<feature_stack> features_;
  stack_scratch<classifier_stack> classifier_;
  stack_scratch<discriminator_stack> discriminator_;
  matrix_view<value_type> eval_input_;
  stack_scratch<feature_stack> eval_features_;
  stack_scratch<classifier_stack> eval_classifier_;
  products_type gemm_;
  // Every weight matrix, in parameter order, and how gemm_ splits the product that writes its
  // gradient (the update follows it; a sparse first layer's gradient is one thread's).
  std::array<backend::host::weight_block,
             feature_stack::depth + classifier_stack::depth + discriminator_stack::depth>
      weight_blocks_{};
  // Whether run() and compute_gradients() hold one OpenMP team for the whole step: only when
  // some product splits among threads (a step that splits nothing would pay for the region).
  bool holds_team_ = false;
  grad_norms norms_;
  loss_scale_state loss_scale_;
  index_t step_index_ = 0;
  profiler* profiler_ = nullptr;  // set_profiler(): times the phases of run(), not owned
};

}  // namespace dafuse
