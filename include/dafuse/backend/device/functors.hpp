// SPDX-License-Identifier: Apache-2.0
//! @file backend/device/functors.hpp
//! @brief The per-element and per-sample pieces of the device executor, as `DAFUSE_HOST_DEVICE`
//! functors: the same code runs in a thrust::for_each on the OpenMP system and in a CUDA kernel.
//!
//! Each functor takes the index of the element, column (sample) or parameter it handles and
//! never reads a thread id. Layouts are dafuse's: a batch of n samples of width d is column-major
//! [d, n]; a layer's parameters are W: [out, in] column-major, then b: [out].
#pragma once
#include <dafuse/backend/device/primitives.hpp>
#include <dafuse/backend/executor.hpp>
#include <dafuse/config.hpp>
#include <dafuse/core/meta.hpp>
#include <dafuse/core/step_values.hpp>
#include <dafuse/head/head_base.hpp>
#include <dafuse/nn/loss.hpp>
#include <dafuse/policy/clip.hpp>
#include <dafuse/policy/precision.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>

namespace dafuse::backend::device {

//! y = f(y + b) over a [rows, cols] block, b: [rows] (the bias and activation of a product that
//! had no fused epilogue for them). With `add_bias` false only f is applied.
template <class T, class Act>
struct bias_activation {
  T* y;           //!< [rows, cols], in place
  const T* bias;  //!< [rows]
  index_t rows;   //!< the layer's output width
  bool add_bias;  //!< add b before f
  Act act;        //!< f
  DAFUSE_HOST_DEVICE void operator()(index_t i) const {
    const T z = add_bias ? y[i] + bias[i % rows] : y[i];
    y[i] = act(z);
  }
};

//! δz = δy ⊙ f'(z), with f'(z) read from the output y = f(z) (nn/activation.hpp), in place.
template <class T, class Act>
struct multiply_by_derivative {
  T* dy;       //!< δy in, δz out
  const T* y;  //!< f(z), laid out as dy
  Act act;     //!< f
  DAFUSE_HOST_DEVICE void operator()(index_t i) const {
    dy[i] = dy[i] * act.derivative_from_output(y[i]);
  }
};

//! The softmax cross-entropy of source column c of the logits z: [classes, B], returned (to be
//! summed), and its gradient scale · (softmax(z) − onehot(y)) into dz. A label outside
//! [0, classes) sets *bad_label to c + 1 (for one such column) and gives no loss nor gradient.
template <class T>
struct softmax_cross_entropy_column {
  const T* z;                 //!< [classes, B]
  T* dz;                      //!< [classes, B]
  const std::int32_t* label;  //!< [B]
  index_t classes;            //!< logits per column
  step_scalar scale;          //!< S / B
  double* bad_label;          //!< one flag for the batch, 0 when every label is in range
  DAFUSE_HOST_DEVICE sum_terms<1> operator()(index_t c) const {
    const std::int32_t y = label[c];
    if (y < 0 || y >= classes) {
      for (index_t k = 0; k < classes; ++k) dz[c * classes + k] = T(0);
      *bad_label = double(c + 1);
      return {{0.0}};
    }
    return {{double(
        nn::softmax_cross_entropy(z + c * classes, classes, y, T(scale.get()), dz + c * classes))}};
  }
};

//! The BCE of G_d's logit z[c] for row c (the first `batch` rows are the source, target 0; the
//! rest target 1): its gradient scale · w_c · (σ(z) − t) into dz[c]; returns w_c · ℓ and whether
//! z is on the right side of 0 (1 or 0), to be summed. `weights` null: every w_c = 1.
template <class T>
struct binary_cross_entropy_row {
  const T* z;         //!< [rows]
  T* dz;              //!< [rows]
  const T* weights;   //!< [rows] (CDAN+E's w), or null
  index_t batch;      //!< B: rows [0, B) are the source
  step_scalar scale;  //!< S / rows
  DAFUSE_HOST_DEVICE sum_terms<2> operator()(index_t c) const {
    const T t = c >= batch ? T(1) : T(0);
    const T w = weights ? weights[c] : T(1);
    const T loss = nn::binary_cross_entropy_with_logit(z[c], t, T(scale.get()) * w, dz + c);
    return {{weights ? double(w) * double(loss) : double(loss),
             (c >= batch ? z[c] > T(0) : z[c] < T(0)) ? 1.0 : 0.0}};
  }
};

//! The prediction of evaluation column c from its logits: the class, and softmax into `p`.
template <class T>
struct predict_column {
  const T* z;                 //!< [classes, n]
  index_t classes;            //!< K
  std::int32_t* classes_out;  //!< [n] or null
  float* probabilities;       //!< [classes, n] or null
  DAFUSE_HOST_DEVICE void operator()(index_t c) const {
    const T* zc = z + c * classes;
    if (classes_out) classes_out[c] = nn::argmax(zc, classes);
    if (probabilities) nn::softmax(zc, classes, probabilities + c * classes);
  }
};

//! `in` converted to T into `out` (a batch of another element type, or rows read for inference).
template <class In, class T>
struct convert {
  const In* in;
  T* out;
  DAFUSE_HOST_DEVICE void operator()(index_t i) const { out[i] = T(in[i]); }
};

//! One module's part of the update: parameters [begin, end) have their gradients multiplied by
//! `scale`, then the optimizer steps with `coefficients` (the module's learning rate).
template <class Optim, class T>
struct module_rule {
  index_t begin = 0, end = 0;                               //!< parameters [begin, end)
  T scale = T(1);                                           //!< clip and unscale
  typename Optim::template coefficients<T> coefficients{};  //!< with the module's learning rate
};

//! Where a device step stands and what its phases produced, in device memory: the step count and
//! the loss scaler, this step's rates, the sums the phases write, the plan the update reads, the
//! last report and the tallies a training loop reads when it asks. Written and read by kernels of
//! one thread (begin_step, decide_step) and by the phases' sums; copied to the host only when a
//! report or the position is asked for. `Weights`: how many weights the head's backward takes.
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

//! The update pass of parameter i: g = clamp(grads[i] · scale, −bound, bound) (no clamp without
//! clip::value), then Optim's rule with the coefficients of i's module, as the plan in `c` says
//! (nothing when it skips). The same expression, in the same order, as the host pass
//! (backend/host/update.hpp), so both round alike.
template <class Optim, class T, std::size_t Weights = 1>
struct update_parameter {
  T* params;             //!< [param_count]
  const T* grads;        //!< [param_count]
  T* state;              //!< [state_per_param · state_stride]
  index_t state_stride;  //!< param_count
  const step_control<Optim, T, Weights>* c;
  DAFUSE_HOST_DEVICE void operator()(index_t i) const {
    if (c->skip) return;
    const int m = i < c->modules[1].begin ? 0 : (i < c->modules[2].begin ? 1 : 2);
    const module_rule<Optim, T>& rule = c->modules[m];
    if (i < rule.begin || i >= rule.end) return;
    T g = grads[i] * rule.scale;
    if (c->clamp) g = g < -c->bound ? -c->bound : (g > c->bound ? c->bound : g);
    Optim::update(i, g, params, state, state_stride, rule.coefficients);
  }
};

}  // namespace dafuse::backend::device
