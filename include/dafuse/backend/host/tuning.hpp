// SPDX-License-Identifier: Apache-2.0
//! @file backend/host/tuning.hpp
//! @brief Every tuned constant of the host backend, each with one line saying where it came from.
//!
//! A `//` line under each constant gives its provenance: the machine, the configuration measured,
//! what the value bought, and the section of docs/benchmarks.md that holds the measurements and the
//! values tried. The headers that use a constant say why it exists; the numbers live here.
#pragma once
#include <dafuse/config.hpp>
#include <dafuse/core/meta.hpp>

namespace dafuse::backend::host {

// ---- How products are split among threads (partition.hpp, thin_products.hpp) -----------------

//! Products below this many floating-point operations run on one thread: a parallel region and
//! operands moving between the cores' caches cost more than half of a smaller product.
// 2 cores, digits-mlp: step 1.63 -> 1.02 ms, 2^20, 2^22 alike; docs/benchmarks.md "The demo's step"
inline constexpr double gemm_parallel_flops = double(1 << 24);

// ---- The update pass (update.hpp) ---------------------------------------------------------------

//! From this many parameters the update runs on every OpenMP thread, each on its part: the pass is
//! memory-bound, and one core cannot draw the bandwidth two can.
// 2 cores, office-head: update 1.48-1.69 -> 0.79-0.83 ms; docs/benchmarks.md "fp32 products"
inline constexpr index_t update_parallel_min = index_t(1) << 17;

//! The update runs in chunks of this many parameters, asking before each for the lines
//! update_prefetch_bytes further on, for writing.
// 2 cores, office-head: the prefetch's unit, not tuned alone; docs/benchmarks.md "Cache lines"
inline constexpr index_t update_chunk = 256;
// 2 cores, 1.84 M parameters: 1.0 -> 0.54-0.60 ms, 1-16 KiB tried; docs/benchmarks.md "Cache lines"
inline constexpr index_t update_prefetch_bytes = 2048;

namespace detail {

// ---- The team (team.hpp) ------------------------------------------------------------------------

//! PAUSEs a waiting thread of a team spins for before it sleeps: longer than any wait in a step.
// 2 cores, digits-mlp beside `yes`: 0.75-0.83 ms (256: 7.5-8.0); docs/benchmarks.md "One OpenMP"
inline constexpr int team_spins = 1 << 18;
//! The same with more threads than processors, where the thread waited for may need the core.
// 2 cores, 3-4 threads: empty job 73-100 µs, 100 untried; docs/benchmarks.md "One OpenMP team"
inline constexpr int team_spins_oversubscribed = 1000;
//! Held steps the pacer judges together, steps one level down after a first lost window, and the
//! most (each loss in a row doubles it): a busy machine pays a held step or two per max_backoff.
// 2 cores, 1-2 busy processes: 2 threads at 0.93-1.36 of 1 (1.4-4.8 unpaced); docs/benchmarks.md
// "Training beside other work"
inline constexpr int team_window = 16;
inline constexpr int team_first_backoff = 8;
inline constexpr int team_max_backoff = 4096;
//! A team kept off returns only when, since it went off, the process's processors sat idle for
//! at least this many processors on average (idle_processors.hpp), judged over at least
//! team_idle_min_seconds (Linux counts idle time in 10 ms ticks).
// 2 cores: a step on the calling thread reads 0.89 quiet, 0.00 beside two busy processes;
// docs/benchmarks.md "Training beside other work"
inline constexpr double team_idle_to_return = 0.5;
inline constexpr double team_idle_min_seconds = 0.1;

// ---- Products with a side of 1 (partition.hpp, thin_products.hpp) -----------------------------

//! Products with a side of 1 and fewer multiply-adds stay on the kernel, whose packing runs in
//! vector loops where thin_product's scalar tails take longer.
// 2 cores, moons bf16: 9 µs a step, 13 as thin; docs/benchmarks.md "Products with a side of 1"
inline constexpr double thin_product_min_terms = 4096;
//! Outer products (k = 1) of at least this many values of C are split by its columns.
// 2 cores, [1024, 64] outer product: 35.3 -> 22.4 µs; docs/benchmarks.md "Each block finished"
inline constexpr index_t thin_parallel_values = index_t(1) << 15;
//! Columns ahead that an outer product asks for C's lines, for writing.
// 2 cores, office-head outer product: 44 -> 39 µs; docs/benchmarks.md "Products with a side of 1"
inline constexpr index_t outer_product_prefetch_columns = 2;

// ---- Blocked products (simd.hpp, gemm_fp32.hpp, gemm_bf16.hpp) --------------------------------

//! Columns of an untransposed A packed at a time across all the panels of a block, so that each
//! column's run is read whole (even, so that a chunk starts on a bf16 k-pair).
// 2 cores, 1 thread, [1024, 1024]·[1024, 64]: 875 -> 775-790 µs; docs/benchmarks.md "What limits"
inline constexpr index_t pack_a_columns = 16;

//! The fp32 kernel's blocking and its thresholds, one set per instruction set: gemm_fp32.hpp
//! picks the set of the kernel it compiles (fp32_kc, fp32_mc, ... there).
struct fp32_blocking_avx512 {
  //! kc = 256 keeps a packed [kc, nr] micro-panel of B in L1 (12 KiB of 48) while the packed
  //! [mc, kc] block of A (mc = 192: 192 KiB) streams from L2 (1 MiB).
  // 2 cores, office-head: kc = 128 no faster; docs/benchmarks.md "What limits each configuration"
  static constexpr index_t kc = 256;
  // 2 cores, digits-mlp: mc = 256 within noise (+1.0 to -2.8 %); docs/benchmarks.md "Each module"
  static constexpr index_t mc = 192;
  // 2 cores: wider than the suite's products, not tuned; docs/benchmarks.md "fp32 products"
  static constexpr index_t nc = 3072;

  //! An Aᵀ·B product reads A in place from this many bytes of A on: half the L2 (1 MiB).
  // 2 cores, office-head: input gradient 531-533 -> 518-521 µs; docs/benchmarks.md "Input grad"
  static constexpr double in_place_min_bytes = 512.0 * 1024;

  //! Steps ahead at which a panel packed by its first tile asks for A's lines.
  // 2 cores, the step: a distance of 32 or 64 slower; docs/benchmarks.md "A's panels packed"
  static constexpr index_t pack_a_distance = 16;
  //! Terms from which a block of A is packed by its panels' first tiles rather than ahead of them.
  // 2 cores, 1 thread, 64 terms: 353-358 µs ahead, 361-376 in tiles; docs/benchmarks.md "A's"
  static constexpr index_t pack_a_in_tiles_min_terms = 128;
};

//! The same for the AVX2 + FMA kernel ([16, 6] tiles of ymm registers): AVX-512's values. kc =
//! 256 keeps a packed [kc, nr] micro-panel of B in L1 (6 KiB of 32) and mc = 192 the block of A
//! in L2 (192 KiB of Zen 3's 512); nc and the thresholds are not tuned for AVX2.
// Zen 4, v3 build, 2048³: kc 128-512, mc 96-384 within noise; docs/benchmarks.md "fp32 products on
// AVX2 + FMA"
struct fp32_blocking_avx2 : fp32_blocking_avx512 {};

//! The bf16 kernel's blocking: kc = 512 keeps a packed [kc, nr] micro-panel of B in L1 (12 KiB
//! of 48) and mc = 256 a packed [mc, kc] block of A in L2 (256 KiB of 1 MiB).
// 2 cores, 1 thread, 1024³: kc 256 or 768 5-10 % slower; docs/benchmarks.md "Mixed precision"
inline constexpr index_t bf16_kc = 512;
// 2 cores, 1 thread, 1024³: mc 128 or 512 5-10 % slower; docs/benchmarks.md "Mixed precision"
inline constexpr index_t bf16_mc = 256;
// 2 cores: as fp32_nc, not tuned; docs/benchmarks.md "Mixed precision"
inline constexpr index_t bf16_nc = 3072;

// ---- Bias gradients (dense.hpp) ---------------------------------------------------------------

//! Cache lines of rows that row_sums sums at a time: four lines of each column in flight, not one.
// 2 cores, 1 thread, [1024, 64]: 13.8 -> 6.9 µs; docs/benchmarks.md "Input gradients read W"
inline constexpr index_t row_sums_packets = 4;

// ---- A sparse first layer (sparse.hpp) --------------------------------------------------------

//! Non-zeros ahead whose column of W (or ∂L/∂W) is prefetched: the columns are at random feature
//! indices, so the hardware prefetcher cannot find them.
// 2 cores, amazon: 8, 16, 32 and 64 alike; docs/benchmarks.md "Products with a side of 1"
inline constexpr index_t sparse_prefetch_distance = 8;
//! Registers of sums per block of rows (128 rows): 8 of the 32 zmm, with room left for the loads.
// 2 cores, 1 thread, amazon forward: 88-91 -> 44-48 µs; docs/benchmarks.md "The sparse first layer"
inline constexpr int sparse_block_vectors_avx512 = 8;
//! The same on AVX2 (104 rows): 13 ymm of sums, a broadcast and a load fill 15 of the 16.
// Zen 4 as x86-64-v3, 1 thread, amazon: forward 69 -> 63 µs against 8; docs/benchmarks.md "AVX2"
inline constexpr int sparse_block_vectors_avx2 = 13;
//! About this many bytes of W per block when a sparse batch is dealt among threads by feature.
// 2 cores, amazon: update 58-59 µs at 256 columns, 158-167 at 16; docs/benchmarks.md "A sparse"
inline constexpr index_t sparse_deal_block_bytes = 65536;

}  // namespace detail

}  // namespace dafuse::backend::host
