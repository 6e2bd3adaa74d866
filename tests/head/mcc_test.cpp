// head::mcc (head/mcc.hpp): two SGD steps against PyTorch and the whole step's gradients in
// double against finite differences of a plain reference of the MCC loss, written as the paper
// states it (the class confusion matrix, its column normalisation, the off-diagonal sum), that
// holds the entropy weights fixed as the head does (head_checks.hpp).
#include <dafuse/head/mcc.hpp>

#include "reference_heads.hpp"

#include <cmath>
#include <optional>
#include <ratio>
#include <vector>

namespace head_mcc_test {

namespace df = dafuse;
namespace heads = df::test::heads;

namespace {

template <class Head>
void check_gradients(double lambda, df::index_t b) {
  std::optional<std::vector<double>> weights;
  heads::check_gradients<Head>(lambda, b, [&](const heads::reference_outputs& out) {
    if (!weights) {
      std::vector<double> seen;
      const double loss = heads::reference_mcc(out, b, Head::temperature, nullptr, &seen);
      weights = seen;
      return loss;
    }
    return heads::reference_mcc(out, b, Head::temperature, &*weights);
  });
}

using constant_mcc = df::head::mcc<df::schedule::constant>;

}  // namespace

TEST_CASE("two MCC SGD steps match PyTorch, entropy weights detached as in the authors' code") {
  heads::check_against_torch<constant_mcc>("mcc");
  heads::check_vectors_see_the_head("mcc");
}

TEST_CASE("MCC step gradients equal finite differences with the entropy weights held fixed") {
  check_gradients<constant_mcc>(4.0, 5);
  check_gradients<constant_mcc>(4.0, 2);
  check_gradients<constant_mcc>(0.0, 3);
}

TEST_CASE("MCC at temperature 1 and 1/2 also matches finite differences") {
  check_gradients<df::head::mcc<df::schedule::constant, std::ratio<1>>>(4.0, 4);
  check_gradients<df::head::mcc<df::schedule::constant, std::ratio<1, 2>>>(4.0, 4);
}

TEST_CASE("head::mcc runs G_y on the target rows and writes their logit gradient") {
  using step = heads::torch_step<df::head::mcc<>>;
  static_assert(step::draws_target_rows && !step::trains_discriminator);
  static_assert(step::classifier_rows_for(4) == 8 && step::classifier_backward_rows_for(4) == 8);
  static_assert(df::head::mcc<>::temperature == 2.5);
  CHECK(df::test::throws_naming([] { step(df::fit_args{.batch = 4, .lambda_max = -1}); },
                                {"lambda_max", "head::mcc"}));
}

}  // namespace head_mcc_test
