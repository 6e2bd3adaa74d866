// SPDX-License-Identifier: Apache-2.0
//! @file backend/cuda/system.cuh
//! @brief `system::cuda`: Thrust's CUDA system (device memory; algorithms on a stream).
#pragma once
#if !defined(__CUDACC__)
#error \
    "dafuse: backend/cuda/ headers are CUDA code: compile this translation unit with nvcc (a .cu file), or name system::omp for the host backend"
#endif
#include <dafuse/backend/device/thrust_memory.hpp>
#include <dafuse/config.hpp>
#include <dafuse/core/error.hpp>
#include <dafuse/core/system.hpp>

#include <cuda_runtime.h>
#include <thrust/system/cuda/execution_policy.h>
#include <thrust/system/cuda/vector.h>

#include <cstddef>
#include <string>

namespace dafuse::system {

//! Device memory of the current CUDA device; algorithms run there. policy() is synchronous on the
//! default stream (buffers use it when they are made); policy(stream) queues on a step's own
//! stream and never waits on the host (Thrust's par_nosync), so a step's phases can be queued,
//! and captured into a CUDA graph, without a host round trip.
struct cuda : backend::device::thrust_memory<cuda> {
  template <class T>
  using vector = thrust::cuda::vector<T>;             //!< owning storage in device memory
  static auto policy() { return thrust::cuda::par; }  //!< Thrust execution policy
  //! Thrust execution policy on `stream`, without synchronising.
  static auto policy(cudaStream_t stream) { return thrust::cuda::par_nosync.on(stream); }
  static constexpr bool host_accessible = false;  //!< device memory: reached through copies
  //! Copies `bytes` from host memory to device memory, complete on return. (Synchronous on the
  //! default stream: a loader's upload between steps, not a step's own work.)
  static void upload(void* to, const void* from, std::size_t bytes) {
    if (bytes) check_copy(cudaMemcpy(to, from, bytes, cudaMemcpyHostToDevice));
  }
  //! Copies `bytes` from device memory to host memory, complete on return.
  static void download(void* to, const void* from, std::size_t bytes) {
    if (bytes) check_copy(cudaMemcpy(to, from, bytes, cudaMemcpyDeviceToHost));
  }

 private:
  static void check_copy(cudaError_t e) {
    if (e != cudaSuccess) fail("system::cuda", std::string("cudaMemcpy: ") + cudaGetErrorString(e));
  }
};

static_assert(system_policy<cuda>);

}  // namespace dafuse::system
