// SPDX-License-Identifier: Apache-2.0
// Tests for backend/host/sparse_batch.hpp: a listed batch names each feature it uses once, in the
// order of first use; listed or dealt, preparing a batch clears exactly the columns of the first
// layer's weight gradient that the previous batch used; a bad batch is refused with the entry
// named, and leaves nothing behind that changes the next batch.
#include <dafuse/backend/host/sparse_batch.hpp>
#include "../check.hpp"

#include <dafuse/core/error.hpp>
#include <dafuse/core/system.hpp>

#include <cstdint>
#include <set>
#include <type_traits>
#include <vector>

namespace backend_sparse_batch_test {

namespace {

namespace host = dafuse::backend::host;
using dafuse::index_t;

constexpr index_t width = 40, out = 3, rows = 4, capacity = 12;

//! A CSR batch of `rows` samples over `width` features.
struct csr {
  std::vector<std::int32_t> offsets, indices;
  std::vector<float> values;
  dafuse::sparse_matrix_view<const float> view() const {
    return {offsets.data(), indices.data(), values.data(), width, rows};
  }
};
csr batch(std::vector<std::int32_t> offsets, std::vector<std::int32_t> indices) {
  std::vector<float> values(indices.size(), 1.0f);
  return {std::move(offsets), std::move(indices), std::move(values)};
}

//! ∂L/∂W [out, width] with `value` in every column of `features` and 9 elsewhere: the 9s are
//! columns no batch has used, which preparing must not touch.
std::vector<float> gradient_with(const std::set<std::int32_t>& features, float value) {
  std::vector<float> dw(std::size_t(out * width), 9.0f);
  for (std::int32_t j : features)
    for (index_t r = 0; r < out; ++r) dw[std::size_t(j * out + r)] = value;
  return dw;
}

//! Checks that dw's columns in `cleared` are 0 and every other column is as `before` left it.
void check_cleared(const std::vector<float>& dw,
                   const std::vector<float>& before,
                   const std::set<std::int32_t>& cleared) {
  for (index_t j = 0; j < width; ++j)
    for (index_t r = 0; r < out; ++r) {
      const std::size_t i = std::size_t(j * out + r);
      CHECK(dw[i] == (cleared.count(std::int32_t(j)) ? 0.0f : before[i]));
    }
}

const csr first = batch({0, 2, 3, 5, 6}, {7, 3, 7, 30, 3, 12});  // uses 7, 3, 30, 12
const csr second = batch({0, 1, 1, 3, 4}, {5, 30, 39, 0});       // uses 5, 30, 39, 0
const std::set<std::int32_t> first_used{3, 7, 12, 30}, second_used{0, 5, 30, 39};

}  // namespace

TEST_CASE("a listed batch names each feature it uses once, in the order of first use") {
  host::sparse_batch_preparer<float, dafuse::system::omp> prep(width, out, rows, capacity, 1);
  CHECK_FALSE(prep.dealt());
  CHECK(prep.parts() == 1);
  CHECK(prep.block() == 0);
  std::vector<float> dw = gradient_with({}, 0.0f);
  prep.prepare(first.view(), dw.data());
  prep.with_batch([&](const auto& x) {
    if constexpr (std::is_same_v<std::decay_t<decltype(x)>,
                                 dafuse::sparse_matrix_view<const float>>) {
      CHECK(std::vector<std::int32_t>(x.used_rows, x.used_rows + x.used_count) ==
            std::vector<std::int32_t>{7, 3, 30, 12});
      CHECK(x.offsets == first.offsets.data());
    } else {
      FAIL("a preparer of one thread deals its batch");
    }
  });
}

TEST_CASE("preparing a batch clears the columns the previous batch used, and no others") {
  for (const int threads : {1, 2, 3}) {
    CAPTURE(threads);
    host::sparse_batch_preparer<float, dafuse::system::omp> prep(width, out, rows, capacity,
                                                                 threads);
    CHECK(prep.dealt() == (threads > 1));
    std::vector<float> dw = gradient_with({}, 0.0f);
    prep.prepare(first.view(), dw.data());
    check_cleared(dw, gradient_with({}, 0.0f), {});  // no previous batch: nothing cleared
    // The step writes the first batch's columns; the next batch clears exactly those.
    dw = gradient_with(first_used, 2.5f);
    const std::vector<float> written = dw;
    prep.prepare(second.view(), dw.data());
    check_cleared(dw, written, first_used);
    dw = gradient_with(second_used, 2.5f);
    const std::vector<float> written_again = dw;
    prep.prepare(first.view(), dw.data());
    check_cleared(dw, written_again, second_used);
  }
}

TEST_CASE("a feature index out of range is refused by name and leaves no feature marked") {
  for (const int threads : {1, 2}) {
    CAPTURE(threads);
    host::sparse_batch_preparer<float, dafuse::system::omp> prep(width, out, rows, capacity,
                                                                 threads);
    std::vector<float> dw = gradient_with({}, 0.0f);
    // Feature 3 is marked before entry 2 turns out bad.
    const csr bad = batch({0, 2, 3, 3, 3}, {3, 8, 40});
    CHECK_THROWS_WITH_AS(
        prep.prepare(bad.view(), dw.data()),
        "dafuse: train_step: sparse_batch().indices[2]: expected a feature in [0, 40), "
        "found 40",
        dafuse::error);
    const csr negative = batch({0, 1, 1, 1, 1}, {-1});
    CHECK_THROWS_WITH_AS(
        prep.prepare(negative.view(), dw.data()),
        "dafuse: train_step: sparse_batch().indices[0]: expected a feature in [0, 40), "
        "found -1",
        dafuse::error);
    // The next batch lists feature 3 again: nothing of the refused ones stayed marked.
    prep.prepare(first.view(), dw.data());
    if (threads == 1)
      prep.with_batch([&](const auto& x) {
        if constexpr (std::is_same_v<std::decay_t<decltype(x)>,
                                     dafuse::sparse_matrix_view<const float>>)
          CHECK(std::vector<std::int32_t>(x.used_rows, x.used_rows + x.used_count) ==
                std::vector<std::int32_t>{7, 3, 30, 12});
      });
  }
}

TEST_CASE("offsets that fall back or pass the capacity are refused by name") {
  host::sparse_batch_preparer<float, dafuse::system::omp> prep(width, out, rows, capacity, 1);
  std::vector<float> dw = gradient_with({}, 0.0f);
  const csr falling = batch({0, 2, 1, 3, 3}, {1, 2, 3});
  CHECK_THROWS_WITH_AS(
      prep.prepare(falling.view(), dw.data()),
      "dafuse: train_step: sparse_batch().offsets[2]: expected a non-decreasing offset "
      "<= 12, found 1",
      dafuse::error);
  const csr too_many = batch({0, 2, 3, 3, 13}, std::vector<std::int32_t>(13, 1));
  CHECK_THROWS_WITH_AS(
      prep.prepare(too_many.view(), dw.data()),
      "dafuse: train_step: sparse_batch().offsets[4]: expected a non-decreasing offset "
      "<= 12, found 13",
      dafuse::error);
}

}  // namespace backend_sparse_batch_test
