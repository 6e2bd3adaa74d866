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
#include <dafuse/backend/host/head_view.hpp>
#include <dafuse/backend/host/loss.hpp>
#include <dafuse/backend/host/products.hpp>
#include <dafuse/backend/host/sparse.hpp>
#include <dafuse/backend/host/sparse_batch.hpp>
#include <dafuse/backend/host/step_memory.hpp>
#include <dafuse/backend/host/team.hpp>
#include <dafuse/backend/host/update.hpp>
#include <dafuse/backend/host/working_copy.hpp>
#include <dafuse/backend/step_control.hpp>
#include <dafuse/core/buffer.hpp>
#include <dafuse/core/error.hpp>
#include <dafuse/core/meta.hpp>
#include <dafuse/core/profiler.hpp>
#include <dafuse/core/system.hpp>
#include <dafuse/head/cdan.hpp>
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
#include <vector>

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
  using head_type = typename Step::head_type;
  template <class Stack>
  using stack_scratch = host::stack_scratch<Stack, value_type>;
  using products_type = host::products_for<Step::compute_format, value_type>;
  static constexpr std::size_t weight_count = backward_weight_count<head_type>;
  using control_type = step_control<Optim, value_type, weight_count>;
  // What the step stores, rounded to its stored format (none for fp32 and fp64).
  struct rounding {
    static value_type round(value_type x) { return products_type::round(x); }
  };

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
    const index_t rows = rows_, classified = classifier_rows_;
    if constexpr (sparse_input) {
      // On several threads the batch is dealt among them by feature, and each runs the first
      // layer's products on its own columns of W (backend/host/sparse.hpp).
      const int threads =
          std::is_same_v<System, system::omp> ? std::min(host::available_threads(), 64) : 1;
      sparse_batch_ = {input_width, feature_stack::template layer<0>::out, rows,
                       index_t(memory_.sparse_capacity()), threads};
    }
    const index_t chunk = args.eval_chunk;
    // CDAN's map: softmax(g) [classes, rows], T and δT [classes · features, rows], row weights.
    const index_t joint_values =
        reads_joint ? class_count * rows + 2 * joint_width * rows + rows : 0;
    // What the head's own maths keeps (head/view.hpp).
    const index_t head_values = head_type::scratch_elements(head_shape());
    head_sums_.assign(std::size_t(head_type::sum_count), 0.0);
    // A conv_net's convolutions run one part per thread of the products' workspace (conv.hpp).
    const int parts = host::available_threads();
    // Training and inference never run at once (they share gemm_ too), and nothing in the
    // training scratch outlives a step: the evaluation scratch takes the same place.
    const index_t training_values =
        stack_scratch<feature_stack>::elements(rows, true, parts) +
        stack_scratch<classifier_stack>::elements(classified, true, parts) +
        (trains_discriminator ? stack_scratch<discriminator_stack>::elements(rows, true, parts)
                              : 0) +
        joint_values + head_values;
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
    head_scratch_ = carve(head_values);
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
    return memory_.memory_bytes() + working_copy_.memory_bytes() + bytes(workspace_) +
           sparse_batch_.memory_bytes();
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
      // Layer 0's W first in the features' gradients.
      sparse_batch_.prepare(memory_.sparse_view(),
                            memory_.gradients().data() + Net::features_offset);
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
    const head::cdan_maths::multilinear_column<value_type, rounding> map{
        classifier_.output().data,
        features_.output().data,
        probabilities_.data,
        joint_.data,
        entropy_weights ? row_weights_.data : nullptr,
        class_count,
        feature_width};
    double weight_sum = 0;
    sequential_map_sum<1>(rows_, map, &weight_sum);
    if (entropy_weights) {
      const head::cdan_maths::normalise_weights<value_type> normalise{row_weights_.data,
                                                                      &weight_sum, rows_};
      for (index_t c = 0; c < rows_; ++c) normalise(c);
    }
  }

  //! δh = Σ_c g_c · δT_c on all rows (g a constant, as the map's forward took it), written fresh
  //! (added to δh with `accumulate`: a later term of a sum of heads).
  void multilinear_backward(bool accumulate = false) requires reads_joint {
    const head::cdan_maths::multilinear_backward_column<value_type, rounding> column{
        probabilities_.data, joint_gradient_.data, features_.output_gradient().data,
        class_count,         feature_width,        accumulate};
    for (index_t c = 0; c < rows_; ++c) column(c);
  }

  //! The view the head's forward and backward run on (head/view.hpp).
  auto head_view() {
    const matrix_view<value_type> none{};
    const matrix_view<value_type> g = trains_discriminator ? discriminator_.output() : none;
    const matrix_view<value_type> dg =
        trains_discriminator ? discriminator_.output_gradient() : none;
    return host::head_view<executor, products_type>(
        *this, gemm_, head_shape(),
        head::view_buffers<value_type>{
            features_.output().data, features_.output_gradient().data, classifier_.output().data,
            classifier_.output_gradient().data, g.data, dg.data, head_scratch_, head_sums_.data()},
        loss_scale_);
  }

  //! Mean softmax cross-entropy of G_y's logits over the B source columns; writes their gradient
  //! δz = S/B · (softmax(z) − onehot(y)), the loss scale S entering here and nowhere else.
  double label_loss(double loss_scale) {
    const index_t b = batch_;
    const matrix_view<value_type> z = classifier_.output();
    const matrix_view<value_type> dz = classifier_.output_gradient();
    const std::int32_t* y = memory_.source_labels().data();
    const value_type scale = value_type(loss_scale / double(b));
    loss_scale_ = loss_scale;
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

  // ---- Steps: the device executor's calls, each run at once --------------------------------

  //! Takes one training step at once, with the team held (run()): begin_step (λ, the head's
  //! weights and the learning rate of the step count), `phases(*this, weights, S, profiler)`,
  //! decide_step (the report, the tallies and the update's plan: backend/step_control.hpp, as a
  //! device step runs them), then the update. report() has its report.
  template <class Rules, class Phases>
  void queue_step(const Rules& rules, Phases&& phases) {
    run([&] { take_step(rules, phases, std::nan(""), true); });
  }
  //! The phases with reversal weight `lambda` and no update (nor step count): compute_gradients.
  template <class Rules, class Phases>
  void queue_gradients(const Rules& rules, double lambda, Phases&& phases) {
    run([&] { take_step(rules, phases, lambda, false); });
  }
  //! The last step's report.
  step_report report() const { return control_.report; }
  //! Steps taken and the loss scaler's state.
  step_position position() const { return control_.position(); }
  //! Continues from step `step` with the loss scaler's state `scale` (resume, initialisation).
  void set_position(index_t step, loss_scale_state scale) { control_.restart(step, scale); }
  //! The last step's unscaled squared norms.
  grad_norms norms() const { return control_.norms; }
  //! The tallies a training loop checks.
  step_tally tallies() const { return control_.tally(); }
  //! Times the phases of every later step into `p` (nullptr: none); not owned.
  void set_profiler(profiler* p) { profiler_ = p; }

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

  // Calls f with the prepared batch: a dense view, a listed sparse view or a dealt one.
  template <class F>
  void with_batch(F&& f) {
    if constexpr (sparse_input) {
      sparse_batch_.with_batch(std::forward<F>(f));
    } else {
      f(matrix_view<const value_type>(input()));
    }
  }

  // The step's sizes as the head sees them.
  head::shape head_shape() const { return {batch_, rows_, feature_width, class_count}; }

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

  // The parameters as the step computes with them (mixed precision: the rounded working copy),
  // and where the products read the weights, given that.
  const value_type* working_parameters() {
    return working_copy_.refresh(memory_.parameters().data(), weight_blocks_, sparse_batch_);
  }
  const value_type* product_weights(const value_type* working) const {
    return working_copy_.product_weights(memory_.parameters().data(), working);
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

  // Whether the sparse batch is dealt among threads by feature.
  bool dealt() const {
    if constexpr (sparse_input)
      return sparse_batch_.dealt();
    else
      return false;
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
              const int parts = sparse_batch_.parts();
              weight_blocks_[next++] = {
                  begin, layer::out, layer::in,
                  parts > 1 ? host::detail::product_split{host::split_along::columns, parts,
                                                          layer::in, sparse_batch_.block()}
                            : host::detail::product_split::one_thread(layer::out, layer::in),
                  sparse_batch_.block()};
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

  // One step on the control block: its start, the phases, its end, and the update its plan asks
  // for (none when decide_step skipped it).
  template <class Rules, class Phases>
  void take_step(const Rules& rules, Phases& phases, double lambda, bool update) {
    begin_step<Rules, control_type>{rules, &control_, lambda}(0);
    const auto f = phases(*this, backward_weights(), control_.used_scale, profiler_);
    // The plan and the update are the update phase (compute_gradients has none).
    profile_scope timing(update ? profiler_ : nullptr, phase::update);
    decide_step<Rules, Optim, value_type, weight_count>{
        rules, &control_,
        step_figures{f.label_loss,
                     f.domain_loss,
                     f.domain_accuracy,
                     {f.features_sq, f.classifier_sq, f.discriminator_sq}},
        update, false}(0);
    if (!update || control_.skip) return;
    // One pass over the parameters: each module's gradients are multiplied by its scale and
    // clamped to ±bound, then its optimizer rule runs with its coefficients. Each thread updates
    // the weights whose gradients it wrote; a sparse step on one thread runs no parallel region
    // before its update and keeps it on that thread.
    using region = host::update_region<Optim, value_type>;
    std::array<region, 3> regions;
    for (std::size_t m = 0; m < regions.size(); ++m) {
      const auto& rule = control_.modules[m];
      regions[m] = region{rule.begin, rule.end, rule.scale, rule.coefficients};
    }
    host::update_parameters<Optim, System>(
        memory_.parameters().data(), memory_.gradients().data(), memory_.optimizer_state().data(),
        Net::param_count, regions, control_.clamp ? double(control_.bound) : HUGE_VAL,
        !sparse_input || dealt(), weight_blocks_);
  }
  // What the head's backward takes: λ, or one weight per term of a sum of heads, as begin_step
  // wrote them.
  auto backward_weights() const {
    if constexpr (weights_terms<head_type>) {
      std::array<double, weight_count> w{};
      for (std::size_t i = 0; i < w.size(); ++i) w[i] = control_.weights[i];
      return w;
    } else {
      return control_.weights[0];
    }
  }

  fit_args args_;
  host::step_memory<Step, System> memory_;  // parameters, gradients, optimizer state, batch, labels
  index_t batch_;                           // B
  index_t rows_;                      // rows per batch: B source, then B target with target rows
  index_t classifier_rows_;           // rows G_y runs on: B, or all rows when the head reads them
  index_t classifier_backward_rows_;  // rows G_y's backward runs on: B, or all rows
  // Mixed precision: the parameters rounded to the compute format.
  host::working_copy<Step, System, products_type> working_copy_;
  // A sparse step's batch, listed or dealt among the threads by feature.
  host::sparse_batch_preparer<value_type, System> sparse_batch_;
  // Every scratch below, carved once: the training scratch, and the evaluation scratch (eval_*)
  // over it.
  buffer<value_type, System> workspace_;
  stack_scratch<feature_stack> features_;
  stack_scratch<classifier_stack> classifier_;
  stack_scratch<discriminator_stack> discriminator_;
  // CDAN: softmax(g) [classes, rows], T and δT [classes · features, rows], weights [1, rows].
  matrix_view<value_type> probabilities_, joint_, joint_gradient_, row_weights_;
  // The head's own scratch (head_type::scratch_elements values) and sums (sum_count doubles).
  value_type* head_scratch_ = nullptr;
  std::vector<double> head_sums_;
  // S of the step being run, as label_loss received it (the head's backward reads it).
  double loss_scale_ = 1;
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
  // Where the step stands, its rates and weights, its last report and tallies.
  control_type control_{};
  profiler* profiler_ = nullptr;
  // The weights of the current step (prepare_weights): what the products compute with, and
  // where they read their weight matrices.
  const value_type* p_ = nullptr;
  const value_type* w_ = nullptr;
};

}  // namespace dafuse::backend
