// SPDX-License-Identifier: Apache-2.0
// Tests for core/buffer.hpp: owning buffers on each host system and column-major views into them.
#include <dafuse/core/buffer.hpp>
#include "../check.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace core_buffer_test {

namespace {

using dafuse::buffer;
using dafuse::index_t;
using dafuse::matrix_view;

using dafuse::test::error_message;

}  // namespace

TEST_CASE_TEMPLATE("a buffer holds the number of elements it was made with and fills them",
                   System,
                   dafuse::system::omp,
                   dafuse::system::cpp) {
  buffer<float, System> empty;
  CHECK(empty.size() == 0);

  buffer<float, System> b(12);
  REQUIRE(b.size() == 12);
  REQUIRE(b.data() != nullptr);
  b.fill(2.5f);
  for (std::size_t i = 0; i < b.size(); ++i) CHECK(b.data()[i] == 2.5f);
  CHECK(reinterpret_cast<std::uintptr_t>(b.data()) % buffer<float, System>::alignment == 0);

  buffer<double, System> v(5, -1.25);
  REQUIRE(v.size() == 5);
  for (std::size_t i = 0; i < v.size(); ++i) CHECK(v.data()[i] == -1.25);
  v.data()[3] = 7;
  CHECK(reinterpret_cast<std::uintptr_t>(v.data()) % buffer<double, System>::alignment == 0);
  CHECK(v.data()[3] == 7.0);
  const buffer<double, System>& cv = v;
  CHECK(cv.data() == v.data());
}

TEST_CASE_TEMPLATE("a matrix view indexes its buffer in column-major order",
                   System,
                   dafuse::system::omp,
                   dafuse::system::cpp) {
  buffer<float, System> b(3 * 4);
  for (std::size_t i = 0; i < b.size(); ++i) b.data()[i] = float(i);
  const matrix_view<float> m = b.matrix(3, 4);
  CHECK(m.rows == 3);
  CHECK(m.cols == 4);
  CHECK(m.size() == 12);
  CHECK(m.data == b.data());
  for (index_t c = 0; c < 4; ++c)
    for (index_t r = 0; r < 3; ++r) {
      CAPTURE(r);
      CAPTURE(c);
      CHECK(m(r, c) == float(c * 3 + r));  // one sample per contiguous column
    }
  m(2, 1) = -1.0f;
  CHECK(b.data()[1 * 3 + 2] == -1.0f);

  // A view at an offset starts there.
  const matrix_view<float> tail = b.matrix(2, 3, 6);
  CHECK(tail.data == b.data() + 6);
  CHECK(tail(1, 2) == b.data()[6 + 2 * 2 + 1]);

  // The const buffer gives a const view of the same memory; a view converts to a const one.
  const buffer<float, System>& cb = b;
  const matrix_view<const float> cm = cb.matrix(4, 3);
  CHECK(cm.data == b.data());
  CHECK(cm(1, 2) == b.data()[2 * 4 + 1]);
  const matrix_view<const float> converted = m;
  CHECK(converted.data == m.data);
  CHECK(converted.rows == 3);
  CHECK(converted.cols == 4);
  CHECK(converted(2, 3) == m(2, 3));
}

TEST_CASE("middle_cols is the contiguous block of the chosen columns") {
  buffer<double> b(4 * 5);
  for (std::size_t i = 0; i < b.size(); ++i) b.data()[i] = double(i);
  const matrix_view<double> m = b.matrix(4, 5);
  const matrix_view<double> mid = m.middle_cols(1, 3);
  CHECK(mid.rows == 4);
  CHECK(mid.cols == 3);
  CHECK(mid.data == b.data() + 4);
  for (index_t c = 0; c < 3; ++c)
    for (index_t r = 0; r < 4; ++r) CHECK(mid(r, c) == m(r, c + 1));
  const matrix_view<double> none = m.middle_cols(5, 0);
  CHECK(none.size() == 0);
  CHECK(none.data == b.data() + 20);
}

TEST_CASE("a view that ends exactly at the end of the buffer is accepted") {
  buffer<float> b(10);
  CHECK(b.matrix(2, 5).size() == 10);
  CHECK(b.matrix(5, 1, 5).data == b.data() + 5);
  CHECK(b.matrix(0, 0, 10).size() == 0);
}

TEST_CASE("a view outside the buffer throws dafuse::error naming the buffer") {
  buffer<float> b(10);
  CHECK_THROWS_WITH_AS(b.matrix(3, 4), doctest::Contains("dafuse: buffer"), dafuse::error);
  CHECK_THROWS_WITH_AS(b.matrix(2, 5, 1), doctest::Contains("dafuse: buffer"), dafuse::error);
  CHECK_THROWS_WITH_AS(b.matrix(-1, 2), doctest::Contains("dafuse: buffer"), dafuse::error);
  CHECK_THROWS_WITH_AS(b.matrix(1, -2), doctest::Contains("dafuse: buffer"), dafuse::error);
  CHECK_THROWS_WITH_AS(b.matrix(1, 1, -1), doctest::Contains("dafuse: buffer"), dafuse::error);
  const buffer<float>& cb = b;
  CHECK_THROWS_WITH_AS(cb.matrix(11, 1), doctest::Contains("dafuse: buffer"), dafuse::error);

  // The message starts with the buffer and says what was asked for and what there is.
  const std::string m = error_message([&] { b.matrix(3, 4, 2); });
  CHECK(m.starts_with("dafuse: buffer"));
  CHECK(m.find("10 elements") != std::string::npos);
  CHECK(m.find("3x4 at offset 2") != std::string::npos);
}

TEST_CASE("a system::cpp buffer works like the OpenMP one") {
  buffer<int, dafuse::system::cpp> b(6, 3);
  b.fill(4);
  const auto m = b.matrix(2, 3);
  m(1, 2) = 9;
  CHECK(b.data()[5] == 9);
  CHECK(b.data()[0] == 4);
  CHECK(b.data()[4] == 4);
  CHECK_THROWS_WITH_AS(b.matrix(2, 4), doctest::Contains("dafuse: buffer"), dafuse::error);
}

TEST_CASE_TEMPLATE("every buffer, copied or moved, starts on a 64-byte boundary",
                   T,
                   float,
                   double,
                   std::uint8_t,
                   std::int32_t) {
  // Allocate odd sizes in between, so malloc hands out addresses of every 16-byte residue.
  std::vector<buffer<T>> kept;
  for (std::size_t n = 1; n < 40; ++n) {
    kept.emplace_back(n, T(n % 7));
    const buffer<T>& b = kept.back();
    CHECK(reinterpret_cast<std::uintptr_t>(b.data()) % 64 == 0);
    buffer<T> copy = b;
    CHECK(reinterpret_cast<std::uintptr_t>(copy.data()) % 64 == 0);
    REQUIRE(copy.size() == n);
    CHECK(std::equal(copy.data(), copy.data() + n, b.data()));
    const T* at = copy.data();
    buffer<T> moved = std::move(copy);
    CHECK(moved.data() == at);  // a move keeps the memory
    CHECK(moved.size() == n);
  }
}

}  // namespace core_buffer_test
