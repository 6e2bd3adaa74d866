// head::mcc (head/mcc.hpp): two SGD steps against PyTorch and the whole step's gradients in
// double against finite differences of a plain reference of the MCC loss, written as the paper
// states it (the class confusion matrix, its column normalisation, the off-diagonal sum), that
// holds the entropy weights fixed as the head does (head_checks.hpp).
#include <dafuse/head/mcc.hpp>

#include "head_checks.hpp"

#include <cmath>
#include <optional>
#include <ratio>
#include <vector>

namespace df = dafuse;
namespace heads = df::test::heads;

namespace {

constexpr df::index_t classes = heads::classes;

// L_MCC of the target rows (columns b..2b of z) at temperature t; the row weights are taken from
// `fixed` when given, else computed from these logits and returned in `seen`.
double reference_mcc(const heads::reference_outputs& out,
                     df::index_t b,
                     double t,
                     const std::vector<double>* fixed,
                     std::vector<double>* seen = nullptr) {
  std::vector<double> y(static_cast<std::size_t>(b * classes)), w(static_cast<std::size_t>(b));
  double weight_sum = 0;
  for (df::index_t i = 0; i < b; ++i) {
    const double* z = &out.z[std::size_t((b + i) * classes)];
    double total = 0;
    for (df::index_t k = 0; k < classes; ++k) total += std::exp(z[k] / t);
    double entropy = 0;
    for (df::index_t k = 0; k < classes; ++k) {
      const double p = std::exp(z[k] / t) / total;
      y[std::size_t(i * classes + k)] = p;
      entropy -= p * std::log(p);
    }
    w[std::size_t(i)] = 1.0 + std::exp(-entropy);
    weight_sum += w[std::size_t(i)];
  }
  for (double& v : w) v *= double(b) / weight_sum;
  if (seen) *seen = w;
  const std::vector<double>& use = fixed ? *fixed : w;
  // C = Ŷᵀ diag(w) Ŷ, then each column divided by its sum; L = off-diagonal sum / classes.
  std::vector<double> c(std::size_t(classes * classes), 0.0);
  for (df::index_t j = 0; j < classes; ++j)
    for (df::index_t k = 0; k < classes; ++k)
      for (df::index_t i = 0; i < b; ++i)
        c[std::size_t(j * classes + k)] +=
            use[std::size_t(i)] * y[std::size_t(i * classes + j)] * y[std::size_t(i * classes + k)];
  double loss = 0;
  for (df::index_t k = 0; k < classes; ++k) {
    double column = 0;
    for (df::index_t j = 0; j < classes; ++j) column += c[std::size_t(j * classes + k)];
    for (df::index_t j = 0; j < classes; ++j)
      if (j != k) loss += c[std::size_t(j * classes + k)] / column;
  }
  return loss / double(classes);
}

template <class Head>
void check_gradients(double lambda, df::index_t b) {
  std::optional<std::vector<double>> weights;
  heads::check_gradients<Head>(lambda, b, [&](const heads::reference_outputs& out) {
    if (!weights) {
      std::vector<double> seen;
      const double loss = reference_mcc(out, b, Head::temperature, nullptr, &seen);
      weights = seen;
      return loss;
    }
    return reference_mcc(out, b, Head::temperature, &*weights);
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
