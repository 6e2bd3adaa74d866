// The machine's fp32 GEMM ceiling: a square n³ product repeated after warm-up, with Eigen (on
// Eigen's own threading) and with dafuse's gemm (backend/host/gemm.hpp: the AVX-512 or AVX2 + FMA
// kernel of gemm_fp32.hpp where the compiler targets one), both on OMP_NUM_THREADS threads, and
// the FMA's own ceiling with the kernel's vectors (operands in registers) for scale.
// Run: OMP_NUM_THREADS=2 build/bench/gemm_ceiling [--n 1024]
#include <dafuse/backend/host/gemm.hpp>

#include <Eigen/Core>

#if defined(_OPENMP)
#include <omp.h>
#endif

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

//! GFLOP/s of `product`, an n³ product, over 10 calls after 2 untimed ones.
template <class F>
double gflops(long n, F&& product) {
  for (int w = 0; w < 2; ++w) product();
  const int reps = 10;
  const auto t0 = std::chrono::steady_clock::now();
  for (int r = 0; r < reps; ++r) product();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return 2.0 * double(n) * double(n) * double(n) * reps / s / 1e9;
}

#if DAFUSE_GEMM_FP32_NATIVE
//! GFLOP/s of independent FMAs on the kernel's vectors, operands in registers, one thread: 12
//! chains cover the latency of 2 pipes (4 cycles each). Each FMA is lanes × 2 FLOP.
double fma_peak_gflops() {
  using V = dafuse::backend::host::detail::fp32_simd;
  constexpr int chains = 12;
  constexpr long iterations = 20'000'000;
  typename V::reg acc[chains];
  for (int c = 0; c < chains; ++c) acc[c] = V::set1(float(c));
  const typename V::reg x = V::set1(0.999f), y = V::set1(1e-3f);
  const auto t0 = std::chrono::steady_clock::now();
  for (long i = 0; i < iterations; ++i)
#pragma GCC unroll 12
    for (int c = 0; c < chains; ++c) acc[c] = V::fmadd(acc[c], x, y);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  float sink = 0;  // keep the sums alive
  for (int c = 0; c < chains; ++c) sink += V::reduce_add(acc[c]);
  if (sink == 42.0f) std::printf(" ");
  return 2.0 * V::lanes * chains * double(iterations) / s / 1e9;
}
#endif

}  // namespace

int main(int argc, char** argv) {
  long n = 1024;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "--n") == 0) n = std::max(16L, std::atol(argv[i + 1]));
#if defined(_OPENMP)
  const int threads = omp_get_max_threads();
#else
  const int threads = 1;
#endif
  const Eigen::MatrixXf a = Eigen::MatrixXf::Random(n, n), b = Eigen::MatrixXf::Random(n, n);
  Eigen::MatrixXf c(n, n);
  const double eigen = gflops(n, [&] { c.noalias() = a * b; });
  const float eigen_sum = c.sum();

  namespace host = dafuse::backend::host;
  host::gemm_workspace<float> ws(n, n, n, threads);
  const double dafuse = gflops(n, [&] {
    host::gemm<host::op::none, host::op::none>(ws, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f,
                                               c.data(), n);
  });
  std::printf(
      "%ld^3 fp32 GEMM, %d thread(s): Eigen %.1f GFLOP/s, dafuse %.1f GFLOP/s (%s kernel)"
      " (checksums %.3g, %.3g)\n",
      n, threads, eigen, dafuse, host::fp32_kernel_name, double(eigen_sum), double(c.sum()));
#if DAFUSE_GEMM_FP32_NATIVE
  const double peak = fma_peak_gflops() * threads;
  std::printf(
      "FMA ceiling (registers only, %d thread(s)): %.1f GFLOP/s; Eigen %.0f %%, dafuse %.0f %%\n",
      threads, peak, 100.0 * eigen / peak, 100.0 * dafuse / peak);
#endif
}
