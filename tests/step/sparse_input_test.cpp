// SPDX-License-Identifier: Apache-2.0
// A step whose feature extractor reads sparse input (nn::sparse_input) against the same step on
// the same data made dense: same losses and gradients (in double, to rounding), the same weights
// over many steps with changing batches (so a stale weight-gradient column would show), the same
// predictions; bad batches are errors; fit on CSR data sets trains. On several threads the batch
// is dealt among them by feature: the same gradients as on one, and a bad batch changes nothing.
// A step whose batch holds room for its data's densest batch (fit_args::sparse_nonzeros) holds
// less and trains the same bits; too little room is refused, naming the field.
#include <dafuse/head/dann.hpp>
#include <dafuse/head/source_only.hpp>
#include <dafuse/step/train_step.hpp>

#include <dafuse/data/csr.hpp>
#include <dafuse/data/sparse_batcher.hpp>
#include <dafuse/train/fit.hpp>

#include "../check.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace step_sparse_input_test {

namespace df = dafuse;

namespace {
using features = df::nn::mlp<30, 16, 8, df::nn::relu>;
using classifier = df::nn::linear<8, 3>;
using discriminator = df::nn::mlp<8, 6, 1, df::nn::relu>;
using sparse_net = df::nn::dann_net<df::nn::sparse_input<features>, classifier, discriminator>;
using dense_net = df::nn::dann_net<features, classifier, discriminator>;
template <class Net, class Precision = df::precision::fp32, class Head = df::head::dann<>>
using step_t =
    df::train_step<Net, df::loader::sync, Precision, df::clip::global_norm, Head, df::optim::sgd>;

static_assert(sparse_net::sparse_input && !dense_net::sparse_input);
static_assert(sparse_net::param_count == dense_net::param_count);

// A batch with ~80 % zeros, written into both steps: dense columns and CSR rows.
template <class Sparse, class Dense>
void fill_both(Sparse& sparse, Dense& dense, std::uint32_t draw) {
  df::counter_rng rng(41, df::rng_stream::user, draw);
  auto x = dense.input();
  auto slots = sparse.sparse_batch();
  std::size_t at = 0;
  slots.offsets[0] = 0;
  for (df::index_t c = 0; c < x.cols; ++c) {
    for (df::index_t j = 0; j < x.rows; ++j) {
      const bool non_zero = rng.below(5) == 0;
      const auto v = non_zero ? std::round(4 * rng.uniform<double>() + 1) : 0.0;
      x(j, c) = typename Dense::value_type(v);
      if (non_zero) {
        slots.indices[at] = std::int32_t(j);
        slots.values[at] = typename Sparse::value_type(v);
        ++at;
      }
    }
    slots.offsets[std::size_t(c) + 1] = std::int32_t(at);
  }
  for (std::size_t i = 0; i < dense.source_labels().size(); ++i)
    dense.source_labels()[i] = sparse.source_labels()[i] = std::int32_t(rng.below(3));
}

const df::fit_args args{.steps = 50,
                        .batch = 6,
                        .lr = 0.05f,
                        .momentum = 0.9f,
                        .max_grad_norm = 5.0f,
                        .lambda_max = 0.7f,
                        .seed = 9};
}  // namespace

TEST_CASE("a sparse first layer gives the dense step's losses and gradients (double)") {
  step_t<sparse_net, df::precision::fp64> sparse(args);
  step_t<dense_net, df::precision::fp64> dense(args);
  REQUIRE(std::equal(sparse.parameters().begin(), sparse.parameters().end(),
                     dense.parameters().begin()));
  for (std::uint32_t draw = 0; draw < 3; ++draw) {
    CAPTURE(draw);
    fill_both(sparse, dense, draw);
    const df::step_report s = sparse.compute_gradients(0.7), d = dense.compute_gradients(0.7);
    CHECK(s.label_loss == doctest::Approx(d.label_loss).epsilon(1e-12));
    CHECK(s.domain_loss == doctest::Approx(d.domain_loss).epsilon(1e-12));
    CHECK(s.grad_norm == doctest::Approx(d.grad_norm).epsilon(1e-12));
    CHECK(df::test::max_relative_error(sparse.gradients(), dense.gradients()) < 1e-12);
  }
}

TEST_CASE("sparse and dense steps train the same weights over changing batches") {
  step_t<sparse_net> sparse(args);
  step_t<dense_net> dense(args);
  for (std::uint32_t t = 0; t < 40; ++t) {
    fill_both(sparse, dense, t);
    const df::step_report s = sparse.run(), d = dense.run();
    REQUIRE(s.label_loss == doctest::Approx(d.label_loss).epsilon(1e-4));
  }
  CHECK(df::test::max_relative_error(std::span<const float>(sparse.parameters()),
                                     std::span<const float>(dense.parameters())) < 1e-4);
}

TEST_CASE("a sparse bf16 step matches the dense bf16 step") {
  step_t<sparse_net, df::precision::bf16> sparse(args);
  step_t<dense_net, df::precision::bf16> dense(args);
  for (std::uint32_t t = 0; t < 10; ++t) {
    fill_both(sparse, dense, t);
    sparse.run();
    dense.run();
  }
  CHECK(df::test::max_relative_error(std::span<const float>(sparse.parameters()),
                                     std::span<const float>(dense.parameters())) < 1e-3);
}

TEST_CASE("a source-only sparse step matches the dense one") {
  using head = df::head::source_only<>;
  step_t<sparse_net, df::precision::fp64, head> sparse(args);
  step_t<dense_net, df::precision::fp64, head> dense(args);
  fill_both(sparse, dense, 4);
  sparse.compute_gradients(0);
  dense.compute_gradients(0);
  CHECK(df::test::max_relative_error(sparse.gradients(), dense.gradients()) < 1e-12);
}

TEST_CASE("a malformed sparse batch is an error that names the slot") {
  step_t<sparse_net> sparse(args);
  step_t<dense_net> dense(args);
  fill_both(sparse, dense, 0);
  auto slots = sparse.sparse_batch();
  const std::int32_t saved = slots.indices[3];
  slots.indices[3] = 30;
  CHECK_THROWS_WITH_AS(
      sparse.run(), doctest::Contains("sparse_batch().indices[3]: expected a feature in [0, 30)"),
      df::error);
  slots.indices[3] = saved;
  slots.offsets[2] = slots.offsets[1] - 1;
  CHECK_THROWS_WITH_AS(sparse.run(), doctest::Contains("sparse_batch().offsets[2]"), df::error);
  fill_both(sparse, dense, 0);
  CHECK_NOTHROW(sparse.run());  // usable again after the errors
}

namespace {
// Two separable classes of sparse rows: class k puts counts on features [15k, 15k + 15), and
// `extra` more counts at random on row i when i % 7 == 0 (rows of differing lengths).
std::pair<df::data::sparse_dataset, df::data::dataset> toy_sets(df::data::domain side,
                                                                std::uint32_t stream,
                                                                int extra = 0) {
  df::counter_rng rng(5, df::rng_stream::synthetic_data, stream);
  std::vector<float> x(120 * 30, 0.0f);
  std::vector<std::int32_t> y(120);
  for (std::size_t i = 0; i < 120; ++i) {
    y[i] = std::int32_t(i % 2);
    for (int k = 0; k < 4; ++k) x[i * 30 + 15 * std::size_t(y[i]) + rng.below(15)] += 1.0f;
    x[i * 30 + rng.below(30)] += 1.0f;  // noise
    if (i % 7 == 0)
      for (int k = 0; k < extra; ++k) x[i * 30 + rng.below(30)] += 1.0f;
  }
  df::data::sparse_dataset s =
      df::data::make_sparse_dataset("toy", side, df::data::to_csr(x.data(), 120, 30), y);
  df::data::dataset d =
      df::data::make_dataset("toy", side, df::data::host_array<float>{{120, 30}, x}, y);
  return {s, d};
}
}  // namespace

TEST_CASE("fit on CSR data sets trains and predicts as the dense step does") {
  const auto make = [](df::data::domain side, std::uint32_t stream) {
    return toy_sets(side, stream);
  };
  const auto [sparse_source, dense_source] = make(df::data::domain::source, 1);
  const auto [sparse_target, dense_target] = make(df::data::domain::target, 2);
  df::fit_args a = args;
  a.steps = 200;
  const df::fit_result s = df::fit<step_t<sparse_net>>(sparse_source, sparse_target, a);
  const df::fit_result d = df::fit<step_t<dense_net>>(dense_source, dense_target, a);
  CHECK(s.target_accuracy > 0.9);
  CHECK(s.target_accuracy == doctest::Approx(d.target_accuracy).epsilon(0.02));
  CHECK(df::test::max_relative_error(std::span<const double>(s.parameters),
                                     std::span<const double>(d.parameters)) < 1e-3);
}

// ---- On several threads the batch is dealt among them by feature ------------------------------

namespace {
//! f() with OpenMP set to `threads` threads (a step deals its sparse batch among as many parts as
//! it was built with).
template <class F>
auto with_threads(int threads, F&& f) {
  const df::test::thread_count scope(threads);
  return f();
}
}  // namespace

TEST_CASE("a sparse step dealt among threads computes what the one-thread step does") {
  // The first layer's 30 features in 16-column blocks: features 0-15 are one part's, 16-29 the
  // next's; with 3 threads the third part is empty.
  using step64 = step_t<sparse_net, df::precision::fp64>;
  using step32 = step_t<sparse_net>;
  using step_bf16 = step_t<sparse_net, df::precision::bf16>;
  step_t<dense_net, df::precision::fp64> dense(args);
  const auto gradients_on = [&](int threads) {
    return with_threads(threads, [&] {
      step64 s(args);
      std::vector<std::vector<double>> g;
      for (std::uint32_t draw = 0; draw < 3; ++draw) {
        fill_both(s, dense, draw);
        s.compute_gradients(0.7);
        g.emplace_back(s.gradients().begin(), s.gradients().end());
      }
      return g;
    });
  };
  const auto trained = [&](auto step_type, int threads) {
    return with_threads(threads, [&] {
      decltype(step_type) s(args);
      for (std::uint32_t t = 0; t < 30; ++t) {
        fill_both(s, dense, t);
        s.run();
      }
      return std::vector<float>(s.parameters().begin(), s.parameters().end());
    });
  };
  // Built on several threads, the step holds room for the dealt parts: it takes the dealt path.
  const auto bytes_on = [](int threads) {
    return with_threads(threads, [] { return step64(args).memory_bytes(); });
  };
  CHECK(bytes_on(2) > bytes_on(1));
  const auto one_gradients = gradients_on(1);
  const auto one32 = trained(step32(args), 1), one_bf16 = trained(step_bf16(args), 1);
  for (int threads : {2, 3}) {
    CAPTURE(threads);
    const auto dealt = gradients_on(threads);
    for (std::size_t draw = 0; draw < dealt.size(); ++draw) {
      CAPTURE(draw);
      // The features' columns the batch does not use stay exact zeros from batch to batch.
      CHECK(df::test::max_relative_error(std::span<const double>(dealt[draw]),
                                         std::span<const double>(one_gradients[draw])) < 1e-12);
      for (std::size_t i = 0; i < dealt[draw].size(); ++i)
        if (one_gradients[draw][i] == 0.0) CHECK(dealt[draw][i] == 0.0);
    }
    CHECK(df::test::max_relative_error(std::span<const float>(trained(step32(args), threads)),
                                       std::span<const float>(one32)) < 1e-4);
    CHECK(df::test::max_relative_error(std::span<const float>(trained(step_bf16(args), threads)),
                                       std::span<const float>(one_bf16)) < 1e-3);
  }
}

TEST_CASE("a dealt sparse step whose jobs run on its caller (a busy machine) gives the same bits") {
  // The pacer may run every job on the calling thread: each part is still dealt and finished as
  // its own, so the bits are those of the held team (backend/host/team.hpp).
  step_t<dense_net> dense(args);
  const auto trained = [&](const char* pacing) {
    const df::test::environment_variable env("DAFUSE_TEAM_PACING", pacing);
    return with_threads(2, [&] {
      step_t<sparse_net> s(args);
      for (std::uint32_t t = 0; t < 20; ++t) {
        fill_both(s, dense, t);
        s.run();
      }
      return std::vector<float>(s.parameters().begin(), s.parameters().end());
    });
  };
  const std::vector<float> held = trained("parallel");
  CHECK(trained("serial") == held);
}

TEST_CASE("a malformed batch leaves a sparse step as it was, on one thread or dealt among two") {
  step_t<dense_net> dense(args);
  for (int threads : {1, 2})
    with_threads(threads, [&] {
      CAPTURE(threads);
      step_t<sparse_net> failed(args), clean(args);
      fill_both(clean, dense, 0);
      clean.run();
      fill_both(failed, dense, 0);
      failed.run();
      // A bad feature index, found after the checks of the offsets.
      fill_both(failed, dense, 1);
      failed.sparse_batch().indices[5] = -1;
      CHECK_THROWS_WITH_AS(failed.run(),
                           doctest::Contains("sparse_batch().indices[5]: expected a feature in [0, "
                                             "30), found -1"),
                           df::error);
      for (std::uint32_t t = 1; t < 5; ++t) {
        fill_both(failed, dense, t);
        fill_both(clean, dense, t);
        failed.run();
        clean.run();
      }
      CHECK(std::equal(failed.parameters().begin(), failed.parameters().end(),
                       clean.parameters().begin()));
      CHECK(std::equal(failed.gradients().begin(), failed.gradients().end(),
                       clean.gradients().begin()));
      return 0;
    });
}

// ---- Room for the data's densest batch (fit_args::sparse_nonzeros) -----------------------------

TEST_CASE(
    "densest_batch_nonzeros sums each set's longest rows, as often as a batch can draw them") {
  // Row lengths: source 3, 1, 4, 1, 5; target 2, 7.
  const auto set = [](df::data::domain side, const std::vector<int>& lengths) {
    std::vector<float> x(lengths.size() * 10, 0.0f);
    for (std::size_t i = 0; i < lengths.size(); ++i)
      for (int k = 0; k < lengths[i]; ++k) x[i * 10 + std::size_t(k)] = 1.0f;
    return df::data::make_sparse_dataset(
        "lengths", side, df::data::to_csr(x.data(), df::index_t(lengths.size()), 10),
        std::vector<std::int32_t>(lengths.size(), 0));
  };
  const auto source = set(df::data::domain::source, {3, 1, 4, 1, 5});
  const auto target = set(df::data::domain::target, {2, 7});
  // Two draws can straddle two epochs and draw the same row twice.
  CHECK(df::data::densest_batch_nonzeros(source, target, 2) == (5 + 5) + (7 + 7));
  CHECK(df::data::densest_batch_nonzeros(source, target, 2, false) == 5 + 5);
  CHECK(df::data::densest_batch_nonzeros(source, target, 1) == 5 + 7);
  // Ten draws touch up to 3 epochs of the 5 source rows and 6 of the 2 target rows.
  CHECK(df::data::densest_batch_nonzeros(source, target, 10) ==
        (3 * 5 + 3 * 4 + 3 * 3 + 1) + (6 * 7 + 4 * 2));
  // A bound: the batches the sampler draws never hold more.
  for (df::index_t batch : {1, 2, 3, 4, 10}) {
    CAPTURE(batch);
    const df::index_t bound = df::data::densest_batch_nonzeros(source, target, batch);
    df::data::sparse_batcher b(source, target, batch, 7, true);
    std::vector<std::int32_t> offsets(static_cast<std::size_t>(2 * batch + 1));
    std::vector<std::int32_t> indices(static_cast<std::size_t>(bound));
    std::vector<float> values(static_cast<std::size_t>(bound));
    std::vector<std::int32_t> labels(static_cast<std::size_t>(batch));
    const df::sparse_batch_slots<float> slots{offsets, indices, values};
    for (int t = 0; t < 50; ++t) CHECK_NOTHROW(b.fill(slots, labels));
  }
}

TEST_CASE(
    "a sparse step with room for its data's densest batch holds less and trains the same bits") {
  const auto source = toy_sets(df::data::domain::source, 1, 6).first;
  const auto target = toy_sets(df::data::domain::target, 2, 6).first;
  const df::index_t densest = df::data::densest_batch_nonzeros(source, target, args.batch);
  REQUIRE(densest < 30 * 2 * args.batch);
  df::fit_args sized_args = args;
  sized_args.sparse_nonzeros = densest;
  for (int threads : {1, 2})
    with_threads(threads, [&] {
      CAPTURE(threads);
      step_t<sparse_net> roomy(args), sized(sized_args);
      CHECK(roomy.sparse_batch().values.size() == std::size_t(30 * 2 * args.batch));
      CHECK(sized.sparse_batch().values.size() == std::size_t(densest));
      // The batch's indices and values, and on two threads the dealt parts' copies of them.
      const std::size_t saved = std::size_t(30 * 2 * args.batch - densest) * 8;
      CHECK(roomy.memory_bytes() - sized.memory_bytes() >= saved * std::size_t(threads));
      df::data::sparse_batcher a(source, target, args.batch, args.seed, true);
      df::data::sparse_batcher b(source, target, args.batch, args.seed, true);
      for (int t = 0; t < 30; ++t) {
        a.fill(roomy.sparse_batch(), roomy.source_labels());
        b.fill(sized.sparse_batch(), sized.source_labels());
        roomy.run();
        sized.run();
      }
      CHECK(std::equal(roomy.parameters().begin(), roomy.parameters().end(),
                       sized.parameters().begin()));
      return 0;
    });
}

TEST_CASE("too little room for a sparse batch is refused, naming fit_args.sparse_nonzeros") {
  const auto source = toy_sets(df::data::domain::source, 1, 6).first;
  const auto target = toy_sets(df::data::domain::target, 2, 6).first;
  const df::index_t densest = df::data::densest_batch_nonzeros(source, target, args.batch);
  df::fit_args small = args;
  small.sparse_nonzeros = densest - 1;
  step_t<sparse_net> s(small);
  // fit checks the room against the data before the first step
  const std::string expected =
      "fit: fit_args.sparse_nonzeros: expected room for the densest batch these data can draw, " +
      std::to_string(densest) + " non-zeros";
  CHECK_THROWS_WITH_AS(df::fit(s, source, target), doctest::Contains(expected.c_str()), df::error);
  // the batcher, at a batch that does not fit
  small.sparse_nonzeros = 3;
  step_t<sparse_net> tiny(small);
  df::data::sparse_batcher b(source, target, args.batch, args.seed, true);
  CHECK_THROWS_WITH_AS(b.fill(tiny.sparse_batch(), tiny.source_labels()),
                       doctest::Contains("found 3 (fit_args::sparse_nonzeros"), df::error);
  df::fit_args negative = args;
  negative.sparse_nonzeros = -1;
  CHECK_THROWS_WITH_AS(step_t<sparse_net>{negative},
                       doctest::Contains("fit_args.sparse_nonzeros: expected 0"), df::error);
  // fit sizes the step it builds from the data: the same bits as a step with the densest room
  df::fit_args a = args;
  a.steps = 40;
  step_t<sparse_net> roomy(a);
  df::fit(roomy, source, target);
  const df::fit_result built = df::fit<step_t<sparse_net>>(source, target, a);
  CHECK(std::equal(roomy.parameters().begin(), roomy.parameters().end(), built.parameters.begin(),
                   [](float p, double q) { return double(p) == q; }));
}

}  // namespace step_sparse_input_test
