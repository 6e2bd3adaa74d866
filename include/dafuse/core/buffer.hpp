// SPDX-License-Identifier: Apache-2.0
//! @file core/buffer.hpp
//! @brief Owning buffers over Thrust vectors and non-owning column-major matrix views.
//!
//! Layout convention used throughout dafuse: a batch of n samples of width d is a column-major
//! [d, n] matrix, one sample per contiguous column (the same bytes as a row-major [n, d] array,
//! which is how NPY files and PyTorch store it). A weight matrix of a layer In → Out is a
//! column-major [Out, In] matrix, so z = W·x + b.
#pragma once
#include <dafuse/config.hpp>
#include <dafuse/core/error.hpp>
#include <dafuse/core/meta.hpp>
#include <dafuse/core/system.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>

namespace dafuse {

//! A non-owning column-major [rows, cols] view with leading dimension rows (contiguous).
template <class T>
struct matrix_view {
  T* data = nullptr;  //!< first element
  index_t rows = 0;   //!< height (features)
  index_t cols = 0;   //!< width (samples)

  DAFUSE_HOST_DEVICE constexpr T& operator()(index_t r, index_t c) const {
    return data[c * rows + r];
  }
  DAFUSE_HOST_DEVICE constexpr index_t size() const { return rows * cols; }
  //! Columns [first, first + count): a contiguous block because storage is column-major.
  DAFUSE_HOST_DEVICE constexpr matrix_view middle_cols(index_t first, index_t count) const {
    return {data + first * rows, rows, count};
  }
  //! The same memory seen as const (a template, so views of const data have no such operator).
  template <class U = T>
  requires(std::is_same_v<U, T> && !std::is_const_v<U>) DAFUSE_HOST_DEVICE constexpr
  operator matrix_view<const U>() const {
    return {data, rows, cols};
  }
};

//! A non-owning [rows, cols] sparse matrix stored by columns (compressed sparse columns), one
//! sample per column: exactly the rows of a CSR data set. Column c's non-zeros are
//! values[k], at row indices[k], for k in [col_begin(c), col_begin(c + 1)), the rows ascending.
//! `offsets` may point into a larger CSR array: positions are taken relative to offsets[0], so a
//! run of a data set's rows is a view without a copy.
template <class T>
struct sparse_matrix_view {
  const std::int32_t* offsets = nullptr;  //!< [cols + 1], non-decreasing
  const std::int32_t* indices = nullptr;  //!< row (feature) of each non-zero
  T* values = nullptr;                    //!< value of each non-zero
  index_t rows = 0;                       //!< height (features)
  index_t cols = 0;                       //!< width (samples)
  //! Distinct rows that have a non-zero in some column, when the owner computed them (the
  //! sparse weight gradient touches only those); `used_rows == nullptr` means not computed.
  const std::int32_t* used_rows = nullptr;
  index_t used_count = 0;  //!< entries of used_rows

  //! Position of column c's first non-zero in indices/values.
  DAFUSE_HOST_DEVICE constexpr index_t col_begin(index_t c) const {
    return index_t(offsets[c]) - index_t(offsets[0]);
  }
  //! Non-zeros in the whole view.
  DAFUSE_HOST_DEVICE constexpr index_t nnz() const { return col_begin(cols); }
};

//! Owning, fixed-size storage in `System`'s memory. Sized once; never reallocates.
//!
//! The first element sits on a `buffer_alignment`-byte boundary. Vectorised loops (Eigen's
//! reductions among them) peel elements up to the first aligned one, so a buffer's address would
//! otherwise decide the order of the sums: two identical steps whose buffers malloc placed
//! differently would differ in the last bits, and a run resumed from a checkpoint in a fresh
//! process would drift from the uninterrupted one. Aligning every buffer makes the results a
//! function of the values alone.
template <class T, class System = system::omp>
class buffer {
 public:
  using value_type = T;
  using system_type = System;
  //! Bytes every buffer's data() is aligned to: a cache line and an AVX-512 vector.
  static constexpr std::size_t alignment = 64;

  buffer() = default;
  explicit buffer(std::size_t n) : storage_(n + padding) { align(n); }
  buffer(std::size_t n, T value) : storage_(n + padding) {
    align(n);
    fill(value);
  }
  buffer(const buffer& other) : buffer(other.size_) {
    if constexpr (System::host_accessible)
      std::copy(other.data(), other.data() + other.size_, data());
    else
      System::copy(other.data(), other.size_, data());  // a device system's own copy
  }
  buffer(buffer&& other) noexcept { swap(other); }
  buffer& operator=(buffer other) noexcept {
    swap(other);
    return *this;
  }
  void swap(buffer& other) noexcept {
    storage_.swap(other.storage_);
    std::swap(offset_, other.offset_);
    std::swap(size_, other.size_);
  }
  friend void swap(buffer& a, buffer& b) noexcept { a.swap(b); }

  T* data() { return raw(storage_.data()) + offset_; }
  const T* data() const { return raw(storage_.data()) + offset_; }
  std::size_t size() const { return size_; }

  //! Column-major [rows, cols] view starting at element `offset`; checks it fits.
  matrix_view<T> matrix(index_t rows, index_t cols, index_t offset = 0) {
    check_fits(rows, cols, offset);
    return {data() + offset, rows, cols};
  }
  matrix_view<const T> matrix(index_t rows, index_t cols, index_t offset = 0) const {
    check_fits(rows, cols, offset);
    return {data() + offset, rows, cols};
  }

  void fill(T value) {
    if constexpr (System::host_accessible)
      std::fill(data(), data() + size_, value);
    else
      System::fill(data(), size_, value);  // a device system's own fill
  }

 private:
  // Spare elements allocated so that an aligned start always exists inside the storage
  // (allocators align to at least alignof(T), so the distance is a whole number of elements).
  static constexpr std::size_t padding =
      sizeof(T) <= alignment && alignment % sizeof(T) == 0 ? alignment / sizeof(T) - 1 : 0;

  void align(std::size_t n) {
    size_ = n;
    const auto address = reinterpret_cast<std::uintptr_t>(raw(storage_.data()));
    const std::size_t misalignment = address % alignment;
    offset_ = padding == 0 || misalignment == 0 ? 0 : (alignment - misalignment) / sizeof(T);
  }

  // The address a vector's data() stands for: a raw pointer, or a Thrust pointer's get().
  template <class P>
  static auto raw(P p) {
    if constexpr (std::is_pointer_v<P>)
      return p;
    else
      return p.get();
  }

  void check_fits(index_t rows, index_t cols, index_t offset) const {
    // Written so no product can overflow: offset ≤ size, then rows·cols ≤ size − offset.
    const std::size_t size = size_;
    const bool fits =
        rows >= 0 && cols >= 0 && offset >= 0 && std::size_t(offset) <= size &&
        (cols == 0 || std::size_t(rows) <= (size - std::size_t(offset)) / std::size_t(cols));
    if (!fits)
      fail("buffer", "view", "a view inside " + std::to_string(size_) + " elements",
           std::to_string(rows) + "x" + std::to_string(cols) + " at offset " +
               std::to_string(offset));
  }

  typename System::template vector<T> storage_;
  std::size_t offset_ = 0;  // elements before the aligned first one
  std::size_t size_ = 0;    // elements in use, from data()
};

}  // namespace dafuse
