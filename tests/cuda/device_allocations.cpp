// Counts this process's device allocations, for the GPU suite's "no allocation in a step" test.
// The suite links the CUDA runtime as a shared library (-cudart shared), so these definitions
// stand in for the runtime's cudaMalloc and cudaMallocAsync and pass each call on to them. A host
// translation unit of its own: in a .cu file, nvcc's device pass sees the runtime's device-side
// cudaMalloc under the same name.
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <atomic>

namespace {
std::atomic<long> allocations{0};
template <class F>
F next_symbol(const char* name) {
  return reinterpret_cast<F>(dlsym(RTLD_NEXT, name));
}
}  // namespace

//! Device allocations counted so far.
long dafuse_test_device_allocations() {
  return allocations.load();
}

extern "C" cudaError_t cudaMalloc(void** p, size_t bytes) {
  using fn = cudaError_t (*)(void**, size_t);
  static const fn real = next_symbol<fn>("cudaMalloc");
  ++allocations;
  return real ? real(p, bytes) : cudaErrorNotSupported;
}

extern "C" cudaError_t cudaMallocAsync(void** p, size_t bytes, cudaStream_t s) {
  using fn = cudaError_t (*)(void**, size_t, cudaStream_t);
  static const fn real = next_symbol<fn>("cudaMallocAsync");
  ++allocations;
  return real ? real(p, bytes, s) : cudaErrorNotSupported;
}
