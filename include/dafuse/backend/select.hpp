// SPDX-License-Identifier: Apache-2.0
//! @file backend/select.hpp
//! @brief The one place that picks the system a step runs on by default.
//!
//! Today every step runs the host backend (Eigen products and Thrust algorithms) on Thrust's
//! OpenMP system. A CUDA backend will be chosen here, for translation units compiled by nvcc,
//! once its kernels exist; user code does not change.
#pragma once
#include <dafuse/config.hpp>
#include <dafuse/core/system.hpp>

namespace dafuse::backend {

//! The system train_step uses when none is named.
using default_system = system::omp;

}  // namespace dafuse::backend
