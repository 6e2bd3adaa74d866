// The example's head of one's own (examples/custom_head.hpp: entropy minimisation, written
// outside the library over the executor's view): two SGD steps against PyTorch and the whole
// step's gradients in double against finite differences of a plain reference of its loss
// (head_checks.hpp), as the shipped heads' tests.
#include "../../examples/custom_head.hpp"

#include "reference_heads.hpp"

#include <cmath>

namespace head_custom_head_test {

namespace df = dafuse;
namespace heads = df::test::heads;

namespace {

using constant_entropy = my_heads::entropy_minimisation<df::schedule::constant>;

//! (1/B)·Σ_i H(softmax(z_i)) over the last b columns of z (the target rows), in plain loops.
double reference_entropy(const heads::reference_outputs& out, df::index_t b) {
  double sum = 0;
  for (df::index_t i = 0; i < b; ++i) {
    const double* z = &out.z[std::size_t((b + i) * heads::classes)];
    double total = 0;
    for (df::index_t k = 0; k < heads::classes; ++k) total += std::exp(z[k]);
    for (df::index_t k = 0; k < heads::classes; ++k) {
      const double p = std::exp(z[k]) / total;
      sum -= p * std::log(p);
    }
  }
  return sum / double(b);
}

}  // namespace

TEST_CASE("a head of one's own: two entropy-minimisation SGD steps match PyTorch") {
  heads::check_against_torch<constant_entropy>("entropy");
  heads::check_vectors_see_the_head("entropy");
}

TEST_CASE("a head of one's own: step gradients equal finite differences of L_y + lambda * H") {
  for (const df::index_t b : {df::index_t(4), df::index_t(1)}) {
    CAPTURE(b);
    heads::check_gradients<constant_entropy>(
        3.0, b, [&](const heads::reference_outputs& out) { return reference_entropy(out, b); });
  }
  heads::check_gradients<constant_entropy>(
      0.0, 3, [](const heads::reference_outputs& out) { return reference_entropy(out, 3); });
}

TEST_CASE("a head of one's own runs G_y on the target rows and refuses a negative lambda_max") {
  using step = heads::torch_step<my_heads::entropy_minimisation<>>;
  static_assert(step::draws_target_rows && !step::trains_discriminator);
  static_assert(step::classifier_rows_for(4) == 8 && step::classifier_backward_rows_for(4) == 8);
  CHECK(df::test::throws_naming([] { step(df::fit_args{.batch = 4, .lambda_max = -1}); },
                                {"lambda_max", "my_heads::entropy_minimisation"}));
}

}  // namespace head_custom_head_test
