// SPDX-License-Identifier: Apache-2.0
//! @file backend/device/primitives.hpp
//! @brief What the device executor needs of a system beyond Thrust: `device_primitives<System>`
//! (products, deterministic sums, copies between host and device, the stream), the shape of a
//! product, and the `device_system` concept.
//!
//! The device executor (backend/device/executor.hpp) is written once over Thrust algorithms on
//! `System::policy(stream)` and the shared functors of backend/device/functors.hpp; the few
//! things Thrust does not give it come from here, one specialisation per system:
//! backend/cuda/primitives.cuh (cuBLASLt, CUB block reductions, CUDA streams) and
//! backend/omp_device/primitives.hpp (Eigen and plain loops, so that the executor's orchestration
//! runs in the CPU test suite).
//!
//! A specialisation provides, T = float or double:
//!   device_primitives()                         a stream of its own and the products' workspace
//!   policy()                                    Thrust's execution policy on that stream
//!   product_plan<T> plan(product_shape<T>)      once, when the executor is built
//!   run(plan, α, A, B, β, C)                    C = α·op(A)·op(B) + β·C, then the epilogue
//!   writes_bias_gradient(plan)                  whether run() writes the plan's bias gradient
//!   sum(x, n, squares, out)                     *out = Σ x_i (or Σ x_i²) in double, into device
//!                                               memory, the same bits on every call
//!   map_sum<K>(n, f, out)                       out[k] = Σ_i f(i).terms[k] (sum_terms,
//!                                               core/step_values.hpp), likewise (f also
//!                                               writes what it computes: a loss's gradient)
//!   prepare_shuffle(rows), shuffle(job, domains)   the resident loader's sequential part
//!   captures, graph, capture(g, body), replay(g)   CUDA graphs (captures = false: none)
//!   to_device(dst, src, bytes), to_host(dst, src, bytes)   copies that complete before returning
//!   synchronize()                               waits for everything queued on the stream
#pragma once
#include <dafuse/config.hpp>
#include <dafuse/core/meta.hpp>
#include <dafuse/core/step_values.hpp>
#include <dafuse/core/system.hpp>

#include <concepts>
#include <cstddef>
#include <cstdint>

namespace dafuse::backend {

//! A system whose memory the host may not read: steps on it run through the device executor. It
//! names Thrust's execution policy for its memory (`policy()`), copies between host memory and
//! its own with upload(to, from, bytes) and download(to, from, bytes), complete when they return
//! (loaders use them outside a step), and copies, fills and loops in its own memory
//! (thrust_memory).
template <class System>
concept device_system =
    system::system_policy<System> && !System::host_accessible &&
    requires(void* to, const void* from, std::size_t bytes, float* x, std::size_t n) {
  System::policy();
  System::upload(to, from, bytes);
  System::download(to, from, bytes);
  System::copy(x, n, x);
  System::fill(x, n, 0.0f);
};

namespace device {

//! What a product adds after C = α·op(A)·op(B) + β·C: nothing, a bias b: [m] on every column,
//! the bias then ReLU, or (a weight-gradient product ∂W = δz·xᵀ) the row sums of A written to
//! `bias`: ∂b = δz·1, when writes_bias_gradient(plan) says the system does it.
enum class epilogue { none, bias, relu_bias, bias_gradient };

//! One product's shape, fixed when the executor is built: column-major operands, op(A): [m, k],
//! op(B): [k, n], C: [m, n], with leading dimensions; `bias` is read by the epilogue.
template <class T>
struct product_shape {
  bool transpose_a = false;  //!< op(A) = Aᵀ (A stored [k, m])
  bool transpose_b = false;  //!< op(B) = Bᵀ (B stored [n, k])
  index_t m = 0, n = 0, k = 0;
  index_t lda = 0, ldb = 0, ldc = 0;
  epilogue after = epilogue::none;
  const T* bias = nullptr;  //!< [m] for epilogue::bias and relu_bias
  //! Bytes the addresses of A, B and C are multiples of (alignment_of the operands' pointers):
  //! what a product kernel may assume of them.
  std::uint32_t align_a = sizeof(T), align_b = sizeof(T), align_c = sizeof(T);
};

//! The largest power of two up to 256 that divides the address of `p`.
inline std::uint32_t alignment_of(const void* p) {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  std::uint32_t align = 256;
  while (align > 1 && a % align != 0) align /= 2;
  return align;
}

//! Products, sums and copies for `System`; the primary template is never used.
template <class System>
class device_primitives {
  static_assert(dependent_false<System>,
                "dafuse: no device primitives for this system; system::cuda's come with "
                "<dafuse/backend/cuda/executor.cuh> (compile with nvcc), system::omp_device's "
                "with <dafuse/backend/omp_device/executor.hpp>");
};

}  // namespace device
}  // namespace dafuse::backend
