// SPDX-License-Identifier: Apache-2.0
//! @file backend/select.hpp
//! @brief The one place that picks the system a step runs on by default, and brings in the
//! executors.
//!
//! Every step runs on Thrust's OpenMP system through the host executor (backend/host/) unless
//! it names another system as train_step's 7th argument. A translation unit compiled by nvcc also
//! gets system::cuda and its executor (backend/cuda/); every build gets system::omp_device, the
//! device executor on the CPU that the tests run the CUDA executor's orchestration with.
#pragma once
#include <dafuse/config.hpp>

#include <dafuse/backend/device/executor.hpp>
#include <dafuse/backend/device/omp_device.hpp>
#include <dafuse/backend/executor.hpp>
#include <dafuse/backend/host/executor.hpp>
#include <dafuse/core/system.hpp>
#if defined(__CUDACC__)
#include <dafuse/backend/cuda/executor.cuh>
#endif

namespace dafuse::backend {

//! The system train_step uses when none is named.
using default_system = system::omp;

}  // namespace dafuse::backend
