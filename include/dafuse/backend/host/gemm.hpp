// SPDX-License-Identifier: Apache-2.0
//! @file backend/host/gemm.hpp
//! @brief Matrix products with packing buffers allocated once: fp32 on dafuse's own kernel
//! (gemm_fp32.hpp) where the compiler targets AVX-512F or AVX2 + FMA, everything else on Eigen's
//! GEMM kernel.
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
#include <dafuse/backend/host/partition.hpp>
#include <dafuse/backend/host/thin_products.hpp>
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

//! Per-thread packing buffers for every product of a step, sized once for the largest one: for
//! dafuse's fp32 kernel (`native`) or for Eigen's.
template <class T>
class gemm_workspace {
 public:
  //! Whether products run on dafuse's fp32 kernel (gemm_fp32.hpp: AVX-512 or AVX2 + FMA) rather
  //! than Eigen's.
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

  //! Threads split C in whole register tiles: dafuse's kernel's mr rows or nr columns (32 × 12 on
  //! AVX-512, 16 × 6 on AVX2), 16 for Eigen's.
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
  //! The same product on the calling thread alone, with thread `t`'s packing buffers (t <
  //! threads()): for a job whose threads each run whole products side by side (conv.hpp's parts).
  template <op OpA, op OpB, class Finish = no_finish>
  double product_on(int t,
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
                    Finish&& finish = {});

 private:
  std::vector<std::unique_ptr<blocking_type>> blocking_;  // Eigen's kernel
  std::vector<detail::fp32_panels> panels_;               // dafuse's fp32 kernel
  detail::split_room<T> room_;
};

namespace detail {
//! gemm() on its finisher's finisher_ref (partition.hpp): the product's code, compiled once per
//! layout and type rather than once per finisher type. With `own` ≥ 0 the whole product runs on
//! the calling thread with thread `own`'s buffers (gemm_workspace::product_on).
template <op OpA, op OpB, class T, bool SumsSquares>
double erased_gemm(gemm_workspace<T>& ws,
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
                   finisher_ref<T, SumsSquares> finish,
                   std::optional<product_split> split,
                   int own = -1) {
  using product = Eigen::internal::general_matrix_matrix_product<
      index_t, T, OpA == op::none ? Eigen::ColMajor : Eigen::RowMajor, false, T,
      OpB == op::none ? Eigen::ColMajor : Eigen::RowMajor, false, Eigen::ColMajor, 1>;
  if (ws.threads() < 1)
    fail("gemm", "workspace", "one sized at construction (gemm_workspace(m, n, k))",
         "a default-constructed one");
  if (own >= ws.threads())
    fail("gemm", "thread", "one of the workspace's " + std::to_string(ws.threads()),
         std::to_string(own));
  if (m == 0 || n == 0) return 0.0;
  detail::split_scratch<T> scratch = ws.scratch();
  if (own >= 0) scratch.threads = 1;  // a thin product then stays on this thread too
  if (detail::is_thin(m, n, k))       // never for k = 0: no terms
    return detail::split_thin_product<OpA, OpB>(m, n, k, alpha, a, lda, b, ldb, beta, c, ldc,
                                                detail::as_stored{}, scratch, finish);
  const detail::product_split chosen =
      own >= 0 ? detail::product_split::one_thread(m, n)
               : detail::chosen_split("gemm", split, ws, m, n, k, scratch);
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
      [&](int block_thread, index_t rows, index_t cols, index_t depth, const T* ab, const T* bb,
          T* cb, index_t ldcb, bool fresh, [[maybe_unused]] double* squares) {
        const int t = own >= 0 ? own : block_thread;
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
  return detail::erased_gemm<OpA, OpB>(ws, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc,
                                       detail::erase_finisher<T>(finish), split);
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

template <class T>
template <op OpA, op OpB, class Finish>
double gemm_workspace<T>::product_on(int t,
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
                                     Finish&& finish) {
  return detail::erased_gemm<OpA, OpB>(*this, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc,
                                       detail::erase_finisher<T>(finish), std::nullopt,
                                       std::max(t, 0));
}

}  // namespace dafuse::backend::host
