// SPDX-License-Identifier: Apache-2.0
//! @file head/view.hpp
//! @brief What a head with maths of its own sees of the step: the step's shape, the products it
//! declares, and the view an executor hands its forward and backward.
//!
//! A head's maths is written once, over a view, as `DAFUSE_HOST_DEVICE` functors run by the
//! view's loops and products it declares ahead; the host executor runs them at once on the CPU
//! (backend/host/head_view.hpp). A view `v` of value type T gives:
//!
//! | member                               | what it is | | ------------------------------------ |
//! ------------------------------------------------------ | | `v.shape()` | head::shape: B, the
//! rows of h, F, the classes          | | `v.features()`, `v.feature_gradient()` | h and δh: [F,
//! rows] (T*, column-major)              | | `v.logits()`, `v.logit_gradient()`   | z and δz of
//! G_y: [classes, rows G_y ran on]            | | `v.discriminator_output()`,
//! `v.discriminator_gradient()` | G_d's output and its gradient: [out, rows] | | `v.scratch()` |
//! the head's scratch_elements(shape) values of T         | | `v.sums()` | the head's sum_count
//! doubles, for map_sum and scalars  | | `v.loss_scale()`                     | S, the step's loss
//! scale (a step_scalar)               | | `v.for_each(n, f)`                   | f(i) for each i
//! in [0, n), in any order                | | `v.map_sum<K>(n, f, out)`            | out[k] = Σ_i
//! f(i).terms[k], in index order             | | `v.product(p, α, A, B, β, C)`        | C =
//! α·op(A)·op(B) + β·C for a declared product p       | | `v.result(loss, accuracy)`           |
//! what forward returns, from step_scalars               | | `View::rounding::round(x)`           |
//! x rounded to the step's stored format (mixed precision)|
//!
//! Values the phases compute reach later phases through `sums()` and step_scalars (read when a
//! phase runs), never as numbers read back when a phase is queued: a device step queues its
//! phases once and replays them.
#pragma once
#include <dafuse/config.hpp>
#include <dafuse/core/meta.hpp>
#include <dafuse/core/step_values.hpp>

namespace dafuse::head {

//! A step's sizes as a head sees them.
struct shape {
  index_t batch = 0;     //!< B: source rows (and target rows, when the batch holds them)
  index_t rows = 0;      //!< rows of h: B, or 2B with target rows
  index_t features = 0;  //!< F: h's width
  index_t classes = 0;   //!< G_y's outputs
};

//! A product a head runs: C[m, n] = α·op(A)·op(B) + β·C, column-major with leading dimensions,
//! op(A) = Aᵀ when transpose_a (A stored [k, m]). Declared by the head for a shape (its
//! `products(shape)`), so that a system that plans its products does so once.
struct product {
  bool transpose_a = false;
  bool transpose_b = false;
  index_t m = 0, n = 0, k = 0;
  index_t lda = 0, ldb = 0, ldc = 0;
  friend constexpr bool operator==(const product&, const product&) = default;
};

//! x ← round(x) over n values: a mixed-precision step stores what it computes rounded.
template <class T, class Rounding>
struct round_values {
  T* x;
  DAFUSE_HOST_DEVICE void operator()(index_t i) const { x[i] = Rounding::round(x[i]); }
};

//! x ← 0 over n values.
template <class T>
struct zero {
  T* x;
  DAFUSE_HOST_DEVICE void operator()(index_t i) const { x[i] = T(0); }
};

//! x_i²: the squared norm of x through map_sum.
template <class T>
struct squares {
  const T* x;
  DAFUSE_HOST_DEVICE sum_terms<1> operator()(index_t i) const {
    return {{double(x[i]) * double(x[i])}};
  }
};

//! *out = a · b / divisor, from two step_scalars (λ and S), for a later phase to read.
struct product_of_scalars {
  double* out;
  step_scalar a, b;
  double divisor;
  DAFUSE_HOST_DEVICE void operator()(index_t) const { *out = a.get() * b.get() / divisor; }
};

//! *out = *in / divisor: a mean or a loss from its sum, for the report and later phases.
struct quotient {
  double* out;
  const double* in;
  double divisor;
  DAFUSE_HOST_DEVICE void operator()(index_t) const { *out = *in / divisor; }
};

}  // namespace dafuse::head
