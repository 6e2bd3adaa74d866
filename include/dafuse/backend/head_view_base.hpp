// SPDX-License-Identifier: Apache-2.0
//! @file backend/head_view_base.hpp
//! @brief What every executor's head view (head/view.hpp) gives alike: the modules' passes a head
//! runs, passed to the executor, and the step's buffers as the head sees them. The host view
//! (backend/host/head_view.hpp) and the device view (backend/device/head_view.hpp) add how
//! loops, sums and products run.
#pragma once
#include <dafuse/config.hpp>

#include <dafuse/core/meta.hpp>
#include <dafuse/head/view.hpp>
#include <dafuse/nn/dann_net.hpp>

namespace dafuse::backend {

//! The part of a view over executor `Exec` that does not depend on where the step runs.
template <class Exec>
class head_view_base {
 public:
  using value_type = typename Exec::value_type;
  using T = value_type;

  // ---- The executor's passes -------------------------------------------------------------

  //! Module M's forward (Exec::forward).
  template <nn::dann_module M>
  void forward() const {
    exec_->template forward<M>();
  }
  //! Module M's backward (Exec::backward): its parameters' squared gradient norm (a number on
  //! the host, a handle on a device).
  template <nn::dann_module M, class Scale>
  auto backward(Scale input_scale, bool accumulate) const {
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

  // ---- The step's buffers, as the head sees them -------------------------------------------

  const head::shape& shape() const { return shape_; }
  T* features() const { return buffers_.features; }
  T* feature_gradient() const { return buffers_.feature_gradient; }
  T* logits() const { return buffers_.logits; }
  T* logit_gradient() const { return buffers_.logit_gradient; }
  T* discriminator_output() const { return buffers_.discriminator_output; }
  T* discriminator_gradient() const { return buffers_.discriminator_gradient; }
  T* scratch() const { return buffers_.scratch; }
  double* sums() const { return buffers_.sums; }

 protected:
  head_view_base(Exec& exec, const head::shape& shape, const head::view_buffers<T>& buffers)
      : exec_(&exec), shape_(shape), buffers_(buffers) {}
  //! Moves the scratch and sums past an earlier term's (head::combine).
  void skip(index_t scratch_values, index_t sum_values) {
    buffers_ = buffers_.after(scratch_values, sum_values);
  }

  Exec* exec_;
  head::shape shape_;
  head::view_buffers<T> buffers_;
};

}  // namespace dafuse::backend
