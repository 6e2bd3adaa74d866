// SPDX-License-Identifier: Apache-2.0
//! @file backend/generic/gemm.hpp
//! @brief Matrix products on Eigen's GEMM kernels with packing buffers allocated once.
//!
//! Eigen's `a.noalias() = b * c` allocates its packing buffers on every call once they pass
//! EIGEN_STACK_ALLOCATION_LIMIT, and its OpenMP path allocates on every call whatever the size.
//! A training step must not allocate, so dafuse calls Eigen 3.4's blocked product
//! (internal::general_matrix_matrix_product, Goto & van de Geijn's algorithm) directly, with one
//! packing buffer per thread sized at construction for the largest product of the step, and
//! splits the output's columns across OpenMP threads itself.
#pragma once
#include <dafuse/config.hpp>
#include <dafuse/core/error.hpp>
#include <dafuse/core/meta.hpp>

#include <Eigen/Core>

#if defined(_OPENMP)
#include <omp.h>
#endif

#include <algorithm>
#include <memory>
#include <vector>

static_assert(EIGEN_WORLD_VERSION == 3 && EIGEN_MAJOR_VERSION == 4,
              "dafuse: backend/generic/gemm.hpp calls Eigen 3.4's blocked GEMM; install Eigen 3.4 "
              "(apt-get install libeigen3-dev on Debian 12)");

namespace dafuse::backend::generic {

//! Whether a GEMM operand is used as stored or transposed.
enum class op { none, transpose };

//! Per-thread packing buffers for every product of a step, sized once for the largest one.
template <class T>
class gemm_workspace {
 public:
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
    for (int t = 0; t < threads; ++t) {
      // Each thread's block has at most ⌈max_n / threads⌉ columns, but sizing for all of them
      // keeps one thread able to run a whole product.
      blocking_.push_back(std::make_unique<blocking_type>(max_m, max_n, max_k, 1, true));
      blocking_.back()->allocateAll();
    }
  }

  int threads() const {
    return int(blocking_.size());
  }
  blocking_type& blocking(int t) {
    return *blocking_[std::size_t(t)];
  }

  //! Stored values are kept as computed: no rounding (see backend/generic/products.hpp).
  static constexpr bool rounds = false;
  static constexpr T round(T x) {
    return x;
  }
  //! C = α·op(A)·op(B) + β·C through gemm() below (the interface forward/backward use).
  template <op OpA, op OpB>
  void product(index_t m,
               index_t n,
               index_t k,
               T alpha,
               const T* a,
               index_t lda,
               const T* b,
               index_t ldb,
               T beta,
               T* c,
               index_t ldc);

 private:
  std::vector<std::unique_ptr<blocking_type>> blocking_;
};

//! Products below this many floating-point operations run on one thread: a parallel region and
//! operands moving between the cores' caches cost more than half of a smaller product. Measured
//! on 2 cores (median step, OMP_NUM_THREADS=2, products split along C's longer side): the
//! digits-mlp DANN step (784-256-256, B = 64 + 64) takes 1.63 ms with every product on one
//! thread and 1.02 ms with this threshold (2^20 and 2^22 measured the same); office-head
//! (2048-256, G_d 256-1024-1024) 5.1 ms against 4.3 ms.
inline constexpr double gemm_parallel_flops = double(1 << 24);

//! C[m, n] = α·op(A)·op(B) + β·C, every matrix column-major with its leading dimension.
//! op(A) is [m, k], op(B) is [k, n]. Allocates nothing.
template <op OpA, op OpB, class T>
void gemm(gemm_workspace<T>& ws,
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
          index_t ldc) {
  using product = Eigen::internal::general_matrix_matrix_product<
      index_t, T, OpA == op::none ? Eigen::ColMajor : Eigen::RowMajor, false, T,
      OpB == op::none ? Eigen::ColMajor : Eigen::RowMajor, false, Eigen::ColMajor, 1>;
  // Eigen's kernel accumulates into C: apply β first.
  Eigen::Map<Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic>, 0, Eigen::OuterStride<>> cm(
      c, m, n, Eigen::OuterStride<>(ldc));
  if (beta == T(0))
    cm.setZero();
  else if (beta != T(1))
    cm *= beta;
  if (m == 0 || n == 0 || k == 0) return;
  if (ws.threads() < 1)
    fail("gemm", "workspace", "one sized at construction (gemm_workspace(m, n, k))",
         "a default-constructed one");

  const int threads = 2.0 * double(m) * double(n) * double(k) < gemm_parallel_flops
                          ? 1
                          : std::max(1, std::min<int>(ws.threads(), int(std::max(m, n) / 8)));
  if (threads <= 1) {
    product::run(m, n, k, a, lda, b, ldb, c, 1, ldc, alpha, ws.blocking(0), nullptr);
    return;
  }
  // Each thread computes a block of C and reads all of the other operand: split the longer side
  // of C, so the operand every thread reads whole is the smaller one. A DANN product is usually
  // wide in features and short in samples (office-head's G_d: [1024, 1024]·[1024, 64]): splitting
  // its 64 columns made both cores stream all 4 MB of W, splitting its 1024 rows reads W once.
  const bool split_rows = m > n;
  const index_t side = split_rows ? m : n;
  // Row j of op(A): row j of A, or column j of A when transposed; column j of op(B) likewise.
  const auto a_rows = [&](index_t i) { return OpA == op::none ? a + i : a + i * lda; };
  const auto b_columns = [&](index_t j) { return OpB == op::none ? b + j * ldb : b + j; };
#if defined(_OPENMP)
#pragma omp parallel for num_threads(threads) schedule(static)
#endif
  for (int t = 0; t < threads; ++t) {
    // Blocks in multiples of 16 (a register tile's rows or columns), the last one shorter.
    const index_t per = ((side + threads - 1) / threads + 15) / 16 * 16;
    const index_t first = std::min<index_t>(side, t * per);
    const index_t count = std::min<index_t>(side, first + per) - first;
    if (count <= 0) continue;
    if (split_rows)
      product::run(count, n, k, a_rows(first), lda, b, ldb, c + first, 1, ldc, alpha,
                   ws.blocking(t), nullptr);
    else
      product::run(m, count, k, a, lda, b_columns(first), ldb, c + first * ldc, 1, ldc, alpha,
                   ws.blocking(t), nullptr);
  }
}

template <class T>
template <op OpA, op OpB>
void gemm_workspace<T>::product(index_t m,
                                index_t n,
                                index_t k,
                                T alpha,
                                const T* a,
                                index_t lda,
                                const T* b,
                                index_t ldb,
                                T beta,
                                T* c,
                                index_t ldc) {
  gemm<OpA, OpB>(*this, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

}  // namespace dafuse::backend::generic
