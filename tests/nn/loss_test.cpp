// SPDX-License-Identifier: Apache-2.0
// Tests for nn/loss.hpp: both losses against their textbook formulas and finite differences in
// double, their behaviour at extreme logits, aliasing of the gradient with the logits, and argmax.
#include <dafuse/nn/loss.hpp>
#include "../check.hpp"

#include <dafuse/core/rng.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>
#include <vector>

namespace nn_loss_test {

namespace {

namespace nn = dafuse::nn;
using dafuse::index_t;

//! −log softmax(z)_label computed the textbook way (no max shift; fine for moderate logits).
double naive_cross_entropy(const std::vector<double>& z, std::int32_t label) {
  double sum = 0;
  for (double v : z) sum += std::exp(v);
  return -std::log(std::exp(z[std::size_t(label)]) / sum);
}

//! Logits in [−4, 4) from a fixed stream.
std::vector<double> random_logits(index_t classes, std::uint64_t seed) {
  dafuse::counter_rng rng(seed, dafuse::rng_stream::user);
  std::vector<double> z(static_cast<std::size_t>(classes));
  for (double& v : z) v = rng.uniform<double>(-4.0, 4.0);
  return z;
}

double naive_sigmoid(double z) {
  return 1.0 / (1.0 + std::exp(-z));
}

//! PyTorch's binary_cross_entropy_with_logits without weights (aten/src/ATen/native/Loss.cpp,
//! 2.x): ℓ = (1 − t)·z − log_sigmoid(z), with its CPU log_sigmoid min(z, 0) − log1p(e^(−|z|)).
double torch_bce_with_logits(double z, double t) {
  const double log_sigmoid = std::min(z, 0.0) - std::log1p(std::exp(-std::abs(z)));
  return (1 - t) * z - log_sigmoid;
}

}  // namespace

TEST_CASE("softmax cross-entropy equals the naive negative log of the softmax") {
  for (index_t classes : {2, 3, 7}) {
    const std::vector<double> z = random_logits(classes, 11 + std::uint64_t(classes));
    for (std::int32_t label = 0; label < classes; ++label) {
      std::vector<double> dz(z.size());
      const double loss = nn::softmax_cross_entropy(z.data(), classes, label, 1.0, dz.data());
      INFO("classes = " << classes << ", label = " << label);
      CHECK(loss == doctest::Approx(naive_cross_entropy(z, label)).epsilon(1e-13));
      CHECK(loss > 0);
    }
  }
}

TEST_CASE("softmax cross-entropy gradient matches finite differences") {
  constexpr index_t classes = 6;
  constexpr double h = 1e-6;
  const std::vector<double> z = random_logits(classes, 5);
  for (std::int32_t label = 0; label < classes; ++label) {
    std::vector<double> dz(classes), scratch(classes), fd(classes);
    nn::softmax_cross_entropy(z.data(), classes, label, 1.0, dz.data());
    for (index_t k = 0; k < classes; ++k) {
      std::vector<double> zp = z, zm = z;
      zp[std::size_t(k)] += h;
      zm[std::size_t(k)] -= h;
      const double lp = nn::softmax_cross_entropy(zp.data(), classes, label, 1.0, scratch.data());
      const double lm = nn::softmax_cross_entropy(zm.data(), classes, label, 1.0, scratch.data());
      fd[std::size_t(k)] = (lp - lm) / (2 * h);
    }
    INFO("label = " << label);
    CHECK(dafuse::test::max_relative_error(std::span(dz), std::span(fd)) < 1e-7);
    // Probabilities minus a one-hot: the components sum to zero.
    double sum = 0;
    for (double v : dz) sum += v;
    CHECK(sum == doctest::Approx(0.0).scale(1.0).epsilon(1e-14));
  }
}

TEST_CASE("softmax cross-entropy scale multiplies the gradient but not the loss") {
  constexpr index_t classes = 5;
  const std::vector<double> z = random_logits(classes, 21);
  std::vector<double> unit(classes), scaled(classes);
  const double loss1 = nn::softmax_cross_entropy(z.data(), classes, 2, 1.0, unit.data());
  const double loss2 = nn::softmax_cross_entropy(z.data(), classes, 2, 0.125, scaled.data());
  CHECK(loss1 == loss2);
  for (std::size_t k = 0; k < unit.size(); ++k)
    CHECK(scaled[k] == doctest::Approx(0.125 * unit[k]).epsilon(1e-15));
}

TEST_CASE_TEMPLATE("softmax cross-entropy stays finite for logits of ±1e4", T, float, double) {
  const T z[3] = {T(1e4), T(-1e4), T(0)};
  T dz[3];

  const T right = nn::softmax_cross_entropy(z, 3, 0, T(1), dz);
  REQUIRE(std::isfinite(right));
  CHECK(right == doctest::Approx(0.0).scale(1.0));
  for (T v : dz) CHECK(std::isfinite(v));
  CHECK(dz[0] == doctest::Approx(0.0).scale(1.0));

  const T wrong = nn::softmax_cross_entropy(z, 3, 1, T(1), dz);
  REQUIRE(std::isfinite(wrong));
  CHECK(wrong == doctest::Approx(2e4));
  for (T v : dz) REQUIRE(std::isfinite(v));
  CHECK(dz[0] == doctest::Approx(1.0));
  CHECK(dz[1] == doctest::Approx(-1.0));
  CHECK(dz[2] == doctest::Approx(0.0).scale(1.0));
}

TEST_CASE("softmax cross-entropy may write its gradient over the logits") {
  constexpr index_t classes = 4;
  const std::vector<double> z = random_logits(classes, 3);
  std::vector<double> separate(classes);
  const double expected = nn::softmax_cross_entropy(z.data(), classes, 1, 0.5, separate.data());
  std::vector<double> in_place = z;
  const double loss = nn::softmax_cross_entropy(in_place.data(), classes, 1, 0.5, in_place.data());
  CHECK(loss == expected);
  for (std::size_t k = 0; k < in_place.size(); ++k) CHECK(in_place[k] == separate[k]);
}

TEST_CASE("softmax cross-entropy in float agrees with double") {
  constexpr index_t classes = 5;
  const std::vector<double> z = random_logits(classes, 8);
  std::vector<float> zf(z.begin(), z.end());
  std::vector<double> zd(zf.begin(), zf.end()), dd(classes);
  std::vector<float> df(classes);
  const float lf = nn::softmax_cross_entropy(zf.data(), classes, 4, 1.0f, df.data());
  const double ld = nn::softmax_cross_entropy(zd.data(), classes, 4, 1.0, dd.data());
  CHECK(double(lf) == doctest::Approx(ld).epsilon(1e-6));
  CHECK(dafuse::test::max_relative_error(std::span(df), std::span(dd)) < 1e-6);
}

TEST_CASE("binary cross-entropy on a logit equals the textbook formula for moderate logits") {
  for (int i = 0; i <= 32; ++i) {
    const double z = -8.0 + 0.5 * i + 0.013;
    const double s = naive_sigmoid(z);
    for (double t : {0.0, 1.0}) {
      double dz = 0;
      const double loss = nn::binary_cross_entropy_with_logit(z, t, 1.0, &dz);
      INFO("z = " << z << ", t = " << t);
      CHECK(loss == doctest::Approx(-(t * std::log(s) + (1 - t) * std::log(1 - s))).epsilon(1e-11));
      CHECK(dz == doctest::Approx(s - t).epsilon(1e-14));
    }
  }
}

TEST_CASE("binary cross-entropy gradient matches finite differences") {
  constexpr double h = 1e-6;
  for (int i = 0; i <= 24; ++i) {
    const double z = -6.0 + 0.5 * i + 0.021;
    for (double t : {0.0, 1.0}) {
      double dz = 0, ignored = 0;
      nn::binary_cross_entropy_with_logit(z, t, 1.0, &dz);
      const double fd = (nn::binary_cross_entropy_with_logit(z + h, t, 1.0, &ignored) -
                         nn::binary_cross_entropy_with_logit(z - h, t, 1.0, &ignored)) /
                        (2 * h);
      INFO("z = " << z << ", t = " << t);
      CHECK(dz == doctest::Approx(fd).epsilon(1e-8).scale(1.0));
      // The scale multiplies the gradient.
      double scaled = 0;
      nn::binary_cross_entropy_with_logit(z, t, -0.25, &scaled);
      CHECK(scaled == doctest::Approx(-0.25 * dz).epsilon(1e-15));
    }
  }
}

TEST_CASE_TEMPLATE("binary cross-entropy stays finite and exact for logits of ±1000",
                   T,
                   float,
                   double) {
  struct row {
    T z, t, loss, dz;
  };
  const row rows[] = {
      {T(1000), T(1), T(0), T(0)},
      {T(1000), T(0), T(1000), T(1)},
      {T(-1000), T(0), T(0), T(0)},
      {T(-1000), T(1), T(1000), T(-1)},
  };
  for (const row& r : rows) {
    T dz = T(42);
    const T loss = nn::binary_cross_entropy_with_logit(r.z, r.t, T(1), &dz);
    INFO("z = " << r.z << ", t = " << r.t);
    REQUIRE(std::isfinite(loss));
    REQUIRE(std::isfinite(dz));
    CHECK(loss == r.loss);
    CHECK(dz == r.dz);
  }
}

TEST_CASE("binary cross-entropy matches PyTorch's formula") {
  for (double z : {-50.0, -7.5, -1.0, -1e-3, 0.0, 1e-3, 0.4, 3.0, 20.0, 90.0}) {
    for (double t : {0.0, 1.0}) {
      double dz = 0;
      const double loss = nn::binary_cross_entropy_with_logit(z, t, 1.0, &dz);
      INFO("z = " << z << ", t = " << t);
      CHECK(loss == doctest::Approx(torch_bce_with_logits(z, t)).epsilon(1e-14));
    }
  }
  // At z = 0 both targets cost log 2.
  double dz = 0;
  CHECK(nn::binary_cross_entropy_with_logit(0.0, 1.0, 1.0, &dz) ==
        doctest::Approx(std::log(2.0)).epsilon(1e-15));
  CHECK(dz == -0.5);
}

TEST_CASE("binary cross-entropy may write its gradient over the logit") {
  double v = 0.3;
  double separate = 0;
  const double expected = nn::binary_cross_entropy_with_logit(0.3, 1.0, 2.0, &separate);
  const double loss = nn::binary_cross_entropy_with_logit(v, 1.0, 2.0, &v);
  CHECK(loss == expected);
  CHECK(v == separate);
  CHECK(v == doctest::Approx(2.0 * (naive_sigmoid(0.3) - 1.0)).epsilon(1e-14));
}

TEST_CASE_TEMPLATE("argmax returns the largest logit's index, the first on ties",
                   T,
                   float,
                   double) {
  const T distinct[] = {T(-3), T(-1), T(-2)};
  CHECK(nn::argmax(distinct, 3) == 1);
  const T last[] = {T(0), T(1), T(2)};
  CHECK(nn::argmax(last, 3) == 2);
  const T tie[] = {T(1), T(3), T(3), T(2)};
  CHECK(nn::argmax(tie, 4) == 1);
  const T all_equal[] = {T(5), T(5), T(5)};
  CHECK(nn::argmax(all_equal, 3) == 0);
  const T one[] = {T(-7)};
  CHECK(nn::argmax(one, 1) == 0);
}

}  // namespace nn_loss_test
