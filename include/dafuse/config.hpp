// SPDX-License-Identifier: Apache-2.0
//! @file config.hpp
//! @brief Version, compiler requirements and the one place that picks Thrust's systems.
#pragma once

#define DAFUSE_VERSION_MAJOR 0
#define DAFUSE_VERSION_MINOR 1
#define DAFUSE_VERSION_PATCH 0

#if __cplusplus < 202002L
#error "dafuse: needs C++20 (compile with -std=c++20 or later)"
#endif

// Without nvcc, Thrust's "device" system must be a CPU one: CCCL's Thrust otherwise pulls in the
// CUDA runtime headers. The host backend names its system explicitly (thrust::omp), so this
// default only matters for user code that says thrust::device_vector.
#if !defined(__CUDACC__) && !defined(THRUST_DEVICE_SYSTEM)
#define THRUST_DEVICE_SYSTEM THRUST_DEVICE_SYSTEM_OMP
#endif

#if defined(__CUDACC__)
#define DAFUSE_HOST_DEVICE __host__ __device__
#else
#define DAFUSE_HOST_DEVICE
#endif

#if defined(_OPENMP)
#define DAFUSE_HAS_OPENMP 1
#else
#define DAFUSE_HAS_OPENMP 0
#endif

// Without OpenMP every step runs on one thread, which a user who forgot -fopenmp would not
// otherwise learn. GCC prints #pragma message as a note; clang prints it as a warning, which
// -Werror would make fatal, so only GCC says it. DAFUSE_SERIAL says one thread is meant.
#if !DAFUSE_HAS_OPENMP && !defined(DAFUSE_SERIAL) && defined(__GNUC__) && !defined(__clang__) && \
    !defined(__CUDACC__)
#pragma message(                                                                            \
    "dafuse: built without OpenMP, so every step runs on one thread: add -fopenmp (CMake: " \
    "OpenMP::OpenMP_CXX), or define DAFUSE_SERIAL if one thread is meant")
#endif
