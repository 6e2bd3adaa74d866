// head::mmd (head/mmd.hpp), both estimators: two SGD steps against PyTorch and the whole step's
// gradients in double against finite differences of a plain reference of MMD² that, as the head
// does, holds the bandwidth's mean distance fixed (head_checks.hpp).
#include <dafuse/head/mmd.hpp>

#include "reference_heads.hpp"

#include <cmath>
#include <optional>
#include <vector>

namespace head_mmd_test {

namespace df = dafuse;
namespace heads = df::test::heads;

namespace {

template <class Head>
void check_gradients(double lambda, df::index_t b) {
  constexpr bool linear = Head::estimator == df::head::mmd_estimator::linear;
  // m̄ at the step's parameters, found by the first call (the reference's own forward).
  std::optional<double> mean;
  heads::check_gradients<Head>(lambda, b, [&](const heads::reference_outputs& out) {
    if (!mean) {
      double seen = 0;
      const double loss = heads::reference_mmd(out, b, linear, std::nullopt, &seen);
      mean = seen;
      return loss;
    }
    return heads::reference_mmd(out, b, linear, mean);
  });
}

using constant_mmd = df::head::mmd<df::schedule::constant>;
using constant_linear_mmd = df::head::mmd_linear<df::schedule::constant>;

}  // namespace

TEST_CASE("two multi-kernel MMD SGD steps match PyTorch, unbiased quadratic estimator") {
  heads::check_against_torch<constant_mmd>("mmd");
  heads::check_vectors_see_the_head("mmd");
}

TEST_CASE("two multi-kernel MMD SGD steps match PyTorch, linear-time estimator") {
  heads::check_against_torch<constant_linear_mmd>("mmd_linear");
  heads::check_vectors_see_the_head("mmd_linear");
}

TEST_CASE("MMD step gradients equal finite differences with the bandwidth held fixed") {
  check_gradients<constant_mmd>(3.0, 5);
  check_gradients<constant_mmd>(3.0, 2);
  check_gradients<constant_mmd>(0.0, 5);
}

TEST_CASE("linear-time MMD step gradients equal finite differences with the bandwidth fixed") {
  check_gradients<constant_linear_mmd>(3.0, 6);
  check_gradients<constant_linear_mmd>(3.0, 2);
}

TEST_CASE("head::mmd refuses batches its estimator cannot use, naming the field") {
  CHECK(df::test::throws_naming([] { heads::torch_step<constant_mmd>(df::fit_args{.batch = 1}); },
                                {"fit_args.batch", "head::mmd", "at least 2"}));
  CHECK(df::test::throws_naming(
      [] { heads::torch_step<constant_linear_mmd>(df::fit_args{.batch = 5}); },
      {"fit_args.batch", "linear-time", "even", "found 5"}));
  CHECK(df::test::throws_naming(
      [] { heads::torch_step<constant_mmd>(df::fit_args{.batch = 4, .lambda_max = -1}); },
      {"lambda_max", "head::mmd"}));
}

TEST_CASE("MMD of a batch whose rows are all the same is 0, with a zero gradient from the head") {
  // Equal inputs give equal features: every distance is 0 (m̄ = 0 must not divide by zero).
  heads::torch_step<constant_mmd> step(df::fit_args{.batch = 4, .lambda_max = 1});
  auto x = step.input();
  for (df::index_t i = 0; i < x.size(); ++i) x.data[i] = 0.25f;
  for (auto& y : step.source_labels()) y = 1;
  const df::step_report r = step.compute_gradients(1.0);
  CHECK(r.domain_loss == doctest::Approx(0.0));
  for (const float g : step.gradients()) CHECK(std::isfinite(g));
}

}  // namespace head_mmd_test
