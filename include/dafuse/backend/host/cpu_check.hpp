// SPDX-License-Identifier: Apache-2.0
//! @file backend/host/cpu_check.hpp
//! @brief The check, before main, that the CPU running a program has the x86 instructions the
//! program was compiled for (-march=native on a newer machine would otherwise die of SIGILL).
//!
//! The features are those the compiler announces (__AVX512F__, ...); the CPU's come from CPUID,
//! with XGETBV for the operating system's saving of the AVX and AVX-512 registers. The check
//! runs once per program from an inline variable's initialiser; a program that dispatches on the
//! CPU itself defines DAFUSE_NO_CPU_CHECK. Nothing here runs on a GPU.
#pragma once
#include <dafuse/config.hpp>

#if (defined(__x86_64__) || defined(__i386__)) && !defined(__CUDA_ARCH__) && \
    (defined(__GNUC__) || defined(__clang__))
#define DAFUSE_CPU_CHECK_X86 1
#include <cpuid.h>
#else
#define DAFUSE_CPU_CHECK_X86 0
#endif

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace dafuse::backend::host {

//! One instruction-set extension: the name GCC and /proc/cpuinfo use, whether this translation
//! unit was compiled to use it, and where CPUID reports it (leaf, subleaf, register 0-3 for
//! EAX-EDX, bit) with the XCR0 state bits the OS must enable for it.
struct cpu_feature {
  const char* name;
  bool compiled_for;
  unsigned leaf, subleaf, reg, bit;
  unsigned long long xcr0;
};

namespace detail {
// XCR0 bits: SSE and AVX state (1, 2); AVX-512's opmask, ZMM_Hi256 and Hi16_ZMM state (5-7).
inline constexpr unsigned long long xcr0_avx = 0x6, xcr0_avx512 = 0xe6;
}  // namespace detail

//! Compiles a function for the baseline ISA whatever the unit's -march (clang keeps -march's AVX
//! unless told no-avx): code that checks the CPU must run on the CPU it is about to reject.
#if DAFUSE_CPU_CHECK_X86
#define DAFUSE_CPU_BASELINE __attribute__((target("arch=x86-64,no-avx")))
#else
#define DAFUSE_CPU_BASELINE
#endif

//! Whether the CPU running this has `f` and the OS saves the registers it needs.
DAFUSE_CPU_BASELINE inline bool cpu_has(const cpu_feature& f) noexcept {
#if DAFUSE_CPU_CHECK_X86
  unsigned r[4] = {0, 0, 0, 0};
  if (__get_cpuid_count(f.leaf, f.subleaf, &r[0], &r[1], &r[2], &r[3]) == 0) return false;
  if (((r[f.reg] >> f.bit) & 1u) == 0) return false;
  if (f.xcr0 == 0) return true;
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid(1, &a, &b, &c, &d) == 0 || ((c >> 27) & 1u) == 0) return false;  // OSXSAVE
  unsigned lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  const unsigned long long xcr0 = (static_cast<unsigned long long>(hi) << 32) | lo;
  return (xcr0 & f.xcr0) == f.xcr0;
#else
  (void)f;
  return true;
#endif
}

// What follows depends on the unit's compiler flags, so it has internal linkage: units compiled
// with different -march flags each check their own (and none breaks the one-definition rule).
namespace {
namespace compiled {
// Whether this unit was compiled to use each extension (the compiler's predefined macros).
#ifdef __SSE4_2__
constexpr bool sse4_2 = true;
#else
constexpr bool sse4_2 = false;
#endif
#ifdef __AVX__
constexpr bool avx = true;
#else
constexpr bool avx = false;
#endif
#ifdef __AVX2__
constexpr bool avx2 = true;
#else
constexpr bool avx2 = false;
#endif
#ifdef __FMA__
constexpr bool fma = true;
#else
constexpr bool fma = false;
#endif
#ifdef __F16C__
constexpr bool f16c = true;
#else
constexpr bool f16c = false;
#endif
#ifdef __BMI2__
constexpr bool bmi2 = true;
#else
constexpr bool bmi2 = false;
#endif
#ifdef __AVX512F__
constexpr bool avx512f = true;
#else
constexpr bool avx512f = false;
#endif
#ifdef __AVX512DQ__
constexpr bool avx512dq = true;
#else
constexpr bool avx512dq = false;
#endif
#ifdef __AVX512CD__
constexpr bool avx512cd = true;
#else
constexpr bool avx512cd = false;
#endif
#ifdef __AVX512BW__
constexpr bool avx512bw = true;
#else
constexpr bool avx512bw = false;
#endif
#ifdef __AVX512VL__
constexpr bool avx512vl = true;
#else
constexpr bool avx512vl = false;
#endif
#ifdef __AVX512VNNI__
constexpr bool avx512vnni = true;
#else
constexpr bool avx512vnni = false;
#endif
#ifdef __AVX512BF16__
constexpr bool avx512bf16 = true;
#else
constexpr bool avx512bf16 = false;
#endif
#ifdef __AVX512FP16__
constexpr bool avx512fp16 = true;
#else
constexpr bool avx512fp16 = false;
#endif
#ifdef __AVXVNNI__
constexpr bool avxvnni = true;
#else
constexpr bool avxvnni = false;
#endif
}  // namespace compiled

//! The extensions checked: those a compiler's -march may turn on and dafuse's kernels, Eigen or
//! the compiler's vectoriser may use. CPUID bit positions: Intel SDM vol. 2A, "CPUID".
constexpr cpu_feature cpu_features[] = {
    cpu_feature{"sse4_2", compiled::sse4_2, 1, 0, 2, 20, 0},
    cpu_feature{"avx", compiled::avx, 1, 0, 2, 28, detail::xcr0_avx},
    cpu_feature{"fma", compiled::fma, 1, 0, 2, 12, detail::xcr0_avx},
    cpu_feature{"f16c", compiled::f16c, 1, 0, 2, 29, detail::xcr0_avx},
    cpu_feature{"avx2", compiled::avx2, 7, 0, 1, 5, detail::xcr0_avx},
    cpu_feature{"bmi2", compiled::bmi2, 7, 0, 1, 8, 0},
    cpu_feature{"avx512f", compiled::avx512f, 7, 0, 1, 16, detail::xcr0_avx512},
    cpu_feature{"avx512dq", compiled::avx512dq, 7, 0, 1, 17, detail::xcr0_avx512},
    cpu_feature{"avx512cd", compiled::avx512cd, 7, 0, 1, 28, detail::xcr0_avx512},
    cpu_feature{"avx512bw", compiled::avx512bw, 7, 0, 1, 30, detail::xcr0_avx512},
    cpu_feature{"avx512vl", compiled::avx512vl, 7, 0, 1, 31, detail::xcr0_avx512},
    cpu_feature{"avx512_vnni", compiled::avx512vnni, 7, 0, 2, 11, detail::xcr0_avx512},
    cpu_feature{"avx512_fp16", compiled::avx512fp16, 7, 0, 3, 23, detail::xcr0_avx512},
    cpu_feature{"avx512_bf16", compiled::avx512bf16, 7, 1, 0, 5, detail::xcr0_avx512},
    cpu_feature{"avx_vnni", compiled::avxvnni, 7, 1, 0, 4, detail::xcr0_avx},
};

//! Writes into `out` (NUL-terminated, at most `size` bytes) the names, space-separated, of the
//! extensions this unit was compiled for that `has` says the CPU lacks; returns their number.
DAFUSE_CPU_BASELINE inline int missing_cpu_features(bool (*has)(const cpu_feature&) noexcept,
                                                    char* out,
                                                    std::size_t size) noexcept {
  int missing = 0;
  std::size_t used = 0;
  if (size > 0) out[0] = '\0';
  for (const cpu_feature& f : cpu_features) {
    if (!f.compiled_for || has(f)) continue;
    ++missing;
    const std::size_t n = std::strlen(f.name);
    if (used + n + 2 > size) continue;
    if (used > 0) out[used++] = ' ';
    std::memcpy(out + used, f.name, n + 1);
    used += n;
  }
  return missing;
}

//! The status a program ends with when its CPU lacks an instruction set it was compiled for: 1,
//! or what DAFUSE_CPU_CHECK_STATUS says (dafuse's tests say 77, which Meson counts as skipped).
#ifdef DAFUSE_CPU_CHECK_STATUS
inline constexpr int cpu_check_status = DAFUSE_CPU_CHECK_STATUS;
#else
inline constexpr int cpu_check_status = EXIT_FAILURE;
#endif

//! Prints what is missing and ends the program (status cpu_check_status) when the CPU lacks an
//! extension this unit was compiled for; returns true otherwise. Never inlined into its caller,
//! which is compiled for the unit's -march.
DAFUSE_CPU_BASELINE __attribute__((noinline)) inline bool require_cpu_features() noexcept {
  char names[256];
  if (missing_cpu_features(&cpu_has, names, sizeof names) == 0) return true;
  std::fputs("dafuse: this program was compiled for CPU instructions this CPU does not have (",
             stderr);
  std::fputs(names, stderr);
  std::fputs(
      "), probably with -march=native on a newer machine. Rebuild it on this machine, or "
      "for every machine it will run on (e.g. -march=x86-64-v3; docs/usage.md, "
      "\"Release builds\").\n",
      stderr);
  std::_Exit(cpu_check_status);
}

//! The extensions this unit was compiled for that the CPU running it lacks, as above: what a
//! program that dispatches among units built for different CPUs asks each unit before calling it.
DAFUSE_CPU_BASELINE inline int missing_cpu_features(char* out, std::size_t size) noexcept {
  return missing_cpu_features(&cpu_has, out, size);
}

//! The extensions this unit was compiled for, space-separated in `out`; returns their number.
inline int compiled_cpu_features(char* out, std::size_t size) noexcept {
  return missing_cpu_features([](const cpu_feature&) noexcept { return false; }, out, size);
}

#ifndef DAFUSE_NO_CPU_CHECK
//! Runs the check before main, in the dynamic initialisation of each unit that includes this.
[[maybe_unused]] const bool cpu_features_checked = require_cpu_features();
#endif
}  // namespace

}  // namespace dafuse::backend::host
