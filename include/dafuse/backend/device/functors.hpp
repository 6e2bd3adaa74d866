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
#include <dafuse/backend/step_control.hpp>
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
