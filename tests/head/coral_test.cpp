// head::coral (head/coral.hpp): two SGD steps against PyTorch and the whole step's gradients in
// double against finite differences of a plain reference of the CORAL loss (head_checks.hpp).
#include <dafuse/head/coral.hpp>

#include "reference_heads.hpp"

#include <vector>

namespace head_coral_test {

namespace df = dafuse;
namespace heads = df::test::heads;

namespace {

using constant_coral = df::head::coral<df::schedule::constant>;

}  // namespace

TEST_CASE("two Deep CORAL SGD steps match PyTorch") {
  heads::check_against_torch<constant_coral>("coral");
  heads::check_vectors_see_the_head("coral");
}

TEST_CASE("CORAL step gradients equal finite differences of L_y + lambda * CORAL") {
  constexpr df::index_t batch = 6;
  const auto loss = [](const heads::reference_outputs& out) {
    return heads::reference_coral(out, batch);
  };
  heads::check_gradients<constant_coral>(40.0, batch, loss);
  heads::check_gradients<constant_coral>(0.0, batch, loss);
}

TEST_CASE("CORAL with two rows per domain, the fewest its covariance takes") {
  heads::check_gradients<constant_coral>(
      40.0, 2, [](const heads::reference_outputs& out) { return heads::reference_coral(out, 2); });
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

}  // namespace head_coral_test
