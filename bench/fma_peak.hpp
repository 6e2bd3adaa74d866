// The core's fp32 FMA peak: independent multiply-adds on registers only, in the widest vector ISA
// this translation unit is compiled for, on one thread and on every OpenMP thread at once. The
// physical limit beside which the GEMM ceiling and the steps' rates are read (docs/benchmarks.md,
// "The FMA peak"); bench/gemm_ceiling and bench/dann_bench print it.
#pragma once
#include <algorithm>
#include <chrono>
#include <fstream>
#include <string>

#if defined(__AVX512F__) || defined(__FMA__) || defined(__SSE2__)
#include <immintrin.h>
#endif
#if defined(_OPENMP)
#include <omp.h>
#endif

namespace bench {

// Enough independent chains to cover the FMA latency times the pipes that issue it: 4 cycles × 2
// pipes on Zen 3–5 and Skylake–Sapphire Rapids (5 × 2 on Haswell) need 8–10 in flight. AVX-512
// has 32 vector registers, so 16 chains; AVX2 and SSE have 16, so 12 chains and the two operands
// stay in registers without spills.
#if defined(__AVX512F__)
using fma_vector = __m512;
inline constexpr int fma_chains = 16;
inline constexpr int fma_lanes = 16;
inline constexpr const char* fma_isa = "AVX-512 (__m512 vfmadd, 16 chains)";
inline fma_vector fma_splat(float x) {
  return _mm512_set1_ps(x);
}
inline fma_vector fma_step(fma_vector acc, fma_vector a, fma_vector b) {
  return _mm512_fmadd_ps(acc, a, b);
}
// Through memory, not _mm512_reduce_add_ps: GCC 12 warns on its _mm256_undefined_pd (PR 105593).
inline float fma_sum(fma_vector v) {
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, v);
  float s = 0;
  for (const float x : lanes) s += x;
  return s;
}
#elif defined(__AVX2__) && defined(__FMA__)
using fma_vector = __m256;
inline constexpr int fma_chains = 12;
inline constexpr int fma_lanes = 8;
inline constexpr const char* fma_isa = "AVX2+FMA (__m256 vfmadd, 12 chains)";
inline fma_vector fma_splat(float x) {
  return _mm256_set1_ps(x);
}
inline fma_vector fma_step(fma_vector acc, fma_vector a, fma_vector b) {
  return _mm256_fmadd_ps(acc, a, b);
}
inline float fma_sum(fma_vector v) {
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, v);
  float s = 0;
  for (const float x : lanes) s += x;
  return s;
}
#elif defined(__SSE2__)
// No FMA instruction: a multiply and an add, the same 2 FLOP per lane in two instructions.
using fma_vector = __m128;
inline constexpr int fma_chains = 12;
inline constexpr int fma_lanes = 4;
inline constexpr const char* fma_isa = "SSE (__m128 mulps + addps, 12 chains)";
inline fma_vector fma_splat(float x) {
  return _mm_set1_ps(x);
}
inline fma_vector fma_step(fma_vector acc, fma_vector a, fma_vector b) {
  return _mm_add_ps(_mm_mul_ps(acc, a), b);
}
inline float fma_sum(fma_vector v) {
  alignas(16) float lanes[4];
  _mm_store_ps(lanes, v);
  return lanes[0] + lanes[1] + lanes[2] + lanes[3];
}
#else
using fma_vector = float;
inline constexpr int fma_chains = 12;
inline constexpr int fma_lanes = 1;
inline constexpr const char* fma_isa = "scalar float (12 chains)";
inline fma_vector fma_splat(float x) {
  return x;
}
inline fma_vector fma_step(fma_vector acc, fma_vector a, fma_vector b) {
  return acc * a + b;
}
inline float fma_sum(fma_vector v) {
  return v;
}
#endif

//! FLOP of one pass of fma_chains_run: every lane of every chain, a multiply and an add.
inline constexpr double fma_flops_per_iteration = 2.0 * fma_chains * fma_lanes;

//! `iterations` passes over fma_chains independent chains acc ← acc·a + b, all in registers; the
//! sum of the chains, so that none of the work is dead. With a = ½ the chains settle at 2b: no
//! overflow, no subnormals.
[[gnu::noinline]] inline float fma_chains_run(long iterations, float a_value, float b_value) {
  fma_vector acc[fma_chains];
  for (int c = 0; c < fma_chains; ++c) acc[c] = fma_splat(b_value + float(c));
  const fma_vector a = fma_splat(a_value), b = fma_splat(b_value);
  for (long i = 0; i < iterations; ++i)
#pragma GCC unroll 16
    for (int c = 0; c < fma_chains; ++c) acc[c] = fma_step(acc[c], a, b);
  float sum = 0;
  for (int c = 0; c < fma_chains; ++c) sum += fma_sum(acc[c]);
  return sum;
}

//! The operands come from memory the compiler cannot see through, so the loop is not folded.
inline volatile float fma_a = 0.5f, fma_b = 1.0f;
//! Where the loops' sums go: read by nobody, written so that the loops are kept.
inline volatile float fma_sink = 0.0f;

//! GFLOP/s of fma_chains_run on `threads` threads at once (each its own loop, one parallel
//! region): the best of `repeats` timed passes of about `seconds` each, after one untimed pass
//! that brings the clock up. 1 thread without OpenMP.
inline double fma_peak_gflops(int threads, double seconds = 0.05, int repeats = 5) {
#if !defined(_OPENMP)
  threads = 1;
#endif
  threads = std::max(1, threads);
  using clock = std::chrono::steady_clock;
  // Size a pass from short single-thread ones, each 4× the last, until one takes over 5 ms.
  long iterations = 1L << 16;
  for (;;) {
    const auto t0 = clock::now();
    fma_sink = fma_chains_run(iterations, fma_a, fma_b);
    const double s = std::chrono::duration<double>(clock::now() - t0).count();
    if (s > 0.005 || iterations > (1L << 40)) {
      iterations = std::max(1L, long(double(iterations) * seconds / s));
      break;
    }
    iterations *= 4;
  }
  double best = 0;
  for (int r = 0; r <= repeats; ++r) {
    double s = 0;
#if defined(_OPENMP)
    float total = 0;
#pragma omp parallel num_threads(threads)
    {
      // Every thread starts together and the clock stops when the last one ends.
#pragma omp barrier
      clock::time_point t0;
#pragma omp master
      t0 = clock::now();
      const float sum = fma_chains_run(iterations, fma_a, fma_b + float(omp_get_thread_num()));
#pragma omp atomic
      total += sum;
#pragma omp barrier
#pragma omp master
      s = std::chrono::duration<double>(clock::now() - t0).count();
    }
    fma_sink = total;
#else
    const auto t0 = clock::now();
    fma_sink = fma_chains_run(iterations, fma_a, fma_b);
    s = std::chrono::duration<double>(clock::now() - t0).count();
#endif
    if (r > 0) best = std::max(best, fma_flops_per_iteration * double(iterations) * threads / s);
  }
  return best / 1e9;
}

//! The CPU's "model name" from /proc/cpuinfo, or "unknown".
inline std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon == std::string::npos) break;
      const auto start = line.find_first_not_of(" \t", colon + 1);
      return start == std::string::npos ? "unknown" : line.substr(start);
    }
  return "unknown";
}

}  // namespace bench
