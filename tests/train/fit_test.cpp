// fit: determinism, accuracy reporting, and clear errors for data that does not fit the network.
#include <dafuse/train/fit.hpp>

#include "../check.hpp"

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

namespace df = dafuse;

namespace {
using net = df::nn::dann_net<df::nn::mlp<3, 16, df::nn::tanh>,
                             df::nn::linear<16, 2>,
                             df::nn::mlp<16, 8, 1, df::nn::relu>>;
template <class Head, class Loader = df::loader::resident>
using step_t =
    df::train_step<net, Loader, df::precision::fp32, df::clip::global_norm, Head, df::optim::sgd>;
using dann_step = step_t<df::head::dann<df::schedule::ganin>>;

// Two Gaussian blobs, class = sign of the first coordinate; the target is shifted by `shift`.
df::data::dataset blobs(df::data::domain side,
                        float shift,
                        df::index_t rows,
                        df::index_t width = 3) {
  df::counter_rng rng(9, df::rng_stream::synthetic_data, std::uint32_t(side));
  df::data::host_array<float> x{{std::size_t(rows), std::size_t(width)},
                                std::vector<float>(std::size_t(rows * width))};
  std::vector<std::int32_t> y(static_cast<std::size_t>(rows));
  for (df::index_t i = 0; i < rows; ++i) {
    y[std::size_t(i)] = std::int32_t(i % 2);
    for (df::index_t k = 0; k < width; ++k)
      x.values[std::size_t(i * width + k)] =
          0.5f * rng.normal<float>() + (k == 0 ? (i % 2 ? 1.5f : -1.5f) : 0.f) + shift;
  }
  return df::data::make_dataset(side == df::data::domain::source ? "blobs source" : "blobs target",
                                side, std::move(x), std::move(y));
}

const df::fit_args args{.steps = 150, .batch = 16, .lr = 0.05f, .momentum = 0.9f, .seed = 21};
}  // namespace

TEST_CASE("two fits with one seed give bitwise identical weights") {
  const auto s = blobs(df::data::domain::source, 0, 120),
             t = blobs(df::data::domain::target, 0.3f, 90);
  const df::fit_result a = df::fit<dann_step>(s, t, args);
  const df::fit_result b = df::fit<dann_step>(s, t, args);
  REQUIRE(a.parameters.size() == std::size_t(net::param_count));
  CHECK(a.parameters == b.parameters);
  CHECK(a.target_accuracy == b.target_accuracy);
  df::fit_args other = args;
  other.seed = 22;
  CHECK(df::fit<dann_step>(s, t, other).parameters != a.parameters);
}

TEST_CASE("fit learns a separable problem and reports accuracy, steps and time") {
  const auto s = blobs(df::data::domain::source, 0, 120),
             t = blobs(df::data::domain::target, 0.2f, 90);
  const df::fit_result r = df::fit<dann_step>(s, t, args);
  CHECK(r.steps == 150);
  CHECK(r.seconds > 0);
  CHECK(r.source_accuracy > 0.95);
  CHECK(r.target_accuracy > 0.9);
  CHECK(std::isfinite(r.last.label_loss));
  CHECK(r.last.domain_loss > 0);
}

TEST_CASE("an unlabelled target trains and reports NaN target accuracy") {
  const auto s = blobs(df::data::domain::source, 0, 60);
  auto t = blobs(df::data::domain::target, 0.2f, 40);
  t.labels.clear();
  const df::fit_result r = df::fit<dann_step>(s, t, args);
  CHECK(std::isnan(r.target_accuracy));
}

TEST_CASE("fit rejects data that does not match the network, naming the file and field") {
  const auto s = blobs(df::data::domain::source, 0, 60);
  const auto wide = blobs(df::data::domain::target, 0, 40, 4);
  CHECK_THROWS_WITH_AS(df::fit<dann_step>(s, wide, args),
                       doctest::Contains("blobs target: feature width: expected 3"), df::error);
  auto bad_labels = blobs(df::data::domain::source, 0, 60);
  bad_labels.labels[5] = 7;
  CHECK_THROWS_WITH_AS(df::fit<dann_step>(bad_labels, s, args),
                       doctest::Contains("blobs source: labels[5]: expected a class in [0, 2)"),
                       df::error);
  auto unlabelled = blobs(df::data::domain::source, 0, 60);
  unlabelled.labels.clear();
  CHECK_THROWS_WITH_AS(df::fit<dann_step>(unlabelled, s, args),
                       doctest::Contains("blobs source: labels"), df::error);
}

TEST_CASE("loader::sync and loader::resident fits agree bitwise") {
  const auto s = blobs(df::data::domain::source, 0, 50),
             t = blobs(df::data::domain::target, 0.2f, 30);
  const auto a = df::fit<step_t<df::head::dann<>, df::loader::sync>>(s, t, args);
  const auto b = df::fit<step_t<df::head::dann<>, df::loader::resident>>(s, t, args);
  CHECK(a.parameters == b.parameters);
}

TEST_CASE_TEMPLATE("loader::prefetch fits agree bitwise with loader::sync, whatever the workers",
                   Loader,
                   df::loader::prefetch<1, 2>,
                   df::loader::prefetch<2, 4>,
                   df::loader::prefetch<4, 5>) {
  const auto s = blobs(df::data::domain::source, 0, 50),
             t = blobs(df::data::domain::target, 0.2f, 30);
  const auto a = df::fit<step_t<df::head::dann<>, df::loader::sync>>(s, t, args);
  const auto b = df::fit<step_t<df::head::dann<>, Loader>>(s, t, args);
  CHECK(a.parameters == b.parameters);
  const auto c = df::fit<step_t<df::head::source_only<>, df::loader::sync>>(s, t, args);
  const auto d = df::fit<step_t<df::head::source_only<>, Loader>>(s, t, args);
  CHECK(c.parameters == d.parameters);
}

TEST_CASE_TEMPLATE("fit reports the time spent waiting for data, within the loop's time",
                   Loader,
                   df::loader::sync,
                   df::loader::resident,
                   df::loader::prefetch<>) {
  const auto s = blobs(df::data::domain::source, 0, 50),
             t = blobs(df::data::domain::target, 0.2f, 30);
  const df::fit_result r = df::fit<step_t<df::head::dann<>, Loader>>(s, t, args);
  CHECK(r.data_wait_seconds >= 0);
  CHECK(r.data_wait_seconds <= r.seconds);
  // sync and resident wait for the whole of every fill, which always takes some time.
  if (!std::is_same_v<Loader, df::loader::prefetch<>>) CHECK(r.data_wait_seconds > 0);
}
