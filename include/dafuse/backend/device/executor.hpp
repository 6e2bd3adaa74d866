// SPDX-License-Identifier: Apache-2.0
//! @file backend/device/executor.hpp
//! @brief The device executor: runs a step's phases on a system whose memory the host does not
//! read (system::cuda; system::omp_device in the CPU tests), over Thrust algorithms on the
//! executor's own stream, the shared functors of backend/device/functors.hpp, and the system's
//! device_primitives (products with fused bias/ReLU epilogues, deterministic sums, copies).
//!
//! Every buffer lives in the system's memory and is sized once; the product plans (cuBLASLt
//! descriptors and algorithms on CUDA) are chosen once. Per step, nothing is allocated. The
//! scalars a phase produces (losses, squared gradient norms, the domain accuracy) are summed into
//! device slots by device_primitives::sum, so they are the same bits on every run.
//!
//! Layouts are the host executor's: the batch [input_width, rows], source columns first; each
//! layer's output and output gradient [out, cols]; the parameters W: [out, in] then b: [out] per
//! layer, module by module (nn::dann_net). For a layer l with input x: [in, n]:
//!   forward    y = f(W·x + b)                      one product, bias (and ReLU) in its epilogue
//!   backward   δz = δy ⊙ f'(y);  ∂W = δz·xᵀ;  ∂b = δz·1;  δx = Wᵀ·δz (scaled, or added)
//! States and results reach the host through read/write copies (backend/executor.hpp).
#pragma once
#include <dafuse/config.hpp>

#include <dafuse/backend/device/functors.hpp>
#include <dafuse/backend/device/head_view.hpp>
#include <dafuse/backend/device/primitives.hpp>
#include <dafuse/backend/device/resident_loader.hpp>
#include <dafuse/backend/executor.hpp>
#include <dafuse/backend/step_control.hpp>
#include <dafuse/core/buffer.hpp>
#include <dafuse/core/error.hpp>
#include <dafuse/core/meta.hpp>
#include <dafuse/core/profiler.hpp>
#include <dafuse/core/rng.hpp>
#include <dafuse/data/dataset.hpp>
#include <dafuse/head/cdan.hpp>
#include <dafuse/head/head_base.hpp>
#include <dafuse/head/view.hpp>
#include <dafuse/nn/activation.hpp>
#include <dafuse/nn/conv2d.hpp>
#include <dafuse/nn/dann_net.hpp>
#include <dafuse/nn/init.hpp>
#include <dafuse/policy/arguments.hpp>

#include <thrust/fill.h>
#include <thrust/for_each.h>
#include <thrust/iterator/counting_iterator.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace dafuse::backend {

namespace device {

//! The outputs and output gradients of one stack's layers for `cols` samples: y_l and δy_l,
//! [out_l, cols] each, carved from one block.
template <class Stack, class T>
struct stack_memory {
  std::array<T*, Stack::depth> outputs{};    //!< y_l
  std::array<T*, Stack::depth> gradients{};  //!< δy_l, then δz_l in place
  index_t cols = 0;                          //!< samples

  //! Values needed for `cols` samples, with or without the gradients.
  static constexpr index_t elements(index_t cols, bool with_gradients) {
    return Stack::activation_count * cols * (with_gradients ? 2 : 1);
  }
  stack_memory() = default;
  stack_memory(T* block, index_t columns, bool with_gradients) : cols(columns) {
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      ((outputs[I] = block + Stack::template activation_offset<I>() * cols), ...);
      if (with_gradients)
        ((gradients[I] =
              block + (Stack::activation_count + Stack::template activation_offset<I>()) * cols),
         ...);
    }
    (std::make_index_sequence<Stack::depth>{});
  }
  T* output() const { return outputs[Stack::depth - 1]; }
  T* output_gradient() const { return gradients[Stack::depth - 1]; }
};

//! Whether layer `Layer`'s activation is ReLU (fused into the forward product's epilogue).
template <class Layer>
inline constexpr bool relu_layer =
    std::is_same_v<std::remove_cvref_t<decltype(Layer::act)>, nn::relu_t>;
//! Whether layer `Layer` has no activation.
template <class Layer>
inline constexpr bool identity_layer = std::remove_cvref_t<decltype(Layer::act)>::is_identity;

//! The product plans of one stack: each layer's forward on the memory's samples and, when
//! trained, its backward products on the first `backward_cols` of them. The plans are made for
//! the pointers they will be run on (their alignment; the bias pointers are fixed in them).
template <class Stack, class T, class Ops>
struct stack_plans {
  using plan = typename Ops::template product_plan<T>;
  std::array<plan, Stack::depth> forward{}, weight_gradient{}, bias_gradient{}, input_gradient{};
  //! Whether layer l's weight-gradient product also writes its bias gradient (else
  //! bias_gradient[l], a product with a ones vector, does).
  std::array<bool, Stack::depth> fused_bias_gradient{};

  stack_plans() = default;
  //! `params` and `grads`: the stack's first parameter and gradient; `x`: its input;
  //! `gradient_of_input`: where the first layer writes the gradient of x (null: nowhere); `ones`:
  //! at least backward_cols ones. Without `trained` only the forward products are planned.
  stack_plans(Ops& ops,
              const T* params,
              const T* grads,
              const T* x,
              const stack_memory<Stack, T>& s,
              index_t backward_cols,
              bool trained,
              const T* gradient_of_input,
              const T* ones) {
    const auto at = [](product_shape<T> shape, const void* a, const void* b, const void* c) {
      shape.align_a = alignment_of(a);
      shape.align_b = alignment_of(b);
      shape.align_c = alignment_of(c);
      return shape;
    };
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (
          [&] {
            using layer = typename Stack::template layer<I>;
            constexpr index_t in = layer::in, out = layer::out;
            const T* w = params + Stack::template param_offset<I>();
            const T* dw = grads + Stack::template param_offset<I>();
            const T* layer_input = I == 0 ? x : s.outputs[I == 0 ? 0 : I - 1];
            // y = f(W·x + b): [out, in]·[in, cols].
            forward[I] = ops.plan(
                at(product_shape<T>{false, false, out, s.cols, in, out, in, out,
                                    relu_layer<layer> ? epilogue::relu_bias : epilogue::bias,
                                    w + layer::weight_count},
                   w, layer_input, s.outputs[I]));
            if (!trained) return;
            const index_t n = backward_cols;
            // ∂W = δz·xᵀ: [out, n]·[n, in], with ∂b = δz·1 (the row sums of δz) in its epilogue
            // where the system offers it, else as a product of its own ([out, n]·[n, 1]).
            weight_gradient[I] =
                ops.plan(at(product_shape<T>{false, true, out, in, n, out, in, out,
                                             epilogue::bias_gradient, dw + layer::weight_count},
                            s.gradients[I], layer_input, dw));
            fused_bias_gradient[I] = Ops::writes_bias_gradient(weight_gradient[I]);
            if (!fused_bias_gradient[I])
              bias_gradient[I] = ops.plan(at(product_shape<T>{false, false, out, 1, n, out, n, out},
                                             s.gradients[I], ones, dw + layer::weight_count));
            // δx = Wᵀ·δz: [in, out]·[out, n].
            const T* dx = I == 0 ? gradient_of_input : s.gradients[I == 0 ? 0 : I - 1];
            if (dx)
              input_gradient[I] = ops.plan(at(
                  product_shape<T>{true, false, in, n, out, out, out, in}, w, s.gradients[I], dx));
          }(),
          ...);
    }
    (std::make_index_sequence<Stack::depth>{});
  }
};

}  // namespace device

template <class System, class Step>
requires device_system<System>
class executor<System, Step> {
 public:
  using net_type = typename Step::net_type;
  using optim_type = typename Step::optim_type;
  using value_type = typename Step::value_type;
  using module = nn::dann_module;
  static constexpr index_t input_width = Step::input_width;
  static constexpr bool sparse_input = Step::sparse_input;
  static constexpr index_t class_count = Step::class_count;
  static constexpr index_t feature_width = Step::feature_width;

  static_assert(!Step::sparse_input,
                "dafuse: a sparse first layer (nn::sparse_input) runs on the host systems only "
                "for now; train it with system::omp, or densify the rows");
  static_assert(!Step::mixed,
                "dafuse: bf16 and fp16 steps run on the host systems only for now; on a device "
                "system use precision::fp32 (or fp64)");
  static_assert(!nn::has_image_layers<typename Step::feature_stack>,
                "dafuse: convolutional feature extractors (nn::conv_net) run on the host systems "
                "only for now; train them with system::omp");

 private:
  using T = value_type;
  using Net = net_type;
  using Optim = optim_type;
  using ops_type = device::device_primitives<System>;
  using feature_stack = typename Net::feature_stack;
  using classifier_stack = typename Net::classifier_stack;
  using discriminator_stack = typename Net::discriminator_stack;
  static constexpr bool trains_discriminator = Step::trains_discriminator;
  static constexpr bool reads_joint =
      Step::head_type::discriminator_reads == discriminator_input::multilinear;
  static constexpr index_t joint_width = reads_joint ? class_count * feature_width : 0;
  template <class Stack>
  using memory_of = device::stack_memory<Stack, T>;
  template <class Stack>
  using plans_of = device::stack_plans<Stack, T, ops_type>;
  static constexpr std::size_t weight_count = backward_weight_count<typename Step::head_type>;
  using control_type = step_control<Optim, T, weight_count>;
  using scalar = step_scalar;
  using head_type = typename Step::head_type;
  friend class device::head_view<executor>;

 public:
  //! Sizes and allocates every buffer once for args.batch and args.eval_chunk and plans every
  //! product; the parameters are left for initialize().
  explicit executor(const fit_args& args)
      : args_(args),
        batch_(args.batch),
        rows_(Step::rows_for(args.batch)),
        classifier_rows_(Step::classifier_rows_for(args.batch)),
        classifier_backward_rows_(head_type::writes_logit_gradient ? classifier_rows_ : batch_),
        chunk_(args.eval_chunk),
        params_(Net::param_count, T(0)),
        grads_(Net::param_count, T(0)),
        state_(Net::param_count * Optim::state_per_param, T(0)),
        input_(input_width * rows_, T(0)),
        labels_(batch_, 0),
        head_sums_(head_type::sum_count, 0.0),
        control_storage_(sizeof(control_type) / sizeof(std::uint64_t) + 1, 0) {
    control_ = reinterpret_cast<control_type*>(control_storage_.data());
    const control_type fresh{};
    ops_.to_device(control_, &fresh, sizeof fresh);
    const index_t rows = rows_, classified = classifier_rows_, chunk = chunk_;
    const index_t joint_values =
        reads_joint ? class_count * rows + 2 * joint_width * rows + rows : 0;
    const index_t longest = std::max({rows, chunk});
    workspace_ = buffer<T, System>(
        memory_of<feature_stack>::elements(rows, true) +
            memory_of<classifier_stack>::elements(classified, true) +
            (trains_discriminator ? memory_of<discriminator_stack>::elements(rows, true) : 0) +
            joint_values + head_type::scratch_elements(head_shape()) + input_width * chunk +
            memory_of<feature_stack>::elements(chunk, false) +
            memory_of<classifier_stack>::elements(chunk, false) + longest,
        T(0));
    T* cursor = workspace_.data();
    auto carve = [&](index_t n) {
      T* p = cursor;
      cursor += n;
      return p;
    };
    features_ = {carve(memory_of<feature_stack>::elements(rows, true)), rows, true};
    classifier_ = {carve(memory_of<classifier_stack>::elements(classified, true)), classified,
                   true};
    if constexpr (trains_discriminator)
      discriminator_ = {carve(memory_of<discriminator_stack>::elements(rows, true)), rows, true};
    if constexpr (reads_joint) {
      probabilities_ = carve(class_count * rows);
      joint_ = carve(joint_width * rows);
      joint_gradient_ = carve(joint_width * rows);
      row_weights_ = carve(rows);
    }
    head_scratch_ = carve(head_type::scratch_elements(head_shape()));
    eval_input_ = carve(input_width * chunk);
    eval_features_ = {carve(memory_of<feature_stack>::elements(chunk, false)), chunk, false};
    eval_classifier_ = {carve(memory_of<classifier_stack>::elements(chunk, false)), chunk, false};
    ones_ = carve(longest);
    thrust::fill_n(ops_.policy(), ones_, longest, T(1));
    eval_classes_ = buffer<std::int32_t, System>(chunk, 0);
    eval_probabilities_ = buffer<float, System>(class_count * chunk, 0.0f);
    eval_h_ = buffer<float, System>(feature_width * chunk, 0.0f);
    eval_staging_.resize(std::size_t(input_width * chunk));

    const T* p = params_.data();
    const T* g = grads_.data();
    features_plans_ =
        plans_of<feature_stack>(ops_, p + Net::features_offset, g + Net::features_offset,
                                input_.data(), features_, rows, true, nullptr, ones_);
    classifier_plans_ = plans_of<classifier_stack>(
        ops_, p + Net::classifier_offset, g + Net::classifier_offset, features_.output(),
        classifier_, classifier_backward_rows_, true, features_.output_gradient(), ones_);
    if constexpr (trains_discriminator)
      discriminator_plans_ = plans_of<discriminator_stack>(
          ops_, p + Net::discriminator_offset, g + Net::discriminator_offset,
          reads_joint ? joint_ : features_.output(), discriminator_, rows, true,
          reads_joint ? joint_gradient_ : features_.output_gradient(), ones_);
    eval_features_plans_ =
        plans_of<feature_stack>(ops_, p + Net::features_offset, g + Net::features_offset,
                                eval_input_, eval_features_, chunk, false, nullptr, ones_);
    eval_classifier_plans_ = plans_of<classifier_stack>(
        ops_, p + Net::classifier_offset, g + Net::classifier_offset, eval_features_.output(),
        eval_classifier_, chunk, false, nullptr, ones_);
    ops_.synchronize();
  }

  executor(const executor&) = delete;
  executor& operator=(const executor&) = delete;

  //! Draws fresh parameters from `seed` (nn::initialize_parameters, on the host) and zeroes the
  //! optimizer state.
  void initialize(std::uint64_t seed, nn::weight_init init) {
    std::vector<T> host(static_cast<std::size_t>(Net::param_count));
    nn::initialize_parameters<Net>(host.data(), seed, init);
    ops_.to_device(params_.data(), host.data(), host.size() * sizeof(T));
    thrust::fill_n(ops_.policy(), state_.data(), state_.size(), T(0));
    const control_type fresh{};
    ops_.to_device(control_, &fresh, sizeof fresh);
  }

  // ---- Where the loader writes (device memory) ---------------------------------------------

  //! The dense batch: [input_width, rows], source columns first, in the system's memory.
  matrix_view<T> input() { return {input_.data(), input_width, rows_}; }
  //! The source rows' class labels: [B], in the system's memory.
  std::span<std::int32_t> source_labels() { return {labels_.data(), labels_.size()}; }

  // ---- State ------------------------------------------------------------------------------

  //! Copies one part of the state into host memory `to` (its size must be the part's).
  void read(state_part part, std::span<T> to) const {
    const buffer<T, System>& b = part_buffer(part);
    check_size(part, to.size(), b.size());
    ops_.to_host(to.data(), b.data(), to.size_bytes());
  }
  //! Writes one part of the state from host memory.
  void write(state_part part, std::span<const T> from) {
    buffer<T, System>& b = part == state_part::parameters  ? params_
                           : part == state_part::gradients ? grads_
                                                           : state_;
    check_size(part, from.size(), b.size());
    ops_.to_device(b.data(), from.data(), from.size_bytes());
  }
  //! Copies `n` values of the system's memory at `from` into host memory `to`.
  template <class U>
  void download(U* to, const U* from, index_t n) const {
    ops_.to_host(to, from, std::size_t(n) * sizeof(U));
  }
  //! Copies `n` host values into the system's memory at `to`.
  template <class U>
  void upload(U* to, const U* from, index_t n) {
    ops_.to_device(to, from, std::size_t(n) * sizeof(U));
  }
  //! Bytes of every buffer the executor owns (not the products' workspace).
  std::size_t memory_bytes() const {
    const auto bytes = [](const auto& b) { return b.size() * sizeof(*b.data()); };
    return bytes(params_) + bytes(grads_) + bytes(state_) + bytes(input_) + bytes(labels_) +
           bytes(control_storage_) + bytes(workspace_) + bytes(eval_classes_) +
           bytes(eval_probabilities_) + bytes(eval_h_);
  }

  // ---- Steps: queued on the executor's stream, decided on the device ----------------------

  //! Steps are queued, not run on the caller's threads: train_step hands over its rules and its
  //! phases (queue_step), and reads the report when asked (report()).
  static constexpr bool queues_steps = true;

  //! Queues one training step: λ and the learning rate from the device's step count (begin_step),
  //! `phases(*this, λ, S)` (handles of device values), the rules' decisions on the device
  //! (decide_step), and the update pass that reads them. On a system that captures (CUDA), the
  //! first call captures all of it into a graph, which every later call replays; nothing waits
  //! for the host.
  template <class Rules, class Phases>
  void queue_step(const Rules& rules, Phases&& phases) {
    if constexpr (ops_type::captures) {
      if (graph_ready_) {
        ops_.replay(graph_);
        return;
      }
      // The first step runs uncaptured: the kernels, and cuBLASLt's, are loaded outside a capture.
      if (capture_ && warmed_up_) {
        ops_.capture(graph_, [&] { queue(rules, phases, std::nan(""), true); });
        graph_ready_ = true;
        ops_.replay(graph_);
        return;
      }
    }
    queue(rules, phases, std::nan(""), true);
    warmed_up_ = true;
  }
  //! Queues the phases of a step with reversal weight `lambda` and no update (nor step count):
  //! compute_gradients. Never captured.
  template <class Rules, class Phases>
  void queue_gradients(const Rules& rules, double lambda, Phases&& phases) {
    queue(rules, phases, lambda, false);
  }
  //! Whether queue_step captures a graph on systems that can (default: yes). Turning it off
  //! queues every step's kernels anew (the un-captured execution the tests compare with).
  void capture_graphs(bool on) {
    capture_ = on;
    graph_ready_ = false;
  }

  //! The last step's report, after waiting for it; a step refused for a label out of range
  //! throws here, naming the row.
  step_report report() const {
    const control_type c = control();
    if (c.refused_label != 0) {
      const index_t col = index_t(c.refused_label) - 1;
      std::int32_t y = 0;
      ops_.to_host(&y, labels_.data() + col, sizeof y);
      const double cleared = 0;
      ops_.to_device(&control_->refused_label, &cleared, sizeof cleared);
      fail("train_step", "source_labels()[" + std::to_string(col) + "]",
           "a class in [0, " + std::to_string(class_count) + ")", std::to_string(y));
    }
    return c.report;
  }
  //! Steps taken and the loss scaler's state, after waiting for the queued steps.
  step_position position() const { return control().position(); }
  //! Continues from step `step` with the loss scaler's state `scale` (resume, initialisation).
  void set_position(index_t step, loss_scale_state scale) {
    control_type c = control();
    c.restart(step, scale);
    ops_.to_device(control_, &c, sizeof c);
  }
  //! The last step's unscaled squared norms.
  grad_norms norms() const { return control().norms; }
  //! A queued step's device time is not split into phases (docs/gpu.md): the profiler sees the
  //! host's phases only (fit's data wait, evaluation, checkpoints).
  void set_profiler(profiler*) {}
  //! The tallies a training loop checks, after waiting for the queued steps.
  step_tally tallies() const { return control().tally(); }

  // ---- loader::resident on the device ------------------------------------------------------

  //! Copies `source` (and, with `with_target`, `target`) into the system's memory once; from then
  //! on every queued step first draws its batch there (resident_loader.hpp: data::epoch_sampler's
  //! draws for `seed`, starting at batch `first_batch`) into input() and source_labels(), with no
  //! host work. Each domain needs at least B rows.
  void load_resident(const data::dataset& source,
                     const data::dataset& target,
                     bool with_target,
                     std::uint64_t seed,
                     std::uint64_t first_batch) {
    const data::dataset* sets[2] = {&source, &target};
    const int domains = with_target ? 2 : 1;
    for (int d = 0; d < domains; ++d) {
      const data::dataset& set = *sets[d];
      if (set.width != input_width)
        fail(set.origin, "feature width", std::to_string(input_width), std::to_string(set.width));
      if (set.rows < batch_)
        fail(set.origin, "rows",
             "at least " + std::to_string(batch_) +
                 " (a batch's rows per domain, for the device-resident loader)",
             std::to_string(set.rows));
    }
    if (source.labels.size() != std::size_t(source.rows))
      fail(source.origin, "labels", "one per row", std::to_string(source.labels.size()));
    ops_.synchronize();
    resident_ = {};
    resident_.domains = domains;
    resident_.labels = buffer<std::int32_t, System>(source.labels.size());
    ops_.to_device(resident_.labels.data(), source.labels.data(),
                   source.labels.size() * sizeof(std::int32_t));
    index_t most_rows = 0;
    for (int d = 0; d < domains; ++d) {
      const data::dataset& set = *sets[d];
      resident_.rows[d] = buffer<float, System>(set.features.size());
      ops_.to_device(resident_.rows[d].data(), set.features.data(),
                     set.features.size() * sizeof(float));
      resident_.order[d] = buffer<std::int32_t, System>(2 * set.rows, 0);
      resident_.swaps[d] = buffer<std::uint32_t, System>(2 * set.rows, 0u);
      device::domain_sampler& ds = resident_.sampler[d];
      ds.rows = set.rows;
      ds.stream = std::uint32_t(d == 0 ? rng_stream::source_sampler : rng_stream::target_sampler);
      ds.order[0] = resident_.order[d].data();
      ds.order[1] = resident_.order[d].data() + set.rows;
      ds.swaps[0] = resident_.swaps[d].data();
      ds.swaps[1] = resident_.swaps[d].data() + set.rows;
      most_rows = std::max(most_rows, set.rows);
    }
    resident_.held = buffer<std::int64_t, System>(4, std::int64_t(-1));
    for (int d = 0; d < 2; ++d) resident_.sampler[d].held = resident_.held.data() + 2 * d;
    resident_.position = {seed, batch_, &control_->batches};
    resident_.most_rows = most_rows;
    ops_.prepare_shuffle(most_rows);
    control_type c = control();
    c.batches = std::int64_t(first_batch);
    ops_.to_device(control_, &c, sizeof c);
    graph_ready_ = false;  // the step's graph now starts with the loader's kernels
    warmed_up_ = false;
  }
  //! Whether load_resident() gave the step its data.
  bool has_resident_data() const { return resident_.domains > 0; }

  // ---- Phases (queued by train_step's phases through queue_step) ----------------------------

  template <class Phases>
  void run(Phases&& phases) {
    std::forward<Phases>(phases)();
  }

  //! The view the head's forward and backward run on (head/view.hpp): its loops, sums and
  //! products are queued on the executor's stream.
  auto head_view() {
    T* g = nullptr;
    T* dg = nullptr;
    if constexpr (trains_discriminator) {
      g = discriminator_.output();
      dg = discriminator_.output_gradient();
    }
    return device::head_view<executor>(
        *this, head_shape(),
        head::view_buffers<T>{features_.output(), features_.output_gradient(), classifier_.output(),
                              classifier_.output_gradient(), g, dg, head_scratch_,
                              head_sums_.data()},
        scalar{&control_->used_scale, 1.0});
  }

  //! The batch is already in the system's memory: nothing to ready.
  void prepare_batch() {}
  //! The products read the master weights.
  void prepare_weights() {}

  //! Module M's forward: G_f on the batch, G_y on the first classifier rows of h, G_d on h or on
  //! the multilinear map for all rows.
  template <module M>
  void forward() {
    using stack = typename Net::template stack<M>;
    if constexpr (M == module::features)
      stack_forward<stack>(features_plans_, Net::features_offset, input_.data(), features_);
    else if constexpr (M == module::classifier)
      stack_forward<stack>(classifier_plans_, Net::classifier_offset, features_.output(),
                           classifier_);
    else
      stack_forward<stack>(discriminator_plans_, Net::discriminator_offset,
                           reads_joint ? joint_ : features_.output(), discriminator_);
  }

  //! Module M's backward from the gradient its output holds: writes ∂L/∂θ_M and sums its squared
  //! norm into device memory (the handle returned). G_y runs on the B source columns (all its
  //! rows when the head writes the target rows' logit gradient) and G_d on all rows; each writes
  //! (or, with `accumulate`, adds) input_scale times its input gradient into δh, or δT for a G_d
  //! that reads the multilinear map. input_scale may be a value in device memory (the reversal's
  //! −λ, a term's weight of a sum of heads).
  template <module M>
  scalar backward(scalar input_scale, bool accumulate) {
    using stack = typename Net::template stack<M>;
    constexpr index_t at = Net::template offset<M>;
    constexpr int m = M == module::features ? 0 : (M == module::classifier ? 1 : 2);
    double* norm = &control_->norm_sq[m];
    if constexpr (M == module::features) {
      stack_backward<stack>(features_plans_, at, input_.data(), features_, rows_, nullptr,
                            scalar(1.0), false);
    } else if constexpr (M == module::classifier) {
      stack_backward<stack>(classifier_plans_, at, features_.output(), classifier_,
                            classifier_backward_rows_, features_.output_gradient(), input_scale,
                            accumulate);
    } else {
      stack_backward<stack>(discriminator_plans_, at, reads_joint ? joint_ : features_.output(),
                            discriminator_, rows_,
                            reads_joint ? joint_gradient_ : features_.output_gradient(),
                            input_scale, accumulate);
    }
    ops_.sum(grads_.data() + at, stack::param_count, true, norm);
    return {norm, 1.0};
  }

  //! CDAN's multilinear map on all rows: g = softmax(z), T = g ⊗ h, and with `entropy_weights`
  //! each row's weight 1 + e^(−H(g)) normalised to sum to the row count (CDAN+E).
  void multilinear_map(bool entropy_weights) requires reads_joint {
    const head::cdan_maths::multilinear_column<T, head::no_rounding<T>> map{
        classifier_.output(),
        features_.output(),
        probabilities_,
        joint_,
        entropy_weights ? row_weights_ : nullptr,
        class_count,
        feature_width};
    if (entropy_weights) {
      // The weights' sum in the same pass, then each weight normalised by it.
      double* sum = &control_->weight_sum;
      ops_.template map_sum<1>(rows_, map, sum);
      for_each(rows_, head::cdan_maths::normalise_weights<T>{row_weights_, sum, rows_});
    } else {
      for_each(rows_, map);
    }
  }

  //! δh = Σ_c g_c · δT_c on all rows, written fresh (added to δh with `accumulate`).
  void multilinear_backward(bool accumulate = false) requires reads_joint {
    for_each(rows_, head::cdan_maths::multilinear_backward_column<T, head::no_rounding<T>>{
                        probabilities_, joint_gradient_, features_.output_gradient(), class_count,
                        feature_width, accumulate});
  }

  //! Softmax cross-entropy over the B source columns, summed into device memory (the handle
  //! returned is the mean); writes δz = S/B · (softmax − onehot). A label out of range is
  //! recorded, and the step refuses it (report()).
  scalar label_loss(scalar loss_scale) {
    const index_t b = batch_;
    ops_.template map_sum<1>(
        b,
        device::softmax_cross_entropy_column<T>{
            classifier_.output(), classifier_.output_gradient(), labels_.data(), class_count,
            loss_scale.scaled(1.0 / double(b)), &control_->bad_label},
        &control_->label_loss_sum);
    return {&control_->label_loss_sum, 1.0 / double(b)};
  }

  //! A discriminator's loss and accuracy as handles of device values.
  struct domain_figures {
    scalar loss, accuracy;
  };
  //! BCE of G_d's logit over all R rows (source 0, target 1), summed into device memory; writes
  //! S/R · (σ(z) − t) and counts the rows on the right side of 0. With `weighted` (CDAN+E), row
  //! i's loss and gradient are multiplied by multilinear_map's w_i.
  domain_figures domain_loss(scalar loss_scale,
                             bool weighted = false) requires trains_discriminator {
    const index_t rows = rows_;
    const T* weights = nullptr;
    if constexpr (reads_joint) weights = weighted ? row_weights_ : nullptr;
    // The loss and the hits summed in one pass, into adjacent values.
    static_assert(offsetof(control_type, domain_right) ==
                  offsetof(control_type, domain_loss_sum) + sizeof(double));
    ops_.template map_sum<2>(rows,
                             device::binary_cross_entropy_row<T>{
                                 discriminator_.output(), discriminator_.output_gradient(), weights,
                                 batch_, loss_scale.scaled(1.0 / double(rows))},
                             &control_->domain_loss_sum);
    return {{&control_->domain_loss_sum, 1.0 / double(rows)},
            {&control_->domain_right, 1.0 / double(rows)}};
  }

  // ---- Inference --------------------------------------------------------------------------

  //! G_f and G_y on `n` rows stored row-major in host memory at `rows` ([n, input_width]), in
  //! chunks of eval_chunk samples; writes what `out` asks for into host memory.
  template <class In>
  void infer(const In* rows, index_t n, inference out) {
    for (index_t first = 0; first < n; first += chunk_) {
      const index_t count = std::min(chunk_, n - first);
      // A short last chunk runs on the full plan width: its spare columns are zeros.
      std::fill(eval_staging_.begin(), eval_staging_.end(), T(0));
      std::transform(rows + first * input_width, rows + (first + count) * input_width,
                     eval_staging_.begin(), [](In v) { return T(v); });
      ops_.to_device(eval_input_, eval_staging_.data(), eval_staging_.size() * sizeof(T));
      stack_forward<feature_stack>(eval_features_plans_, Net::features_offset, eval_input_,
                                   eval_features_);
      stack_forward<classifier_stack>(eval_classifier_plans_, Net::classifier_offset,
                                      eval_features_.output(), eval_classifier_);
      for_each(count,
               device::predict_column<T>{eval_classifier_.output(), class_count,
                                         out.classes ? eval_classes_.data() : nullptr,
                                         out.probabilities ? eval_probabilities_.data() : nullptr});
      if (out.features)
        for_each(count * feature_width,
                 device::convert<T, float>{eval_features_.output(), eval_h_.data()});
      if (out.classes) download(out.classes + first, eval_classes_.data(), count);
      if (out.probabilities)
        download(out.probabilities + first * class_count, eval_probabilities_.data(),
                 count * class_count);
      if (out.features)
        download(out.features + first * feature_width, eval_h_.data(), count * feature_width);
    }
  }

 private:
  // thrust::for_each of f over [0, n) on the executor's stream.
  template <class F>
  void for_each(index_t n, const F& f) {
    if (n > 0) thrust::for_each_n(ops_.policy(), thrust::counting_iterator<index_t>(0), n, f);
  }

  // ---- What the head's view queues (device::head_view) ------------------------------------

  // The sizes the head sees.
  head::shape head_shape() const { return {batch_, rows_, feature_width, class_count}; }
  template <class F>
  void queue_for_each(index_t n, const F& f) {
    for_each(n, f);
  }
  template <int K, class F>
  void queue_map_sum(index_t n, const F& f, double* out) {
    ops_.template map_sum<K>(n, f, out);
  }
  // C = α·op(A)·op(B) + β·C for a head's product p: planned the first time p is queued, for any
  // operand address (the alignment of T alone), and kept.
  void queue_head_product(const head::product& p, T alpha, const T* a, const T* b, T beta, T* c) {
    auto it = std::find_if(head_plans_.begin(), head_plans_.end(),
                           [&](const auto& planned) { return planned.first == p; });
    if (it == head_plans_.end()) {
      p.check();
      head_plans_.emplace_back(
          p, ops_.plan(device::product_shape<T>{p.transpose_a, p.transpose_b, p.m, p.n, p.k, p.lda,
                                                p.ldb, p.ldc}));
      it = head_plans_.end() - 1;
    }
    ops_.run(it->second, alpha, a, b, beta, c);
  }

  // One step's work in order: begin_step, the phases, decide_step and (training) the update.
  template <class Rules, class Phases>
  void queue(const Rules& rules, Phases& phases, double lambda, bool update) {
    const bool draws = update && has_resident_data();
    if (draws) queue_batch();
    for_each(1, begin_step<Rules, control_type>{rules, control_, lambda});
    const auto f = phases(*this, backward_weights(), scalar{&control_->used_scale, 1.0}, nullptr);
    const step_figures figures{f.label_loss,
                               f.domain_loss,
                               f.domain_accuracy,
                               {f.features_sq, f.classifier_sq, f.discriminator_sq}};
    for_each(1,
             decide_step<Rules, Optim, T, weight_count>{rules, control_, figures, update, draws});
    if (update)
      for_each(Step::trained_param_count,
               device::update_parameter<Optim, T, weight_count>{
                   params_.data(), grads_.data(), state_.data(), Net::param_count, control_});
  }

  // What the head's backward takes, as handles of the values begin_step writes: λ, or one
  // weight per term of a sum of heads.
  auto backward_weights() const {
    if constexpr (weights_terms<head_type>) {
      std::array<scalar, head_type::term_count> w;
      for (std::size_t i = 0; i < w.size(); ++i) w[i] = scalar{&control_->weights[i], 1.0};
      return w;
    } else {
      return scalar{&control_->weights[0], 1.0};
    }
  }

  // The resident loader's kernels: the swaps of any epoch a domain's draws reach for the first
  // time, the permutations, then the gather into input() and source_labels().
  void queue_batch() {
    const device::domain_sampler* ds = resident_.sampler;
    for_each(resident_.most_rows,
             device::draw_swaps{resident_.position, {ds[0], ds[1]}, resident_.domains});
    ops_.shuffle(device::shuffle_domain{resident_.position, {ds[0], ds[1]}}, resident_.domains);
    for_each(input_width * rows_,
             device::gather_batch<T>{resident_.position,
                                     {ds[0], ds[1]},
                                     {resident_.rows[0].data(), resident_.rows[1].data()},
                                     resident_.labels.data(),
                                     input_width,
                                     input_.data(),
                                     labels_.data()});
  }

  // The control block, copied to the host after the queued work.
  control_type control() const {
    control_type c;
    ops_.to_host(&c, control_, sizeof c);
    return c;
  }

  const buffer<T, System>& part_buffer(state_part part) const {
    return part == state_part::parameters  ? params_
           : part == state_part::gradients ? grads_
                                           : state_;
  }
  static void check_size(state_part part, std::size_t given, std::size_t size) {
    if (given != size)
      fail("train_step",
           part == state_part::parameters  ? "parameters"
           : part == state_part::gradients ? "gradients"
                                           : "optimizer state",
           std::to_string(size) + " values", std::to_string(given));
  }

  // Forward through `Stack`, whose parameters start at `offset`, from x: [Stack::in, s.cols].
  template <class Stack>
  void stack_forward(const plans_of<Stack>& plans,
                     index_t offset,
                     const T* x,
                     const memory_of<Stack>& s) {
    const T* p = params_.data() + offset;
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (
          [&] {
            using layer = typename Stack::template layer<I>;
            const T* in = I == 0 ? x : s.outputs[I == 0 ? 0 : I - 1];
            ops_.run(plans.forward[I], T(1), p + Stack::template param_offset<I>(), in, T(0),
                     s.outputs[I]);
            // Bias (and ReLU) came with the product; another activation is applied here.
            if constexpr (!device::identity_layer<layer> && !device::relu_layer<layer>)
              for_each(layer::out * s.cols,
                       device::bias_activation<T, std::remove_cvref_t<decltype(layer::act)>>{
                           s.outputs[I], nullptr, layer::out, false, layer::act});
          }(),
          ...);
    }
    (std::make_index_sequence<Stack::depth>{});
  }

  // Backward through `Stack` on its first `cols` samples, given δy of its last layer: ∂L/∂θ at
  // grads + offset and, when `input_gradient`, alpha · δx written (or added) there.
  template <class Stack>
  void stack_backward(const plans_of<Stack>& plans,
                      index_t offset,
                      const T* x,
                      const memory_of<Stack>& s,
                      index_t cols,
                      T* input_gradient,
                      scalar input_scale,
                      bool accumulate) {
    const T* p = params_.data() + offset;
    T* g = grads_.data() + offset;
    [&]<std::size_t... L>(std::index_sequence<L...>) {
      (
          [&] {
            constexpr std::size_t l = Stack::depth - 1 - L;  // last layer first
            using layer = typename Stack::template layer<l>;
            T* dz = s.gradients[l];
            if constexpr (!device::identity_layer<layer>)
              for_each(layer::out * cols,
                       device::multiply_by_derivative<T, std::remove_cvref_t<decltype(layer::act)>>{
                           dz, s.outputs[l], layer::act});
            const T* in = l == 0 ? x : s.outputs[l == 0 ? 0 : l - 1];
            T* dw = g + Stack::template param_offset<l>();
            ops_.run(plans.weight_gradient[l], T(1), dz, in, T(0), dw);
            if (!plans.fused_bias_gradient[l])
              ops_.run(plans.bias_gradient[l], T(1), dz, ones_, T(0), dw + layer::weight_count);
            if constexpr (l > 0)
              ops_.run(plans.input_gradient[l], T(1), p + Stack::template param_offset<l>(), dz,
                       T(0), s.gradients[l - 1]);
            else if (input_gradient) {
              // A scale read when the step runs multiplies the first layer's output gradient
              // (its weight gradients are taken), so the product can still add: s·(Wᵀ·dz) =
              // Wᵀ·(s·dz).
              if (!input_scale.constant())
                for_each(layer::out * cols, head::scale_values<T>{dz, input_scale});
              const T alpha = input_scale.constant() ? T(input_scale.factor) : T(1);
              ops_.run(plans.input_gradient[0], alpha, p, dz, accumulate ? T(1) : T(0),
                       input_gradient);
            }
          }(),
          ...);
    }
    (std::make_index_sequence<Stack::depth>{});
  }

  ops_type ops_;  // first: the stream and the products' workspace outlive every buffer's use
  fit_args args_;
  index_t batch_, rows_, classifier_rows_;
  index_t classifier_backward_rows_;  // B, or G_y's rows when the head writes their δz
  index_t chunk_;
  buffer<T, System> params_, grads_, state_;       // [param_count] each, state × state_per_param
  buffer<T, System> input_;                        // [input_width, rows]
  buffer<std::int32_t, System> labels_;            // [B]
  buffer<double, System> head_sums_;               // the head's sum_count sums
  buffer<std::uint64_t, System> control_storage_;  // room for the control block
  control_type* control_ = nullptr;                // in control_storage_
  buffer<T, System> workspace_;                    // every activation below, carved once
  memory_of<feature_stack> features_;
  memory_of<classifier_stack> classifier_;
  memory_of<discriminator_stack> discriminator_;
  T* probabilities_ = nullptr;   // CDAN: softmax(g) [classes, rows]
  T* joint_ = nullptr;           // T [classes · F, rows]
  T* joint_gradient_ = nullptr;  // δT
  T* row_weights_ = nullptr;     // CDAN+E's w [rows]
  T* head_scratch_ = nullptr;    // the head's scratch_elements(shape) values
  // The head's products (head/view.hpp), each planned once.
  std::vector<std::pair<head::product, typename ops_type::template product_plan<T>>> head_plans_;
  T* eval_input_ = nullptr;  // [input_width, chunk]
  memory_of<feature_stack> eval_features_;
  memory_of<classifier_stack> eval_classifier_;
  T* ones_ = nullptr;  // [max(rows, chunk)] ones: ∂b = δz·1
  buffer<std::int32_t, System> eval_classes_;
  buffer<float, System> eval_probabilities_, eval_h_;
  std::vector<T> eval_staging_;  // host: one chunk of rows converted to T
  plans_of<feature_stack> features_plans_, eval_features_plans_;
  plans_of<classifier_stack> classifier_plans_, eval_classifier_plans_;
  plans_of<discriminator_stack> discriminator_plans_;
  // loader::resident's data and samplers (load_resident), in the system's memory.
  struct resident_data {
    int domains = 0;                         // 0: none loaded; 1: source only; 2: source and target
    buffer<float, System> rows[2];           // row-major [R, width] per domain
    buffer<std::int32_t, System> labels;     // the source's [R_s]
    buffer<std::int32_t, System> order[2];   // two permutations per domain
    buffer<std::uint32_t, System> swaps[2];  // their swaps
    buffer<std::int64_t, System> held;       // [2 domains × 2 slots]
    device::domain_sampler sampler[2];
    device::sampler_position position;
    index_t most_rows = 0;
  } resident_;
  typename ops_type::graph graph_;  // the captured step (systems that capture)
  bool graph_ready_ = false;
  bool warmed_up_ = false;  // a step has run uncaptured since the kernels last changed
  bool capture_ = true;
};

}  // namespace dafuse::backend
