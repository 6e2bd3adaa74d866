// SPDX-License-Identifier: Apache-2.0
//! @file backend/cuda/primitives.cuh
//! @brief system::cuda's device primitives: a stream of the step's own, products through
//! cuBLASLt (fp32 without TF32, fp64) with the bias and ReLU (and the bias gradient) in their
//! epilogues, deterministic one-launch sums with CUB's block reduction, the resident loader's
//! shuffle in shared memory, CUDA graphs, and copies between host and device.
//!
//! Each product is planned once: its descriptors, layouts and the algorithm cuBLASLt's heuristic
//! picks for the alignment of the pointers it will read, then reused every step. cuBLASLt's
//! results depend only on the algorithm and the operands (its split-K schemes reduce in a fixed
//! order), and the sums use a fixed grid, so a step gives the same bits on every run.
#pragma once
#if !defined(__CUDACC__)
#error \
    "dafuse: backend/cuda/ headers are CUDA code: compile this translation unit with nvcc (a .cu file), or name system::omp for the host backend"
#endif
#include <dafuse/config.hpp>

#include <dafuse/backend/cuda/system.cuh>
#include <dafuse/backend/device/functors.hpp>
#include <dafuse/backend/device/primitives.hpp>
#include <dafuse/backend/device/resident_loader.hpp>
#include <dafuse/core/error.hpp>
#include <dafuse/core/meta.hpp>
#include <dafuse/nn/activation.hpp>

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <thrust/for_each.h>
#include <thrust/iterator/counting_iterator.h>
#include <cub/block/block_reduce.cuh>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>

namespace dafuse::backend::cuda {

//! Throws `dafuse: <what>: <CUDA's message>` unless `e` is cudaSuccess.
inline void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) fail(what, std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e));
}
//! Throws unless a cuBLASLt call succeeded.
inline void check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) fail(what, "cuBLASLt status " + std::to_string(int(s)));
}

//! Whether a CUDA device is present and usable (the GPU tests skip without one).
inline bool device_available() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

namespace detail {

//! Threads of a block of the sums, and blocks of their first pass.
inline constexpr int sum_threads = 256;
inline constexpr int sum_blocks = 128;
//! Values a map_sum adds per index, at most.
inline constexpr int max_terms = 4;

//! A sum in one launch: block b adds values b·threads + t, stepping by the grid, in double, and
//! writes its total to partials[b]; the last block to finish (a counter in device memory, reset
//! by that block for the next sum) adds the `gridDim.x` partials in block order into *out. The
//! order of every addition is fixed by the grid, so the same values give the same bits.
template <class T>
__global__ void __launch_bounds__(sum_threads)
    sum_values(const T* x, index_t n, bool squares, double* partials, unsigned* done, double* out) {
  using reduce = cub::BlockReduce<double, sum_threads>;
  __shared__ typename reduce::TempStorage storage;
  __shared__ bool last;
  double s = 0;
  for (index_t i = index_t(blockIdx.x) * sum_threads + threadIdx.x; i < n;
       i += index_t(gridDim.x) * sum_threads) {
    const double v = double(x[i]);
    s += squares ? v * v : v;
  }
  const double total = reduce(storage).Sum(s);
  if (threadIdx.x == 0) {
    partials[blockIdx.x] = total;
    __threadfence();  // the partial is visible before the count says so
    last = atomicAdd(done, 1u) == gridDim.x - 1;
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  __syncthreads();
  const double v = int(threadIdx.x) < int(gridDim.x) ? partials[threadIdx.x] : 0.0;
  __syncthreads();  // storage is reused
  const double sum = reduce(storage).Sum(v);
  if (threadIdx.x == 0) {
    *out = sum;
    *done = 0;
  }
}

//! map_sum in one launch: thread i of the grid-stride loop runs f(i), which returns K values;
//! each is added up as sum_values adds its one, and the last block writes the K totals to out.
template <int K, class F>
__global__ void __launch_bounds__(sum_threads)
    map_sum_values(index_t n, F f, double* partials, unsigned* done, double* out) {
  using reduce = cub::BlockReduce<double, sum_threads>;
  __shared__ typename reduce::TempStorage storage;
  __shared__ bool last;
  double s[K] = {};
  for (index_t i = index_t(blockIdx.x) * sum_threads + threadIdx.x; i < n;
       i += index_t(gridDim.x) * sum_threads) {
    const sum_terms<K> v = f(i);
    for (int k = 0; k < K; ++k) s[k] += v.terms[k];
  }
  for (int k = 0; k < K; ++k) {
    const double total = reduce(storage).Sum(s[k]);
    if (threadIdx.x == 0) partials[k * sum_blocks + blockIdx.x] = total;
    __syncthreads();  // storage is reused
  }
  if (threadIdx.x == 0) {
    __threadfence();
    last = atomicAdd(done, 1u) == gridDim.x - 1;
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  for (int k = 0; k < K; ++k) {
    const double v =
        int(threadIdx.x) < int(gridDim.x) ? partials[k * sum_blocks + threadIdx.x] : 0.0;
    const double total = reduce(storage).Sum(v);
    if (threadIdx.x == 0) out[k] = total;
    __syncthreads();
  }
  if (threadIdx.x == 0) *done = 0;
}

//! The resident loader's permutations (backend/device/resident_loader.hpp), one block a domain:
//! the swaps and 0..R−1 loaded into shared memory by every thread, the swaps applied there by one
//! thread (a sequential chain of shared-memory accesses, not global ones), the permutation written
//! back by every thread. A domain of more than `shared_rows` rows runs shuffle_domain in global
//! memory instead.
__global__ void shuffle_in_shared(device::shuffle_domain job, index_t shared_rows) {
  extern __shared__ std::int32_t shared[];
  const int d = int(blockIdx.x);
  const device::domain_sampler& ds = job.domain[d];
  const std::int64_t t = *job.at.drawn;
  for (int s = 0; s < 2; ++s) {
    const std::int64_t e = device::wanted_epoch(job.at, ds.rows, t, s);
    if (e < 0 || ds.held[s] == e) continue;  // the same answer in every thread
    __syncthreads();                         // every thread has read held[s]
    if (ds.rows > shared_rows) {
      if (threadIdx.x == 0) {
        std::int32_t* order = ds.order[s];
        for (index_t i = 0; i < ds.rows; ++i) order[i] = std::int32_t(i);
        device::apply_swaps(order, ds.swaps[s], ds.rows);
        ds.held[s] = e;
      }
      __syncthreads();
      continue;
    }
    std::int32_t* order = shared;
    auto* swaps = reinterpret_cast<std::uint32_t*>(shared + shared_rows);
    for (index_t i = threadIdx.x; i < ds.rows; i += blockDim.x) {
      order[i] = std::int32_t(i);
      swaps[i] = ds.swaps[s][i];
    }
    __syncthreads();
    if (threadIdx.x == 0) device::apply_swaps(order, swaps, ds.rows);
    __syncthreads();
    for (index_t i = threadIdx.x; i < ds.rows; i += blockDim.x) ds.order[s][i] = order[i];
    __syncthreads();
    if (threadIdx.x == 0) ds.held[s] = e;
  }
}

//! C[i] = β·C[i] over an m × n block at leading dimension ldc (i counts the block's values):
//! a product with no terms.
template <class T>
struct scale_columns {
  T* c;
  index_t m, ldc;
  T beta;
  DAFUSE_HOST_DEVICE void operator()(index_t i) const {
    T& v = c[(i / m) * ldc + i % m];
    v = beta == T(0) ? T(0) : beta * v;
  }
};
//! The bias and activation of a product whose epilogue was not fused.
template <class T, class Act>
struct bias_columns {
  T* c;
  const T* bias;
  index_t m, ldc;
  Act act;
  DAFUSE_HOST_DEVICE void operator()(index_t i) const {
    const index_t row = i % m;
    T& v = c[(i / m) * ldc + row];
    v = act(v + bias[row]);
  }
};

//! C = α·op(A)·op(B) + β·C, one thread per value of C, k terms in order: the product of a plan for
//! which cuBLASLt's heuristic has no algorithm (slow, never expected, but never a failed step).
template <class T>
struct plain_product {
  device::product_shape<T> s;
  T alpha, beta;
  const T* a;
  const T* b;
  T* c;
  DAFUSE_HOST_DEVICE void operator()(index_t i) const {
    const index_t row = i % s.m, col = i / s.m;
    T sum = T(0);
    for (index_t t = 0; t < s.k; ++t) {
      const T x = s.transpose_a ? a[row * s.lda + t] : a[t * s.lda + row];
      const T y = s.transpose_b ? b[t * s.ldb + col] : b[col * s.ldb + t];
      sum += x * y;
    }
    T& v = c[col * s.ldc + row];
    v = beta == T(0) ? alpha * sum : alpha * sum + beta * v;
  }
};

//! cuBLASLt's data and compute types for T.
template <class T>
struct lt_types;
template <>
struct lt_types<float> {
  static constexpr cudaDataType_t data = CUDA_R_32F;
  static constexpr cublasComputeType_t compute = CUBLAS_COMPUTE_32F;  // no TF32
};
template <>
struct lt_types<double> {
  static constexpr cudaDataType_t data = CUDA_R_64F;
  static constexpr cublasComputeType_t compute = CUBLAS_COMPUTE_64F;
};

//! The cuBLASLt objects of one planned product, destroyed with it.
struct lt_plan_objects {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  std::size_t workspace = 0;  // bytes the algorithm needs
  lt_plan_objects() = default;
  lt_plan_objects(const lt_plan_objects&) = delete;
  lt_plan_objects& operator=(const lt_plan_objects&) = delete;
  ~lt_plan_objects() {
    if (c) cublasLtMatrixLayoutDestroy(c);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (desc) cublasLtMatmulDescDestroy(desc);
  }
};

}  // namespace detail

//! A product planned for cuBLASLt: its shape, its objects (null when the heuristic offers no
//! algorithm: run() then multiplies with plain_product), and whether the epilogue runs as a
//! kernel of its own (when no algorithm offers it fused, or the bias is not 16-byte aligned).
template <class T>
struct lt_plan {
  device::product_shape<T> shape{};
  std::shared_ptr<const detail::lt_plan_objects> objects;
  bool separate_epilogue = false;
};

}  // namespace dafuse::backend::cuda

namespace dafuse::backend::device {

template <>
class device_primitives<system::cuda> {
 public:
  template <class T>
  using product_plan = cuda::lt_plan<T>;
  //! Bytes of workspace cuBLASLt's algorithms may use (split-K partial products).
  static constexpr std::size_t workspace_bytes = std::size_t(32) << 20;

  device_primitives() {
    cuda::check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    cuda::check(cublasLtCreate(&lt_), "cublasLtCreate");
    cuda::check(cudaMalloc(&workspace_, workspace_bytes), "cudaMalloc (cuBLASLt workspace)");
    cuda::check(
        cudaMalloc(&partials_, sizeof(double) * cuda::detail::sum_blocks * cuda::detail::max_terms),
        "cudaMalloc (sum partials)");
    cuda::check(cudaMalloc(&done_, sizeof(unsigned)), "cudaMalloc (sum counter)");
    cuda::check(cudaMemset(done_, 0, sizeof(unsigned)), "cudaMemset (sum counter)");
  }
  device_primitives(const device_primitives&) = delete;
  device_primitives& operator=(const device_primitives&) = delete;
  ~device_primitives() {
    cudaStreamSynchronize(stream_);
    cudaFree(done_);
    cudaFree(partials_);
    cudaFree(workspace_);
    cublasLtDestroy(lt_);
    cudaStreamDestroy(stream_);
  }

  //! A step's work is captured into a CUDA graph once and replayed.
  static constexpr bool captures = true;
  //! A captured graph and its executable instance, destroyed with it.
  struct graph {
    cudaGraph_t captured = nullptr;
    cudaGraphExec_t instance = nullptr;
    graph() = default;
    graph(const graph&) = delete;
    graph& operator=(const graph&) = delete;
    ~graph() { reset(); }
    void reset() {
      if (instance) cudaGraphExecDestroy(instance);
      if (captured) cudaGraphDestroy(captured);
      instance = nullptr;
      captured = nullptr;
    }
  };
  //! Captures what `body` queues on the stream into `g` (replacing what it held), without running
  //! it (cudaStreamCaptureModeRelaxed: queries the runtime makes while launching are allowed).
  template <class Body>
  void capture(graph& g, Body&& body) const {
    g.reset();
    cuda::check(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeRelaxed),
                "cudaStreamBeginCapture");
    try {
      body();
    } catch (...) {
      cudaGraph_t partial = nullptr;
      cudaStreamEndCapture(stream_, &partial);
      if (partial) cudaGraphDestroy(partial);
      throw;
    }
    cuda::check(cudaStreamEndCapture(stream_, &g.captured), "cudaStreamEndCapture");
    cuda::check(cudaGraphInstantiate(&g.instance, g.captured, 0), "cudaGraphInstantiate");
  }
  //! Launches the captured graph on the stream.
  void replay(const graph& g) const {
    cuda::check(cudaGraphLaunch(g.instance, stream_), "cudaGraphLaunch");
  }

  //! Thrust's policy on the step's stream, without host synchronisation.
  auto policy() const { return system::cuda::policy(stream_); }
  cudaStream_t stream() const { return stream_; }

  //! Plans a product: descriptors, layouts, and the heuristic's best algorithm for operands at
  //! the alignment of `shape`'s pointers, with the epilogue fused when an algorithm offers it.
  template <class T>
  product_plan<T> plan(const product_shape<T>& shape) const {
    product_plan<T> p;
    p.shape = shape;
    if (shape.after == epilogue::bias_gradient) {
      // Fused (BGRADA) when an algorithm offers it; otherwise the plan is a plain product.
      if (shape.k > 0 && alignment_of(shape.bias) >= 16) {
        p.objects = make_objects(shape, true);
        if (p.objects) return p;
      }
      p.shape.after = epilogue::none;
      p.shape.bias = nullptr;
      return plan(p.shape);
    }
    const bool wants_epilogue = shape.after != epilogue::none;
    if (shape.k == 0) {  // run() scales C itself: cuBLASLt refuses k = 0
      p.separate_epilogue = wants_epilogue;
      return p;
    }
    const bool bias_aligned = !wants_epilogue || alignment_of(shape.bias) >= 16;
    if (wants_epilogue && bias_aligned) {
      p.objects = make_objects(shape, true);
      if (p.objects) return p;
    }
    p.objects = make_objects(shape, false);  // null: run() multiplies with plain_product
    p.separate_epilogue = wants_epilogue;
    return p;
  }

  //! Whether run() writes the bias gradient a plan asked for (epilogue::bias_gradient): cuBLASLt
  //! offers the BGRADA epilogue for the product, else the caller computes it.
  template <class T>
  static bool writes_bias_gradient(const product_plan<T>& p) {
    return p.shape.after == epilogue::bias_gradient;
  }

  //! C = α·op(A)·op(B) + β·C on the stream, then the plan's epilogue.
  template <class T>
  void run(const product_plan<T>& p, T alpha, const T* a, const T* b, T beta, T* c) const {
    const product_shape<T>& s = p.shape;
    if (s.k > 0 && !p.objects) {
      thrust::for_each_n(policy(), thrust::counting_iterator<index_t>(0), s.m * s.n,
                         cuda::detail::plain_product<T>{s, alpha, beta, a, b, c});
    } else if (s.k == 0) {
      // cuBLASLt refuses k = 0; C = β·C.
      thrust::for_each_n(policy(), thrust::counting_iterator<index_t>(0), s.m * s.n,
                         cuda::detail::scale_columns<T>{c, s.m, s.ldc, beta});
    } else {
      cuda::check(cublasLtMatmul(lt_, p.objects->desc, &alpha, a, p.objects->a, b, p.objects->b,
                                 &beta, c, p.objects->c, c, p.objects->c, &p.objects->algo,
                                 workspace_, p.objects->workspace, stream_),
                  "cublasLtMatmul");
    }
    if (p.separate_epilogue) {
      if (s.after == epilogue::relu_bias)
        thrust::for_each_n(
            policy(), thrust::counting_iterator<index_t>(0), s.m * s.n,
            cuda::detail::bias_columns<T, nn::relu_t>{c, s.bias, s.m, s.ldc, nn::relu});
      else
        thrust::for_each_n(
            policy(), thrust::counting_iterator<index_t>(0), s.m * s.n,
            cuda::detail::bias_columns<T, nn::identity_t>{c, s.bias, s.m, s.ldc, nn::identity});
    }
  }

  //! *out = Σ x_i (Σ x_i² with `squares`) in double, in one launch: a fixed grid of partial sums
  //! that the last block adds in order, so the same values give the same bits.
  template <class T>
  void sum(const T* x, index_t n, bool squares, double* out) const {
    using namespace cuda::detail;
    const int blocks = int(
        std::min<index_t>(sum_blocks, std::max<index_t>(1, (n + sum_threads - 1) / sum_threads)));
    sum_values<T><<<blocks, sum_threads, 0, stream_>>>(x, n, squares, partials_, done_, out);
    cuda::check(cudaGetLastError(), "dafuse sum kernel");
  }

  //! Readies shuffle() for domains of up to `rows` rows: the shared memory a block needs (two
  //! 4-byte values a row), up to what the device allows a block.
  void prepare_shuffle(index_t rows) {
    int device = 0, most = 0;
    cuda::check(cudaGetDevice(&device), "cudaGetDevice");
    cuda::check(cudaDeviceGetAttribute(&most, cudaDevAttrMaxSharedMemoryPerBlockOptin, device),
                "cudaDeviceGetAttribute");
    shared_rows_ = std::min<index_t>(rows, index_t(most) / 8);
    cuda::check(
        cudaFuncSetAttribute(cuda::detail::shuffle_in_shared,
                             cudaFuncAttributeMaxDynamicSharedMemorySize, int(shared_rows_ * 8)),
        "cudaFuncSetAttribute");
  }
  //! The sequential part of the resident loader's permutations: one block a domain.
  void shuffle(const shuffle_domain& job, int domains) const {
    cuda::detail::shuffle_in_shared<<<domains, 256, std::size_t(shared_rows_) * 8, stream_>>>(
        job, shared_rows_);
    cuda::check(cudaGetLastError(), "dafuse shuffle kernel");
  }

  //! For i in [0, n): f(i) returns sum_terms<K>, K values it has computed (a loss, a
  //! hit) besides what it writes; out[k] = Σ_i of value k, in double, in one launch, the same
  //! bits on every call.
  template <int K, class F>
  void map_sum(index_t n, const F& f, double* out) const {
    using namespace cuda::detail;
    static_assert(K >= 1 && K <= max_terms, "dafuse: map_sum adds 1 to 4 values per index");
    const int blocks = int(
        std::min<index_t>(sum_blocks, std::max<index_t>(1, (n + sum_threads - 1) / sum_threads)));
    map_sum_values<K, F><<<blocks, sum_threads, 0, stream_>>>(n, f, partials_, done_, out);
    cuda::check(cudaGetLastError(), "dafuse map_sum kernel");
  }

  //! Copies host → device on the stream and waits for it.
  void to_device(void* dst, const void* src, std::size_t bytes) const {
    if (!bytes) return;
    cuda::check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_),
                "cudaMemcpyAsync (to the device)");
    synchronize();
  }
  //! Copies device → host after everything queued before it, and waits for it.
  void to_host(void* dst, const void* src, std::size_t bytes) const {
    if (!bytes) return;
    cuda::check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream_),
                "cudaMemcpyAsync (to the host)");
    synchronize();
  }
  void synchronize() const { cuda::check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize"); }

 private:
  // The objects of one product, or null when cuBLASLt has no algorithm for it.
  template <class T>
  std::shared_ptr<const cuda::detail::lt_plan_objects> make_objects(const product_shape<T>& s,
                                                                    bool fused_epilogue) const {
    using types = cuda::detail::lt_types<T>;
    auto o = std::make_shared<cuda::detail::lt_plan_objects>();
    cuda::check(cublasLtMatmulDescCreate(&o->desc, types::compute, types::data),
                "cublasLtMatmulDescCreate");
    const cublasOperation_t ta = s.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t tb = s.transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    cuda::check(
        cublasLtMatmulDescSetAttribute(o->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta),
        "cuBLASLt TRANSA");
    cuda::check(
        cublasLtMatmulDescSetAttribute(o->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb),
        "cuBLASLt TRANSB");
    if (fused_epilogue) {
      const cublasLtEpilogue_t e = s.after == epilogue::relu_bias ? CUBLASLT_EPILOGUE_RELU_BIAS
                                   : s.after == epilogue::bias_gradient ? CUBLASLT_EPILOGUE_BGRADA
                                                                        : CUBLASLT_EPILOGUE_BIAS;
      cuda::check(
          cublasLtMatmulDescSetAttribute(o->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &e, sizeof e),
          "cuBLASLt EPILOGUE");
      const void* bias = s.bias;
      cuda::check(cublasLtMatmulDescSetAttribute(o->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                                 sizeof bias),
                  "cuBLASLt BIAS_POINTER");
    }
    const std::uint64_t a_rows = s.transpose_a ? s.k : s.m, a_cols = s.transpose_a ? s.m : s.k;
    const std::uint64_t b_rows = s.transpose_b ? s.n : s.k, b_cols = s.transpose_b ? s.k : s.n;
    cuda::check(cublasLtMatrixLayoutCreate(&o->a, types::data, a_rows, a_cols, s.lda),
                "cublasLtMatrixLayoutCreate (A)");
    cuda::check(cublasLtMatrixLayoutCreate(&o->b, types::data, b_rows, b_cols, s.ldb),
                "cublasLtMatrixLayoutCreate (B)");
    cuda::check(cublasLtMatrixLayoutCreate(&o->c, types::data, std::uint64_t(s.m),
                                           std::uint64_t(s.n), s.ldc),
                "cublasLtMatrixLayoutCreate (C)");
    cublasLtMatmulPreference_t pref = nullptr;
    cuda::check(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
    const std::size_t ws = workspace_bytes;
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                         sizeof ws);
    const std::uint32_t align_a = s.align_a, align_b = s.align_b, align_c = s.align_c;
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_a,
                                         sizeof align_a);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_b,
                                         sizeof align_b);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_c,
                                         sizeof align_c);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_c,
                                         sizeof align_c);
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(lt_, o->desc, o->a, o->b, o->c, o->c,
                                                             pref, 1, &result, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    if (st != CUBLAS_STATUS_SUCCESS || found == 0) return nullptr;
    o->algo = result.algo;
    o->workspace = result.workspaceSize;
    return o;
  }

  cudaStream_t stream_ = nullptr;
  cublasLtHandle_t lt_ = nullptr;
  void* workspace_ = nullptr;
  double* partials_ = nullptr;  // [max_terms · sum_blocks]: each block's part of a sum
  unsigned* done_ = nullptr;    // blocks of the current sum that have finished
  index_t shared_rows_ = 0;     // rows shuffle_in_shared keeps in shared memory
};

}  // namespace dafuse::backend::device
