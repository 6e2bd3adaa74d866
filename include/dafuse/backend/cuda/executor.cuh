// SPDX-License-Identifier: Apache-2.0
//! @file backend/cuda/executor.cuh
//! @brief The executor of system::cuda: the device executor (backend/device/executor.hpp) over
//! CUDA's device primitives (cuBLASLt products, CUB reductions, a stream of its own).
#pragma once
#if !defined(__CUDACC__)
#error \
    "dafuse: backend/cuda/ headers are CUDA code: compile this translation unit with nvcc (a .cu file), or name system::omp for the host backend"
#endif
#include <dafuse/config.hpp>

#include <dafuse/backend/cuda/primitives.cuh>
#include <dafuse/backend/cuda/system.cuh>
#include <dafuse/backend/device/executor.hpp>
