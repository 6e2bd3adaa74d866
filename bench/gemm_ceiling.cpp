// The machine's fp32 GEMM ceiling: a square n³ product repeated after warm-up, with Eigen (on
// Eigen's own threading) and with dafuse's gemm (backend/host/gemm.hpp: the AVX-512 or AVX2 + FMA
// kernel of gemm_fp32.hpp where the compiler targets one), both on OMP_NUM_THREADS threads; and
// beside it the physical limit, the core's fp32 FMA peak (fma_peak.hpp) on 1 thread and on
// OMP_NUM_THREADS, with each product's share of it. One line per measurement:
//   cpu: <model name>; FMA peak loop: <ISA>
//   fp32 FMA peak, <t> thread(s): <x> GFLOP/s (<ISA>)
//   <n>^3 fp32 GEMM, <t> thread(s): Eigen <x> GFLOP/s, dafuse <y> GFLOP/s (...)
// Run: OMP_NUM_THREADS=2 build/bench/gemm_ceiling [--n 1024]
#include <dafuse/backend/host/gemm.hpp>

#include "fma_peak.hpp"

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
  std::printf("cpu: %s; FMA peak loop: %s\n", bench::cpu_model().c_str(), bench::fma_isa);
  const double peak_1 = bench::fma_peak_gflops(1);
  std::printf("fp32 FMA peak, 1 thread(s): %.1f GFLOP/s (%s)\n", peak_1, bench::fma_isa);
  const double peak_n = threads > 1 ? bench::fma_peak_gflops(threads) : peak_1;
  if (threads > 1)
    std::printf("fp32 FMA peak, %d thread(s): %.1f GFLOP/s (%s)\n", threads, peak_n,
                bench::fma_isa);

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
      " (%.1f%%, %.1f%% of the FMA peak) (checksums %.3g, %.3g)\n",
      n, threads, eigen, dafuse, host::fp32_kernel_name, 100 * eigen / peak_n,
      100 * dafuse / peak_n, double(eigen_sum), double(c.sum()));
}
