// SPDX-License-Identifier: Apache-2.0
//! @file head/view.hpp
//! @brief What a head with maths of its own sees of the step: the step's shape, the products it
//! declares, and the view an executor hands its forward and backward.
//!
//! A head's maths is written once, over a view, as `DAFUSE_HOST_DEVICE` functors run by the
//! view's loops and products it declares ahead. The host executor runs them at once on the CPU
//! (backend/host/head_view.hpp); the device executor queues them on its stream
//! (backend/device/head_view.hpp). A view `v` of value type T gives:
//!
//!   v.shape()                                 head::shape: B, the rows of h, F, the classes
//!   v.features(), v.feature_gradient()        h and δh: [F, rows] (T*, column-major)
//!   v.logits(), v.logit_gradient()            z and δz of G_y: [classes, rows G_y ran on]
//!   v.discriminator_output(), ..._gradient()  G_d's output and its gradient: [out, rows]
//!   v.scratch()                               the head's scratch_elements(shape) values of T
//!   v.sums()                                  the head's sum_count doubles
//!   v.loss_scale()                            S, the step's loss scale (a step_scalar)
//!   v.for_each(n, f)                          f(i) for each i in [0, n), in any order
//!   v.map_sum<K>(n, f, out)                   out[k] = Σ_i f(i).terms[k], the same bits each run
//!   v.product(p, α, A, B, β, C)               C = α·op(A)·op(B) + β·C, p declared, α a number
//!   v.result(loss, accuracy)                  what forward returns, from step_scalars
//!   View::rounding::round(x)                  x rounded to the step's stored format
//!
//! Values the phases compute reach later phases through `sums()` and step_scalars (read when a
//! phase runs), never as numbers read back when a phase is queued: a device step queues its
//! phases once and replays them. So a product's α is a number known when it is queued; a factor
//! that a phase computes (λ·S) scales an operand first (scale_values).
#pragma once
#include <dafuse/config.hpp>
#include <dafuse/core/error.hpp>
#include <dafuse/core/meta.hpp>
#include <dafuse/core/step_values.hpp>

#include <string>

namespace dafuse::head {

//! A step's sizes as a head sees them.
struct shape {
  index_t batch = 0;     //!< B: source rows (and target rows, when the batch holds them)
  index_t rows = 0;      //!< rows of h: B, or 2B with target rows
  index_t features = 0;  //!< F: h's width
  index_t classes = 0;   //!< G_y's outputs
};

//! What a view points at: the step's buffers a head reads and writes (column-major, one column
//! a row of the batch), the head's scratch and sums, in the memory of the step's system.
template <class T>
struct view_buffers {
  T* features = nullptr;                //!< h: [F, rows]
  T* feature_gradient = nullptr;        //!< δh: [F, rows]
  T* logits = nullptr;                  //!< z: [classes, rows G_y ran on]
  T* logit_gradient = nullptr;          //!< δz, laid out as z
  T* discriminator_output = nullptr;    //!< G_d's output: [out, rows] (null without G_d)
  T* discriminator_gradient = nullptr;  //!< its gradient
  T* scratch = nullptr;                 //!< the head's scratch_elements(shape) values
  double* sums = nullptr;               //!< the head's sum_count doubles

  //! The buffers of a later term of a sum of heads: its scratch and sums after the earlier
  //! terms'.
  view_buffers after(index_t scratch_values, index_t sum_values) const {
    view_buffers b = *this;
    b.scratch += scratch_values;
    b.sums += sum_values;
    return b;
  }
};

//! A product a head runs: C[m, n] = α·op(A)·op(B) + β·C, column-major with leading dimensions,
//! op(A) = Aᵀ when transpose_a (A stored [k, m]). Declared by the head for a shape (its
//! `products(shape)`); a system that plans its products plans each the first time it is queued
//! (a device step's first run, which is never captured into a graph).
struct product {
  bool transpose_a = false;
  bool transpose_b = false;
  index_t m = 0, n = 0, k = 0;
  index_t lda = 0, ldb = 0, ldc = 0;
  friend constexpr bool operator==(const product&, const product&) = default;

  //! Throws dafuse::error naming the first field that cannot describe a product: m, n and k at
  //! least 1, and each leading dimension at least the rows its matrix is stored with (A: k rows
  //! when transpose_a, else m; B: n when transpose_b, else k; C: m). Every view checks a product
  //! before it runs or plans it.
  void check() const {
    const auto at_least = [](const char* field, index_t found, index_t least, const char* why) {
      if (found < least)
        fail("head::product", field, "at least " + std::to_string(least) + " (" + why + ")",
             std::to_string(found));
    };
    at_least("m", m, 1, "the rows of C");
    at_least("n", n, 1, "the columns of C");
    at_least("k", k, 1, "the inner dimension");
    at_least("lda", lda, transpose_a ? k : m, transpose_a ? "A is stored [k, m]" : "A is [m, k]");
    at_least("ldb", ldb, transpose_b ? n : k, transpose_b ? "B is stored [n, k]" : "B is [k, n]");
    at_least("ldc", ldc, m, "C is [m, n]");
  }
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

//! The rounding of a step that stores what it computes in its own format (fp32, fp64).
template <class T>
struct no_rounding {
  DAFUSE_HOST_DEVICE static T round(T x) { return x; }
};

//! x ← round(by · x) over n values, by read when the phase runs: a factor known only then (λ·S)
//! applied to an operand before a product, whose α is a number known when it is queued, or the
//! reversal's −λ on a device module's input gradient.
template <class T, class Rounding = no_rounding<T>>
struct scale_values {
  T* x;
  step_scalar by;
  DAFUSE_HOST_DEVICE void operator()(index_t i) const {
    x[i] = Rounding::round(T(by.get()) * x[i]);
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
