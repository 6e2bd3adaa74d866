// The machine's fp32 GEMM ceiling with Eigen: a square product repeated after warm-up, on
// Eigen's own threading (OMP_NUM_THREADS decides). Run: build/bench/gemm_ceiling [--n 1024].
#include <Eigen/Core>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

int main(int argc, char** argv) {
  long n = 1024;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "--n") == 0) n = std::max(16L, std::atol(argv[i + 1]));
  const Eigen::MatrixXf a = Eigen::MatrixXf::Random(n, n), b = Eigen::MatrixXf::Random(n, n);
  Eigen::MatrixXf c(n, n);
  for (int w = 0; w < 2; ++w) c.noalias() = a * b;
  const int reps = 10;
  const auto t0 = std::chrono::steady_clock::now();
  for (int r = 0; r < reps; ++r) c.noalias() = a * b;
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("%ld^3 fp32 GEMM, %d thread(s): %.1f GFLOP/s (checksum %.3g)\n", n,
              Eigen::nbThreads(), 2.0 * double(n) * double(n) * double(n) * reps / s / 1e9,
              double(c.sum()));
}
