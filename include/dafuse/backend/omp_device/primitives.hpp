// SPDX-License-Identifier: Apache-2.0
//! @file backend/omp_device/primitives.hpp
//! @brief system::omp_device's device primitives (backend/device/primitives.hpp): Eigen's
//! products and plain sums on the CPU.
#pragma once
#include <dafuse/config.hpp>

#include <dafuse/backend/device/primitives.hpp>
#include <dafuse/backend/device/resident_loader.hpp>
#include <dafuse/backend/omp_device/system.hpp>
#include <dafuse/core/meta.hpp>

#include <thrust/system/omp/execution_policy.h>
#include <Eigen/Core>

#include <cstddef>
#include <cstring>

namespace dafuse::backend::device {

//! omp_device's primitives: Eigen's products (Eigen splits them among OpenMP threads by blocks
//! of C, never along k, so results do not depend on the thread count) and sums in one pass.
template <>
class device_primitives<system::omp_device> {
 public:
  //! A product's plan: its shape, nothing to prepare.
  template <class T>
  using product_plan = product_shape<T>;

  //! Steps are queued as they come: no graphs on the CPU.
  static constexpr bool captures = false;
  struct graph {};

  device_primitives() = default;
  device_primitives(const device_primitives&) = delete;
  device_primitives& operator=(const device_primitives&) = delete;

  static auto policy() { return thrust::omp::par; }

  template <class T>
  product_plan<T> plan(const product_shape<T>& shape) const {
    return shape;
  }

  //! C = α·op(A)·op(B) + β·C, then the bias and ReLU the plan asks for. β = 0 never reads C.
  template <class T>
  void run(const product_plan<T>& p, T alpha, const T* a, const T* b, T beta, T* c) const {
    using matrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic>;
    using const_map = Eigen::Map<const matrix, 0, Eigen::OuterStride<>>;
    const index_t a_rows = p.transpose_a ? p.k : p.m, a_cols = p.transpose_a ? p.m : p.k;
    const index_t b_rows = p.transpose_b ? p.n : p.k, b_cols = p.transpose_b ? p.k : p.n;
    const const_map am(a, a_rows, a_cols, Eigen::OuterStride<>(p.lda));
    const const_map bm(b, b_rows, b_cols, Eigen::OuterStride<>(p.ldb));
    Eigen::Map<matrix, 0, Eigen::OuterStride<>> cm(c, p.m, p.n, Eigen::OuterStride<>(p.ldc));
    if (beta == T(0)) {
      if (p.k == 0) {
        cm.setZero();
      } else if (p.transpose_a) {
        if (p.transpose_b)
          cm.noalias() = alpha * (am.transpose() * bm.transpose());
        else
          cm.noalias() = alpha * (am.transpose() * bm);
      } else if (p.transpose_b) {
        cm.noalias() = alpha * (am * bm.transpose());
      } else {
        cm.noalias() = alpha * (am * bm);
      }
    } else {
      if (beta != T(1)) cm *= beta;
      if (p.k > 0) {
        if (p.transpose_a) {
          if (p.transpose_b)
            cm.noalias() += alpha * (am.transpose() * bm.transpose());
          else
            cm.noalias() += alpha * (am.transpose() * bm);
        } else if (p.transpose_b) {
          cm.noalias() += alpha * (am * bm.transpose());
        } else {
          cm.noalias() += alpha * (am * bm);
        }
      }
    }
    if (p.after == epilogue::none) return;
    if (p.after == epilogue::bias_gradient) {
      // ∂b = row sums of A (δz: [m, k]), in column order.
      T* bias = const_cast<T*>(p.bias);
      for (index_t row = 0; row < p.m; ++row) bias[row] = T(0);
      for (index_t col = 0; col < p.k; ++col)
        for (index_t row = 0; row < p.m; ++row) bias[row] += a[col * p.lda + row];
      return;
    }
    for (index_t col = 0; col < p.n; ++col)
      for (index_t row = 0; row < p.m; ++row) {
        T& v = c[col * p.ldc + row];
        v += p.bias[row];
        if (p.after == epilogue::relu_bias) v = v > T(0) ? v : T(0);
      }
  }

  //! run() writes every bias gradient it is asked for.
  template <class T>
  static bool writes_bias_gradient(const product_plan<T>& p) {
    return p.after == epilogue::bias_gradient;
  }

  //! out[k] = Σ_i f(i).terms[k] over i in [0, n), in index order.
  template <int K, class F>
  void map_sum(index_t n, const F& f, double* out) const {
    sequential_map_sum<K>(n, f, out);
  }

  //! *out = Σ x_i (Σ x_i² with `squares`) over n values, accumulated in double in index order.
  template <class T>
  void sum(const T* x, index_t n, bool squares, double* out) const {
    double s = 0;
    for (index_t i = 0; i < n; ++i) s += squares ? double(x[i]) * double(x[i]) : double(x[i]);
    *out = s;
  }

  //! Readies shuffle() for domains of up to `rows` rows (nothing to do on the CPU).
  void prepare_shuffle(index_t /*rows*/) {}
  //! The sequential part of the resident loader's permutations, one domain after the other.
  void shuffle(const shuffle_domain& job, int domains) const {
    for (int d = 0; d < domains; ++d) job(d);
  }

  static void to_device(void* dst, const void* src, std::size_t bytes) {
    if (bytes) std::memcpy(dst, src, bytes);
  }
  static void to_host(void* dst, const void* src, std::size_t bytes) {
    if (bytes) std::memcpy(dst, src, bytes);
  }
  static void synchronize() {}
};

}  // namespace dafuse::backend::device
