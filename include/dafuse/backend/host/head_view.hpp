// SPDX-License-Identifier: Apache-2.0
//! @file backend/host/head_view.hpp
//! @brief The host executor's view for a head's maths (head/view.hpp): loops on the calling
//! thread, sums in index order, products through the step's product kernels, each phase run at
//! once.
#pragma once
#include <dafuse/config.hpp>

#include <dafuse/backend/executor.hpp>
#include <dafuse/backend/host/partition.hpp>
#include <dafuse/core/error.hpp>
#include <dafuse/core/meta.hpp>
#include <dafuse/core/step_values.hpp>
#include <dafuse/head/view.hpp>
#include <dafuse/nn/dann_net.hpp>

namespace dafuse::backend::host {

//! The view over the host executor `Exec`, whose products run on `Products` (gemm_workspace, or
//! mixed_products, whose round() also rounds what the head stores). It also passes the modules'
//! passes a head runs (G_d's forward and backward, the domain loss, CDAN's map) to the executor.
template <class Exec, class Products>
class head_view {
 public:
  using value_type = typename Exec::value_type;
  using T = value_type;
  //! Rounding to the step's stored format (none for fp32 and fp64).
  struct rounding {
    static T round(T x) { return Products::round(x); }
  };

  head_view(Exec& exec,
            Products& products,
            const head::shape& shape,
            const head::view_buffers<T>& buffers,
            double loss_scale)
      : exec_(&exec),
        products_(&products),
        shape_(shape),
        buffers_(buffers),
        loss_scale_(loss_scale) {}

  // ---- The executor's passes -------------------------------------------------------------

  //! Module M's forward (Exec::forward).
  template <nn::dann_module M>
  void forward() const {
    exec_->template forward<M>();
  }
  //! Module M's backward (Exec::backward): its parameters' squared gradient norm.
  template <nn::dann_module M>
  double backward(double input_scale, bool accumulate) const {
    return exec_->template backward<M>(input_scale, accumulate);
  }
  //! G_d's BCE (Exec::domain_loss).
  template <class... Args>
  auto domain_loss(Args... args) const {
    return exec_->domain_loss(args...);
  }
  //! CDAN's multilinear map and its backward (Exec::multilinear_map, multilinear_backward).
  void multilinear_map(bool entropy_weights) const { exec_->multilinear_map(entropy_weights); }
  void multilinear_backward(bool accumulate = false) const {
    exec_->multilinear_backward(accumulate);
  }

  // ---- A head's own maths ----------------------------------------------------------------

  const head::shape& shape() const { return shape_; }
  T* features() const { return buffers_.features; }
  T* feature_gradient() const { return buffers_.feature_gradient; }
  T* logits() const { return buffers_.logits; }
  T* logit_gradient() const { return buffers_.logit_gradient; }
  T* discriminator_output() const { return buffers_.discriminator_output; }
  T* discriminator_gradient() const { return buffers_.discriminator_gradient; }
  T* scratch() const { return buffers_.scratch; }
  double* sums() const { return buffers_.sums; }
  //! S, the loss scale of this step (a constant: the host runs each phase at once).
  step_scalar loss_scale() const { return step_scalar(loss_scale_); }

  //! f(i) for i in [0, n), in order, on the calling thread.
  template <class F>
  void for_each(index_t n, const F& f) const {
    for (index_t i = 0; i < n; ++i) f(i);
  }
  //! out[k] = Σ_i f(i).terms[k] over i in [0, n), added in index order.
  template <int K, class F>
  void map_sum(index_t n, const F& f, double* out) const {
    sequential_map_sum<K>(n, f, out);
  }
  //! C = α·op(A)·op(B) + β·C for the product p on the step's kernels.
  void product(const head::product& p, double alpha, const T* a, const T* b, T beta, T* c) const {
    const T scale = T(alpha);
    if (p.transpose_a) {
      if (p.transpose_b)
        products_->template product<op::transpose, op::transpose>(p.m, p.n, p.k, scale, a, p.lda, b,
                                                                  p.ldb, beta, c, p.ldc);
      else
        products_->template product<op::transpose, op::none>(p.m, p.n, p.k, scale, a, p.lda, b,
                                                             p.ldb, beta, c, p.ldc);
    } else if (p.transpose_b) {
      products_->template product<op::none, op::transpose>(p.m, p.n, p.k, scale, a, p.lda, b, p.ldb,
                                                           beta, c, p.ldc);
    } else {
      products_->template product<op::none, op::none>(p.m, p.n, p.k, scale, a, p.lda, b, p.ldb,
                                                      beta, c, p.ldc);
    }
  }
  //! A head's loss and accuracy as its forward returns them.
  domain_loss_result result(step_scalar loss, step_scalar accuracy = step_scalar(0.0)) const {
    return {loss.get(), accuracy.get()};
  }
  //! The view of a later term of a sum of heads: its scratch and sums after the earlier terms'.
  head_view after(index_t scratch_values, index_t sum_values) const {
    head_view v = *this;
    v.buffers_ = buffers_.after(scratch_values, sum_values);
    return v;
  }

 private:
  Exec* exec_;
  Products* products_;
  head::shape shape_;
  head::view_buffers<T> buffers_;
  double loss_scale_;
};

}  // namespace dafuse::backend::host
