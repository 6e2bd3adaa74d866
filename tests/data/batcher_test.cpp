// SPDX-License-Identifier: Apache-2.0
// Tests for data/batcher.hpp: both loaders fill the same batches for a seed, source rows come
// first and target rows after, in the samplers' order, and bad inputs are refused.
#include <dafuse/data/batcher.hpp>
#include "../check.hpp"
#include "tagged_rows.hpp"

#include <dafuse/core/buffer.hpp>
#include <dafuse/core/rng.hpp>
#include <dafuse/data/dataset.hpp>
#include <dafuse/data/sampler.hpp>
#include <dafuse/policy/loader.hpp>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace data_batcher_test {

namespace {

using dafuse::buffer;
using dafuse::index_t;
using dafuse::matrix_view;
using dafuse::rng_stream;
using dafuse::data::batcher;
using dafuse::data::dataset;
using dafuse::data::domain;
using dafuse::data::epoch_sampler;
using dafuse::data::host_array;
using omp = dafuse::system::omp;

constexpr index_t width = 5;
constexpr index_t batch = 3;
constexpr std::uint64_t seed = 42;

dataset make_source(index_t rows = 7, index_t w = width, bool labelled = true) {
  return dafuse::test::tagged_source(rows, w, labelled);
}
dataset make_target(index_t rows = 5, index_t w = width) {
  return dafuse::test::tagged_target(rows, w);
}
using dafuse::test::elements;

template <class T>
bool column_is_row(matrix_view<T> x, index_t c, const dataset& d, index_t row) {
  for (index_t k = 0; k < d.width; ++k)
    if (x(k, c) != T(d.row(row)[k])) return false;
  return true;
}

}  // namespace

TEST_CASE_TEMPLATE("sync and resident loaders fill the same batches for the same seed",
                   T,
                   float,
                   double) {
  const dataset source = make_source(), target = make_target();
  batcher<dafuse::loader::sync, omp> sync(source, target, batch, seed, true);
  batcher<dafuse::loader::resident, omp> resident(source, target, batch, seed, true);
  buffer<T> xa(elements(width * 2 * batch)), xb(elements(width * 2 * batch));
  buffer<std::int32_t> ya(elements(batch)), yb(elements(batch));
  // 8 steps cross several epochs of both samplers (7 source rows, 5 target rows, 3 per step).
  for (int step = 0; step < 8; ++step) {
    CAPTURE(step);
    xa.fill(T(-100));
    xb.fill(T(100));
    sync.fill(xa.matrix(width, 2 * batch), std::span(ya.data(), ya.size()));
    resident.fill(xb.matrix(width, 2 * batch), std::span(yb.data(), yb.size()));
    for (std::size_t i = 0; i < xa.size(); ++i) REQUIRE(xa.data()[i] == xb.data()[i]);
    for (std::size_t i = 0; i < ya.size(); ++i) REQUIRE(ya.data()[i] == yb.data()[i]);
  }
}

TEST_CASE_TEMPLATE("a batch holds the sampled source rows then the sampled target rows",
                   Loader,
                   dafuse::loader::sync,
                   dafuse::loader::resident) {
  const dataset source = make_source(), target = make_target();
  batcher<Loader, omp> b(source, target, batch, seed, true);
  epoch_sampler source_order(source.rows, seed, rng_stream::source_sampler);
  epoch_sampler target_order(target.rows, seed, rng_stream::target_sampler);
  buffer<float> x(elements(width * 2 * batch));
  buffer<std::int32_t> y(elements(batch));
  for (int step = 0; step < 6; ++step) {
    CAPTURE(step);
    const matrix_view<float> m = x.matrix(width, 2 * batch);
    b.fill(m, std::span(y.data(), y.size()));
    for (index_t c = 0; c < batch; ++c) {
      CAPTURE(c);
      const index_t row = source_order.next();
      CHECK(column_is_row(m, c, source, row));
      CHECK(y.data()[c] == source.labels[std::size_t(row)]);
    }
    for (index_t c = batch; c < 2 * batch; ++c) {
      CAPTURE(c);
      CHECK(column_is_row(m, c, target, target_order.next()));
    }
  }
}

TEST_CASE_TEMPLATE("without target rows a batch fills only its B source columns",
                   Loader,
                   dafuse::loader::sync,
                   dafuse::loader::resident) {
  const dataset source = make_source(), target = make_target();
  batcher<Loader, omp> b(source, target, batch, seed, false);
  epoch_sampler source_order(source.rows, seed, rng_stream::source_sampler);
  // Room for 2B columns, of which the batch may only touch the first B.
  buffer<double> x(elements(width * 2 * batch), -7.0);
  buffer<std::int32_t> y(elements(batch));
  for (int step = 0; step < 4; ++step) {
    CAPTURE(step);
    b.fill(x.matrix(width, batch), std::span(y.data(), y.size()));
    const matrix_view<double> m = x.matrix(width, 2 * batch);
    for (index_t c = 0; c < batch; ++c) {
      const index_t row = source_order.next();
      CHECK(column_is_row(m, c, source, row));
      CHECK(y.data()[c] == source.labels[std::size_t(row)]);
    }
    for (index_t i = width * batch; i < width * 2 * batch; ++i) CHECK(x.data()[i] == -7.0);
  }
  // A 2B-column input is the wrong shape for a batch without target rows.
  CHECK_THROWS_WITH_AS(b.fill(x.matrix(width, 2 * batch), std::span(y.data(), y.size())),
                       doctest::Contains("batcher: step input"), dafuse::error);
}

TEST_CASE_TEMPLATE("without target rows the target's width does not matter",
                   Loader,
                   dafuse::loader::sync,
                   dafuse::loader::resident) {
  const dataset source = make_source(), target = make_target(4, width + 2);
  batcher<Loader, omp> b(source, target, batch, seed, false);
  buffer<float> x(elements(width * batch));
  buffer<std::int32_t> y(elements(batch));
  CHECK_NOTHROW(b.fill(x.matrix(width, batch), std::span(y.data(), y.size())));
}

TEST_CASE_TEMPLATE("a step input of the wrong shape is refused with both shapes in the message",
                   Loader,
                   dafuse::loader::sync,
                   dafuse::loader::resident) {
  const dataset source = make_source(), target = make_target();
  batcher<Loader, omp> b(source, target, batch, seed, true);
  buffer<float> x(elements((width + 1) * 2 * batch));
  buffer<std::int32_t> y(elements(batch + 1));
  const std::span<std::int32_t> labels(y.data(), std::size_t(batch));
  // Wrong height, wrong number of columns, wrong number of labels.
  CHECK_THROWS_WITH_AS(b.fill(x.matrix(width + 1, 2 * batch), labels),
                       doctest::Contains("batcher: step input: expected [5, 6] with 3 labels, "
                                         "found [6, 6] with 3 labels"),
                       dafuse::error);
  CHECK_THROWS_WITH_AS(b.fill(x.matrix(width, batch), labels),
                       doctest::Contains("found [5, 3] with 3 labels"), dafuse::error);
  CHECK_THROWS_WITH_AS(b.fill(x.matrix(width, 2 * batch), std::span(y.data(), y.size())),
                       doctest::Contains("found [5, 6] with 4 labels"), dafuse::error);
}

TEST_CASE_TEMPLATE("an unlabelled source is refused naming its origin",
                   Loader,
                   dafuse::loader::sync,
                   dafuse::loader::resident) {
  const dataset source = make_source(7, width, false), target = make_target();
  using loader_batcher = batcher<Loader, omp>;
  CHECK_THROWS_WITH_AS(loader_batcher(source, target, batch, seed, true),
                       doctest::Contains("source.npy: labels"), dafuse::error);
  CHECK_THROWS_WITH_AS(loader_batcher(source, target, batch, seed, false),
                       doctest::Contains("source.npy: labels"), dafuse::error);
}

TEST_CASE_TEMPLATE("a target whose width differs from the source's is refused naming both",
                   Loader,
                   dafuse::loader::sync,
                   dafuse::loader::resident) {
  const dataset source = make_source(), target = make_target(5, width - 1);
  using loader_batcher = batcher<Loader, omp>;
  CHECK_THROWS_WITH_AS(loader_batcher(source, target, batch, seed, true),
                       doctest::Contains("target.npy: feature width: expected 5 (the source's, "
                                         "source.npy), found 4"),
                       dafuse::error);
}

TEST_CASE("a source-only batcher accepts an empty target and a rejected fill consumes no batch") {
  dafuse::data::host_array<float> x{{6, 2}, std::vector<float>(12)};
  for (std::size_t i = 0; i < 12; ++i) x.values[i] = float(i);
  const auto source = dafuse::data::make_dataset("six rows", dafuse::data::domain::source,
                                                 std::move(x), {0, 1, 0, 1, 0, 1});
  const dafuse::data::dataset empty;
  dafuse::data::batcher<dafuse::loader::sync, dafuse::system::omp> a(source, empty, 2, 5, false);
  dafuse::data::batcher<dafuse::loader::sync, dafuse::system::omp> b(source, empty, 2, 5, false);
  dafuse::buffer<float> xa(4), xb(4), wrong(6);
  dafuse::buffer<std::int32_t> la(2), lb(2);
  CHECK_THROWS_AS(b.fill(wrong.matrix(2, 3), std::span<std::int32_t>(lb.data(), 2)), dafuse::error);
  a.fill(xa.matrix(2, 2), std::span<std::int32_t>(la.data(), 2));
  b.fill(xb.matrix(2, 2), std::span<std::int32_t>(lb.data(), 2));
  CHECK(std::equal(xa.data(), xa.data() + 4, xb.data()));
  CHECK_THROWS_WITH_AS((dafuse::data::batcher<dafuse::loader::sync, dafuse::system::omp>(
                           source, empty, 0, 5, false)),
                       doctest::Contains("batcher: batch: expected at least 1"), dafuse::error);
}

TEST_CASE_TEMPLATE("a loader started at batch k fills what an uninterrupted one fills from k on",
                   Loader,
                   dafuse::loader::sync,
                   dafuse::loader::resident) {
  const dataset source = make_source(), target = make_target();
  const std::uint64_t k = 6;  // crosses epochs of both samplers (7 and 5 rows, 3 per batch)
  batcher<Loader, omp> straight(source, target, batch, seed, true);
  batcher<Loader, omp> resumed(source, target, batch, seed, true, k);
  buffer<float> xa(elements(width * 2 * batch)), xb(elements(width * 2 * batch));
  buffer<std::int32_t> ya(elements(batch)), yb(elements(batch));
  const auto labels_a = std::span(ya.data(), ya.size());
  for (std::uint64_t i = 0; i < k; ++i) straight.fill(xa.matrix(width, 2 * batch), labels_a);
  for (int step = 0; step < 5; ++step) {
    straight.fill(xa.matrix(width, 2 * batch), labels_a);
    resumed.fill(xb.matrix(width, 2 * batch), std::span(yb.data(), yb.size()));
    for (std::size_t i = 0; i < xa.size(); ++i) REQUIRE(xa.data()[i] == xb.data()[i]);
    for (std::size_t i = 0; i < ya.size(); ++i) REQUIRE(ya.data()[i] == yb.data()[i]);
  }
}

}  // namespace data_batcher_test
