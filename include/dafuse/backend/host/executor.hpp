// SPDX-License-Identifier: Apache-2.0
//! @file backend/host/executor.hpp
//! @brief The host executor: runs a step's phases on Thrust's OpenMP or CPP system with the host
//! product kernels, one held OpenMP team, and every buffer sized once.
//!
//! Mixed precision (policy/precision.hpp): the batch, a working copy of the weights, every layer
//! output, every δ and every parameter gradient are rounded to the 16-bit format as they are
//! written (where the bf16 kernel rounds its operands itself, only the biases of that copy are:
//! its products read the master weights). The loss scale S enters through the losses' gradients
//! and nowhere else; the gradients' squared norms are accumulated as the gradients are written.
#pragma once
#include <dafuse/config.hpp>

#include <dafuse/backend/executor.hpp>
#include <dafuse/backend/host/cpu_check.hpp>
#include <dafuse/backend/host/dense.hpp>
#include <dafuse/backend/host/loss.hpp>
#include <dafuse/backend/host/products.hpp>
#include <dafuse/backend/host/sparse.hpp>
#include <dafuse/backend/host/sparse_checks.hpp>
#include <dafuse/backend/host/step_memory.hpp>
#include <dafuse/backend/host/team.hpp>
#include <dafuse/backend/host/update.hpp>
#include <dafuse/core/buffer.hpp>
#include <dafuse/core/error.hpp>
#include <dafuse/core/meta.hpp>
#include <dafuse/core/system.hpp>
#include <dafuse/head/head_base.hpp>
#include <dafuse/nn/conv2d.hpp>
#include <dafuse/nn/dann_net.hpp>
#include <dafuse/nn/init.hpp>
#include <dafuse/nn/loss.hpp>
#include <dafuse/policy/arguments.hpp>

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

namespace dafuse::backend {

//! A system whose memory the host reads and writes directly: Thrust's OpenMP and CPP systems.
template <class System>
concept host_system = System::host_accessible;

template <class System, class Step>
requires host_system<System>
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
  static_assert(!Step::mixed || Step::compute_format == number_format::bf16 ||
                    !nn::has_image_layers<typename net_type::feature_stack>,
                "dafuse: nn::conv_net runs in fp32, fp64 or bf16 on the host; use precision::bf16 "
                "or precision::fp32 for a step with convolutions");

 private:
  using Net = net_type;
  using Optim = optim_type;
  using feature_stack = typename Net::feature_stack;
  using classifier_stack = typename Net::classifier_stack;
  using discriminator_stack = typename Net::discriminator_stack;
  static constexpr bool mixed = Step::mixed;
  static constexpr bool trains_discriminator = Step::trains_discriminator;
  // G_d reads the multilinear map softmax(g) ⊗ h (CDAN) rather than h.
  static constexpr bool reads_joint =
      Step::head_type::discriminator_reads == discriminator_input::multilinear;
  // Values of one column of the multilinear map: classes · features.
  static constexpr index_t joint_width = reads_joint ? class_count * feature_width : 0;
  // The executor operations the head calls beyond the modules' passes.
  static constexpr head_operation head_ops = Step::head_type::operations;
  static constexpr bool aligns_covariance = uses(head_ops, head_operation::covariance_alignment);
  static constexpr bool measures_discrepancy = uses(head_ops, head_operation::kernel_discrepancy);
  static constexpr bool confuses_classes = uses(head_ops, head_operation::class_confusion);
  // MDD's adversarial classifier f' is G_d.
  static constexpr bool measures_disparity =
      uses(head_ops, head_operation::margin_disparity) && trains_discriminator;
  template <class Stack>
  using stack_scratch = host::stack_scratch<Stack, value_type>;
  using products_type = host::products_for<Step::compute_format, value_type>;

 public:
  //! Sizes and allocates every buffer once for args.batch and args.eval_chunk; the parameters
  //! are left for initialize().
  explicit executor(const fit_args& args)
      : args_(args),
        memory_(args.batch, args.sparse_nonzeros),
        batch_(args.batch),
        rows_(Step::rows_for(args.batch)),
        classifier_rows_(Step::classifier_rows_for(args.batch)),
        classifier_backward_rows_(Step::classifier_backward_rows_for(args.batch)) {
    const index_t b = batch_, rows = rows_, classified = classifier_rows_;
    if constexpr (mixed)
      working_params_ = buffer<value_type, System>(Net::param_count, value_type(0));
    if constexpr (sparse_input) {
      used_features_ = buffer<std::int32_t, System>(input_width);
      previous_used_features_ = buffer<std::int32_t, System>(input_width);
      feature_marks_ = buffer<std::uint8_t, System>(input_width, 0);
      // On several threads the batch is dealt among them by feature, and each runs the first
      // layer's products on its own columns of W (backend/host/sparse.hpp).
      if (const int threads = std::min(host::available_threads(), 64);
          std::is_same_v<System, system::omp> && threads > 1) {
        constexpr index_t out = feature_stack::template layer<0>::out;
        feature_parts_ = host::sparse_feature_parts<value_type>(
            input_width, out, rows, index_t(memory_.sparse_capacity()), threads,
            host::sparse_deal_block<value_type>(input_width, out, threads));
      }
    }
    const index_t chunk = args.eval_chunk;
    // CDAN's map: softmax(g) [classes, rows], T and δT [classes · features, rows], row weights.
    const index_t joint_values =
        reads_joint ? class_count * rows + 2 * joint_width * rows + rows : 0;
    // CORAL: the centred features X̃ [features, rows] and D = C_s − C_t [features, features].
    const index_t coral_values =
        aligns_covariance ? feature_width * rows + feature_width * feature_width : 0;
    // MMD: one value per pair of rows (its distance, then its gradient coefficient).
    const index_t mmd_values = measures_discrepancy ? rows * rows : 0;
    // MCC: the target rows' softmax Ŷ [classes, B], their weights [B], and two per-class values.
    const index_t mcc_values = confuses_classes ? class_count * b + b + 2 * class_count : 0;
    // A conv_net's convolutions run one part per thread of the products' workspace (conv.hpp).
    const int parts = host::available_threads();
    // Training and inference never run at once (they share gemm_ too), and nothing in the
    // training scratch outlives a step: the evaluation scratch takes the same place.
    const index_t training_values =
        stack_scratch<feature_stack>::elements(rows, true, parts) +
        stack_scratch<classifier_stack>::elements(classified, true, parts) +
        (trains_discriminator ? stack_scratch<discriminator_stack>::elements(rows, true, parts)
                              : 0) +
        joint_values + coral_values + mmd_values + mcc_values;
    const index_t evaluation_values =
        (sparse_input ? 0 : input_width * chunk) +
        stack_scratch<feature_stack>::elements(chunk, false, parts) +
        stack_scratch<classifier_stack>::elements(chunk, false, parts);
    workspace_ = buffer<value_type, System>(std::max(training_values, evaluation_values));
    value_type* cursor = workspace_.data();
    auto carve = [&](index_t n) {
      value_type* p = cursor;
      cursor += n;
      return p;
    };
    features_ = {carve(stack_scratch<feature_stack>::elements(rows, true, parts)), rows, true,
                 parts};
    classifier_ = {carve(stack_scratch<classifier_stack>::elements(classified, true, parts)),
                   classified, true, parts};
    if constexpr (trains_discriminator)
      discriminator_ = {carve(stack_scratch<discriminator_stack>::elements(rows, true, parts)),
                        rows, true, parts};
    if constexpr (reads_joint) {
      probabilities_ = {carve(class_count * rows), class_count, rows};
      joint_ = {carve(joint_width * rows), joint_width, rows};
      joint_gradient_ = {carve(joint_width * rows), joint_width, rows};
      row_weights_ = {carve(rows), 1, rows};
    }
    if constexpr (aligns_covariance) {
      centered_features_ = {carve(feature_width * rows), feature_width, rows};
      covariance_difference_ = {carve(feature_width * feature_width), feature_width, feature_width};
    }
    if constexpr (measures_discrepancy) pair_values_ = {carve(rows * rows), rows, rows};
    if constexpr (confuses_classes) {
      target_probabilities_ = {carve(class_count * b), class_count, b};
      target_weights_ = {carve(b), 1, b};
      class_terms_ = {carve(2 * class_count), class_count, 2};
    }
    cursor = workspace_.data();
    eval_input_ = {carve(sparse_input ? 0 : input_width * chunk), input_width, chunk};
    eval_features_ = {carve(stack_scratch<feature_stack>::elements(chunk, false, parts)), chunk,
                      false, parts};
    eval_classifier_ = {carve(stack_scratch<classifier_stack>::elements(chunk, false, parts)),
                        chunk, false, parts};
    // One set of GEMM packing buffers for the largest product of the step.
    const index_t widest =
        std::max({feature_stack::max_product_side, classifier_stack::max_product_side,
                  discriminator_stack::max_product_side, input_width, joint_width});
    const index_t longest = std::max(rows, chunk);
    gemm_ = products_type(widest, std::max(widest, longest), std::max(widest, longest));
    // Partial sums for the forward products that layer_split divides by W's columns: [out, n]
    // per extra thread for n < in samples (dense_partial_sums), within widest·rows values (an
    // evaluation chunk wider than a batch keeps the split by rows where they would not fit).
    gemm_.reserve_partial_sums(std::min(
        widest * rows, std::max({host::dense_partial_sums<feature_stack>(longest),
                                 host::dense_partial_sums<classifier_stack>(longest),
                                 host::dense_partial_sums<discriminator_stack>(longest)})));
    std::size_t next = 0;
    add_weight_blocks<feature_stack>(Net::features_offset, rows, next);
    add_weight_blocks<classifier_stack>(Net::classifier_offset, classifier_backward_rows_, next);
    add_weight_blocks<discriminator_stack>(Net::discriminator_offset, rows, next);
    holds_team_ = std::is_same_v<System, system::omp> &&
                  ((nn::has_image_layers<feature_stack> && parts > 1) ||
                   std::any_of(weight_blocks_.begin(), weight_blocks_.end(),
                               [](const auto& w) { return w.split.threads > 1; }));
  }

  //! Draws fresh parameters from `seed` (nn::initialize_parameters) and zeroes the optimizer
  //! state.
  void initialize(std::uint64_t seed, nn::weight_init init) { memory_.initialize(seed, init); }

  // ---- Where the loader writes -------------------------------------------------------------

  //! The dense batch: [input_width, rows], source columns first.
  matrix_view<value_type> input() requires(!sparse_input) { return memory_.input(); }
  //! The sparse batch's CSR arrays, with room for the densest batch.
  sparse_batch_slots<value_type> sparse_batch() requires sparse_input {
    return memory_.sparse_batch();
  }
  //! The source rows' class labels: [B].
  std::span<std::int32_t> source_labels() { return memory_.source_labels(); }

  // ---- State ------------------------------------------------------------------------------

  std::span<value_type> parameters() { return memory_.parameters(); }
  std::span<const value_type> parameters() const { return memory_.parameters(); }
  std::span<const value_type> gradients() const { return memory_.gradients(); }
  std::span<value_type> optimizer_state() { return memory_.optimizer_state(); }
  std::span<const value_type> optimizer_state() const { return memory_.optimizer_state(); }
  //! Copies one part of the state into `to` (its size must be the part's).
  void read(state_part part, std::span<value_type> to) const {
    const std::span<const value_type> from = part == state_part::parameters  ? parameters()
                                             : part == state_part::gradients ? gradients()
                                                                             : optimizer_state();
    check_size(part, to.size(), from.size());
    std::copy(from.begin(), from.end(), to.begin());
  }
  //! Writes one part of the state from `from`.
  void write(state_part part, std::span<const value_type> from) {
    const std::span<value_type> to = part == state_part::parameters  ? parameters()
                                     : part == state_part::gradients ? memory_.gradients()
                                                                     : optimizer_state();
    check_size(part, from.size(), to.size());
    std::copy(from.begin(), from.end(), to.begin());
  }
  //! Bytes of every buffer the executor owns (not the GEMM packing buffers).
  std::size_t memory_bytes() const {
    const auto bytes = [](const auto& b) { return b.size() * sizeof(*b.data()); };
    return memory_.memory_bytes() + bytes(working_params_) + bytes(used_features_) +
           bytes(previous_used_features_) + bytes(feature_marks_) + bytes(workspace_) +
           feature_parts_.memory_bytes();
  }

  // ---- Phases -----------------------------------------------------------------------------

  //! Runs phases() on the calling thread, with one OpenMP team held for it when some product
  //! splits among threads (backend/host/team.hpp); a step that splits nothing would pay for it.
  //! The pacer keeps the team off while it costs more than the calling thread alone (a busy
  //! machine); the values are the same bits either way.
  template <class Phases>
  void run(Phases&& phases) {
    host::with_thread_team(holds_team_, &pacer_, std::forward<Phases>(phases));
  }

  //! Checks the batch and readies it: a dense batch is rounded to the compute format; a sparse
  //! one is listed (or dealt among the threads) by feature, and the first layer's weight
  //! gradient is cleared where the previous batch wrote it.
  void prepare_batch() {
    if constexpr (sparse_input) {
      if (dealt())
        dealt_batch_ = deal_sparse_batch();
      else
        listed_batch_ = prepare_sparse_batch();
    } else if constexpr (mixed) {
      // A sparse batch's values are rounded as the first layer reads them; a dense one here.
      round_in_place(input().data, input_width * rows_);
    }
  }

  //! Readies the weights the products read (mixed precision: the rounded working copy).
  void prepare_weights() {
    p_ = working_parameters();
    w_ = product_weights(p_);
  }

  //! Module M's forward: G_f on the batch; G_y on the first Step::classifier_rows_for(B) columns
  //! of h; G_d on what the head has it read (h, or the multilinear map) for all rows.
  template <module M>
  void forward() {
    using stack = typename Net::template stack<M>;
    constexpr index_t at = Net::template offset<M>;
    if constexpr (M == module::features)
      with_batch(
          [&](const auto& x) { host::forward<stack>(p_ + at, x, features_, gemm_, w_ + at); });
    else
      host::forward<stack>(p_ + at, module_input<M>(scratch<M>().cols), scratch<M>(), gemm_,
                           w_ + at);
  }

  //! Module M's backward from the gradient its output holds: writes ∂L/∂θ_M and returns its
  //! squared norm. G_y runs it on the B source columns (the label loss's; all rows when the head
  //! writes the target rows' logit gradient) and G_d on all rows;
  //! each writes (or, with `accumulate`, adds) input_scale · its input gradient into the
  //! gradient of what it read: δh's columns, or δT for a G_d that reads the multilinear map.
  template <module M>
  double backward(double input_scale, bool accumulate) {
    using stack = typename Net::template stack<M>;
    constexpr index_t at = Net::template offset<M>;
    value_type* g = memory_.gradients().data();
    if constexpr (M == module::features) {
      double sq = 0;
      with_batch([&](const auto& x) {
        sq = host::backward<stack>(p_ + at, g + at, x, features_, gemm_, {}, value_type(1), false,
                                   w_ + at);
      });
      return sq;
    } else {
      const index_t cols = M == module::classifier ? classifier_backward_rows_ : scratch<M>().cols;
      const matrix_view<value_type> input_gradient =
          M == module::discriminator && reads_joint
              ? joint_gradient_
              : features_.output_gradient().middle_cols(0, cols);
      return host::backward<stack>(p_ + at, g + at, module_input<M>(cols),
                                   scratch<M>().leading(cols), gemm_, input_gradient,
                                   value_type(input_scale), accumulate, w_ + at);
    }
  }

  //! CDAN's multilinear map on all rows: g = softmax(z) of G_y's logits, T = g ⊗ h
  //! (T[c·F + j] = g_c·h_j), and, when `entropy_weights`, each row's weight 1 + e^(−H(g))
  //! normalised to sum to the row count (CDAN+E).
  void multilinear_map(bool entropy_weights) requires reads_joint {
    const index_t rows = rows_;
    const matrix_view<value_type> z = classifier_.output();
    const matrix_view<value_type> h = features_.output();
    double weight_sum = 0;
    for (index_t c = 0; c < rows; ++c) {
      value_type* g = &probabilities_(0, c);
      nn::softmax(&z(0, c), class_count, g);
      if (entropy_weights) {
        const double w = 1.0 + std::exp(-double(nn::softmax_entropy(&z(0, c), class_count)));
        row_weights_(0, c) = value_type(w);
        weight_sum += w;
      }
      value_type* t = &joint_(0, c);
      for (index_t k = 0; k < class_count; ++k)
        for (index_t j = 0; j < feature_width; ++j)
          t[k * feature_width + j] = products_type::round(g[k] * h(j, c));
    }
    if (entropy_weights)
      for (index_t c = 0; c < rows; ++c)
        row_weights_(0, c) = value_type(double(row_weights_(0, c)) * double(rows) / weight_sum);
  }

  //! δh = Σ_c g_c · δT_c on all rows (g a constant, as the map's forward took it), written fresh
  //! (added to δh with `accumulate`: a later term of a sum of heads).
  void multilinear_backward(bool accumulate = false) requires reads_joint {
    const matrix_view<value_type> dh = features_.output_gradient();
    for (index_t c = 0; c < rows_; ++c) {
      const value_type* g = &probabilities_(0, c);
      const value_type* dt = &joint_gradient_(0, c);
      value_type* out = &dh(0, c);
      if (!accumulate)
        for (index_t j = 0; j < feature_width; ++j) out[j] = value_type(0);
      for (index_t k = 0; k < class_count; ++k)
        for (index_t j = 0; j < feature_width; ++j) out[j] += g[k] * dt[k * feature_width + j];
      for (index_t j = 0; j < feature_width; ++j) out[j] = products_type::round(out[j]);
    }
  }

  //! Mean softmax cross-entropy of G_y's logits over the B source columns; writes their gradient
  //! δz = S/B · (softmax(z) − onehot(y)), the loss scale S entering here and nowhere else.
  double label_loss(double loss_scale) {
    const index_t b = batch_;
    const matrix_view<value_type> z = classifier_.output();
    const matrix_view<value_type> dz = classifier_.output_gradient();
    const std::int32_t* y = memory_.source_labels().data();
    const value_type scale = value_type(loss_scale / double(b));
    for (index_t c = 0; c < b; ++c)
      if (y[c] < 0 || y[c] >= class_count)
        fail("train_step", "source_labels()[" + std::to_string(c) + "]",
             "a class in [0, " + std::to_string(class_count) + ")", std::to_string(y[c]));
    return host::softmax_cross_entropy(z.data, class_count, b, y, scale, dz.data) / double(b);
  }

  //! Mean BCE of G_d's logit over all R rows (the B source rows 0, the rest 1); writes its
  //! gradient S/R · (σ(z) − t), and counts the logits on the right side of 0 in the same pass.
  //! With `weighted` (CDAN+E) row i's loss and gradient are multiplied by multilinear_map's w_i.
  domain_loss_result domain_loss(double loss_scale,
                                 bool weighted = false) requires trains_discriminator {
    const index_t rows = rows_;
    const value_type* z = discriminator_.output().data;
    value_type* dz = discriminator_.output_gradient().data;
    const value_type scale = value_type(loss_scale / double(rows));
    index_t right = 0;
    double sum = 0;
    if constexpr (reads_joint) {
      if (weighted) {
        for (index_t c = 0; c < rows; ++c) {
          const value_type w = row_weights_(0, c);
          const value_type t = value_type(c >= batch_);
          sum +=
              double(w) * double(nn::binary_cross_entropy_with_logit(z[c], t, scale * w, &dz[c]));
          right += c >= batch_ ? z[c] > value_type(0) : z[c] < value_type(0);
        }
        return {sum / double(rows), double(right) / double(rows)};
      }
    }
    sum = host::binary_cross_entropy_with_logits(z, rows, batch_, scale, dz, right);
    return {sum / double(rows), double(right) / double(rows)};
  }

  //! Deep CORAL (Sun & Saenko 2016) on h: with X̃ each domain's B columns of h less their mean,
  //! C = X̃·X̃ᵀ/(B − 1) its unbiased covariance [F, F] (F features) and D = C_s − C_t, returns
  //! L = ‖D‖²_F / (4F²), and keeps X̃, D and the loss scale S for coral_backward.
  domain_loss_result coral_loss(double loss_scale) requires aligns_covariance {
    const index_t b = batch_, f = feature_width;
    const matrix_view<value_type> h = features_.output();
    const matrix_view<value_type> x = centered_features_;
    for (const index_t first : {index_t(0), b})
      for (index_t j = 0; j < f; ++j) {
        double mean = 0;
        for (index_t c = first; c < first + b; ++c) mean += double(h(j, c));
        mean /= double(b);
        for (index_t c = first; c < first + b; ++c)
          x(j, c) = products_type::round(value_type(double(h(j, c)) - mean));
      }
    // D = X̃_s·X̃_sᵀ/(B − 1) − X̃_t·X̃_tᵀ/(B − 1): two products into one [F, F] buffer.
    value_type* d = covariance_difference_.data;
    const value_type alpha = value_type(1.0 / double(b - 1));
    gemm_.template product<host::op::none, host::op::transpose>(f, f, b, alpha, x.data, f, x.data,
                                                                f, value_type(0), d, f);
    gemm_.template product<host::op::none, host::op::transpose>(
        f, f, b, -alpha, x.data + f * b, f, x.data + f * b, f, value_type(1), d, f);
    round_in_place(d, f * f);
    double sum = 0;
    for (index_t k = 0; k < f * f; ++k) sum += double(d[k]) * double(d[k]);
    head_loss_scale_ = loss_scale;
    return {sum / (4.0 * double(f) * double(f)), 0.0};
  }
  //! CORAL's gradient, λ·S·∂L/∂h, written fresh into δh: ∂L/∂C_s = D/(2F²) and, D symmetric,
  //! ∂L/∂x̃_i = D·x̃_i/((B − 1)·F²) on a source column, its negative on a target one; the centring
  //! adds nothing (X̃'s columns sum to 0, so Σ_i D·x̃_i = 0). Added to δh with `accumulate`. G_d
  //! is not trained: returns 0.
  double coral_backward(double weight, bool accumulate = false) requires aligns_covariance {
    const index_t b = batch_, f = feature_width;
    const value_type coefficient =
        value_type(weight * head_loss_scale_ / (double(b - 1) * double(f) * double(f)));
    const value_type* d = covariance_difference_.data;
    const value_type* x = centered_features_.data;
    value_type* dh = features_.output_gradient().data;
    const value_type beta = accumulate ? value_type(1) : value_type(0);
    gemm_.template product<host::op::none, host::op::none>(f, b, f, coefficient, d, f, x, f, beta,
                                                           dh, f);
    gemm_.template product<host::op::none, host::op::none>(f, b, f, -coefficient, d, f, x + f * b,
                                                           f, beta, dh + f * b, f);
    round_in_place(dh, f * rows_);
    return 0.0;
  }

  //! Multi-kernel MMD² (DAN: Long et al. 2015) between the source and target rows of h, with
  //! k(d) = (1/K)·Σ_u exp(−d / (2·α_u·m̄)) on d = ‖h_i − h_j‖², the K bandwidth multipliers α_u
  //! in `multipliers` and m̄ the mean of d over the pairs the estimator reads (a constant for the
  //! gradient). The estimator is L = Σ_pairs c_ij·k(d_ij) over pairs i < j: unbiased quadratic,
  //! c = 2/(B(B − 1)) within a domain and −2/B² across; or, `linear`, the linear-time one over
  //! the quad-tuples (s_2i, s_2i+1, t_2i, t_2i+1): c = 2/B for (s_2i, s_2i+1) and (t_2i, t_2i+1),
  //! −2/B for (s_2i, t_2i+1) and (s_2i+1, t_2i). Keeps each pair's 2·c·k'(d) for mmd_backward.
  template <std::size_t K>
  domain_loss_result mmd_loss(double loss_scale,
                              bool linear,
                              const std::array<double, K>& multipliers) requires
      measures_discrepancy {
    const matrix_view<value_type> h = features_.output();
    const matrix_view<value_type> pairs = pair_values_;
    linear_mmd_ = linear;
    double total = 0;
    index_t count = 0;
    for_each_mmd_pair(linear, [&](index_t i, index_t j, double) {
      const value_type* a = &h(0, i);
      const value_type* b = &h(0, j);
      value_type d = 0;
      for (index_t f = 0; f < feature_width; ++f) d += (a[f] - b[f]) * (a[f] - b[f]);
      pairs(i, j) = d;
      total += double(d);
      ++count;
    });
    // Every row the same: every d is 0, and any bandwidth gives the same loss and gradient.
    const double mean = total > 0 ? total / double(count) : 1.0;
    double loss = 0;
    for_each_mmd_pair(linear, [&](index_t i, index_t j, double c) {
      double k = 0, slope = 0;
      for (const double alpha : multipliers) {
        const double width = 2.0 * alpha * mean, e = std::exp(-double(pairs(i, j)) / width);
        k += e;
        slope -= e / width;
      }
      loss += c * k / double(K);
      pairs(i, j) = value_type(2.0 * c * slope / double(K));
    });
    head_loss_scale_ = loss_scale;
    return {loss, 0.0};
  }
  //! MMD's gradient, λ·S·∂L/∂h, written fresh into δh (added to it with `accumulate`): each pair
  //! adds q·(h_i − h_j) to δh_i and subtracts it from δh_j, q = λ·S·2·c·k'(d) (∂d/∂h_i =
  //! 2(h_i − h_j)). Returns 0 (no G_d).
  double mmd_backward(double weight, bool accumulate = false) requires measures_discrepancy {
    const matrix_view<value_type> h = features_.output();
    const matrix_view<value_type> dh = features_.output_gradient();
    const matrix_view<value_type> pairs = pair_values_;
    const double scale = weight * head_loss_scale_;
    if (!accumulate) std::fill_n(dh.data, feature_width * rows_, value_type(0));
    for_each_mmd_pair(linear_mmd_, [&](index_t i, index_t j, double) {
      const value_type q = value_type(scale * double(pairs(i, j)));
      const value_type* a = &h(0, i);
      const value_type* b = &h(0, j);
      value_type* da = &dh(0, i);
      value_type* db = &dh(0, j);
      for (index_t f = 0; f < feature_width; ++f) {
        const value_type v = q * (a[f] - b[f]);
        da[f] += v;
        db[f] -= v;
      }
    });
    round_in_place(dh.data, feature_width * rows_);
    return 0.0;
  }

  //! Minimum Class Confusion (Jin et al. 2020) on the B target rows' logits z: Ŷ_i =
  //! softmax(z_i/T); w_i = 1 + e^(−H(Ŷ_i)) normalised to Σ w = B (a constant for the gradient);
  //! the class confusion C = Ŷᵀ·diag(w)·Ŷ [classes, classes], each column divided by its sum s_j;
  //! L = Σ_{j≠j'} C̃_jj' / classes. Ŷ's rows sum to 1, so s_j = Σ_i w_i·Ŷ_ij, the normalised
  //! columns sum to 1, and L = 1 − (1/classes)·Σ_j C_jj/s_j. Keeps Ŷ, w and the per-class terms.
  domain_loss_result mcc_loss(double loss_scale, double temperature) requires confuses_classes {
    const index_t b = batch_;
    const matrix_view<value_type> z = classifier_.output();
    const matrix_view<value_type> y = target_probabilities_;
    value_type* w = target_weights_.data;
    double weight_sum = 0;
    for (index_t i = 0; i < b; ++i) {
      const value_type* zi = &z(0, b + i);
      value_type zmax = zi[0];
      for (index_t k = 1; k < class_count; ++k) zmax = std::max(zmax, zi[k]);
      // H = log Σ e^u − Σ Ŷ·u with u = (z − max z)/T: exact, no ε inside a log.
      double total = 0, weighted = 0;
      for (index_t k = 0; k < class_count; ++k) {
        const double u = (double(zi[k]) - double(zmax)) / temperature, e = std::exp(u);
        y(k, i) = value_type(e);
        total += e;
        weighted += e * u;
      }
      for (index_t k = 0; k < class_count; ++k) y(k, i) = value_type(double(y(k, i)) / total);
      const double entropy = std::log(total) - weighted / total;
      w[i] = value_type(1.0 + std::exp(-entropy));
      weight_sum += double(w[i]);
    }
    for (index_t i = 0; i < b; ++i) w[i] = value_type(double(w[i]) * double(b) / weight_sum);
    double trace = 0;
    for (index_t k = 0; k < class_count; ++k) {
      double s = 0, c = 0;
      for (index_t i = 0; i < b; ++i) {
        s += double(w[i]) * double(y(k, i));
        c += double(w[i]) * double(y(k, i)) * double(y(k, i));
      }
      // A class no row gives any probability (underflow) confuses nothing: c_jj/s_j → 0.
      const bool seen = s > 0;
      class_terms_(k, 0) = value_type(seen ? 2.0 / s : 0.0);
      class_terms_(k, 1) = value_type(seen ? c / (s * s) : 0.0);
      trace += seen ? c / s : 0.0;
    }
    head_loss_scale_ = loss_scale;
    temperature_ = temperature;
    return {1.0 - trace / double(class_count), 0.0};
  }
  //! MCC's gradient, λ·S·∂L/∂z, written fresh into the target rows' δz: with w constant,
  //! ∂L/∂Ŷ_ik = −(w_i/classes)·(2·Ŷ_ik/s_k − C_kk/s_k²), then through the softmax at
  //! temperature T: δz_i = (λS/T)·Ŷ_i ⊙ (g_i − ⟨g_i, Ŷ_i⟩). Returns 0 (no G_d).
  double mcc_backward(double weight) requires confuses_classes {
    const index_t b = batch_;
    const matrix_view<value_type> dz = classifier_.output_gradient();
    const matrix_view<value_type> y = target_probabilities_;
    const double scale = weight * head_loss_scale_ / temperature_;
    for (index_t i = 0; i < b; ++i) {
      const double wi = double(target_weights_.data[i]) / double(class_count);
      value_type* di = &dz(0, b + i);
      double mean = 0;
      for (index_t k = 0; k < class_count; ++k) {
        const double g =
            -wi * (double(class_terms_(k, 0)) * double(y(k, i)) - double(class_terms_(k, 1)));
        di[k] = value_type(g);
        mean += g * double(y(k, i));
      }
      for (index_t k = 0; k < class_count; ++k)
        di[k] = products_type::round(value_type(scale * double(y(k, i)) * (double(di[k]) - mean)));
    }
    return 0.0;
  }

  //! Margin disparity discrepancy (Zhang et al. 2019) with G_d as the adversarial classifier f'
  //! (one logit a class) and G_y's predictions ŷ = argmax z as pseudo-labels (constants): with
  //! p = softmax(f'(h)), L = γ·(1/B)·Σ_source −log p_ŷ + (1/B)·Σ_target −log(1 − p_ŷ). Writes
  //! G_d's output gradient S·∂L/∂f' (G_d's backward takes it from there, through the reversal):
  //! (S·γ/B)·(p − onehot(ŷ)) on a source row and (S/B)·(p − q) on a target row, q the softmax of
  //! f' over the classes other than ŷ (q_ŷ = 0). −log(1 − p_ŷ) = logsumexp(f') −
  //! logsumexp_{k≠ŷ}(f'): exact, no ε inside a log. The accuracy is the fraction of rows where
  //! f' does what it is trained for: agree with ŷ on a source row, disagree on a target row.
  domain_loss_result mdd_loss(double loss_scale, double margin) requires measures_disparity {
    const index_t b = batch_, rows = rows_;
    const matrix_view<value_type> z = classifier_.output();
    const matrix_view<value_type> f = discriminator_.output();
    const matrix_view<value_type> gradient = discriminator_.output_gradient();
    double source = 0, target = 0;
    index_t right = 0;
    for (index_t c = 0; c < rows; ++c) {
      const bool is_source = c < b;
      const std::int32_t y = nn::argmax(&z(0, c), class_count);
      const value_type* fc = &f(0, c);
      value_type* dc = &gradient(0, c);
      // logsumexp over all classes and over the classes other than ŷ, from one maximum each.
      double all_max = double(fc[0]), rest_max = -std::numeric_limits<double>::infinity();
      for (index_t k = 0; k < class_count; ++k) {
        all_max = std::max(all_max, double(fc[k]));
        if (k != y) rest_max = std::max(rest_max, double(fc[k]));
      }
      double all = 0, rest = 0;
      for (index_t k = 0; k < class_count; ++k) {
        all += std::exp(double(fc[k]) - all_max);
        if (k != y) rest += std::exp(double(fc[k]) - rest_max);
      }
      const double log_all = all_max + std::log(all), log_rest = rest_max + std::log(rest);
      const double scale = loss_scale / double(b) * (is_source ? margin : 1.0);
      for (index_t k = 0; k < class_count; ++k) {
        const double p = std::exp(double(fc[k]) - log_all);
        const double other = is_source ? double(k == y)
                             : k == y  ? 0.0
                                       : std::exp(double(fc[k]) - log_rest);
        dc[k] = products_type::round(value_type(scale * (p - other)));
      }
      if (is_source)
        source += log_all - double(fc[y]);
      else
        target += log_all - log_rest;
      right += (nn::argmax(fc, class_count) == y) == is_source;
    }
    return {(margin * source + target) / double(b), double(right) / double(rows)};
  }

  //! One pass over the parameters: each module's gradients are multiplied by its scale and
  //! clamped to ±clip_limit, then its optimizer rule runs with its learning rate. Each thread
  //! updates the weights whose gradients it wrote; a sparse step on one thread runs no parallel
  //! region before its update and keeps it on that thread.
  void update(const std::array<module_update, 3>& modules, double clip_limit, index_t step_index) {
    using region = host::update_region<Optim, value_type>;
    std::array<region, 3> regions;
    for (std::size_t m = 0; m < modules.size(); ++m)
      regions[m] = region{modules[m].begin, modules[m].end, value_type(modules[m].scale),
                          Optim::template make<value_type>(args_, modules[m].lr, step_index)};
    host::update_parameters<Optim, System>(
        memory_.parameters().data(), memory_.gradients().data(), memory_.optimizer_state().data(),
        Net::param_count, regions, clip_limit, !sparse_input || dealt(), weight_blocks_);
  }

  // ---- Inference --------------------------------------------------------------------------

  //! G_f and G_y on `n` rows stored row-major at `rows` ([n, input_width]), in chunks of
  //! eval_chunk samples; writes what `out` asks for.
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

  //! The same for the samples of a sparse matrix: `rows` is [input_width, n], one sample a column.
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

 private:
  // Module M's scratch (G_y or G_d).
  template <module M>
  const stack_scratch<typename Net::template stack<M>>& scratch() const {
    if constexpr (M == module::classifier)
      return classifier_;
    else
      return discriminator_;
  }
  // What module M (G_y or G_d) reads, on its first `cols` columns: h, or the multilinear map.
  template <module M>
  matrix_view<const value_type> module_input(index_t cols) const {
    if constexpr (M == module::discriminator && reads_joint)
      return matrix_view<const value_type>(joint_.middle_cols(0, cols));
    else
      return matrix_view<const value_type>(features_.output().middle_cols(0, cols));
  }

  // Calls f(i, j, c) for each pair of rows i < j that the MMD estimator reads, with its
  // coefficient c (mmd_loss gives both estimators).
  template <class F>
  void for_each_mmd_pair(bool linear, F&& f) const {
    const index_t b = batch_;
    if (linear) {
      const double c = 2.0 / double(b);
      for (index_t i = 0; i + 1 < b; i += 2) {
        f(i, i + 1, c);
        f(b + i, b + i + 1, c);
        f(i, b + i + 1, -c);
        f(i + 1, b + i, -c);
      }
    } else {
      const double same = 2.0 / (double(b) * double(b - 1)),
                   across = -2.0 / (double(b) * double(b));
      for (index_t j = 1; j < rows_; ++j)
        for (index_t i = 0; i < j; ++i) f(i, j, (i < b) == (j < b) ? same : across);
    }
  }

  // Calls f with the prepared batch: a dense view, a listed sparse view or a dealt one.
  template <class F>
  void with_batch(F&& f) {
    if constexpr (sparse_input) {
      if (dealt())
        f(dealt_batch_);
      else
        f(listed_batch_);
    } else {
      f(matrix_view<const value_type>(input()));
    }
  }

  static void check_size(state_part part, std::size_t given, std::size_t size) {
    if (given != size)
      fail("train_step",
           part == state_part::parameters  ? "parameters"
           : part == state_part::gradients ? "gradients"
                                           : "optimizer state",
           std::to_string(size) + " values", std::to_string(given));
  }

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
      return memory_.parameters().data();
    } else {
      const value_type* master = memory_.parameters().data();
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
        host::run_on_team(feature_parts_.parts(), [&](int t, int team, auto&&) {
          host::for_each_owned_run(weight_blocks_, 0, Net::param_count, t, team, round_range);
        });
      } else {
        // As memory-bound as the update, and split as it is: each thread rounds the weights whose
        // gradient it writes and its products read (a sparse step on one thread keeps it there).
        host::for_each_owned_slice<System, value_type>(weight_blocks_, 0, Net::param_count,
                                                       round_range, !sparse_input);
      }
      return working;
    }
  }
  // Where the products read the weights, given working_parameters()' result.
  const value_type* product_weights(const value_type* working) const {
    return products_read_master ? memory_.parameters().data() : working;
  }
  // Runs round_range(first, last) over each bias of `Stack`, whose parameters start at `offset`
  // (a layer's parameters after its weights: a dense layer's [out], a convolution's [C_out], none
  // for max-pooling).
  template <class Stack, class F>
  static void round_biases(index_t offset, const F& round_range) {
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      ((round_range(
           offset + Stack::template param_offset<I>() + Stack::template layer<I>::weight_count,
           offset + Stack::template param_offset<I>() + Stack::template layer<I>::param_count)),
       ...);
    }
    (std::make_index_sequence<Stack::depth>{});
  }

  // G_f and G_y on the x.cols samples of one evaluation chunk; writes `out` from sample `first`.
  template <class Input>
  void infer_chunk(const value_type* p, const Input& x, index_t first, const inference& out) {
    const auto f = eval_features_.leading(x.cols);
    const auto y = eval_classifier_.leading(x.cols);
    const value_type* w = product_weights(p);
    host::forward<feature_stack>(p + Net::features_offset, x, f, gemm_, w + Net::features_offset);
    const matrix_view<value_type> h = f.output();
    host::forward<classifier_stack>(p + Net::classifier_offset, matrix_view<const value_type>(h), y,
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
    const index_t rows = rows_;
    sparse_matrix_view<const value_type> x = memory_.sparse_view();
    const std::int32_t* offsets = x.offsets;
    const std::int32_t* indices = x.indices;
    host::check_sparse_offsets("train_step", offsets, rows, memory_.sparse_capacity());
    constexpr index_t out = feature_stack::template layer<0>::out;
    value_type* dw = memory_.gradients().data() + Net::features_offset;  // layer 0's W first
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
        host::fail_sparse_index("train_step", k, j, input_width);
      }
      if (!marks[j]) {
        marks[j] = 1;
        used[used_count_++] = j;
      }
    }
    for (index_t u = 0; u < used_count_; ++u) marks[used[u]] = 0;
    x.used_rows = used;
    x.used_count = used_count_;
    return x;
  }

  // Whether the sparse batch is dealt among threads by feature (sparse_feature_parts).
  bool dealt() const { return feature_parts_.parts() > 1; }

  // The same checks, then the batch dealt among the threads by feature; each thread first clears
  // its columns of the weight gradient that the previous batch wrote.
  host::dealt_sparse_batch<value_type> deal_sparse_batch() {
    const index_t rows = rows_;
    const sparse_matrix_view<const value_type> x = memory_.sparse_view();
    host::check_sparse_offsets("train_step", x.offsets, rows, memory_.sparse_capacity());
    host::check_sparse_indices("train_step", x.indices, x.offsets[rows], input_width);
    constexpr index_t out = feature_stack::template layer<0>::out;
    value_type* dw = memory_.gradients().data() + Net::features_offset;  // layer 0's W first
    return feature_parts_.deal(x,
                               [dw](index_t j) { std::fill_n(dw + j * out, out, value_type(0)); });
  }

  //! Records the weight matrices of `Stack`, whose parameters start at `offset`, from
  //! weight_blocks_[next] on: ∂L/∂W = δz·xᵀ is a [out, in] product over `columns` samples.
  template <class Stack>
  void add_weight_blocks(index_t offset, index_t columns, std::size_t& next) {
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (
          [&] {
            using layer = typename Stack::template layer<I>;
            const index_t begin = offset + Stack::template param_offset<I>();
            if constexpr (I == 0 && sparse_input) {
              // Dealt by feature among the parts, or one thread's.
              const int parts = feature_parts_.parts();
              weight_blocks_[next++] = {
                  begin, layer::out, layer::in,
                  parts > 1 ? host::detail::product_split{host::split_along::columns, parts,
                                                          layer::in, feature_parts_.block()}
                            : host::detail::product_split::one_thread(layer::out, layer::in),
                  parts > 1 ? feature_parts_.block() : 0};
            } else if constexpr (nn::kind_of<layer>() != nn::layer_kind::dense) {
              // A convolution's ∂L/∂W sums products over chunks of samples (host/conv.hpp): one
              // thread updates it; max-pooling has no weights (an empty block keeps the order).
              weight_blocks_[next++] = {
                  begin, layer::weight_rows, layer::weight_cols,
                  host::detail::product_split::one_thread(layer::weight_rows, layer::weight_cols)};
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

  fit_args args_;
  host::step_memory<Step, System> memory_;  // parameters, gradients, optimizer state, batch, labels
  index_t batch_;                           // B
  index_t rows_;                      // rows per batch: B source, then B target with target rows
  index_t classifier_rows_;           // rows G_y runs on: B, or all rows when the head reads them
  index_t classifier_backward_rows_;  // rows G_y's backward runs on: B, or all rows
  // Mixed precision: the parameters rounded (only their biases are written when
  // products_read_master), else empty.
  buffer<value_type, System> working_params_;
  // Features the current and the previous sparse batch use, and a mark per feature (all 0
  // between calls) to list them without duplicates.
  buffer<std::int32_t, System> used_features_, previous_used_features_;
  buffer<std::uint8_t, System> feature_marks_;
  index_t used_count_ = 0;
  // The batch dealt among the threads by feature: a sparse step with more than one thread.
  host::sparse_feature_parts<value_type> feature_parts_;
  // The prepared sparse batch: listed on one thread, or dealt.
  sparse_matrix_view<const value_type> listed_batch_{};
  host::dealt_sparse_batch<value_type> dealt_batch_{};
  // Every scratch below, carved once: the training scratch, and the evaluation scratch (eval_*)
  // over it.
  buffer<value_type, System> workspace_;
  stack_scratch<feature_stack> features_;
  stack_scratch<classifier_stack> classifier_;
  stack_scratch<discriminator_stack> discriminator_;
  // CDAN: softmax(g) [classes, rows], T and δT [classes · features, rows], weights [1, rows].
  matrix_view<value_type> probabilities_, joint_, joint_gradient_, row_weights_;
  // CORAL: X̃ [features, rows] and D = C_s − C_t [features, features]; the loss scale S.
  matrix_view<value_type> centered_features_, covariance_difference_;
  // MMD: pair (i, j), i < j, at (i, j): ‖h_i − h_j‖², then 2·c_ij·k'(‖h_i − h_j‖²).
  matrix_view<value_type> pair_values_;
  bool linear_mmd_ = false;  // the estimator of the last mmd_loss
  // MCC: Ŷ = softmax(z/T) of the target rows [classes, B], their weights w [1, B], and per class
  // (2/s_j, c_jj/s_j²) [classes, 2]; the temperature of the last mcc_loss.
  matrix_view<value_type> target_probabilities_, target_weights_, class_terms_;
  double temperature_ = 1;
  double head_loss_scale_ = 1;
  matrix_view<value_type> eval_input_;
  stack_scratch<feature_stack> eval_features_;
  stack_scratch<classifier_stack> eval_classifier_;
  products_type gemm_;
  // Every weight matrix, in parameter order, and how gemm_ splits the product that writes its
  // gradient (the update follows it; a sparse first layer's gradient is one thread's).
  std::array<host::weight_block,
             feature_stack::depth + classifier_stack::depth + discriminator_stack::depth>
      weight_blocks_{};
  bool holds_team_ = false;
  host::team_pacer pacer_;
  // The weights of the current step (prepare_weights): what the products compute with, and
  // where they read their weight matrices.
  const value_type* p_ = nullptr;
  const value_type* w_ = nullptr;
};

}  // namespace dafuse::backend
