// SPDX-License-Identifier: Apache-2.0
//! @file backend/default_system.hpp
//! @brief The one place that picks the system a step runs on by default, and brings in the
//! host executor.
//!
//! Every step runs on system::omp through the host executor (backend/host/) unless it names
//! another system as train_step's 7th argument. A translation unit compiled by nvcc also gets
//! system::cuda and its executor (backend/cuda/). system::omp_device, the device executor on the
//! CPU that the tests run the CUDA executor's orchestration with, comes with its own header
//! (backend/omp_device/executor.hpp, which dafuse.hpp does not include): a step that does not name
//! it parses neither the device executor nor Thrust.
#pragma once
#include <dafuse/config.hpp>

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
