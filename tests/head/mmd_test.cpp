// head::mmd (head/mmd.hpp), both estimators: two SGD steps against PyTorch and the whole step's
// gradients in double against finite differences of a plain reference of MMD² that, as the head
// does, holds the bandwidth's mean distance fixed (head_checks.hpp).
#include <dafuse/head/mmd.hpp>

#include "head_checks.hpp"

#include <cmath>
#include <optional>
#include <vector>

namespace df = dafuse;
namespace heads = df::test::heads;

namespace {

double squared_distance(const heads::reference_outputs& out, df::index_t i, df::index_t j) {
  double d = 0;
  for (df::index_t f = 0; f < heads::features; ++f) {
    const double v =
        out.h[std::size_t(i * heads::features + f)] - out.h[std::size_t(j * heads::features + f)];
    d += v * v;
  }
  return d;
}

// The pairs an estimator reads, each (i, j, c) with its coefficient, written out as in the
// papers: all pairs of the unbiased estimator, or the linear one's quad-tuples.
struct pair {
  df::index_t i, j;
  double c;
};
std::vector<pair> estimator_pairs(df::index_t b, bool linear) {
  std::vector<pair> pairs;
  if (linear) {
    for (df::index_t i = 0; i < b / 2; ++i) {
      const df::index_t s = 2 * i, t = b + 2 * i;
      pairs.push_back({s, s + 1, 2.0 / double(b)});
      pairs.push_back({t, t + 1, 2.0 / double(b)});
      pairs.push_back({s, t + 1, -2.0 / double(b)});
      pairs.push_back({s + 1, t, -2.0 / double(b)});
    }
    return pairs;
  }
  // Σ_{i≠j} k(s_i, s_j)/(B(B−1)) + Σ_{i≠j} k(t_i, t_j)/(B(B−1)) − 2·Σ_{i,j} k(s_i, t_j)/B²,
  // over ordered pairs.
  for (df::index_t i = 0; i < 2 * b; ++i)
    for (df::index_t j = 0; j < 2 * b; ++j) {
      if (i == j) continue;
      const bool same = (i < b) == (j < b);
      pairs.push_back({i, j, same ? 1.0 / double(b * (b - 1)) : -1.0 / double(b * b)});
    }
  return pairs;
}

// MMD² of the reference outputs; the mean distance m̄ is taken from `fixed_mean` when given
// (the gradient holds it constant), else from these outputs, and returned in `seen`.
double reference_mmd(const heads::reference_outputs& out,
                     df::index_t b,
                     bool linear,
                     std::optional<double> fixed_mean,
                     double* seen = nullptr) {
  const std::vector<pair> pairs = estimator_pairs(b, linear);
  double mean = 0;  // over the pairs read (ordered or not: the same mean)
  for (const pair& p : pairs) mean += squared_distance(out, p.i, p.j) / double(pairs.size());
  if (seen) *seen = mean;
  const double m = fixed_mean ? *fixed_mean : mean;
  double loss = 0;
  for (const pair& p : pairs) {
    const double d = squared_distance(out, p.i, p.j);
    double k = 0;
    for (const double alpha : {0.125, 0.25, 0.5, 1.0, 2.0}) k += std::exp(-d / (2 * alpha * m));
    loss += p.c * k / 5.0;
  }
  return loss;
}

template <class Head>
void check_gradients(double lambda, df::index_t b) {
  constexpr bool linear = Head::estimator == df::head::mmd_estimator::linear;
  // m̄ at the step's parameters, found by the first call (the reference's own forward).
  std::optional<double> mean;
  heads::check_gradients<Head>(lambda, b, [&](const heads::reference_outputs& out) {
    if (!mean) {
      double seen = 0;
      const double loss = reference_mmd(out, b, linear, std::nullopt, &seen);
      mean = seen;
      return loss;
    }
    return reference_mmd(out, b, linear, mean);
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
