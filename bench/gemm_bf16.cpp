// SPDX-License-Identifier: Apache-2.0
// bf16 products (backend/host/gemm_bf16.hpp) against dafuse's fp32 products (gemm.hpp: the
// AVX-512 or AVX2 kernel of gemm_fp32.hpp, or Eigen's where the compiler targets neither) on one
// thread, for the shapes of a DANN step on MNIST-sized inputs (batch 128, widths
// 784 → 256 → 256, heads of 10 and 64) and square 512³ and 1024³; Eigen's own Eigen::bfloat16
// product on two shapes for reference. Each entry: the median GFLOP/s of many timed repetitions
// after warm-up. Run: OMP_NUM_THREADS=1 build/bench/gemm_bf16 [--reps N]
#include <dafuse/backend/host/gemm.hpp>
#include <dafuse/backend/host/gemm_bf16.hpp>

#include <Eigen/Core>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

namespace host = dafuse::backend::host;
using dafuse::index_t;
using host::op;

struct shape {
  const char* what;
  op op_a, op_b;
  index_t m, n, k;
  bool eigen_bf16;  // also time Eigen::bfloat16 (slow: a scalar kernel)
};

//! Median seconds per call of `f` over `reps` timed calls (after `reps / 4 + 2` untimed ones);
//! each timed sample covers enough calls to last ≥ 50 µs so the clock's resolution does not count.
template <class F>
double median_seconds(F&& f, int reps) {
  for (int w = 0; w < reps / 4 + 2; ++w) f();
  auto t0 = std::chrono::steady_clock::now();
  f();
  const double once = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const int inner = std::max(1, int(50e-6 / std::max(once, 1e-9)));
  std::vector<double> s;
  for (int r = 0; r < reps; ++r) {
    t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < inner; ++i) f();
    s.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() /
                inner);
  }
  std::nth_element(s.begin(), s.begin() + reps / 2, s.end());
  return s[std::size_t(reps / 2)];
}

template <op OpA, op OpB>
void run_shape(const shape& s, int reps) {
  const index_t m = s.m, n = s.n, k = s.k;
  const index_t lda = OpA == op::none ? m : k, a_cols = OpA == op::none ? k : m;
  const index_t ldb = OpB == op::none ? k : n, b_cols = OpB == op::none ? n : k;
  std::mt19937 gen(42);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> a(std::size_t(lda * a_cols)), b(std::size_t(ldb * b_cols)),
      c(std::size_t(m * n), 0.0f);
  for (float& x : a) x = u(gen);
  for (float& x : b) x = u(gen);
  const double flop = 2.0 * double(m) * double(n) * double(k);

  host::gemm_workspace<float> ws32(m, n, k, 1);
  const double t32 = median_seconds(
      [&] {
        host::gemm<OpA, OpB>(ws32, m, n, k, 1.0f, a.data(), lda, b.data(), ldb, 0.0f, c.data(), m);
      },
      reps);
  host::bf16_gemm_workspace ws16(m, n, k, 1);
  const double t16 = median_seconds(
      [&] {
        host::gemm_bf16<OpA, OpB>(ws16, m, n, k, 1.0f, a.data(), lda, b.data(), ldb, 0.0f, c.data(),
                                  m);
      },
      reps);
  std::string eigen = "";
  if (s.eigen_bf16) {
    using mat = Eigen::Matrix<Eigen::bfloat16, Eigen::Dynamic, Eigen::Dynamic>;
    const mat ea = Eigen::Map<const Eigen::MatrixXf>(a.data(), lda, a_cols).cast<Eigen::bfloat16>();
    const mat eb = Eigen::Map<const Eigen::MatrixXf>(b.data(), ldb, b_cols).cast<Eigen::bfloat16>();
    mat ec(m, n);
    const double te = median_seconds(
        [&] {
          if constexpr (OpA == op::none && OpB == op::none)
            ec.noalias() = ea * eb;
          else if constexpr (OpA == op::none)
            ec.noalias() = ea * eb.transpose();
          else if constexpr (OpB == op::none)
            ec.noalias() = ea.transpose() * eb;
          else
            ec.noalias() = ea.transpose() * eb.transpose();
        },
        std::max(3, reps / 20));
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f", flop / te / 1e9);
    eigen = buf;
  }
  // Pad by characters, not bytes: the names hold UTF-8 arrows and superscripts.
  std::string what = s.what;
  std::size_t chars = 0;
  for (const char ch : what) chars += (static_cast<unsigned char>(ch) & 0xc0) != 0x80;
  what.append(chars < 28 ? 28 - chars : 0, ' ');
  std::printf("| %s | %5td %5td %5td | %8.1f | %8.1f | %5.2fx | %10s |\n", what.c_str(), m, n, k,
              flop / t32 / 1e9, flop / t16 / 1e9, t32 / t16, eigen.c_str());
}

}  // namespace

#if DAFUSE_GEMM_BF16_NATIVE
// The instruction's own ceiling on this core: 24 independent vdpbf16ps chains (enough to hide
// its latency), operands in registers, no memory traffic. Each instruction does 16 lanes × 2
// multiply-adds = 64 FLOP.
double vdpbf16ps_peak_gflops() {
  constexpr int chains = 24;
  constexpr long iterations = 20'000'000;
  __m512 acc[chains];
  for (int c = 0; c < chains; ++c) acc[c] = _mm512_set1_ps(float(c));
  const __m512bh a = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1e-3f), _mm512_set1_ps(2e-3f));
  const __m512bh b = _mm512_cvtne2ps_pbh(_mm512_set1_ps(3e-3f), _mm512_set1_ps(4e-3f));
  const auto t0 = std::chrono::steady_clock::now();
  for (long i = 0; i < iterations; ++i)
#pragma GCC unroll 24
    for (int c = 0; c < chains; ++c) acc[c] = _mm512_dpbf16_ps(acc[c], a, b);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  float sink = 0;  // keep the sums alive
  for (int c = 0; c < chains; ++c) sink += _mm512_reduce_add_ps(acc[c]);
  if (sink == 42.0f) std::printf(" ");
  return 64.0 * chains * double(iterations) / s / 1e9;
}
#endif

int main(int argc, char** argv) {
  int reps = 200;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "--reps") == 0) reps = std::max(5, std::atoi(argv[i + 1]));
  // (m, n, k) of C[m, n] = op(A)[m, k]·op(B)[k, n], column-major: a layer's forward is
  // W[out, in]·x[in, batch]; its weight gradient δ[out, batch]·x[in, batch]ᵀ; its input gradient
  // W[out, in]ᵀ·δ[out, batch].
  const shape shapes[] = {
      {"forward 784→256: W·x", op::none, op::none, 256, 128, 784, true},
      {"forward 256→256: W·x", op::none, op::none, 256, 128, 256, false},
      {"forward 256→10: W·x", op::none, op::none, 10, 128, 256, false},
      {"[10,256]·[256,64]", op::none, op::none, 10, 64, 256, false},
      {"weight grad 784→256: δ·xᵀ", op::none, op::transpose, 256, 784, 128, false},
      {"weight grad 256→256: δ·xᵀ", op::none, op::transpose, 256, 256, 128, false},
      {"input grad 256→256: Wᵀ·δ", op::transpose, op::none, 256, 128, 256, false},
      {"input grad 784→256: Wᵀ·δ", op::transpose, op::none, 784, 128, 256, false},
      {"512³", op::none, op::none, 512, 512, 512, true},
      {"1024³", op::none, op::none, 1024, 1024, 1024, false},
  };
#if DAFUSE_GEMM_BF16_NATIVE
  std::printf("ceiling: independent vdpbf16ps in registers, one thread: %.1f GFLOP/s\n",
              vdpbf16ps_peak_gflops());
#endif
  std::printf("gemm_bf16 (%s) vs gemm fp32 (%s kernel), one thread, median of %d, GFLOP/s\n",
              host::bf16_products_native ? "AVX512-BF16 vdpbf16ps" : "portable: fp32 gemm",
              host::fp32_kernel_name, reps);
  std::printf("| %-28s | %17s | %8s | %8s | %6s | %10s |\n", "product", "    m     n     k", "fp32",
              "bf16", "ratio", "Eigen bf16");
  for (const shape& s : shapes) {
    if (s.op_a == op::none && s.op_b == op::none)
      run_shape<op::none, op::none>(s, reps);
    else if (s.op_a == op::none)
      run_shape<op::none, op::transpose>(s, reps);
    else if (s.op_b == op::none)
      run_shape<op::transpose, op::none>(s, reps);
    else
      run_shape<op::transpose, op::transpose>(s, reps);
  }
}
