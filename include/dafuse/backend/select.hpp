// SPDX-License-Identifier: Apache-2.0
//! @file backend/select.hpp
//! @brief The one place that picks the system a step runs on by default, and brings in its
//! executor.
//!
//! Every step runs on Thrust's OpenMP system through the host executor (backend/host/): the
//! product kernels, one held OpenMP team, Eigen. A CUDA executor will be chosen here, for
//! translation units compiled by nvcc; user code does not change.
#pragma once
#include <dafuse/config.hpp>

#include <dafuse/backend/executor.hpp>
#include <dafuse/backend/host/executor.hpp>
#include <dafuse/core/system.hpp>

namespace dafuse::backend {

//! The system train_step uses when none is named.
using default_system = system::omp;

}  // namespace dafuse::backend
