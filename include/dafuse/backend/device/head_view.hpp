// SPDX-License-Identifier: Apache-2.0
//! @file backend/device/head_view.hpp
//! @brief The device executor's view for a head's maths (head/view.hpp): loops and sums queued
//! on the executor's stream, products planned the first time they are queued, values in the
//! system's memory.
#pragma once
#include <dafuse/config.hpp>

#include <dafuse/backend/head_view_base.hpp>
#include <dafuse/core/step_values.hpp>
#include <dafuse/head/view.hpp>

namespace dafuse::backend::device {

//! The view over the device executor `Exec`: everything it runs is queued, to run when the
//! step does, so a value a phase computes reaches a later one as a step_scalar (never a number).
//! It also passes the modules' passes a head runs (G_d's forward and backward, the domain loss,
//! CDAN's map) to the executor.
template <class Exec>
class head_view : public head_view_base<Exec> {
  using base = head_view_base<Exec>;

 public:
  using typename base::T;
  using typename base::value_type;
  //! Device steps store what they compute in their own format (fp32 or fp64): nothing to round.
  using rounding = head::no_rounding<T>;

  head_view(Exec& exec,
            const head::shape& shape,
            const head::view_buffers<T>& buffers,
            step_scalar loss_scale)
      : base(exec, shape, buffers), loss_scale_(loss_scale) {}

  //! S, read from the step's memory when a phase runs.
  step_scalar loss_scale() const { return loss_scale_; }

  //! f(i) for i in [0, n), queued (Thrust's for_each on the executor's stream).
  template <class F>
  void for_each(index_t n, const F& f) const {
    this->exec_->queue_for_each(n, f);
  }
  //! out[k] = Σ_i f(i).terms[k], queued; the system's deterministic sum.
  template <int K, class F>
  void map_sum(index_t n, const F& f, double* out) const {
    this->exec_->template queue_map_sum<K>(n, f, out);
  }
  //! C = α·op(A)·op(B) + β·C on the system's products, planned the first time p is queued.
  void product(const head::product& p, double alpha, const T* a, const T* b, T beta, T* c) const {
    this->exec_->queue_head_product(p, T(alpha), a, b, beta, c);
  }
  //! A head's loss and accuracy as its forward returns them: handles of values in the step's
  //! memory, which the step's report reads when the step has run.
  auto result(step_scalar loss, step_scalar accuracy = step_scalar(0.0)) const {
    return typename Exec::domain_figures{loss, accuracy};
  }
  //! The view of a later term of a sum of heads: its scratch and sums after the earlier terms'.
  head_view after(index_t scratch_values, index_t sum_values) const {
    head_view v = *this;
    v.skip(scratch_values, sum_values);
    return v;
  }

 private:
  step_scalar loss_scale_;
};

}  // namespace dafuse::backend::device
