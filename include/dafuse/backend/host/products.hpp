// SPDX-License-Identifier: Apache-2.0
//! @file backend/host/products.hpp
//! @brief The matrix products of a mixed-precision step, and which product set a precision uses.
//!
//! forward() and backward() in dense.hpp take a "product set": something that runs
//! C = α·op(A)·op(B) + β·C (`product<OpA, OpB>(...)`) and rounds a stored value to the step's
//! format (`round`, `rounds`). For fp32 and fp64 that is gemm_workspace<T> itself. For bf16 and
//! fp16 it is mixed_products<F>: the operands it receives already hold F's values (the step
//! rounds every stored tensor), so an fp32 product of them is exact term by term and only the
//! order of the fp32 sums differs from a native 16-bit product. The one exception: where the
//! kernel rounds its operands itself (`rounds_operands`), the step hands it the master weights.
//! With AVX512-BF16 the bf16 products run on gemm_bf16, whose instruction does twice an fp32 FMA's
//! multiply-adds (docs/benchmarks.md, "Mixed precision: bf16 products on AVX512-BF16").
#pragma once
#include <dafuse/config.hpp>

#include <dafuse/backend/host/gemm.hpp>
#include <dafuse/backend/host/gemm_bf16.hpp>
#include <dafuse/core/half.hpp>
#include <dafuse/core/meta.hpp>

#include <algorithm>
#include <optional>
#include <type_traits>
#include <utility>

namespace dafuse::backend::host {

//! Products and rounding for a step that stores its values in the 16-bit format F.
template <number_format F>
class mixed_products {
  static_assert(is_narrow<F>, "dafuse: mixed_products is for the 16-bit formats bf16 and fp16");

 public:
  static constexpr bool rounds = true;  //!< stored values are rounded to F
  //! The kernel rounds its operands to F itself as it packs them (bf16 on AVX512-BF16, with the
  //! same round-to-nearest-even as `round`): a product of unrounded values then gives what the
  //! product of their rounded copies does, so the step can hand it the master weights. (Except
  //! below 2^-126: the instruction reads fp32 subnormals as zero, where `round` can round the
  //! largest of them up to bf16's smallest normal; see gemm_bf16.hpp.)
  static constexpr bool rounds_operands = F == number_format::bf16 && bf16_products_native;
  //! `x` rounded to F (round to nearest even; fp16 overflows to ±Inf).
  static float round(float x) { return round_to<F>(x); }

  mixed_products() = default;
  //! Buffers for products up to [max_m, max_k]·[max_k, max_n].
  mixed_products(index_t max_m, index_t max_n, index_t max_k) : kernel_(max_m, max_n, max_k) {}

  //! C = α·op(A)·op(B) + β·C on operands that hold F's values (or, with rounds_operands, that it
  //! rounds to F itself), accumulated in fp32; each finished block of C goes to `finish`, and
  //! `split` divides it among threads, as in gemm(), which returns the sum of its shares.
  template <op OpA, op OpB, class Finish = no_finish>
  double product(index_t m,
                 index_t n,
                 index_t k,
                 float alpha,
                 const float* a,
                 index_t lda,
                 const float* b,
                 index_t ldb,
                 float beta,
                 float* c,
                 index_t ldc,
                 Finish&& finish = {},
                 std::optional<detail::product_split> split = std::nullopt) {
    if constexpr (native_bf16)
      return gemm_bf16<OpA, OpB>(kernel_, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc,
                                 std::forward<Finish>(finish), split);
    else
      return gemm<OpA, OpB>(kernel_, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc,
                            std::forward<Finish>(finish), split);
  }
  //! The same product on the calling thread alone, with thread `t`'s packing buffers (t <
  //! threads()), as gemm_workspace::product_on.
  template <op OpA, op OpB, class Finish = no_finish>
  double product_on(int t,
                    index_t m,
                    index_t n,
                    index_t k,
                    float alpha,
                    const float* a,
                    index_t lda,
                    const float* b,
                    index_t ldb,
                    float beta,
                    float* c,
                    index_t ldc,
                    Finish&& finish = {}) {
    if constexpr (native_bf16)
      return detail::erased_gemm_bf16<OpA, OpB>(kernel_, m, n, k, alpha, a, lda, b, ldb, beta, c,
                                                ldc, detail::erase_finisher<float>(finish),
                                                std::nullopt, std::max(t, 0));
    else
      return kernel_.template product_on<OpA, OpB>(t, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc,
                                                   std::forward<Finish>(finish));
  }
  //! Threads whose packing buffers product_on can use.
  int threads() const { return kernel_.threads(); }
  //! How product() splits C[m, n] = op(A)[m, k]·op(B)[k, n] among threads.
  detail::product_split split(index_t m, index_t n, index_t k) const {
    return kernel_.split(m, n, k);
  }
  //! How a dense layer's products split W[out, in] over n samples among threads.
  layer_split split_layer(index_t out, index_t in, index_t n) const {
    return kernel_.split_layer(out, in, n);
  }
  //! Room for the partial sums of products split along their terms (gemm_workspace's).
  void reserve_partial_sums(index_t values) { kernel_.reserve_partial_sums(values); }

 private:
  // bf16 operands go to the AVX512-BF16 kernel where the compiler targets it; fp16 (no fast fp16
  // products on x86 before AVX512-FP16) and bf16 elsewhere use the fp32 kernel, which is exact
  // term by term on these operands.
  static constexpr bool native_bf16 = F == number_format::bf16 && bf16_products_native;
  std::conditional_t<native_bf16, bf16_gemm_workspace, gemm_workspace<float>> kernel_;
};

namespace detail {
template <number_format F, class T>
struct products_for {
  using type = gemm_workspace<T>;
};
template <number_format F, class T>
requires is_narrow<F>
struct products_for<F, T> {
  static_assert(std::is_same_v<T, float>,
                "dafuse: bf16/fp16 mixed precision keeps fp32 master values");
  using type = mixed_products<F>;
};
}  // namespace detail

//! The product set of a step whose values are stored in format F and mastered in type T.
template <number_format F, class T>
using products_for = typename detail::products_for<F, T>::type;

}  // namespace dafuse::backend::host
