// SPDX-License-Identifier: Apache-2.0
//! @file backend/omp_device/executor.hpp
//! @brief The executor of system::omp_device: the device executor (backend/device/executor.hpp)
//! over the CPU's device primitives (Eigen products, plain sums), for testing the CUDA
//! executor's orchestration without a GPU. Include it to name system::omp_device in a step.
#pragma once
#include <dafuse/config.hpp>

#include <dafuse/backend/device/executor.hpp>
#include <dafuse/backend/omp_device/primitives.hpp>
#include <dafuse/backend/omp_device/system.hpp>
