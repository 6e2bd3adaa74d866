// SPDX-License-Identifier: Apache-2.0
//! @file step/eager_step.hpp
//! @brief `eager_step`: train_step's maths run eagerly, one primitive per operation with every
//! intermediate in its own buffer: the baseline that fused-vs-eager benchmarks compare against.
//!
//! It takes train_step's template arguments and fit_args, starts from the same weights (same seed,
//! same nn::initialize calls in the same order) and computes the same losses, gradients, clipping
//! and update, but as PyTorch eager runs a DANN step: each operation is its own pass over memory
//! and writes its own buffer. One run() does, in this order (B source rows, R = 2B rows with an
//! adversarial head, B without):
//!
//!   forward, per layer of G_f (R cols), G_y (B cols), G_d (R cols):
//!     z = W·x              GEMM (gemm_workspace), or the sparse product for an nn::sparse_input
//!                          first layer, into z's buffer
//!     z += b               a pass over z
//!     a = f(z)             a pass into a's buffer (none for an identity layer: a is z)
//!   label loss:  log-probabilities = log_softmax(z_y)  → their buffer [C, B]
//!                probabilities = exp(log-probabilities) → their buffer [C, B]
//!                L_y = −mean log-probability of the label (the NLL gather)
//!   domain loss: ℓ_c = BCE-with-logits(z_d, t_c)         → a buffer [R]
//!                L_d = mean ℓ;  accuracy = mean [sign(z_d) right]   (two more passes)
//!   backward:    δz_y = (probabilities − onehot) / B;  δz_d = (σ(z_d) − t) / R
//!     per layer, last to first:
//!       δz = δa ⊙ f'(a)    a pass into δz's buffer (none for an identity layer)
//!       ∂L/∂W = δz·xᵀ      GEMM into the gradient buffer (sparse first layer: zero the whole
//!                          ∂L/∂W, then scatter one scaled δz column per non-zero)
//!       ∂L/∂b = Σ_cols δz  a pass
//!       δx = Wᵀ·δz         GEMM into δx's buffer (skipped for G_f's first layer)
//!     δh_r = −λ·δh_d       the reversal: a pass into its own buffer
//!     δh = δh_r + [δh_y, 0] a pass (δh = δh_y without an adversarial head)
//!   norms:  ‖∂L/∂W‖², ‖∂L/∂b‖² of every layer, a pass per tensor (torch's clip_grad_norm_)
//!   clip:   norm policies: g ← g·scale over each module (as clip_grad_norm_, which multiplies
//!           even by 1); clip::value: g ← clamp(g, ±limit) (clip_grad_value_); clip::none: nothing
//!   update: the optimizer's pass: Optim::update on each parameter (scale 1, no clamp)
//!
//! The fused step instead applies bias and activation to each product's output in the same pass,
//! writes softmax-CE and BCE and their gradients in one pass, folds −λ into the product that
//! writes δh and the sum into the next product's β, accumulates the norms while it writes the
//! gradients and clips inside the update pass. The maths is the same, operation by operation, so
//! the two steps agree to rounding (tested to 1e-12 in fp64 and 1e-5 in fp32; measured: the same
//! weights bit for bit on the tests' dense networks, and within 3e-8 after 550 fp32 steps of the
//! demo network with global-norm clipping).
//!
//! The update is one pass per module, Optim::update itself, so that the rule is literally the
//! policy's. PyTorch's CPU SGD does 2–3 passes (weight decay, momentum buffer, parameter) and Adam
//! 5–7: the eager baseline here is, if anything, a little faster than PyTorch's.
//!
//! Every buffer is allocated by the constructor; run() allocates nothing. fp32 and fp64 only.
#pragma once
#include <dafuse/config.hpp>

#include <dafuse/backend/default_system.hpp>
#include <dafuse/backend/host/conv.hpp>
#include <dafuse/backend/host/dense.hpp>
#include <dafuse/backend/host/gemm.hpp>
#include <dafuse/backend/host/products.hpp>
#include <dafuse/backend/host/sparse.hpp>
#include <dafuse/backend/host/sparse_checks.hpp>
#include <dafuse/backend/host/step_memory.hpp>
#include <dafuse/backend/host/update.hpp>
#include <dafuse/core/buffer.hpp>
#include <dafuse/core/error.hpp>
#include <dafuse/core/half.hpp>
#include <dafuse/core/meta.hpp>
#include <dafuse/core/profiler.hpp>
#include <dafuse/core/rng.hpp>
#include <dafuse/head/head_base.hpp>
#include <dafuse/nn/conv2d.hpp>
#include <dafuse/nn/dann_net.hpp>
#include <dafuse/nn/grad_reversal.hpp>
#include <dafuse/nn/init.hpp>
#include <dafuse/policy/arguments.hpp>
#include <dafuse/policy/clip.hpp>
#include <dafuse/policy/loader.hpp>
#include <dafuse/policy/optim.hpp>
#include <dafuse/policy/precision.hpp>
#include <dafuse/policy/schedule.hpp>
#include <dafuse/step/step_types.hpp>
#include <dafuse/step/train_step.hpp>

#include <Eigen/Core>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <type_traits>
#include <utility>

namespace dafuse {

namespace detail {

//! Whether eager_step runs precision P: one without a 16-bit format and without a loss scaler
//! (fp32, fp64). A type that is no precision policy passes here: the precision slot's own check
//! names it.
template <class P>
constexpr bool eager_precision() {
  if constexpr (precision_policy<P>)
    return !is_narrow<P::compute_format> && !P::loss_scale_type::scales;
  else
    return true;
}

//! eager_step's buffers of one layer stack for `cols` samples: per layer l, z_l = W·x + b, the
//! activation a_l = f(z_l), the gradient δa_l and δz_l = δa_l ⊙ f'(a_l), each [out_l, cols] in
//! memory of its own, except that an identity layer's a_l is z_l and its δz_l is δa_l (there is
//! no operation between them, as in PyTorch).
template <class Stack, class T>
struct eager_stack_buffers {
  std::array<matrix_view<T>, Stack::depth> products;           //!< z_l = W·x + b
  std::array<matrix_view<T>, Stack::depth> outputs;            //!< a_l = f(z_l)
  std::array<matrix_view<T>, Stack::depth> output_gradients;   //!< δa_l
  std::array<matrix_view<T>, Stack::depth> product_gradients;  //!< δz_l
  std::array<T*, Stack::depth> indices{};  //!< a max-pooling's argmax: [out_l, cols], else null
  backend::host::conv_scratch<T> conv;     //!< the convolutions' im2col chunk (host/conv.hpp)
  index_t cols = 0;                        //!< samples

  //! Whether layer I has no activation (its a is its z, its δz its δa).
  template <std::size_t I>
  static constexpr bool is_identity = decltype(Stack::template layer<I>::act)::is_identity;

  //! Values needed for `cols` samples: four [out] columns per layer, two for an identity one.
  static constexpr index_t elements(index_t cols) {
    return [&]<std::size_t... I>(std::index_sequence<I...>) {
      return ((Stack::template layer<I>::out * (is_identity<I> ? 2 : 4)) + ...) * cols +
             Stack::index_count * cols + backend::host::conv_scratch_elements<Stack>(1);
    }
    (std::make_index_sequence<Stack::depth>{});
  }

  eager_stack_buffers() = default;
  //! Carves the buffers from `block`, which holds elements(columns) values.
  eager_stack_buffers(T* block, index_t columns) : cols(columns) {
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (
          [&] {
            const index_t out = Stack::template layer<I>::out;
            const auto next = [&] {
              const matrix_view<T> v{block, out, cols};
              block += out * cols;
              return v;
            };
            products[I] = next();
            outputs[I] = is_identity<I> ? products[I] : next();
            output_gradients[I] = next();
            product_gradients[I] = is_identity<I> ? output_gradients[I] : next();
          }(),
          ...);
      ((indices[I] = nn::index_count_of<typename Stack::template layer<I>>() > 0
                         ? block + Stack::template index_offset<I>() * cols
                         : nullptr),
       ...);
      // One part: each convolution's products split among the threads as gemm splits them.
      if constexpr (Stack::patch_elements > 0)
        conv = backend::host::conv_scratch<T>::template of<Stack>(block + Stack::index_count * cols,
                                                                  1);
    }
    (std::make_index_sequence<Stack::depth>{});
  }

  //! a of the last layer: the stack's output, [out, cols].
  matrix_view<T> output() const { return outputs[Stack::depth - 1]; }
  //! δa of the last layer: the gradient the stack's backward starts from, [out, cols].
  matrix_view<T> output_gradient() const { return output_gradients[Stack::depth - 1]; }
};

}  // namespace detail

//! train_step's training step executed eagerly (see the file comment for its passes). Same
//! template arguments, same fit_args, same initial weights, same results to rounding; training
//! only (evaluate with a train_step that reads parameters()).
template <class Net,
          class Loader,
          class Precision,
          class Clip,
          class Head,
          class Optim,
          class System = backend::default_system>
class eager_step : public checked_step_types<Net, Loader, Precision, Clip, Head, Optim> {
  using types = checked_step_types<Net, Loader, Precision, Clip, Head, Optim>;
  static_assert(detail::eager_precision<typename types::precision_type>(),
                "dafuse: eager_step runs precision::fp32 and precision::fp64 only (eager mixed "
                "precision and loss scaling are out of scope); compare bf16/fp16 with train_step "
                "alone, or run the eager baseline in fp32");
  using checked_system = typename detail::system_check<System>::type;
  static_assert(checked_system::host_accessible,
                "dafuse: eager_step runs on the host backend only (system::omp or system::cpp)");
  static_assert(!types::head_type::classifier_reads_target &&
                    types::head_type::discriminator_reads != discriminator_input::multilinear &&
                    !types::head_type::own_maths && !types::head_type::writes_logit_gradient &&
                    !weights_terms<typename types::head_type>,
                "dafuse: eager_step runs head::source_only and head::dann (G_d reading h); "
                "compare other heads with train_step alone");
  // The eager passes are DANN's: G_d on all rows of h, through the reversal.
  static constexpr bool adversarial = types::trains_discriminator;

 public:
  using system_type = checked_system;  //!< where memory lives
  using typename types::classifier_stack;
  using typename types::clip_type;
  using typename types::discriminator_stack;
  using typename types::feature_stack;
  using typename types::head_type;
  using typename types::net_type;
  using typename types::optim_type;
  using typename types::schedule_type;
  using typename types::value_type;
  using types::can_implement;  //!< train_step's run-time checks: both accept the same arguments
  using types::class_count;
  using types::compute_format;
  using types::draws_target_rows;
  using types::feature_width;
  using types::input_width;
  using types::sparse_input;
  using types::trained_param_count;
  using types::trains_discriminator;
  //! The fused step with the same arguments: the one this step's results match.
  using fused_type = train_step<Net, Loader, Precision, Clip, Head, Optim, System>;

  //! Sizes and allocates every buffer once, and initialises the parameters from args.seed exactly
  //! as train_step does.
  explicit eager_step(const fit_args& args)
      : args_(checked(args)), memory_(args_.batch, args_.sparse_nonzeros) {
    const index_t b = args_.batch;
    const index_t rows = feature_rows();
    const index_t adversarial_values = adversarial
                                           ? stack_buffers<discriminator_stack>::elements(rows) +
                                                 rows + feature_width * (b + 2 * rows)
                                           : 0;
    workspace_ = buffer<value_type, system_type>(stack_buffers<feature_stack>::elements(rows) +
                                                 stack_buffers<classifier_stack>::elements(b) +
                                                 2 * class_count * b + adversarial_values);
    value_type* cursor = workspace_.data();
    const auto carve = [&](index_t n) {
      value_type* p = cursor;
      cursor += n;
      return p;
    };
    features_ = {carve(stack_buffers<feature_stack>::elements(rows)), rows};
    classifier_ = {carve(stack_buffers<classifier_stack>::elements(b)), b};
    log_probabilities_ = {carve(class_count * b), class_count, b};
    probabilities_ = {carve(class_count * b), class_count, b};
    if constexpr (adversarial) {
      discriminator_ = {carve(stack_buffers<discriminator_stack>::elements(rows)), rows};
      domain_losses_ = {carve(rows), 1, rows};
      classifier_input_gradient_ = {carve(feature_width * b), feature_width, b};
      discriminator_input_gradient_ = {carve(feature_width * rows), feature_width, rows};
      reversed_gradient_ = {carve(feature_width * rows), feature_width, rows};
    }
    // One set of GEMM packing buffers for the largest product, sized as train_step sizes its own.
    const index_t widest =
        std::max({feature_stack::max_product_side, classifier_stack::max_product_side,
                  discriminator_stack::max_product_side, input_width});
    gemm_ = products_type(widest, std::max(widest, rows), std::max(widest, rows));
    // As train_step: the same splits, the same sums.
    gemm_.reserve_partial_sums(std::min(
        widest * rows, std::max({backend::host::dense_partial_sums<feature_stack>(rows),
                                 backend::host::dense_partial_sums<classifier_stack>(rows),
                                 backend::host::dense_partial_sums<discriminator_stack>(rows)})));
    initialize_parameters(args_.seed);
  }

  //! Draws fresh parameters from `seed` (nn::initialize_parameters, as train_step) and clears the
  //! optimizer state and step count.
  void initialize_parameters(std::uint64_t seed) {
    memory_.initialize(seed, args_.init);
    step_index_ = 0;
  }

  //! Rows the step reads per call: B source then B target (B only without an adversarial head).
  index_t feature_rows() const { return types::rows_for(args_.batch); }

  //! The batch the loader fills: [input_width, feature_rows()], source columns first.
  matrix_view<value_type> input() requires(!sparse_input) { return memory_.input(); }

  //! Where a sparse batch goes (sparse_input only), as train_step::sparse_batch_slots:
  //! feature_rows() samples, source first, in CSR form (offsets[0] = 0; sample c's non-zeros are
  //! values[k] at feature indices[k] for k in [offsets[c], offsets[c + 1])), with room for
  //! input_width non-zeros per sample.
  using sparse_batch_slots = typename fused_type::sparse_batch_slots;
  sparse_batch_slots sparse_batch() requires sparse_input { return memory_.sparse_batch(); }
  //! The source rows' class labels: [B], each in [0, class_count).
  std::span<std::int32_t> source_labels() { return memory_.source_labels(); }

  //! One training step on input() (or sparse_batch()) and source_labels): forward, losses,
  //! backward, norms, clip, update, each operation its own pass.
  step_report run() {
    const step_rates rates = types::rates(args_, step_index_);
    const double lambda = rates.lambda, lr = rates.lr;
    step_report report = compute_gradients(lambda);
    report.lr = lr;
    profile_scope timing(profiler_, phase::update);
    // As train_step: a non-finite gradient skips the update; the schedule still advances.
    if (!std::isfinite(report.grad_norm)) {
      report.skipped = true;
      ++step_index_;
      return report;
    }
    clip_gradients(clip_type::scales(norms_, args_));
    update_parameters(lr);
    ++step_index_;
    return report;
  }

  //! Forward, losses, backward and norms only: fills gradients() for the current parameters with
  //! reversal weight λ and returns the losses; no parameter changes.
  step_report compute_gradients(double lambda) {
    if constexpr (sparse_input)
      return compute_gradients_on(checked_sparse_batch(), lambda);
    else
      return compute_gradients_on(matrix_view<const value_type>(input()), lambda);
  }

  std::span<value_type> parameters() { return memory_.parameters(); }
  std::span<const value_type> parameters() const { return memory_.parameters(); }
  //! The gradients of the last step: raw after compute_gradients(); after run(), clipped in
  //! place when the clip policy clipped (as a PyTorch parameter's .grad after clip_grad_norm_).
  std::span<const value_type> gradients() const { return memory_.gradients(); }
  //! Squared norms of the last raw gradients, per module.
  const grad_norms& norms() const { return norms_; }
  //! The optimizer's per-parameter state, in train_step's layout.
  std::span<value_type> optimizer_state() { return memory_.optimizer_state(); }
  std::span<const value_type> optimizer_state() const { return memory_.optimizer_state(); }
  //! Bytes of every buffer the step owns (parameters, gradients, optimizer state, batch, every
  //! intermediate; not the GEMM packing buffers), counted as train_step::memory_bytes counts its
  //! own: what benchmarks compare between executions.
  std::size_t memory_bytes() const {
    const auto bytes = [](const auto& b) { return b.size() * sizeof(*b.data()); };
    return memory_.memory_bytes() + bytes(workspace_);
  }
  //! Steps taken since initialisation.
  index_t step_index() const { return step_index_; }
  //! Times every later run() into `p` (forward, backward, update), as train_step; not owned.
  void set_profiler(profiler* p) { profiler_ = p; }
  const fit_args& args() const { return args_; }

 private:
  using T = value_type;
  template <class Stack>
  using stack_buffers = detail::eager_stack_buffers<Stack, T>;
  using products_type = backend::host::products_for<compute_format, T>;
  using matrix_map = backend::host::matrix_map<T>;
  using const_matrix_map = backend::host::const_matrix_map<T>;
  using vector_map = backend::host::vector_map<T>;
  using const_vector_map = backend::host::const_vector_map<T>;
  using op = backend::host::op;

  static const fit_args& checked(const fit_args& a) {
    if (const status s = can_implement(a); !s) throw error(s.message);
    return a;
  }

  // The CSR batch as a view, after train_step's checks (same messages, named eager_step).
  sparse_matrix_view<const T> checked_sparse_batch() {
    const index_t rows = feature_rows();
    const sparse_matrix_view<const T> x = memory_.sparse_view();
    backend::host::check_sparse_offsets("eager_step", x.offsets, rows, memory_.sparse_capacity());
    backend::host::check_sparse_indices("eager_step", x.indices, x.offsets[rows], input_width);
    return x;
  }

  template <class Input>
  step_report compute_gradients_on(const Input& x, double lambda) {
    const index_t b = args_.batch;
    const T* p = memory_.parameters().data();
    T* g = memory_.gradients().data();
    step_report report;
    report.lambda = lambda;

    profile_scope forward_timing(profiler_, phase::forward);
    forward<feature_stack>(p + net_type::features_offset, x, features_);
    const matrix_view<const T> h = features_.output();  // [feature_width, rows]
    const matrix_view<const T> h_source = h.middle_cols(0, b);
    forward<classifier_stack>(p + net_type::classifier_offset, h_source, classifier_);
    report.label_loss = label_loss();
    if constexpr (adversarial) {
      forward<discriminator_stack>(p + net_type::discriminator_offset, h, discriminator_);
      domain_loss(report);
    }
    forward_timing.stop();

    profile_scope backward_timing(profiler_, phase::backward);
    label_loss_gradient();
    const matrix_view<T> dh = features_.output_gradient();  // δh: [feature_width, rows]
    if constexpr (adversarial) {
      domain_loss_gradient();
      backward<discriminator_stack>(p + net_type::discriminator_offset,
                                    g + net_type::discriminator_offset, h, discriminator_,
                                    discriminator_input_gradient_);
      reverse_gradient(lambda);
      backward<classifier_stack>(p + net_type::classifier_offset, g + net_type::classifier_offset,
                                 h_source, classifier_, classifier_input_gradient_);
      sum_feature_gradients(dh);
    } else {
      // Without G_d, G_y's input gradient is δh itself.
      backward<classifier_stack>(p + net_type::classifier_offset, g + net_type::classifier_offset,
                                 h_source, classifier_, dh);
    }
    backward<feature_stack>(p + net_type::features_offset, g + net_type::features_offset, x,
                            features_, matrix_view<T>{});

    // Gradient norms: a pass per parameter tensor, after the backward (clip_grad_norm_).
    norms_ = {};
    norms_.features_sq = squared_norm<feature_stack>(g + net_type::features_offset);
    norms_.classifier_sq = squared_norm<classifier_stack>(g + net_type::classifier_offset);
    if constexpr (adversarial)
      norms_.discriminator_sq =
          squared_norm<discriminator_stack>(g + net_type::discriminator_offset);
    report.grad_norm = norms_.global();
    report.task_grad_norm = norms_.task();
    report.discriminator_grad_norm = norms_.discriminator();
    return report;
  }

  // a_l for every layer of `Stack` on x: [in, n], three passes per layer.
  template <class Stack, class Input>
  void forward(const T* params, const Input& x, const stack_buffers<Stack>& s) {
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (
          [&] {
            using layer = typename Stack::template layer<I>;
            const T* w = params + Stack::template param_offset<I>();
            constexpr nn::layer_kind kind = nn::kind_of<layer>();
            if constexpr (kind == nn::layer_kind::max_pool2d) {
              // a = max over each window (and its argmax), one pass
              backend::host::max_pool_forward<layer>(layer_input<Stack, I>(x, s),
                                                     s.products[I].data, s.indices[I]);
            } else if constexpr (kind == nn::layer_kind::conv2d) {
              // z = W·X̂ (im2col, then the product, chunk by chunk of samples), z += b by channel
              backend::host::conv_forward<layer>(gemm_, w, layer_input<Stack, I>(x, s),
                                                 s.products[I].data, s.conv,
                                                 [](T*) { return backend::host::no_finish{}; });
              matrix_map(s.products[I].data, layer::out_channels, layer::pixels * s.cols)
                  .colwise() += const_vector_map(w + layer::weight_count, layer::out_channels);
            } else {
              // z = W·x: [out, in]·[in, n] (GEMM, or one scaled column of W per sparse non-zero)
              if constexpr (I == 0)
                backend::host::input_product<layer>(gemm_, w, x, s.products[I].data);
              else
                backend::host::input_product<layer>(
                    gemm_, w, matrix_view<const T>(s.outputs[I - 1]), s.products[I].data);
              // z += b
              backend::host::map(s.products[I]).colwise() +=
                  const_vector_map(w + layer::weight_count, layer::out);
            }
            // a = f(z)
            if constexpr (!stack_buffers<Stack>::template is_identity<I>)
              backend::host::map(s.outputs[I]) =
                  backend::host::map(s.products[I]).unaryExpr([](T v) { return T(layer::act(v)); });
          }(),
          ...);
    }
    (std::make_index_sequence<Stack::depth>{});
  }

  // Backward through `Stack` from δa of its last layer (s.output_gradient()): writes ∂L/∂θ at
  // `grads` and, when `input_gradient` is given, δx into it.
  template <class Stack, class Input>
  void backward(const T* params,
                T* grads,
                const Input& x,
                const stack_buffers<Stack>& s,
                matrix_view<T> input_gradient) {
    const index_t n = s.cols;
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      // Layers last to first: fold over the reversed index sequence.
      (
          [&] {
            constexpr std::size_t l = Stack::depth - 1 - I;
            using layer = typename Stack::template layer<l>;
            // δz = δa ⊙ f'(a) (f' read from the output, as the fused backward does)
            if constexpr (!stack_buffers<Stack>::template is_identity<l>)
              backend::host::map(s.product_gradients[l]) =
                  backend::host::map(s.output_gradients[l])
                      .binaryExpr(backend::host::map(s.outputs[l]), [](T d, T a) {
                        return d * T(layer::act.derivative_from_output(a));
                      });
            const T* dz = s.product_gradients[l].data;
            const T* w = params + Stack::template param_offset<l>();
            T* gw = grads + Stack::template param_offset<l>();
            constexpr nn::layer_kind kind = nn::kind_of<layer>();
            if constexpr (kind != nn::layer_kind::dense) {
              matrix_view<T> dx = input_gradient;
              if constexpr (l > 0) dx = s.output_gradients[l - 1];
              if constexpr (kind == nn::layer_kind::max_pool2d) {
                // δx: each δa routed to its window's argmax
                if (dx.data != nullptr)
                  backend::host::max_pool_backward<layer>(dz, s.indices[l], n, dx.data, T(1), false,
                                                          [](index_t) { return T(1); });
              } else {
                // ∂L/∂W = δZ·X̂ᵀ, ∂L/∂b = Σ δz by channel, δx = col2im(Wᵀ·δZ)
                backend::host::conv_weight_gradient<layer>(gemm_, dz, layer_input<Stack, l>(x, s),
                                                           gw, s.conv, backend::host::no_finish{});
                if (dx.data != nullptr)
                  backend::host::conv_input_gradient<layer>(gemm_, w, dz, n, dx.data, T(1), false,
                                                            s.conv);
              }
            } else {
              // ∂L/∂W = δz·xᵀ: [out, n]·[n, in]
              if constexpr (l == 0 && std::is_same_v<Input, sparse_matrix_view<const T>>) {
                // A sparse x gives PyTorch's dense gradient of W: zero all of it, then add one
                // scaled column of δz per non-zero (the library's sparse weight gradient).
                matrix_map(gw, layer::out, layer::in).setZero();
                backend::host::sparse_weight_gradient<products_type>(dz, layer::out, x, gw);
              } else {
                const matrix_view<const T> in = layer_input<Stack, l>(x, s);
                gemm_.template product<op::none, op::transpose>(
                    layer::out, layer::in, n, T(1), dz, layer::out, in.data, layer::in, T(0), gw,
                    layer::out, backend::host::no_finish{},
                    gemm_.split_layer(layer::out, layer::in, n).weight_gradient);
              }
              // ∂L/∂b = Σ_columns δz
              vector_map(gw + layer::weight_count, layer::out).noalias() =
                  backend::host::map(s.product_gradients[l]).rowwise().sum();
              // δx = Wᵀ·δz: [in, out]·[out, n]
              matrix_view<T> dx = input_gradient;
              if constexpr (l > 0) dx = s.output_gradients[l - 1];
              if (dx.data != nullptr)
                gemm_.template product<op::transpose, op::none>(
                    layer::in, n, layer::out, T(1), w, layer::out, dz, layer::out, T(0), dx.data,
                    layer::in, backend::host::no_finish{},
                    gemm_.split_layer(layer::out, layer::in, n).input_gradient);
            }
          }(),
          ...);
    }
    (std::make_index_sequence<Stack::depth>{});
  }

  // The input of layer L of `Stack`: x for the first layer, the previous layer's a otherwise.
  template <class Stack, std::size_t L, class Input>
  static matrix_view<const T> layer_input(const Input& x, const stack_buffers<Stack>& s) {
    if constexpr (L == 0)
      return x;
    else
      return s.outputs[L - 1];
  }

  // Σ ‖g‖² over the stack's tensors (each layer's W, then b), each its own pass, summed in double.
  template <class Stack>
  static double squared_norm(const T* grads) {
    double sum = 0;
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (
          [&] {
            using layer = typename Stack::template layer<I>;
            const T* gw = grads + Stack::template param_offset<I>();
            sum += double(const_vector_map(gw, layer::weight_count).squaredNorm());
            sum +=
                double(const_vector_map(gw + layer::weight_count, layer::bias_count).squaredNorm());
          }(),
          ...);
    }
    (std::make_index_sequence<Stack::depth>{});
    return sum;
  }

  // L_y = mean softmax cross-entropy of G_y's logits over the B source columns, as F.cross_entropy
  // computes it: log_softmax into its buffer, the probabilities into theirs (kept for the
  // backward), then the NLL gather and mean. ℓ = −log p_y = logsumexp(z) − z_y (nn/loss.hpp).
  double label_loss() {
    const index_t b = args_.batch;
    const matrix_view<const T> z = classifier_.output();
    // log p = z − max z − log Σ exp(z − max z): subtracting the max keeps exp finite.
    for (index_t c = 0; c < b; ++c) {
      const T* zc = &z(0, c);
      T zmax = zc[0];
      for (index_t k = 1; k < class_count; ++k) zmax = zc[k] > zmax ? zc[k] : zmax;
      T sum = 0;
      for (index_t k = 0; k < class_count; ++k) sum += std::exp(zc[k] - zmax);
      const T log_sum = std::log(sum);
      for (index_t k = 0; k < class_count; ++k) log_probabilities_(k, c) = zc[k] - zmax - log_sum;
    }
    // p = exp(log p)
    backend::host::map(probabilities_) =
        backend::host::map(log_probabilities_).unaryExpr([](T v) { return T(std::exp(v)); });
    // NLL: −mean over the samples of log p at the label.
    const std::int32_t* y = memory_.source_labels().data();
    double sum = 0;
    for (index_t c = 0; c < b; ++c) {
      if (y[c] < 0 || y[c] >= class_count)
        fail("eager_step", "source_labels()[" + std::to_string(c) + "]",
             "a class in [0, " + std::to_string(class_count) + ")", std::to_string(y[c]));
      sum -= double(log_probabilities_(y[c], c));
    }
    return sum / double(b);
  }

  // δz_y = (p − onehot(y)) / B into G_y's output gradient.
  void label_loss_gradient() {
    const index_t b = args_.batch;
    const matrix_view<T> dz = classifier_.output_gradient();
    const std::int32_t* y = memory_.source_labels().data();
    const T scale = T(1.0 / double(b));
    for (index_t c = 0; c < b; ++c)
      for (index_t k = 0; k < class_count; ++k)
        dz(k, c) = scale * (probabilities_(k, c) - (k == y[c] ? T(1) : T(0)));
  }

  // L_d = mean BCE on G_d's logit over the 2B columns (source t = 0, target t = 1), as
  // BCEWithLogitsLoss: the element-wise losses into their buffer, then the mean; then the share
  // of logits on the right side of 0 (source < 0 < target), a pass of its own.
  void domain_loss(step_report& report) {
    const index_t rows = feature_rows(), b = args_.batch;
    const T* z = discriminator_.output().data;
    T* losses = domain_losses_.data;
    // ℓ = max(z, 0) − z·t + log(1 + e^(−|z|)) (nn/loss.hpp), never overflowing
    for (index_t c = 0; c < rows; ++c) {
      const T t = c >= b ? T(1) : T(0);
      losses[c] = (z[c] > T(0) ? z[c] : T(0)) - z[c] * t + std::log1p(std::exp(-std::abs(z[c])));
    }
    double sum = 0;
    for (index_t c = 0; c < rows; ++c) sum += double(losses[c]);
    report.domain_loss = sum / double(rows);
    index_t right = 0;
    for (index_t c = 0; c < rows; ++c) right += c >= b ? z[c] > 0 : z[c] < 0;
    report.domain_accuracy = double(right) / double(rows);
  }

  // δz_d = (σ(z) − t) / 2B into G_d's output gradient (σ in the form nn/loss.hpp uses).
  void domain_loss_gradient() {
    const index_t rows = feature_rows(), b = args_.batch;
    const T* z = discriminator_.output().data;
    T* dz = discriminator_.output_gradient().data;
    const T scale = T(1.0 / double(rows));
    for (index_t c = 0; c < rows; ++c) {
      const T e = std::exp(-std::abs(z[c]));
      const T sigma = z[c] >= T(0) ? T(1) / (T(1) + e) : e / (T(1) + e);
      dz[c] = scale * (sigma - (c >= b ? T(1) : T(0)));
    }
  }

  // The gradient reversal's backward (Ganin & Lempitsky 2015): δh_r = −λ·δh_d, G_f ascends L_d.
  void reverse_gradient(double lambda) {
    const nn::grad_reversal<T> reversal{T(lambda)};
    backend::host::map(reversed_gradient_) =
        backend::host::map(discriminator_input_gradient_).unaryExpr([reversal](T d) {
          return reversal.backward(d);
        });
  }

  // δh = δh_r + [δh_y, 0]: G_y saw only the source columns (autograd's sum of h's two uses).
  void sum_feature_gradients(matrix_view<T> dh) {
    const index_t b = args_.batch;
    backend::host::map(dh.middle_cols(0, b)) =
        backend::host::map(reversed_gradient_.middle_cols(0, b)) +
        backend::host::map(classifier_input_gradient_);
    backend::host::map(dh.middle_cols(b, b)) =
        backend::host::map(reversed_gradient_.middle_cols(b, b));
  }

  // Clipping in place, on the raw norms: the clip policy's per-module scales (a pass per module,
  // whenever the policy scales: clip_grad_norm_ multiplies by its clamped coefficient even when
  // it is 1), then its clamp (a pass, clip_grad_value_). clip::none does nothing.
  void clip_gradients(const clip_scales& c) {
    if constexpr (!std::is_same_v<clip_type, clip::none>) {
      T* g = memory_.gradients().data();
      const bool clamps = std::isfinite(c.limit);
      if (!clamps || c.task != 1 || c.discriminator != 1) {
        vector_map(g, net_type::task_param_count) *= T(c.task);
        if constexpr (adversarial)
          vector_map(g + net_type::discriminator_offset,
                     net_type::param_count - net_type::discriminator_offset) *= T(c.discriminator);
      }
      if (clamps) {
        const T bound = T(c.limit);
        vector_map v(g, trained_param_count);
        v = v.unaryExpr([bound](T x) { return x < -bound ? -bound : (x > bound ? bound : x); });
      }
    }
  }

  // The optimizer's pass: Optim::update on every trained parameter with its module's learning
  // rate, through the library's update pass with scale 1 and no clamp (clipping is done).
  void update_parameters(double lr) {
    using region = backend::host::update_region<optim_type, T>;
    const auto module_region = [&](index_t begin, index_t end, float lr_mult) {
      return region{begin, end, T(1),
                    optim_type::template make<T>(args_, lr * double(lr_mult), step_index_)};
    };
    const std::array<region, 3> regions{
        module_region(net_type::features_offset, net_type::classifier_offset,
                      args_.lr_mult.features),
        module_region(net_type::classifier_offset, net_type::discriminator_offset,
                      args_.lr_mult.classifier),
        // Without an adversarial head G_d is not trained: an empty range.
        module_region(net_type::discriminator_offset, trained_param_count,
                      args_.lr_mult.discriminator)};
    backend::host::update_parameters<optim_type, system_type>(
        memory_.parameters().data(), memory_.gradients().data(), memory_.optimizer_state().data(),
        net_type::param_count, regions, std::numeric_limits<double>::infinity(), !sparse_input);
  }

  fit_args args_;
  // Parameters, gradients, optimizer state, batch and labels, as the fused step's executor holds
  // them.
  backend::host::step_memory<types, system_type> memory_;
  buffer<T, system_type> workspace_;       // every buffer below, carved once
  stack_buffers<feature_stack> features_;  // z, a, δa, δz per layer; δa of the last is δh
  stack_buffers<classifier_stack> classifier_;
  stack_buffers<discriminator_stack> discriminator_;
  matrix_view<T> log_probabilities_;             // [class_count, B]
  matrix_view<T> probabilities_;                 // [class_count, B]
  matrix_view<T> domain_losses_;                 // [1, rows]: BCE of each row
  matrix_view<T> classifier_input_gradient_;     // δh_y: [feature_width, B]
  matrix_view<T> discriminator_input_gradient_;  // δh_d: [feature_width, rows]
  matrix_view<T> reversed_gradient_;             // δh_r = −λ·δh_d: [feature_width, rows]
  products_type gemm_;
  grad_norms norms_;
  index_t step_index_ = 0;
  profiler* profiler_ = nullptr;  // set_profiler(): times the phases of run(), not owned
};

}  // namespace dafuse
