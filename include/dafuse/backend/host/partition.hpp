// SPDX-License-Identifier: Apache-2.0
//! @file backend/host/partition.hpp
//! @brief How a product is divided among threads: C's rows or columns, or its terms, in blocks,
//! a dense layer's three splits, and split_product, which runs the blocks on a team.
#pragma once
#include <dafuse/config.hpp>

#include <dafuse/backend/host/simd.hpp>
#include <dafuse/backend/host/team.hpp>
#include <dafuse/backend/host/tuning.hpp>
#include <dafuse/core/error.hpp>
#include <dafuse/core/meta.hpp>

#include <algorithm>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace dafuse::backend::host {

//! Whether a GEMM operand is used as stored or transposed.
enum class op { none, transpose };

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

//! Whether C[m, n] = op(A)[m, k]·op(B)[k, n] runs as thin_product rather than on the kernel: a
//! side of 1, and thin_product_min_terms multiply-adds or more (fewer stay on the kernel).
inline bool is_thin(index_t m, index_t n, index_t k) {
  return (m == 1 || n == 1 || k == 1) &&
         double(m) * double(n) * double(k) >= thin_product_min_terms;
}

//! Whether a product of m·n·k multiply-adds is worth more than one thread (and is not thin): from
//! gemm_parallel_flops on, below which a parallel region and operands moving between the cores'
//! caches cost more than half of the product.
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
//! update wrote half of W's lines from the core that had not read them last.
//! W's columns are its contiguous runs, so a block of them is a block of whole cache lines when a
//! column is (out·sizeof(T) a multiple of 64 bytes, the weights aligned), and at most one line
//! at each end of the block is shared otherwise.
//!
//! The blocks are as even as whole cache lines of the input gradient's rows allow (its blocks of
//! rows then share no line), not whole register tiles: 784 inputs split 400 + 384, not 416 + 368;
//! a block that ends part-way through a tile of the input gradient finishes it with a narrower one.
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
//! [1024, 1024] ∂L/∂W. The sum is added in another order, so it may differ in the last bits.
template <class Finish>
concept squares_finisher = requires {
  requires std::remove_cvref_t<Finish>::sums_squares;
};

namespace detail {
//! A finisher seen through a pointer. gemm() and gemm_bf16() call their finisher through one, so
//! that a product's code (its split, its kernels, the team's lambdas) is compiled once per
//! operand layout and type, not once per finisher type, which each layer has its own of
//! (docs/testing.md has the compile times). It is called once per finished block, not per value.
//! Refers to the finisher it was made from, which must outlive it.
template <class T, bool SumsSquares>
class finisher_ref {
 public:
  static constexpr bool sums_squares = SumsSquares;  //!< see squares_finisher

  template <class Finish>
  explicit finisher_ref(Finish& finish) noexcept
      : finish_(static_cast<const void*>(std::addressof(finish))), call_(&call<Finish>) {}

  double operator()(T* block, index_t rows, index_t cols, index_t ld) const {
    return call_(finish_, block, rows, cols, ld);
  }

 private:
  template <class Finish>
  static double call(const void* finish, T* block, index_t rows, index_t cols, index_t ld) {
    // Finish carries the constness of the finisher the reference was made from.
    return (*static_cast<Finish*>(const_cast<void*>(finish)))(block, rows, cols, ld);
  }

  const void* finish_;
  double (*call_)(const void*, T*, index_t, index_t, index_t);
};

//! `finish` as the finisher_ref a product of T values calls.
template <class T, class Finish>
finisher_ref<T, squares_finisher<Finish>> erase_finisher(Finish& finish) noexcept {
  return finisher_ref<T, squares_finisher<Finish>>(finish);
}

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
//! hardware prefetcher then draws in lines the other core is writing. The next layer then reads
//! part of its input from the other core, which costs less (docs/benchmarks.md, "Each block
//! finished where it was written").
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

}  // namespace dafuse::backend::host
