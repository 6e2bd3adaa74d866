// head::coral (head/coral.hpp): two SGD steps against PyTorch and the whole step's gradients in
// double against finite differences of a plain reference of the CORAL loss (head_checks.hpp).
#include <dafuse/head/coral.hpp>

#include "head_checks.hpp"

#include <vector>

namespace df = dafuse;
namespace heads = df::test::heads;

namespace {

// ‖C_s − C_t‖²_F / (4F²), C the unbiased covariance of the first or last `batch` columns of h.
double reference_coral(const heads::reference_outputs& out, df::index_t batch) {
  constexpr df::index_t f = heads::features;
  std::vector<double> difference(std::size_t(f * f), 0.0);
  for (int domain = 0; domain < 2; ++domain) {
    const double sign = domain == 0 ? 1.0 : -1.0;
    const double* h = out.h.data() + domain * batch * f;
    std::vector<double> mean(std::size_t(f), 0.0);
    for (df::index_t c = 0; c < batch; ++c)
      for (df::index_t j = 0; j < f; ++j) mean[std::size_t(j)] += h[c * f + j] / double(batch);
    for (df::index_t a = 0; a < f; ++a)
      for (df::index_t b = 0; b < f; ++b) {
        double sum = 0;
        for (df::index_t c = 0; c < batch; ++c)
          sum += (h[c * f + a] - mean[std::size_t(a)]) * (h[c * f + b] - mean[std::size_t(b)]);
        difference[std::size_t(a * f + b)] += sign * sum / double(batch - 1);
      }
  }
  double loss = 0;
  for (const double d : difference) loss += d * d;
  return loss / (4.0 * double(f * f));
}

using constant_coral = df::head::coral<df::schedule::constant>;

}  // namespace

TEST_CASE("two Deep CORAL SGD steps match PyTorch") {
  heads::check_against_torch<constant_coral>("coral");
  heads::check_vectors_see_the_head("coral");
}

TEST_CASE("CORAL step gradients equal finite differences of L_y + lambda * CORAL") {
  constexpr df::index_t batch = 6;
  const auto loss = [](const heads::reference_outputs& out) { return reference_coral(out, batch); };
  heads::check_gradients<constant_coral>(40.0, batch, loss);
  heads::check_gradients<constant_coral>(0.0, batch, loss);
}

TEST_CASE("CORAL with two rows per domain, the fewest its covariance takes") {
  heads::check_gradients<constant_coral>(
      40.0, 2, [](const heads::reference_outputs& out) { return reference_coral(out, 2); });
}

TEST_CASE("head::coral refuses one row per domain and a negative lambda_max, naming the field") {
  CHECK(df::test::throws_naming([] { heads::torch_step<constant_coral>(df::fit_args{.batch = 1}); },
                                {"fit_args.batch", "head::coral", "at least 2"}));
  CHECK(df::test::throws_naming(
      [] { heads::torch_step<constant_coral>(df::fit_args{.batch = 4, .lambda_max = -1}); },
      {"lambda_max", "head::coral"}));
}

TEST_CASE("head::coral draws target rows and trains no discriminator") {
  using step = heads::torch_step<df::head::coral<>>;
  static_assert(step::draws_target_rows && !step::trains_discriminator);
  static_assert(step::trained_param_count == heads::torch_net::task_param_count);
  // Ganin's ramp by default: λ(0) = 0, λ(1) ≈ lambda_max.
  const df::fit_args args{.steps = 10, .lambda_max = 2.0f};
  CHECK(df::head::coral<>::weight(args, df::progress{0, 10}) == 0.0);
  CHECK(df::head::coral<>::weight(args, df::progress{10, 10}) ==
        doctest::Approx(2.0).epsilon(1e-4));
}
