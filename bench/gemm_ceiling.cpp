// The machine's fp32 GEMM ceiling: a square n³ product with Eigen (on Eigen's own threading) and
// with dafuse's gemm (backend/host/gemm.hpp: the AVX-512 or AVX2 + FMA kernel of gemm_fp32.hpp
// where the compiler targets one), both on OMP_NUM_THREADS threads, one call of each in turn so
// that both see the same load; and beside it the physical limit, the core's fp32 FMA peak
// (fma_peak.hpp, the best of its runs) on 1 thread and on OMP_NUM_THREADS, with each product's
// share of it. The best call is the one to set against that peak (both are what the machine
// does when nothing else takes its caches); the median says how often it does. One line each:
//   cpu: <model name>; FMA peak loop: <ISA>
//   fp32 FMA peak, <t> thread(s): <x> GFLOP/s (<ISA>)
//   <n>^3 fp32 GEMM, <t> thread(s), <r> calls each: Eigen best <x> median <x> GFLOP/s, dafuse ...
// Run: OMP_NUM_THREADS=2 build/bench/gemm_ceiling [--n 1024] [--calls 15]
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
#include <vector>

namespace {

//! GFLOP/s of one call of `product`, an n³ product.
template <class F>
double gflops(long n, F&& product) {
  const auto t0 = std::chrono::steady_clock::now();
  product();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return 2.0 * double(n) * double(n) * double(n) / s / 1e9;
}

struct rates {
  double best, median;
};
rates summary(std::vector<double> x) {
  std::sort(x.begin(), x.end());
  return {x.back(), x[x.size() / 2]};
}

}  // namespace

int main(int argc, char** argv) {
  long n = 1024;
  int calls = 15;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--n") == 0) n = std::max(16L, std::atol(argv[i + 1]));
    if (std::strcmp(argv[i], "--calls") == 0) calls = std::max(1, std::atoi(argv[i + 1]));
  }
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
  namespace host = dafuse::backend::host;
  host::gemm_workspace<float> ws(n, n, n, threads);
  Eigen::MatrixXf d(n, n);
  const auto eigen_product = [&] { c.noalias() = a * b; };
  const auto dafuse_product = [&] {
    host::gemm<host::op::none, host::op::none>(ws, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f,
                                               d.data(), n);
  };
  for (int w = 0; w < 2; ++w) eigen_product(), dafuse_product();
  std::vector<double> eigen_calls, dafuse_calls;
  for (int r = 0; r < calls; ++r) {
    eigen_calls.push_back(gflops(n, eigen_product));
    dafuse_calls.push_back(gflops(n, dafuse_product));
  }
  const rates eigen = summary(eigen_calls), dafuse = summary(dafuse_calls);
  std::printf(
      "%ld^3 fp32 GEMM, %d thread(s), %d calls each: Eigen best %.1f median %.1f GFLOP/s, dafuse "
      "best %.1f median %.1f GFLOP/s (%s kernel); of the FMA peak: Eigen %.1f%% %.1f%%, dafuse "
      "%.1f%% %.1f%% (checksums %.3g, %.3g)\n",
      n, threads, calls, eigen.best, eigen.median, dafuse.best, dafuse.median,
      host::fp32_kernel_name, 100 * eigen.best / peak_n, 100 * eigen.median / peak_n,
      100 * dafuse.best / peak_n, 100 * dafuse.median / peak_n, double(c.sum()), double(d.sum()));
}
