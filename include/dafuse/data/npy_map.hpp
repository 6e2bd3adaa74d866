// SPDX-License-Identifier: Apache-2.0
//! @file data/npy_map.hpp
//! @brief Read-only memory-mapped NPY files: the values in place, without copying them (POSIX).
#pragma once
#include <dafuse/config.hpp>
#include <dafuse/core/error.hpp>
#include <dafuse/core/file.hpp>
#include <dafuse/core/meta.hpp>
#include <dafuse/data/npy.hpp>

#include <bit>
#include <cerrno>
#include <cstddef>
#include <filesystem>
#include <span>
#include <string>
#include <utility>
#include <vector>

#if defined(__unix__) || defined(__APPLE__)
#include <sys/mman.h>
#define DAFUSE_HAS_MMAP 1
#else
#define DAFUSE_HAS_MMAP 0
#endif

namespace dafuse::data {

#if DAFUSE_HAS_MMAP

namespace detail {

//! Owns a read-only, private mapping of a whole file; unmaps it when destroyed. Empty files are
//! not mapped (mmap refuses length 0) and read as no bytes.
class file_mapping {
 public:
  file_mapping(const std::filesystem::path& path, const std::string& where) {
    // Opened like every reader opens (core/file.hpp): without blocking on a FIFO, and refusing
    // anything but a regular file, with the same messages as load_npy.
    const dafuse::detail::input_file f(path, where);
    size_ = static_cast<std::size_t>(f.size());
    if (size_ != 0) {
      void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, f.native_handle(), 0);
      if (p == MAP_FAILED) {
        const int err = errno;
        size_ = 0;
        fail(where, "cannot map " + std::to_string(f.size()) + " bytes: " + os_reason(err));
      }
      data_ = static_cast<const unsigned char*>(p);
    }
    // The mapping keeps its own reference to the file; `f` closes its descriptor here.
  }
  ~file_mapping() { unmap(); }
  file_mapping(file_mapping&& o) noexcept
      : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {}
  file_mapping& operator=(file_mapping&& o) noexcept {
    if (this != &o) {
      unmap();
      data_ = std::exchange(o.data_, nullptr);
      size_ = std::exchange(o.size_, 0);
    }
    return *this;
  }
  file_mapping(const file_mapping&) = delete;
  file_mapping& operator=(const file_mapping&) = delete;

  std::span<const unsigned char> bytes() const { return {data_, size_}; }

 private:
  void unmap() {
    if (data_ != nullptr) ::munmap(const_cast<unsigned char*>(data_), size_);
    data_ = nullptr;
    size_ = 0;
  }

  const unsigned char* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace detail

//! An NPY file mapped read-only into memory: `values()` reads the elements where they lie in the
//! file, so only the pages touched are read, and several processes share one copy in the page
//! cache. The header is checked like `load_npy<T>` checks it (dtype exactly `T`, C order, exactly
//! product(shape) elements), with the same messages; in addition the data must be in the host's
//! byte order and start on a multiple of alignof(T) (numpy pads headers to 64 bytes, older numpy
//! to 16).
//!
//! Mapping never converts: a float64 file maps as `mapped_npy<double>` only. To train on one (the
//! step reads float32), load it with `load_npy_as_float`, which converts as it reads and peaks
//! at the float32 array, half the file's size; a float32 copy made once (`x.astype(np.float32)`)
//! maps without any copy.
//!
//! The mapping is private and read-only; the file must not be truncated while mapped (reading a
//! page past the new end raises SIGBUS, as with any mmap). Move-only; a moved-from object is empty.
template <class T>
class mapped_npy {
  static_assert(npy_element<T>,
                "dafuse: mapped_npy<T> supports T = float, double and the 8- to 64-bit integers "
                "of <cstdint>");

 public:
  explicit mapped_npy(const std::filesystem::path& path)
      : where_(path.string()), map_(path, where_) {
    const std::span<const unsigned char> bytes = map_.bytes();
    const npy_header h = parse_npy_header(bytes, where_);
    constexpr dtype want = dtype_of_v<T>;
    detail::check_dtype(h, want, where_);
    if (h.byte_order != std::endian::native)
      fail(where_, "descr", "data in the host's byte order to map it",
           detail::dtype_text(h) + "; use load_npy, which swaps the bytes as it reads");
    const std::size_t count = detail::checked_count(h, bytes.size(), where_);
    if (h.data_offset % alignof(T) != 0)
      fail(where_, "header length",
           "data starting on a multiple of " + std::to_string(alignof(T)) +
               " bytes to map it (use load_npy for this file)",
           "data at byte " + std::to_string(h.data_offset));
    shape_ = h.shape;
    // The mapping's bytes are T objects laid out by the writer; the start is aligned (checked
    // above, and mmap returns page-aligned memory).
    if (count != 0) values_ = {reinterpret_cast<const T*>(bytes.data() + h.data_offset), count};
  }

  mapped_npy(mapped_npy&& o) noexcept
      : where_(std::move(o.where_)),
        map_(std::move(o.map_)),
        shape_(std::move(o.shape_)),
        values_(std::exchange(o.values_, {})) {
    o.shape_.clear();
  }
  mapped_npy& operator=(mapped_npy&& o) noexcept {
    if (this != &o) {
      where_ = std::move(o.where_);
      map_ = std::move(o.map_);
      shape_ = std::move(o.shape_);
      o.shape_.clear();
      values_ = std::exchange(o.values_, {});
    }
    return *this;
  }
  mapped_npy(const mapped_npy&) = delete;
  mapped_npy& operator=(const mapped_npy&) = delete;
  ~mapped_npy() = default;

  //! The file's path, as used in messages.
  const std::string& path() const { return where_; }
  //! Dimensions from the header; empty for a 0-d array (and for a moved-from object).
  const std::vector<std::size_t>& shape() const { return shape_; }
  //! product(shape) elements in C order, valid while this object lives.
  std::span<const T> values() const { return values_; }
  //! A copy of the values in memory, as `load_npy<T>` returns them.
  host_array<T> copy() const { return {shape_, std::vector<T>(values_.begin(), values_.end())}; }

 private:
  std::string where_;
  detail::file_mapping map_;
  std::vector<std::size_t> shape_;
  std::span<const T> values_;
};

#else

//! Memory mapping needs POSIX mmap; on this platform use load_npy.
template <class T>
class mapped_npy {
  static_assert(dependent_false<T>,
                "dafuse: mapped_npy needs POSIX mmap (a __unix__ or Apple platform); use "
                "load_npy<T> to read the file into memory instead");
};

#endif

}  // namespace dafuse::data
