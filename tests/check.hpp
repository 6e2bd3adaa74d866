// Helpers shared by the tests: tolerant comparisons and paths to test data.
#pragma once
#include <doctest/doctest.h>

#include <dafuse/core/error.hpp>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#if defined(_OPENMP)
#include <omp.h>
#endif

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <system_error>

namespace dafuse::test {

//! Sets OpenMP's thread count for the scope, then puts it back (a step splits its work among as
//! many threads as OpenMP has when it is built).
struct thread_count {
  int previous = 1;
  explicit thread_count(int threads) {
#if defined(_OPENMP)
    previous = omp_get_max_threads();
    omp_set_num_threads(threads);
#else
    (void)threads;
#endif
  }
  ~thread_count() {
#if defined(_OPENMP)
    omp_set_num_threads(previous);
#endif
  }
  thread_count(const thread_count&) = delete;
  thread_count& operator=(const thread_count&) = delete;
};

//! Sets an environment variable for the scope (unsets it for a null value), then restores it.
struct environment_variable {
  std::string name, previous;
  bool was_set = false;
  environment_variable(const char* variable, const char* value) : name(variable) {
    if (const char* v = std::getenv(variable)) previous = v, was_set = true;
    if (value)
      ::setenv(variable, value, 1);
    else
      ::unsetenv(variable);
  }
  ~environment_variable() {
    if (was_set)
      ::setenv(name.c_str(), previous.c_str(), 1);
    else
      ::unsetenv(name.c_str());
  }
  environment_variable(const environment_variable&) = delete;
  environment_variable& operator=(const environment_variable&) = delete;
};

//! The message of the dafuse::error `f` throws, or "" when it throws none.
template <class F>
std::string error_message(F&& f) {
  try {
    f();
  } catch (const dafuse::error& e) {
    return e.what();
  }
  return "";
}

//! Whether calling f throws dafuse::error with a message containing every one of `parts`.
template <class F>
bool throws_naming(F f, std::initializer_list<std::string_view> parts) {
  const std::string m = error_message(f);
  if (m.empty()) return false;
  for (const std::string_view part : parts) {
    if (m.find(part) == std::string::npos) {
      MESSAGE("message lacks \"" << std::string(part) << "\": " << m);
      return false;
    }
  }
  return true;
}

//! Largest |a_i − b_i| divided by the scale of b (its largest magnitude, at least `floor`):
//! relative error in the max norm, meaningful for vectors with entries near zero.
template <class A, class B>
double max_relative_error(std::span<A> a, std::span<B> b, double floor = 1e-12) {
  REQUIRE(a.size() == b.size());
  double scale = floor, worst = 0;
  for (std::size_t i = 0; i < b.size(); ++i) scale = std::max(scale, std::abs(double(b[i])));
  for (std::size_t i = 0; i < a.size(); ++i)
    worst = std::max(worst, std::abs(double(a[i]) - double(b[i])));
  return worst / scale;
}

//! tests/ in the source tree.
inline std::filesystem::path source_dir() {
  return std::filesystem::path(DAFUSE_SOURCE_DIR);
}
//! ../shared/data next to the checkout (may not exist: tests that need it skip).
inline std::filesystem::path shared_data_dir() {
  return std::filesystem::path(DAFUSE_SHARED_DATA_DIR);
}

//! A directory of its own for one test case (named after the test and the process, so parallel
//! test processes never share one), removed with everything in it afterwards.
class temp_dir {
 public:
  explicit temp_dir(std::string_view name)
      : dir_(std::filesystem::temp_directory_path() /
             ("dafuse_" + std::string(name) + "_" + std::to_string(::getpid()))) {
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  ~temp_dir() {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
  std::filesystem::path operator/(std::string_view name) const { return dir_ / name; }
  const std::filesystem::path& path() const { return dir_; }

 private:
  std::filesystem::path dir_;
};

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define DAFUSE_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define DAFUSE_TEST_SANITIZED 1
#endif
#endif
#if !defined(DAFUSE_TEST_SANITIZED)
#define DAFUSE_TEST_SANITIZED 0
#endif

//! Measures how far this process's resident memory rises above where it was when constructed:
//! the kernel's peak (VmHWM) is reset through /proc/self/clear_refs, so a reader's peak use is
//! seen even after it has freed its memory. `usable()` is false where Linux does not allow it.
//! Sanitizers' allocators keep shadow memory and quarantines: tests skip their bounds there.
class peak_memory {
 public:
  peak_memory() {
    std::ofstream clear("/proc/self/clear_refs");
    clear << "5";
    clear.close();
    usable_ = !DAFUSE_TEST_SANITIZED && clear.good() && status_kib("VmRSS:") > 0;
    start_ = status_kib("VmRSS:");
  }
  bool usable() const { return usable_; }
  //! Bytes the peak rose above the start.
  double growth_bytes() const { return 1024.0 * double(status_kib("VmHWM:") - start_); }

 private:
  static long status_kib(std::string_view key) {
    std::ifstream in("/proc/self/status");
    std::string line;
    while (std::getline(in, line))
      if (line.compare(0, key.size(), key) == 0) return std::atol(line.c_str() + key.size());
    return -1;
  }
  bool usable_ = false;
  long start_ = 0;
};

//! Runs `f` on a thread of its own and waits at most `seconds` for it. A reader that blocks on
//! the FIFO at `fifo` (opened for reading with no writer) is released by opening the FIFO for
//! writing, so a failing test ends instead of hanging; returns whether `f` finished in time.
template <class F>
bool finishes_within(double seconds, const std::filesystem::path& fifo, F f) {
  std::future<void> done = std::async(std::launch::async, f);
  if (done.wait_for(std::chrono::duration<double>(seconds)) == std::future_status::ready) {
    done.get();
    return true;
  }
  const int fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);  // unblocks a reader's open()
  if (fd >= 0) ::close(fd);
  done.wait();
  return false;
}

//! Creates a FIFO (named pipe) at `path` with no writer.
inline void make_fifo(const std::filesystem::path& path) {
  REQUIRE(::mkfifo(path.c_str(), 0600) == 0);
}

//! `count` zeroed values of T that end exactly where a page no access is allowed to begins, so a
//! read or write one past the end faults. AddressSanitizer does not check AVX-512's masked loads
//! and stores, and the heap after a std::vector is readable: this is how a test sees a kernel's
//! tail lanes stay inside the buffer.
template <class T>
class guarded_array {
 public:
  explicit guarded_array(std::size_t count) : count_(count) {
    const std::size_t page = std::size_t(::sysconf(_SC_PAGESIZE));
    const std::size_t bytes = count * sizeof(T), pages = (bytes + page - 1) / page;
    length_ = (pages + 1) * page;
    void* base =
        ::mmap(nullptr, length_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(base != MAP_FAILED);
    base_ = static_cast<std::byte*>(base);
    REQUIRE(::mprotect(base_ + pages * page, page, PROT_NONE) == 0);
    data_ = reinterpret_cast<T*>(base_ + pages * page - bytes);
  }
  ~guarded_array() { ::munmap(base_, length_); }
  guarded_array(const guarded_array&) = delete;
  guarded_array& operator=(const guarded_array&) = delete;

  T* data() { return data_; }
  const T* data() const { return data_; }
  std::size_t size() const { return count_; }
  T& operator[](std::size_t i) { return data_[i]; }
  const T& operator[](std::size_t i) const { return data_[i]; }
  T* begin() { return data_; }
  T* end() { return data_ + count_; }
  const T* begin() const { return data_; }
  const T* end() const { return data_ + count_; }
  std::span<const T> span() const { return {data_, count_}; }

 private:
  std::size_t count_ = 0, length_ = 0;
  std::byte* base_ = nullptr;
  T* data_ = nullptr;
};

}  // namespace dafuse::test
