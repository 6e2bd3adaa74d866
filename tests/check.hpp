// Helpers shared by the tests: tolerant comparisons and paths to test data.
#pragma once
#include <doctest/doctest.h>

#include <dafuse/core/error.hpp>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <system_error>

namespace dafuse::test {

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

}  // namespace dafuse::test
