// SPDX-License-Identifier: Apache-2.0
//! @file backend/host/gemm.hpp
//! @brief Matrix products with packing buffers allocated once: fp32 on dafuse's AVX-512 kernel
//! (gemm_fp32.hpp) where the compiler targets AVX-512F, everything else on Eigen's GEMM kernel.
//!
//! Eigen's `a.noalias() = b * c` allocates its packing buffers on every call once they pass
//! EIGEN_STACK_ALLOCATION_LIMIT, and its OpenMP path allocates on every call whatever the size.
//! A training step must not allocate, so dafuse calls Eigen 3.4's blocked product
//! (internal::general_matrix_matrix_product, Goto & van de Geijn's algorithm) directly, or its own
//! fp32 kernel, with packing buffers per thread sized at construction for the largest product of
//! the step, and splits the output along its longer side across OpenMP threads itself.
#pragma once
#include <dafuse/config.hpp>

#include <dafuse/backend/host/gemm_fp32.hpp>
#include <dafuse/backend/host/team.hpp>
#include <dafuse/core/error.hpp>
#include <dafuse/core/meta.hpp>

#include <Eigen/Core>

#if defined(_OPENMP)
#include <omp.h>
#endif

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

static_assert(EIGEN_WORLD_VERSION == 3 && EIGEN_MAJOR_VERSION == 4,
              "dafuse: backend/host/gemm.hpp calls Eigen 3.4's blocked GEMM; install Eigen 3.4 "
              "(apt-get install libeigen3-dev on Debian 12)");

namespace dafuse::backend::host {

//! Whether a GEMM operand is used as stored or transposed.
enum class op { none, transpose };

//! Products below this many floating-point operations run on one thread: a parallel region and
//! operands moving between the cores' caches cost more than half of a smaller product. Measured
//! on 2 cores (median step, OMP_NUM_THREADS=2, products split along C's longer side): the
//! digits-mlp DANN step (784-256-256, B = 64 + 64) takes 1.63 ms with every product on one
//! thread and 1.02 ms with this threshold (2^20 and 2^22 measured the same); office-head
//! (2048-256, G_d 256-1024-1024) 5.1 ms against 4.3 ms.
inline constexpr double gemm_parallel_flops = double(1 << 24);

//! Which dimension of C[m, n] = op(A)[m, k]·op(B)[k, n] a split divides among threads: C's rows,
//! C's columns, or the k terms of every sum (each thread then sums its terms into a partial C,
//! and the partials are added; see split_product).
enum class split_along { rows, columns, depth };

namespace detail {
//! How split_product divides a product among threads: `side` (C's rows or columns, or k) in
//! blocks of `per`, the last block shorter. One thread (`threads` = 1) takes all of it. The
//! parameter update follows the split of a weight gradient (update.hpp), so each core updates the
//! part of ∂L/∂W it has just written.
struct product_split {
  split_along along = split_along::columns;
  int threads = 1;   //!< blocks, one per thread
  index_t side = 0;  //!< rows or columns of C, or terms, along the split
  index_t per = 0;   //!< rows, columns or terms per block

  //! All of C[m, n] on one thread.
  static product_split one_thread(index_t m, index_t n) {
    const index_t side = m > n ? m : n;
    return {m > n ? split_along::rows : split_along::columns, 1, side, side};
  }

  //! `side` in at most `max_threads` blocks of whole `unit`s, as even as whole units allow.
  static product_split even(split_along along, index_t side, int max_threads, index_t unit) {
    product_split s{along, 1, side, side};
    s.threads = std::max(1, std::min<int>(max_threads, int((side + unit - 1) / unit)));
    s.per = ((side + s.threads - 1) / s.threads + unit - 1) / unit * unit;
    return s;
  }

  //! Block t's rows, columns or terms [first, second); empty from t = threads on, and possibly
  //! for the last t below it (per rounds up to whole units).
  std::pair<index_t, index_t> range(int t) const {
    const index_t first = t < threads ? std::min<index_t>(side, index_t(t) * per) : side;
    return {first, t < threads ? std::min<index_t>(side, first + per) : side};
  }
};

//! Products of fewer multiply-adds stay on the kernel, whose packing rounds and lays out the
//! operands in vector loops: thin_product's scalar tails took longer there (moons' 15 → 1 layer:
//! its bf16 step 13 µs against 9 µs on the kernel).
inline constexpr double thin_product_min_terms = 4096;

//! Whether C[m, n] = op(A)[m, k]·op(B)[k, n] runs as thin_product rather than on the kernel.
inline bool is_thin(index_t m, index_t n, index_t k) {
  return (m == 1 || n == 1 || k == 1) &&
         double(m) * double(n) * double(k) >= thin_product_min_terms;
}

//! Whether a product of m·n·k multiply-adds is worth more than one thread (and is not thin).
inline bool splits(index_t m, index_t n, index_t k) {
  return !is_thin(m, n, k) && 2.0 * double(m) * double(n) * double(k) >= gemm_parallel_flops;
}

//! The split of C[m, n] = op(A)[m, k]·op(B)[k, n] over at most `max_threads` threads in blocks of
//! whole `row_tile`-row or `col_tile`-column register tiles. Below gemm_parallel_flops, for a
//! thin product (which runs on the calling thread), or with one thread: all of C on one. Otherwise
//! C is split along its longer side. Each thread reads all of the other operand, so splitting the
//! longer side makes that the smaller one: a DANN product is usually wide in features and short in
//! samples (office-head's G_d: [1024, 1024]·[1024, 64]), and splitting its 64 columns made both
//! cores stream all 4 MB of W where splitting its 1024 rows reads W once.
inline product_split split_for(
    index_t m, index_t n, index_t k, int max_threads, index_t row_tile, index_t col_tile) {
  const product_split one = product_split::one_thread(m, n);
  if (!splits(m, n, k)) return one;
  return product_split::even(one.along, one.side, max_threads,
                             one.along == split_along::rows ? row_tile : col_tile);
}

}  // namespace detail

//! Values of T in one 64-byte cache line.
template <class T>
inline constexpr index_t line_values = index_t(64 / sizeof(T));

//! How a dense layer's three products divide its weights W[out, in] among threads: each thread
//! takes the same block of W's columns in all three, so W, ∂L/∂W and the optimizer state stay in
//! the cache of one core from the forward product to the update.
//!
//! Why: on 2 cores a cache line that both have read since it was last written is slow to write
//! (see docs/benchmarks.md, "Cache lines both cores hold"). Split by the longer side of each C,
//! the forward y = W·x read W by its rows and the other two products by its columns, so the
//! update wrote half of W's lines from the core that had not read them last: office-head's update
//! took 0.60 ms that way, 0.33 ms with the columns kept together (the whole step 3.34 → 2.85 ms).
//! W's columns are its contiguous runs, so a block of them is a block of whole cache lines when a
//! column is (out·sizeof(T) a multiple of 64 bytes, the weights aligned), and at most one line
//! at each end of the block is shared otherwise.
//!
//! The blocks are as even as whole cache lines of the input gradient's rows allow (its blocks of
//! rows then share no line), not whole register tiles: digits-mlp's first layer (784 inputs) split
//! 400 + 384 rather than 416 + 368, and its step took 723 against 729 µs (medians of eight
//! alternated runs, OMP_NUM_THREADS=2). A block that ends part-way through a tile of the input
//! gradient finishes it with a narrower tile.
struct layer_split {
  detail::product_split forward;          //!< y[out, n] = W·x: along the terms, W's columns
  detail::product_split weight_gradient;  //!< ∂L/∂W[out, in] = δz·xᵀ: along its columns
  detail::product_split input_gradient;   //!< δx[in, n] = Wᵀ·δz: along its rows, W's columns

  //! For a layer of `in` inputs and `out` outputs over `n` samples, on at most `max_threads`
  //! threads, W's columns in blocks of whole `line`s (values per cache line of the input
  //! gradient), `row_tile` and `col_tile` as split_for takes them. Each product
  //! keeps its own split (split_for) where a split along the terms does not pay: when the
  //! products stay on one thread, when the forward's partial sums ([out, n] per extra thread)
  //! would be as large as W (n ≥ in), or when they do not fit in `partial_room` values.
  static layer_split make(index_t out,
                          index_t in,
                          index_t n,
                          int max_threads,
                          index_t row_tile,
                          index_t col_tile,
                          index_t line,
                          index_t partial_room) {
    layer_split s{detail::split_for(out, n, in, max_threads, row_tile, col_tile),
                  detail::split_for(out, in, n, max_threads, row_tile, col_tile),
                  detail::split_for(in, n, out, max_threads, row_tile, col_tile)};
    const detail::product_split w =
        detail::product_split::even(split_along::depth, in, max_threads, line);
    if (!detail::splits(out, n, in) || w.threads < 2 || n >= in || out * n > partial_room) return s;
    s.forward = w;
    s.weight_gradient = w;
    s.weight_gradient.along = split_along::columns;
    s.input_gradient = w;
    s.input_gradient.along = split_along::rows;
    return s;
  }
};

//! What a product does with each finished block of C: nothing (a share of 0 in the sum that
//! gemm() returns). A finisher is called as `finish(block, rows, cols, ldc)` on the block's
//! [rows, cols] values, column-major with C's leading dimension, by the thread that has just
//! written them, and returns that block's share of a sum. Finishers of one product run
//! concurrently on different blocks and must not throw (inside the OpenMP region an exception
//! ends the program). The sum is added in block order, so it depends on the split: a sum of
//! squares comes out the same for a given thread count, not across thread counts.
struct no_finish {
  template <class T>
  double operator()(T*, index_t, index_t, index_t) const {
    return 0.0;
  }
};

//! A finisher whose share is the sum of the squares of its block's values, and which leaves the
//! block as it is, may say so (`static constexpr bool sums_squares = true`). A product on the
//! blocked AVX-512 kernels then adds the squares up from the registers as it stores C's final
//! values, and calls the finisher only where it cannot (a split along the terms, the thin and
//! in-place paths, Eigen's kernel). Why: dense.hpp's finish_gradient read each thread's block of
//! a weight gradient back from memory for its squared norm, 2 MiB of it for office-head's
//! [1024, 1024] ∂L/∂W; its three weight-gradient products took 44 µs a step longer with that
//! finisher than with none (a throwaway program, two threads, 355.8 against 332.3 µs for the
//! largest). The sum is added in another order, so it may differ in the last bits.
template <class Finish>
concept squares_finisher = requires {
  requires std::remove_cvref_t<Finish>::sums_squares;
};

namespace detail {
// ---- Products with a side of 1 ----------------------------------------------------------------
// A layer with one output (every discriminator's last) makes products with m = 1 (its forward
// and its weight gradient) and k = 1 (its input gradient, an outer product). The blocked kernel
// pads such a product to whole [32, 12] tiles and packs both operands for it: office-head's three
// took 86 µs a step there (OMP_NUM_THREADS=2), and take 14 µs on one thread and 47 µs on two here,
// most of it the outer product's writes (below). `load` is what a product does to each operand
// value as it reads it: nothing, or gemm_bf16's rounding.

//! C(0, j) = α·x·y(:, j) + β·C(0, j) for j < n: a row x[k] (x(l) at x[l·xs]) times a matrix
//! y[k, n] (y(l, j) at y[l·yl + j·yj]); C(0, j) at c[j·cs]. β = 0 does not read C.
template <class T, class Load>
void row_times_matrix(index_t k,
                      index_t n,
                      T alpha,
                      const T* x,
                      index_t xs,
                      const T* y,
                      index_t yl,
                      index_t yj,
                      T beta,
                      T* c,
                      index_t cs,
                      Load load) {
  const auto store = [&](index_t j, T sum) {
    c[j * cs] = beta == T(0) ? alpha * sum : alpha * sum + beta * c[j * cs];
  };
  constexpr index_t lanes = index_t(64 / sizeof(T));  // one 512-bit register of sums
  if (yl == 1 && xs == 1) {
    // Columns of y are contiguous: one dot product per j, in `lanes` partial sums added in a fixed
    // order (the result does not depend on the thread or the call).
    for (index_t j = 0; j < n; ++j) {
      const T* yc = y + j * yj;
      T part[lanes] = {};
      const index_t whole = k - k % lanes;
      for (index_t l = 0; l < whole; l += lanes)
        for (index_t u = 0; u < lanes; ++u) part[u] += load(x[l + u]) * load(yc[l + u]);
      T sum = T(0);
      for (index_t l = whole; l < k; ++l) sum += load(x[l]) * load(yc[l]);
      for (index_t u = 0; u < lanes; ++u) sum += part[u];
      store(j, sum);
    }
    return;
  }
  // Otherwise a chunk of C's sums at a time, adding x(l)·y(l, :) for each l in order (rows of y
  // are contiguous when yj = 1, the case this serves: a weight gradient δz·xᵀ of one output).
  constexpr index_t chunk = 256;
  for (index_t j0 = 0; j0 < n; j0 += chunk) {
    const index_t count = std::min(chunk, n - j0);
    T sums[chunk] = {};
    for (index_t l = 0; l < k; ++l) {
      const T xl = load(x[l * xs]);
      const T* yr = y + l * yl + j0 * yj;
      if (yj == 1)
        for (index_t j = 0; j < count; ++j) sums[j] += xl * load(yr[j]);
      else
        for (index_t j = 0; j < count; ++j) sums[j] += xl * load(yr[j * yj]);
    }
    for (index_t j = 0; j < count; ++j) store(j0 + j, sums[j]);
  }
}

//! C[m, n] = α·op(A)·op(B) + β·C when is_thin(m, n, k), on the calling thread. β = 0 does not
//! read C.
template <op OpA, op OpB, class T, class Load>
void thin_product(index_t m,
                  index_t n,
                  index_t k,
                  T alpha,
                  const T* a,
                  index_t lda,
                  const T* b,
                  index_t ldb,
                  T beta,
                  T* c,
                  index_t ldc,
                  Load load) {
  constexpr bool ta = OpA == op::transpose, tb = OpB == op::transpose;
  // op(A)(i, l) = a[i·ai + l·al]; op(B)(l, j) = b[l·bl + j·bj].
  const index_t ai = ta ? lda : 1, al = ta ? 1 : lda;
  const index_t bl = tb ? ldb : 1, bj = tb ? 1 : ldb;
  if (k == 1) {
    // The outer product C(i, j) = α·(A(i)·B(j)) + β·C(i, j), a column of C at a time. β and
    // A's stride are tested outside the loops, which are then plain vector loops. C is usually
    // a gradient both cores read in the last step, and each line's write waits for the other
    // core to drop its copy: its columns are asked for two ahead (prefetch_lines). On 2
    // threads digits-mlp's [256, 128] took 22 µs without and 18 µs with, office-head's [1024, 64]
    // 44 and 39 µs (on one thread, office-head's takes 5.5 µs).
    constexpr index_t ahead = 2;
    for (index_t j = 0; j < std::min(ahead, n); ++j) prefetch_lines<true>(c + j * ldc, m);
    const auto columns = [&](auto a_at) {
      for (index_t j = 0; j < n; ++j) {
        if (j + ahead < n) prefetch_lines<true>(c + (j + ahead) * ldc, m);
        const T bv = load(b[j * bj]);
        T* cj = c + j * ldc;
        if (beta == T(0))
          for (index_t i = 0; i < m; ++i) cj[i] = alpha * (load(a_at(i)) * bv);
        else
          for (index_t i = 0; i < m; ++i) cj[i] = alpha * (load(a_at(i)) * bv) + beta * cj[i];
      }
    };
    if (ai == 1)
      columns([a](index_t i) { return a[i]; });
    else
      columns([a, stride = ai](index_t i) { return a[i * stride]; });
  } else if (m == 1) {
    row_times_matrix(k, n, alpha, a, al, b, bl, bj, beta, c, ldc, load);
  } else {
    // n = 1: Cᵀ = op(B)ᵀ·op(A)ᵀ, a row times a matrix whose (l, i) is op(A)(i, l).
    row_times_matrix(k, m, alpha, b, bl, a, al, ai, beta, c, index_t(1), load);
  }
}

//! thin_product's `load` for a product of the values as stored.
struct as_stored {
  template <class T>
  T operator()(T v) const {
    return v;
  }
};

//! What split_product takes from a workspace: room for one finisher share per thread and for the
//! partial sums of a split along the terms, and the tile its reduction splits C's columns by.
template <class T>
struct split_scratch {
  double* block_sums = nullptr;  //!< `threads` shares
  T* partial_sums = nullptr;     //!< threads − 1 blocks of `partial_room` values
  index_t partial_room = 0;
  int threads = 1;
  index_t col_tile = 1;
};

//! What a workspace keeps for split_product on its `threads` threads: one finisher share per
//! thread, and room for the partial sums of products split along their terms, allocated by
//! reserve() once rather than per product.
template <class T>
class split_room {
 public:
  split_room() = default;
  explicit split_room(int threads) : block_sums_(std::size_t(threads), 0.0) {}

  //! Room for the partial sums of products with C of up to `values` values: `threads − 1`
  //! blocks of them (thread 0 adds into C itself). Allocates before it records the room, so a
  //! failed allocation leaves both as they were.
  void reserve(index_t values) {
    if (values <= room_) return;
    partial_sums_ = aligned_array<T>(std::size_t(std::max(threads() - 1, 0) * values));
    room_ = values;
  }
  index_t room() const { return room_; }
  split_scratch<T> scratch(index_t col_tile) {
    return {block_sums_.data(), partial_sums_.data(), room_, threads(), col_tile};
  }

 private:
  // The thread count is the shares' count, so a moved-from room (no shares) says 0 threads.
  int threads() const { return int(block_sums_.size()); }
  std::vector<double> block_sums_;  // one per thread
  aligned_array<T> partial_sums_;   // threads − 1 blocks of room_
  index_t room_ = 0;
};

}  // namespace detail

//! Per-thread packing buffers for every product of a step, sized once for the largest one: for
//! dafuse's fp32 kernel (`native`) or for Eigen's.
template <class T>
class gemm_workspace {
 public:
  //! Whether products run on dafuse's AVX-512 fp32 kernel (gemm_fp32.hpp) rather than Eigen's.
  static constexpr bool native = std::is_same_v<T, float> && fp32_products_native;
  using blocking_type = Eigen::internal::gemm_blocking_space<Eigen::ColMajor,
                                                             T,
                                                             T,
                                                             Eigen::Dynamic,
                                                             Eigen::Dynamic,
                                                             Eigen::Dynamic,
                                                             1,
                                                             false>;

  gemm_workspace() = default;
  //! Buffers for products up to [max_m, max_k]·[max_k, max_n] on up to `threads` threads
  //! (0: OpenMP's maximum).
  gemm_workspace(index_t max_m, index_t max_n, index_t max_k, int threads = 0) {
#if defined(_OPENMP)
    if (threads <= 0) threads = omp_get_max_threads();
#else
    threads = 1;
#endif
    threads = std::max(threads, 1);
    room_ = detail::split_room<T>(threads);
    // Each thread's block of C is a part of the largest product, but sizing every thread for all
    // of it keeps one thread able to run a whole product.
    for (int t = 0; t < threads; ++t)
      if constexpr (native) {
        panels_.push_back(detail::make_fp32_panels(max_m, max_n, max_k));
      } else {
        blocking_.push_back(std::make_unique<blocking_type>(max_m, max_n, max_k, 1, true));
        blocking_.back()->allocateAll();
      }
  }

  int threads() const {
    return int(native ? panels_.size() : blocking_.size());
  }
  blocking_type& blocking(int t) {
    return *blocking_[std::size_t(t)];
  }
  detail::fp32_panels& panels(int t) {
    return panels_[std::size_t(t)];
  }
  //! Room for the partial sums of products split along their terms with C of up to `values`
  //! values (see layer_split): `threads() − 1` blocks of them, allocated here, not per product.
  void reserve_partial_sums(index_t values) {
    room_.reserve(values);
  }
  //! What split_product needs: a finisher share per thread, the partial sums' room.
  detail::split_scratch<T> scratch() {
    return room_.scratch(col_tile);
  }

  //! Threads split C in whole register tiles: dafuse's kernel's 32 rows or 12 columns, 16 for
  //! Eigen's.
  static constexpr index_t row_tile = native ? detail::fp32_mr : 16;
  static constexpr index_t col_tile = native ? detail::fp32_nr : 16;
  //! How gemm() splits C[m, n] = op(A)[m, k]·op(B)[k, n] among this workspace's threads.
  detail::product_split split(index_t m, index_t n, index_t k) const {
    return detail::split_for(m, n, k, threads(), row_tile, col_tile);
  }
  //! How a dense layer's products split W[out, in] over n samples among this workspace's threads.
  layer_split split_layer(index_t out, index_t in, index_t n) const {
    return layer_split::make(out, in, n, threads(), row_tile, col_tile, line_values<T>,
                             room_.room());
  }

  //! Stored values are kept as computed: no rounding (see backend/host/products.hpp).
  static constexpr bool rounds = false;
  static constexpr T round(T x) {
    return x;
  }
  //! C = α·op(A)·op(B) + β·C through gemm() below (the interface forward/backward use), each
  //! finished block of C passed to `finish`; returns the sum of its shares.
  template <op OpA, op OpB, class Finish = no_finish>
  double product(index_t m,
                 index_t n,
                 index_t k,
                 T alpha,
                 const T* a,
                 index_t lda,
                 const T* b,
                 index_t ldb,
                 T beta,
                 T* c,
                 index_t ldc,
                 Finish&& finish = {},
                 std::optional<detail::product_split> split = std::nullopt);

 private:
  std::vector<std::unique_ptr<blocking_type>> blocking_;  // Eigen's kernel
  std::vector<detail::fp32_panels> panels_;               // dafuse's fp32 kernel
  detail::split_room<T> room_;
};

namespace detail {
//! Runs one product C[m, n] = α·op(A)[m, k]·op(B)[k, n] + β·C as `split` divides it, one block
//! per thread: `block(t, rows, cols, depth, a_block, b_block, c_block, ldc_block, fresh, squares)`
//! computes a [rows, cols] block of C over `depth` terms, whose rows of op(A), columns of op(B)
//! (or terms of both) and place in C the pointers give, with thread t's buffers; `fresh` asks for
//! α·op(A)·op(B) alone (a partial sum, β = 0), otherwise β applies. Then `finish` runs on each
//! finished block of C on the thread that finished it (see no_finish). For a squares_finisher,
//! `squares` points at the block's share: `block` returns true when it has added the squares of
//! the block's values there itself (the finisher is then not called), false otherwise. Returns the
//! finishers' shares added in block order, so the sum does not depend on which thread ends first.
//!
//! Along the terms, thread t sums terms [first, end) into C (t = 0) or into its partial, then,
//! after a barrier, each thread adds the partials to a block of C's columns (whole column tiles)
//! and finishes it. The partials are added in order, so C depends on the thread count: the same
//! for a given count, not across counts.
//!
//! Why columns: a block of C's columns is one contiguous run, where a block of its rows is a
//! run of every column, interleaved with the other threads' runs, and on 2 cores each core's
//! hardware prefetcher then draws in lines the other core is writing. Measured (two threads
//! summing [256, 128] partial sums over 256 terms, then a ReLU over their block): 76.5 µs by
//! rows against 55.9 µs by columns, and 62.5 against 55.6 µs without the ReLU; [1024, 64] over
//! 1024 terms, 530.6 against 506.3 µs. The next layer then reads part of its input from the other
//! core, which costs less: the digits-mlp step 843 → 831 µs, office-head 2651 → 2592 µs (both
//! with the layer's bias and activation as the finisher; OMP_NUM_THREADS=2).
//! A team smaller than the split (OMP_THREAD_LIMIT, nested regions) runs several blocks per thread.
template <op OpA, op OpB, class T, class Block, class Finish>
double split_product(const product_split& split,
                     index_t m,
                     index_t n,
                     index_t k,
                     const T* a,
                     index_t lda,
                     const T* b,
                     index_t ldb,
                     T* c,
                     index_t ldc,
                     const split_scratch<T>& scratch,
                     Block&& block,
                     Finish&& finish) {
  double* const block_sums = scratch.block_sums;
  // Where a block may add its squares (a squares_finisher's share), if anywhere.
  const auto squares_of = [](double& share) { return squares_finisher<Finish> ? &share : nullptr; };
  if (split.threads <= 1) {
    double share = 0.0;
    return block(0, m, n, k, a, b, c, ldc, false, squares_of(share)) ? share : finish(c, m, n, ldc);
  }
  int blocks = split.threads;
  if (split.along == split_along::depth) {
    const product_split sums =
        product_split::even(split_along::columns, n, scratch.threads, scratch.col_tile);
    blocks = sums.threads;
    const auto partial = [&](int t) {
      return scratch.partial_sums + (t - 1) * scratch.partial_room;
    };
    run_on_team(std::max(split.threads, sums.threads), [&](int me, int team, auto&& sync) {
      for (int t = me; t < split.threads; t += team) {
        const auto [first, end] = split.range(t);
        if (end <= first) continue;
        // Terms [first, end): columns of op(A) (of A, or its rows when transposed), rows of op(B).
        const T* at = OpA == op::none ? a + first * lda : a + first;
        const T* bt = OpB == op::none ? b + first : b + first * ldb;
        // Partial sums: finished below, once added.
        if (t == 0)
          block(0, m, n, end - first, at, bt, c, ldc, false, nullptr);
        else
          block(t, m, n, end - first, at, bt, partial(t), m, true, nullptr);
      }
      sync();
      for (int r = me; r < sums.threads; r += team) {
        const auto [first, end] = sums.range(r);
        block_sums[r] = 0.0;
        if (end <= first) continue;
        for (int t = 1; t < split.threads; ++t) {
          if (split.range(t).second <= split.range(t).first) continue;  // no terms, no partial
          const T* p = partial(t);
          for (index_t j = first; j < end; ++j) {
            T* cj = c + j * ldc;
            const T* pj = p + j * m;
            for (index_t i = 0; i < m; ++i) cj[i] += pj[i];
          }
        }
        block_sums[r] = finish(c + first * ldc, m, end - first, ldc);
      }
    });
  } else {
    run_on_team(split.threads, [&](int me, int team, auto&&) {
      for (int t = me; t < split.threads; t += team) {
        const auto [first, end] = split.range(t);
        const index_t count = end - first;
        block_sums[t] = 0.0;
        if (count <= 0) continue;
        double share = 0.0;  // the threads' shares sit in one cache line: add up locally
        // Row i of op(A): row i of A, or column i of A when transposed; column j of op(B) likewise.
        if (split.along == split_along::rows) {
          if (!block(t, count, n, k, OpA == op::none ? a + first : a + first * lda, b, c + first,
                     ldc, false, squares_of(share)))
            share = finish(c + first, count, n, ldc);
        } else {
          if (!block(t, m, count, k, a, OpB == op::none ? b + first * ldb : b + first,
                     c + first * ldc, ldc, false, squares_of(share)))
            share = finish(c + first * ldc, m, count, ldc);
        }
        block_sums[t] = share;
      }
    });
  }
  double sum = 0.0;
  for (int t = 0; t < blocks; ++t) sum += block_sums[t];
  return sum;
}

//! Outer products (k = 1) of at least this many values of C are split by C's columns among the
//! threads; smaller ones, and every other thin product, run on the calling thread. An outer
//! product does one multiply per value it writes, and C is usually a gradient both cores read in
//! the last step, so its time goes to taking the lines back from the other core: two cores
//! take back their halves at once. (Row blocks would interleave the two cores' writes within
//! every column: see split_product.)
inline constexpr index_t thin_parallel_values = index_t(1) << 15;

//! thin_product as gemm() runs it: on the calling thread, or an outer product of at least
//! thin_parallel_values values split by C's columns among up to scratch.threads threads (blocks
//! of whole column tiles), `finish` run on each block by the thread that wrote it. Returns the
//! finishers' shares added in block order. Every value of C comes out the same either way.
template <op OpA, op OpB, class T, class Load, class Finish>
double split_thin_product(index_t m,
                          index_t n,
                          index_t k,
                          T alpha,
                          const T* a,
                          index_t lda,
                          const T* b,
                          index_t ldb,
                          T beta,
                          T* c,
                          index_t ldc,
                          Load load,
                          const split_scratch<T>& scratch,
                          Finish&& finish) {
  const product_split split =
      k == 1 && m * n >= thin_parallel_values
          ? product_split::even(split_along::columns, n, scratch.threads, scratch.col_tile)
          : product_split::one_thread(m, n);
  return split_product<OpA, OpB>(
      split, m, n, k, a, lda, b, ldb, c, ldc, scratch,
      [&](int, index_t rows, index_t cols, index_t depth, const T* ab, const T* bb, T* cb,
          index_t ldcb, bool, double*) {
        thin_product<OpA, OpB>(rows, cols, depth, alpha, ab, lda, bb, ldb, beta, cb, ldcb, load);
        return false;
      },
      finish);
}

//! A split along the terms needs room for its partial sums: check it fits (a split along C's
//! rows or columns always does).
template <class T>
void check_split(const char* where,
                 const product_split& split,
                 index_t m,
                 index_t n,
                 index_t k,
                 const split_scratch<T>& scratch) {
  if (split.threads <= 1) return;
  const bool terms = split.along == split_along::depth, rows = split.along == split_along::rows;
  const index_t side = terms ? k : rows ? m : n;
  const char* named = terms ? "k" : rows ? "m" : "n";
  if (split.threads > scratch.threads)
    fail(where, "split",
         "at most the workspace's " + std::to_string(scratch.threads) + " thread block(s)",
         std::to_string(split.threads));
  if (split.side != side || split.per <= 0 || index_t(split.threads) * split.per < side)
    fail(where, "split",
         std::string("blocks that cover the side they divide (") + named + " = " +
             std::to_string(side) + ")",
         std::to_string(split.threads) + " blocks of " + std::to_string(split.per) +
             " over a side of " + std::to_string(split.side));
  if (terms && m * n > scratch.partial_room)
    fail(where, "split along the terms",
         "partial sums within the room reserved for them (reserve_partial_sums)",
         "[" + std::to_string(m) + ", " + std::to_string(n) + "] partial sums for room for " +
             std::to_string(scratch.partial_room) + " values");
}

//! The split a product runs with: `given` once check_split accepts it, otherwise the workspace's
//! own. Called before C is touched, so that a refused split leaves C as it was.
template <class Workspace, class T>
product_split chosen_split(const char* where,
                           const std::optional<product_split>& given,
                           const Workspace& ws,
                           index_t m,
                           index_t n,
                           index_t k,
                           const split_scratch<T>& scratch) {
  if (!given) return ws.split(m, n, k);
  check_split(where, *given, m, n, k, scratch);
  return *given;
}
}  // namespace detail

//! C[m, n] = α·op(A)·op(B) + β·C, every matrix column-major with its leading dimension.
//! op(A) is [m, k], op(B) is [k, n]. Each thread passes the block of C it has computed to
//! `finish` (see no_finish) while the block is still in its cache; returns the sum of the
//! finishers' shares. `split` says how threads divide the product (a layer_split's, say); by
//! default the workspace's split(): C's longer side, whose blocks give the same C as one thread.
//! Allocates nothing.
template <op OpA, op OpB, class T, class Finish = no_finish>
double gemm(gemm_workspace<T>& ws,
            index_t m,
            index_t n,
            index_t k,
            T alpha,
            const T* a,
            index_t lda,
            const T* b,
            index_t ldb,
            T beta,
            T* c,
            index_t ldc,
            Finish&& finish = {},
            std::optional<detail::product_split> split = std::nullopt) {
  using product = Eigen::internal::general_matrix_matrix_product<
      index_t, T, OpA == op::none ? Eigen::ColMajor : Eigen::RowMajor, false, T,
      OpB == op::none ? Eigen::ColMajor : Eigen::RowMajor, false, Eigen::ColMajor, 1>;
  if (ws.threads() < 1)
    fail("gemm", "workspace", "one sized at construction (gemm_workspace(m, n, k))",
         "a default-constructed one");
  if (m == 0 || n == 0) return 0.0;
  const detail::split_scratch<T> scratch = ws.scratch();
  if (detail::is_thin(m, n, k))  // never for k = 0: no terms
    return detail::split_thin_product<OpA, OpB>(m, n, k, alpha, a, lda, b, ldb, beta, c, ldc,
                                                detail::as_stored{}, scratch, finish);
  const detail::product_split chosen = detail::chosen_split("gemm", split, ws, m, n, k, scratch);
  // Eigen's kernel accumulates into C: apply β first. dafuse's applies β as it stores C (β = 0
  // never reads C, so NaN there does not propagate).
  constexpr bool native = gemm_workspace<T>::native;
  if (!native || k == 0) {
    Eigen::Map<Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic>, 0, Eigen::OuterStride<>> cm(
        c, m, n, Eigen::OuterStride<>(ldc));
    if (beta == T(0))
      cm.setZero();
    else if (beta != T(1))
      cm *= beta;
    if (k == 0) return finish(c, m, n, ldc);
  }

  return detail::split_product<OpA, OpB>(
      chosen, m, n, k, a, lda, b, ldb, c, ldc, scratch,
      [&](int t, index_t rows, index_t cols, index_t depth, const T* ab, const T* bb, T* cb,
          index_t ldcb, bool fresh, [[maybe_unused]] double* squares) {
        if constexpr (native) {
#if DAFUSE_GEMM_FP32_NATIVE
          if constexpr (OpA == op::transpose && OpB == op::none)
            if (detail::fp32_product_transposed_a_in_place(ws.panels(t), rows, cols, depth, alpha,
                                                           ab, lda, bb, ldb, fresh ? T(0) : beta,
                                                           cb, ldcb))
              return false;
          // A block of one panel of rows and one block of terms reads both operands in place.
          if constexpr (OpA == op::none)
            if (detail::fp32_product_in_place<OpB == op::transpose>(
                    rows, cols, depth, alpha, ab, lda, bb, ldb, fresh ? T(0) : beta, cb, ldcb,
                    squares))
              return squares != nullptr;
          detail::blocked_product<detail::fp32_kernel, OpA == op::transpose, OpB == op::transpose>(
              ws.panels(t), rows, cols, depth, alpha, ab, lda, bb, ldb, fresh ? T(0) : beta, cb,
              ldcb, squares);
          return squares != nullptr;
#endif
        } else {
          if (fresh)
            for (index_t j = 0; j < cols; ++j) std::fill(cb + j * ldcb, cb + j * ldcb + rows, T(0));
          product::run(rows, cols, depth, ab, lda, bb, ldb, cb, 1, ldcb, alpha, ws.blocking(t),
                       nullptr);
        }
        return false;
      },
      finish);
}

template <class T>
template <op OpA, op OpB, class Finish>
double gemm_workspace<T>::product(index_t m,
                                  index_t n,
                                  index_t k,
                                  T alpha,
                                  const T* a,
                                  index_t lda,
                                  const T* b,
                                  index_t ldb,
                                  T beta,
                                  T* c,
                                  index_t ldc,
                                  Finish&& finish,
                                  std::optional<detail::product_split> split) {
  return gemm<OpA, OpB>(*this, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc,
                        std::forward<Finish>(finish), split);
}

}  // namespace dafuse::backend::host
