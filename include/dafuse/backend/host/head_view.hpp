// SPDX-License-Identifier: Apache-2.0
//! @file backend/host/head_view.hpp
//! @brief The host executor's view for a head's maths (head/view.hpp): loops on the calling
//! thread, sums in index order, products through the step's product kernels, each phase run at
//! once.
#pragma once
#include <dafuse/config.hpp>

#include <dafuse/backend/executor.hpp>
#include <dafuse/backend/head_view_base.hpp>
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
class head_view : public head_view_base<Exec> {
  using base = head_view_base<Exec>;

 public:
  using typename base::T;
  using typename base::value_type;
  //! Rounding to the step's stored format (none for fp32 and fp64).
  struct rounding {
    static T round(T x) { return Products::round(x); }
  };

  head_view(Exec& exec,
            Products& products,
            const head::shape& shape,
            const head::view_buffers<T>& buffers,
            double loss_scale)
      : base(exec, shape, buffers), products_(&products), loss_scale_(loss_scale) {}

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
    p.check();
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
    v.skip(scratch_values, sum_values);
    return v;
  }

 private:
  Products* products_;
  double loss_scale_;
};

}  // namespace dafuse::backend::host
