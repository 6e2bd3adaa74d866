// SPDX-License-Identifier: Apache-2.0
//! @file backend/generic/update.hpp
//! @brief The one pass over all parameters that applies clipping and the optimizer update.
#pragma once
#include <dafuse/config.hpp>
#include <dafuse/core/meta.hpp>
#include <dafuse/policy/clip.hpp>

#include <thrust/for_each.h>
#include <thrust/iterator/counting_iterator.h>

namespace dafuse::backend::generic {

//! For every parameter i < count: g = grads[i]·scale (scale.task below `task_count`,
//! scale.discriminator from there), then Optim's update of params[i] with its state.
//! One read of each gradient, one read-modify-write of each parameter and its state.
template <class Optim, class System, class T>
void update_parameters(T* params,
                       const T* grads,
                       T* state,
                       index_t count,
                       index_t task_count,
                       clip_scales scale,
                       const typename Optim::template coefficients<T>& c) {
  const T task_scale = T(scale.task), discriminator_scale = T(scale.discriminator);
  thrust::for_each(System::policy(), thrust::counting_iterator<index_t>(0),
                   thrust::counting_iterator<index_t>(count), [=](index_t i) {
                     const T g = grads[i] * (i < task_count ? task_scale : discriminator_scale);
                     Optim::update(i, g, params, state, count, c);
                   });
}

}  // namespace dafuse::backend::generic
