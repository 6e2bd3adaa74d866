// SPDX-License-Identifier: Apache-2.0
// Tests for select/validators.hpp: each validator on cases whose answer is known in closed form,
// SND against a naive double loop, BNM, MaNo and EnsV against NumPy's values of the papers'
// formulas (tools/reference_validators.py, validators_reference.hpp), the domain classifier
// against a saturated model and a naive gradient of its objective, PAD and DEV on identical and
// on separated domains, and the checks.
#include <dafuse/select/validators.hpp>
#include "../check.hpp"
#include "validators_reference.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace select_validators_test {

namespace {

namespace sel = dafuse::select;
namespace ref = select_validators_reference;
using dafuse::counter_rng;
using dafuse::index_t;
using dafuse::rng_stream;
using dafuse::test::throws_naming;

//! A column-major [rows, cols] matrix of floats that owns its values.
struct host_matrix {
  index_t rows = 0, cols = 0;
  std::vector<float> values;

  host_matrix(index_t r, index_t c) : rows(r), cols(c), values(std::size_t(r * c), 0.0f) {}
  float& operator()(index_t k, index_t i) { return values[std::size_t(i * rows + k)]; }
  float operator()(index_t k, index_t i) const { return values[std::size_t(i * rows + k)]; }
  dafuse::matrix_view<const float> view() const { return {values.data(), rows, cols}; }
};

//! n copies of the uniform distribution over c classes.
host_matrix uniform_predictions(index_t c, index_t n) {
  host_matrix p(c, n);
  for (float& v : p.values) v = 1.0f / float(c);
  return p;
}

//! One-hot predictions; sample i is of class cls(i).
template <class Class>
host_matrix one_hot(index_t c, index_t n, Class cls) {
  host_matrix p(c, n);
  for (index_t i = 0; i < n; ++i) p(cls(i), i) = 1.0f;
  return p;
}

//! softmax(scale·logits) per column, the logits N(0, 1) plus `peak` on class i mod c.
host_matrix random_predictions(
    index_t c, index_t n, double scale, double peak, std::uint64_t seed) {
  counter_rng rng(seed, rng_stream::user);
  host_matrix p(c, n);
  std::vector<double> z(static_cast<std::size_t>(c));
  for (index_t i = 0; i < n; ++i) {
    double top = -1e300;
    for (index_t k = 0; k < c; ++k) {
      z[std::size_t(k)] = scale * rng.normal<double>() + (k == i % c ? peak : 0.0);
      top = std::max(top, z[std::size_t(k)]);
    }
    double sum = 0;
    for (double& v : z) sum += (v = std::exp(v - top));
    for (index_t k = 0; k < c; ++k) p(k, i) = float(z[std::size_t(k)] / sum);
  }
  return p;
}

//! Features of n samples of width d: N(0, 1) in every coordinate, plus `shift` on coordinate 0.
host_matrix gaussian_features(index_t d, index_t n, double shift, std::uint64_t seed) {
  counter_rng rng(seed, rng_stream::user);
  host_matrix x(d, n);
  for (index_t i = 0; i < n; ++i)
    for (index_t k = 0; k < d; ++k) x(k, i) = rng.normal<float>() + (k == 0 ? float(shift) : 0.f);
  return x;
}

//! SND written out as the paper states it: the whole n×n similarity matrix of L2-normalised
//! columns, self-similarity removed, a row softmax of S/τ, the mean of the rows' entropies.
double naive_snd(const host_matrix& p, double tau) {
  const index_t c = p.rows, n = p.cols;
  std::vector<double> xhat(p.values.size());
  for (index_t i = 0; i < n; ++i) {
    double norm = 0;
    for (index_t k = 0; k < c; ++k) norm += double(p(k, i)) * double(p(k, i));
    norm = std::sqrt(norm);
    for (index_t k = 0; k < c; ++k) xhat[std::size_t(i * c + k)] = double(p(k, i)) / norm;
  }
  std::vector<double> s(static_cast<std::size_t>(n * n));
  for (index_t i = 0; i < n; ++i)
    for (index_t j = 0; j < n; ++j) {
      double dot = 0;
      for (index_t k = 0; k < c; ++k)
        dot += xhat[std::size_t(i * c + k)] * xhat[std::size_t(j * c + k)];
      s[std::size_t(i * n + j)] = dot;
    }
  double total = 0;
  for (index_t i = 0; i < n; ++i) {
    double z = 0;  // S/τ ≤ 1/τ = 20 at most here: exp needs no shift
    for (index_t j = 0; j < n; ++j)
      if (j != i) z += std::exp(s[std::size_t(i * n + j)] / tau);
    double h = 0;
    for (index_t j = 0; j < n; ++j) {
      if (j == i) continue;
      const double q = std::exp(s[std::size_t(i * n + j)] / tau) / z;
      if (q > 0) h -= q * std::log(q);
    }
    total += h;
  }
  return total / double(n);
}

//! Source and target with one feature taking values −1 or +1: source has s_minus samples at −1
//! and s_plus at +1, target t_minus and t_plus. The saturated model's MLE is p(t|x) = the
//! fraction of target samples at x.
struct two_point_domains {
  host_matrix source, target;
  two_point_domains(index_t s_minus, index_t s_plus, index_t t_minus, index_t t_plus)
      : source(1, s_minus + s_plus), target(1, t_minus + t_plus) {
    for (index_t i = 0; i < source.cols; ++i) source(0, i) = i < s_minus ? -1.0f : 1.0f;
    for (index_t i = 0; i < target.cols; ++i) target(0, i) = i < t_minus ? -1.0f : 1.0f;
  }
};

const float minus_one = -1.0f, plus_one = 1.0f;

constexpr double eps = std::numeric_limits<double>::epsilon();

//! A view of a reference's flat [classes, n] values.
dafuse::matrix_view<const float> view_of(const std::vector<float>& values, std::int64_t classes) {
  return {values.data(), index_t(classes), index_t(values.size()) / index_t(classes)};
}

//! Views of EnsV's candidates, in their order.
std::vector<dafuse::matrix_view<const float>> views_of(const std::vector<host_matrix>& m) {
  std::vector<dafuse::matrix_view<const float>> v;
  for (const host_matrix& x : m) v.push_back(x.view());
  return v;
}

}  // namespace

// --- mean_entropy and information_maximization ----------------------------------------------

TEST_CASE("uniform predictions have mean entropy log C and information maximization 0") {
  for (const index_t c : {2, 3, 10, 31}) {
    CAPTURE(c);
    const host_matrix p = uniform_predictions(c, 7);
    CHECK(sel::mean_entropy(p.view()) == doctest::Approx(std::log(double(c))).epsilon(1e-7));
    CHECK(sel::information_maximization(p.view()) == doctest::Approx(0.0).epsilon(1e-12));
  }
}

TEST_CASE("confident predictions spread evenly over the classes have entropy 0 and IM log C") {
  for (const index_t c : {2, 5, 10}) {
    CAPTURE(c);
    const host_matrix p = one_hot(c, 4 * c, [&](index_t i) { return i % c; });
    CHECK(sel::mean_entropy(p.view()) == 0.0);
    CHECK(sel::information_maximization(p.view()) ==
          doctest::Approx(std::log(double(c))).epsilon(1e-14));
  }
}

TEST_CASE("confident predictions all of one class have entropy 0 and IM 0") {
  const host_matrix p = one_hot(4, 25, [](index_t) { return 2; });
  CHECK(sel::mean_entropy(p.view()) == 0.0);
  CHECK(sel::information_maximization(p.view()) == 0.0);
}

TEST_CASE("mean_entropy and IM match a hand computation on two samples") {
  // p₁ = (1/2, 1/2), p₂ = (1, 0): mean entropy (log 2)/2; p̄ = (3/4, 1/4).
  host_matrix p(2, 2);
  p(0, 0) = 0.5f, p(1, 0) = 0.5f, p(0, 1) = 1.0f;
  const double mean_h = std::log(2.0) / 2;
  const double h_mean = -0.75 * std::log(0.75) - 0.25 * std::log(0.25);
  CHECK(sel::mean_entropy(p.view()) == doctest::Approx(mean_h).epsilon(1e-15));
  CHECK(sel::information_maximization(p.view()) == doctest::Approx(h_mean - mean_h).epsilon(1e-14));
}

TEST_CASE("IM lies between 0 and log C and rises as predictions sharpen over balanced classes") {
  double previous = -1;
  for (const double peak : {0.0, 1.0, 3.0, 8.0}) {
    CAPTURE(peak);
    const host_matrix p = random_predictions(6, 600, 0.3, peak, 11);
    const double im = sel::information_maximization(p.view());
    CHECK(im >= 0.0);
    CHECK(im <= std::log(6.0));
    CHECK(im > previous);
    previous = im;
    // IM = H(p̄) − mean entropy ≤ log C − mean entropy.
    CHECK(im <= std::log(6.0) - sel::mean_entropy(p.view()) + 1e-12);
  }
}

TEST_CASE("entropy divides a column by its sum when the sum is within the tolerance") {
  host_matrix p(2, 1), exact(2, 1);
  p(0, 0) = 0.2f * 1.0005f, p(1, 0) = 0.8f * 1.0005f;  // sums to 1.0005
  exact(0, 0) = 0.2f, exact(1, 0) = 0.8f;
  CHECK(sel::mean_entropy(p.view()) ==
        doctest::Approx(sel::mean_entropy(exact.view())).epsilon(1e-7));
}

// --- soft_neighborhood_density --------------------------------------------------------------

TEST_CASE("soft_neighborhood_density matches a naive double loop over the similarity matrix") {
  // 300 samples: more than one 256-column block, so the block boundary is covered.
  for (const double tau : {0.05, 0.5}) {
    for (const double peak : {0.0, 4.0}) {
      CAPTURE(tau);
      CAPTURE(peak);
      const host_matrix p = random_predictions(5, 300, 1.0, peak, 3);
      CHECK(sel::soft_neighborhood_density(p.view(), tau) ==
            doctest::Approx(naive_snd(p, tau)).epsilon(1e-12));
    }
  }
  const host_matrix small = random_predictions(3, 2, 1.0, 0.0, 5);
  CHECK(sel::soft_neighborhood_density(small.view()) == 0.0);  // one neighbour: q = 1, H = 0
}

TEST_CASE("SND of balanced one-hot clusters has the closed form of two similarity levels") {
  // K classes of m samples: S/τ is 1/τ to the m − 1 others of a class and 0 to the n − m rest.
  const index_t k = 3, m = 5, n = k * m;
  const double tau = 0.05;
  const host_matrix p = one_hot(k, n, [&](index_t i) { return i / m; });
  const double z = double(m - 1) * std::exp(1 / tau) + double(n - m);
  const double q_same = std::exp(1 / tau) / z, q_other = 1 / z;
  const double expected =
      -double(m - 1) * q_same * std::log(q_same) - double(n - m) * q_other * std::log(q_other);
  CHECK(sel::soft_neighborhood_density(p.view(), tau) == doctest::Approx(expected).epsilon(1e-12));
  CHECK(expected == doctest::Approx(std::log(double(m - 1))).epsilon(1e-5));
}

TEST_CASE("SND of a collapse onto one class is log(n − 1), its largest possible value") {
  const host_matrix p = one_hot(4, 40, [](index_t) { return 1; });
  CHECK(sel::soft_neighborhood_density(p.view()) == doctest::Approx(std::log(39.0)).epsilon(1e-14));
}

TEST_CASE(
    "SND scores predictions in tight clusters higher than predictions spread over the simplex") {
  // Tight: softmax of 8·one-hot + N(0, 0.2²) logits, four clusters of 50 near the vertices; each
  // row spreads nearly evenly over its 49 cluster mates, so SND ≈ log 49 = 3.89. Spread:
  // softmax of N(0, 2²) logits; each sample has fewer close neighbours at τ = 0.05 (3.56).
  const host_matrix tight = random_predictions(4, 200, 0.2, 8.0, 7);
  const host_matrix spread = random_predictions(4, 200, 2.0, 0.0, 7);
  const double snd_tight = sel::soft_neighborhood_density(tight.view());
  const double snd_spread = sel::soft_neighborhood_density(spread.view());
  CHECK(snd_tight > snd_spread + 0.2);
  CHECK(snd_tight == doctest::Approx(std::log(49.0)).epsilon(0.01));
  // Clusters of peak 4 blurred by more and more logit noise: SND falls as they loosen (3.87,
  // 3.63, 3.55). It is not monotone in general: at noise 4 it rises again to 3.56.
  double previous = snd_tight;
  for (const double noise : {1.0, 2.0, 3.0}) {
    CAPTURE(noise);
    const host_matrix p = random_predictions(4, 200, noise, 4.0, 7);
    const double snd = sel::soft_neighborhood_density(p.view());
    CHECK(snd < previous);
    previous = snd;
  }
}

TEST_CASE("SND of nearly uniform predictions approaches log(n − 1): all samples look alike") {
  // softmax of N(0, 0.2²) logits: every prediction is near (1/4, …, 1/4), so every sample is
  // every other's near neighbour, as in a collapse. SND rewards that too (5.24 of 5.29).
  const host_matrix p = random_predictions(4, 200, 0.2, 0.0, 7);
  const host_matrix clusters = random_predictions(4, 200, 0.2, 8.0, 7);
  const double snd = sel::soft_neighborhood_density(p.view());
  CHECK(snd > std::log(199.0) - 0.1);
  CHECK(snd > sel::soft_neighborhood_density(clusters.view()));
}

// --- batch_nuclear_norm ---------------------------------------------------------------------

TEST_CASE("batch_nuclear_norm matches NumPy's singular values of the prediction matrix") {
  // The Gram matrix's entries are sums of n products (relative error ≤ n·ε) and its eigen-solve
  // adds about C·ε·‖G‖, so each λ_j = σ_j² moves by at most (n + C)·ε·σ_max², and σ_j by that
  // over 2σ_j; summed over the min(n, C) singular values, divided by n.
  struct reference_case {
    const char* name;
    const std::vector<float>& p;
    std::int64_t classes, samples;
    double bnm, sigma_max, sigma_min;
  };
  for (const reference_case& r :
       {reference_case{"tall", ref::tall_probabilities, ref::tall_classes, ref::tall_samples,
                       ref::tall_bnm, ref::tall_sigma_max, ref::tall_sigma_min},
        reference_case{"wide", ref::wide_probabilities, ref::wide_classes, ref::wide_samples,
                       ref::wide_bnm, ref::wide_sigma_max, ref::wide_sigma_min}}) {
    CAPTURE(r.name);
    const double n = double(r.samples), c = double(r.classes);
    const double per_sigma = (n + c) * eps * r.sigma_max * r.sigma_max / r.sigma_min;
    const double tolerance = std::min(n, c) * per_sigma / n;
    const double bnm = sel::batch_nuclear_norm(view_of(r.p, r.classes));
    INFO("BNM " << bnm << ", NumPy " << r.bnm << ", tolerance " << tolerance);
    CHECK(std::abs(bnm - r.bnm) <= tolerance);
  }
}

TEST_CASE("batch_nuclear_norm is √(C/n) for balanced one-hot predictions, 1/√n for a collapse") {
  for (const index_t c : {2, 3, 10}) {
    CAPTURE(c);
    const index_t n = 7 * c;
    // PᵀP = 7·I: C singular values √7, ‖P‖_* = C√7.
    const host_matrix balanced = one_hot(c, n, [&](index_t i) { return i % c; });
    CHECK(sel::batch_nuclear_norm(balanced.view()) ==
          doctest::Approx(std::sqrt(double(c) / double(n))).epsilon(1e-14));
    // One singular value √n.
    const host_matrix collapse = one_hot(c, n, [](index_t) { return 1; });
    CHECK(sel::batch_nuclear_norm(collapse.view()) ==
          doctest::Approx(1 / std::sqrt(double(n))).epsilon(1e-14));
    // P = (1/C)·1·1ᵀ: one singular value √(n·C)/C.
    const host_matrix uniform = uniform_predictions(c, n);
    CHECK(sel::batch_nuclear_norm(uniform.view()) ==
          doctest::Approx(1 / std::sqrt(double(n * c))).epsilon(1e-13));
  }
  // Fewer samples than classes (the n × n Gram matrix): n distinct one-hot rows, PPᵀ = I, BNM 1.
  const host_matrix few = one_hot(6, 4, [](index_t i) { return i + 1; });
  CHECK(sel::batch_nuclear_norm(few.view()) == doctest::Approx(1.0).epsilon(1e-14));
}

TEST_CASE("batch_nuclear_norm rises with confidence and with the spread of predicted classes") {
  double previous = 0;
  for (const double peak : {0.0, 1.0, 3.0, 8.0}) {
    CAPTURE(peak);
    const double bnm = sel::batch_nuclear_norm(random_predictions(5, 200, 0.3, peak, 13).view());
    CHECK(bnm > previous);
    CHECK(bnm <= std::sqrt(5.0 / 200.0) + 1e-12);
    previous = bnm;
  }
}

// --- mano, mano_criterion and mano_from_logits ----------------------------------------------

TEST_CASE("mano matches NumPy's scaled L_p norm of the normalised prediction matrix") {
  // n·C terms summed, each within a few ε: relative error ≤ (n·C + 8)·ε.
  struct reference_case {
    const char* name;
    const std::vector<float>& p;
    std::int64_t classes;
    double mano4, mano3;
  };
  for (const reference_case& r : {reference_case{"tall", ref::tall_probabilities, ref::tall_classes,
                                                 ref::tall_mano, ref::tall_mano_p3},
                                  reference_case{"wide", ref::wide_probabilities, ref::wide_classes,
                                                 ref::wide_mano, ref::wide_mano_p3}}) {
    CAPTURE(r.name);
    const double tolerance = (double(r.p.size()) + 8) * eps;
    CHECK(sel::mano(view_of(r.p, r.classes)) == doctest::Approx(r.mano4).epsilon(tolerance));
    CHECK(sel::mano(view_of(r.p, r.classes), 3.0) == doctest::Approx(r.mano3).epsilon(tolerance));
  }
}

TEST_CASE("mano is 1/C for uniform predictions and C^(−1/p) for one-hot ones, of any classes") {
  for (const index_t c : {2, 3, 10}) {
    CAPTURE(c);
    CHECK(sel::mano(uniform_predictions(c, 5).view()) ==
          doctest::Approx(1 / double(c)).epsilon(1e-14));
    const host_matrix balanced = one_hot(c, 3 * c, [&](index_t i) { return i % c; });
    const host_matrix collapse = one_hot(c, 3 * c, [](index_t) { return 0; });
    CHECK(sel::mano(balanced.view()) == doctest::Approx(std::pow(double(c), -0.25)).epsilon(1e-14));
    CHECK(sel::mano(collapse.view()) == sel::mano(balanced.view()));
    CHECK(sel::mano(balanced.view(), 2.0) ==
          doctest::Approx(std::pow(double(c), -0.5)).epsilon(1e-14));
  }
}

TEST_CASE("mano_from_logits matches NumPy's softrun on both sides of the criterion") {
  // Each of the n·C terms of Φ is within a few ε·max|z|; each term of the norm within a few ε.
  struct reference_case {
    const char* name;
    const std::vector<float>& z;
    double criterion, mano;
  };
  for (const reference_case& r :
       {reference_case{"taylor", ref::taylor_logits, ref::taylor_criterion, ref::taylor_mano},
        reference_case{"softmax", ref::softmax_logits, ref::softmax_criterion,
                       ref::softmax_mano}}) {
    CAPTURE(r.name);
    const auto logits = view_of(r.z, 4);
    const double terms = double(r.z.size());
    double largest = 0;
    for (const float v : r.z) largest = std::max(largest, double(std::abs(v)));
    CHECK(std::abs(sel::mano_criterion(logits) - r.criterion) <= 4 * terms * eps * largest);
    CHECK(sel::mano_from_logits(logits) == doctest::Approx(r.mano).epsilon((terms + 16) * eps));
  }
  CHECK(ref::taylor_criterion <= 5);
  CHECK(ref::softmax_criterion > 5);
}

TEST_CASE("mano_from_logits uses the Taylor form below the threshold and softmax above it") {
  // One sample, logits (2, 0): Φ = log(1 + e²) − 1 = 1.13. Taylor: v = (5, 1), q = (5/6, 1/6).
  host_matrix z(2, 1);
  z(0, 0) = 2.0f;
  const double phi = std::log(1 + std::exp(2.0)) - 1;
  CHECK(sel::mano_criterion(z.view()) == doctest::Approx(phi).epsilon(1e-15));
  const auto norm4 = [](double a, double b) {
    return std::pow((a * a * a * a + b * b * b * b) / 2, 0.25);
  };
  CHECK(sel::mano_from_logits(z.view()) == doctest::Approx(norm4(5.0 / 6, 1.0 / 6)).epsilon(1e-15));
  const double s = 1 / (1 + std::exp(-2.0));
  CHECK(sel::mano_from_logits(z.view(), {.threshold = 1.0}) ==
        doctest::Approx(norm4(s, 1 - s)).epsilon(1e-15));
  // The softmax form on logits is mano on their softmax.
  host_matrix p(2, 1);
  p(0, 0) = float(s), p(1, 0) = float(1 - s);
  CHECK(sel::mano_from_logits(z.view(), {.threshold = 1.0}) ==
        doctest::Approx(sel::mano(p.view())).epsilon(1e-7));
  // Zero logits: Φ = log C exactly, and both forms give the uniform distribution.
  const host_matrix zero(3, 4);
  CHECK(sel::mano_criterion(zero.view()) == doctest::Approx(std::log(3.0)).epsilon(1e-15));
  CHECK(sel::mano_from_logits(zero.view()) == doctest::Approx(1.0 / 3).epsilon(1e-15));
  CHECK(sel::mano_from_logits(zero.view(), {.threshold = -1.0}) ==
        doctest::Approx(1.0 / 3).epsilon(1e-15));
}

// --- ensemble_validation --------------------------------------------------------------------

TEST_CASE("ensemble_validation matches NumPy's agreement with the ensemble's argmax") {
  std::vector<host_matrix> candidates;
  for (const std::vector<float>& values : ref::ensv_candidates) {
    host_matrix m{index_t(ref::ensv_classes), index_t(ref::ensv_samples)};
    m.values = values;
    candidates.push_back(m);
  }
  const auto views = views_of(candidates);
  CHECK(sel::ensemble_pseudo_labels(views) == ref::ensv_labels);
  // Counts over n samples divided by n: exact.
  CHECK(sel::ensemble_validation(views) == ref::ensv_scores);
}

TEST_CASE("ensemble_validation scores identical candidates, and a lone one, 1") {
  const host_matrix p = random_predictions(4, 50, 1.0, 1.0, 17);
  CHECK(sel::ensemble_validation(views_of({p, p, p})) == std::vector<double>{1.0, 1.0, 1.0});
  CHECK(sel::ensemble_validation(views_of({p})) == std::vector<double>{1.0});
}

TEST_CASE("ensemble_validation breaks ties toward the lowest class index") {
  // Two candidates that disagree evenly: the ensemble is (1/2, 1/2) everywhere, label 0.
  host_matrix a(2, 5), b(2, 5), unsure(2, 5);
  for (index_t i = 0; i < 5; ++i) {
    a(0, i) = 0.75f, a(1, i) = 0.25f;
    b(0, i) = 0.25f, b(1, i) = 0.75f;
    unsure(0, i) = unsure(1, i) = 0.5f;  // its own argmax is a tie too: class 0
  }
  CHECK(sel::ensemble_pseudo_labels(views_of({a, b})) == std::vector<std::int32_t>(5, 0));
  CHECK(sel::ensemble_validation(views_of({a, b})) == std::vector<double>{1.0, 0.0});
  CHECK(sel::ensemble_validation(views_of({b, a})) == std::vector<double>{0.0, 1.0});
  CHECK(sel::ensemble_validation(views_of({b, unsure})) == std::vector<double>{1.0, 0.0});
}

TEST_CASE("ensemble_validation rewards the mistake most candidates share") {
  // Truth: class i mod 3. Two candidates confuse classes 1 and 2 alike; the third is right.
  const auto confident = [](index_t (*label)(index_t)) {
    host_matrix p(3, 30);
    for (index_t i = 0; i < 30; ++i) {
      for (index_t k = 0; k < 3; ++k) p(k, i) = 0.1f;
      p(label(i), i) = 0.8f;
    }
    return p;
  };
  const host_matrix right = confident([](index_t i) { return i % 3; });
  const host_matrix confused = confident([](index_t i) { return i % 3 == 0 ? 0 : 3 - i % 3; });
  const std::vector<double> scores =
      sel::ensemble_validation(views_of({confused, right, confused}));
  CHECK(scores[0] == 1.0);
  CHECK(scores[1] == doctest::Approx(1.0 / 3).epsilon(1e-15));
  CHECK(scores[2] == 1.0);
}

// --- domain_classifier ----------------------------------------------------------------------

TEST_CASE("domain_classifier recovers the target fraction at each point of a saturated model") {
  // Source: 30 at −1, 10 at +1; target: 10 at −1, 30 at +1 ⇒ p(t|−1) = 1/4, p(t|+1) = 3/4.
  const two_point_domains d(30, 10, 10, 30);
  sel::domain_classifier_args args;
  args.l2 = 0;
  args.tolerance = 1e-12;
  const sel::domain_classifier c(d.source.view(), d.target.view(), args);
  CHECK(c.converged());
  CHECK(c.width() == 1);
  CHECK(c.probability_target(&minus_one) == doctest::Approx(0.25).epsilon(1e-10));
  CHECK(c.probability_target(&plus_one) == doctest::Approx(0.75).epsilon(1e-10));
  // Equal domain sizes: the density ratio is the odds, p_t(x)/p_s(x) = (10/40)/(30/40) = 1/3.
  CHECK(c.log_prior_odds() == 0.0);
  CHECK(c.density_ratio(&minus_one) == doctest::Approx(1.0 / 3).epsilon(1e-9));
  CHECK(c.density_ratio(&plus_one) == doctest::Approx(3.0).epsilon(1e-9));
}

TEST_CASE("domain_classifier's density ratio undoes unequal domain sizes, balanced or not") {
  // Source: 60 at −1, 20 at +1 (3/4, 1/4); target: 5 at −1, 15 at +1 (1/4, 3/4).
  const two_point_domains d(60, 20, 5, 15);
  for (const bool balanced : {false, true}) {
    CAPTURE(balanced);
    sel::domain_classifier_args args;
    args.l2 = 0;
    args.tolerance = 1e-12;
    args.balance_domains = balanced;
    const sel::domain_classifier c(d.source.view(), d.target.view(), args);
    CHECK(c.converged());
    CHECK(c.log_prior_odds() == doctest::Approx(balanced ? 0.0 : std::log(20.0 / 80.0)));
    // Unbalanced: p(t|−1) = 5/65; balanced, each target sample weighs 4 source ones: 20/80.
    CHECK(c.probability_target(&minus_one) ==
          doctest::Approx(balanced ? 20.0 / 80.0 : 5.0 / 65.0).epsilon(1e-10));
    CHECK(c.density_ratio(&minus_one) == doctest::Approx((1.0 / 4) / (3.0 / 4)).epsilon(1e-9));
    CHECK(c.density_ratio(&plus_one) == doctest::Approx((3.0 / 4) / (1.0 / 4)).epsilon(1e-9));
  }
}

TEST_CASE("domain_classifier separates linearly separable domains with a regularised finite fit") {
  // Coordinate 0 is ≤ −1 for source, ≥ +1 for target; coordinates 1, 2 are noise.
  host_matrix source = gaussian_features(3, 200, 0.0, 21),
              target = gaussian_features(3, 150, 0.0, 22);
  for (index_t i = 0; i < source.cols; ++i) source(0, i) = -1.0f - std::abs(source(0, i));
  for (index_t i = 0; i < target.cols; ++i) target(0, i) = 1.0f + std::abs(target(0, i));
  const sel::domain_classifier c(source.view(), target.view());
  CHECK(c.converged());
  CHECK(std::isfinite(c.bias()));
  for (index_t i = 0; i < source.cols; ++i) CHECK(c.logit(&source(0, i)) < 0);
  for (index_t i = 0; i < target.cols; ++i) CHECK(c.logit(&target(0, i)) > 0);
  // The separating coordinate carries the weight.
  CHECK(std::abs(c.weights()[0]) > 10 * std::abs(c.weights()[1]));
  CHECK(std::abs(c.weights()[0]) > 10 * std::abs(c.weights()[2]));
  // Without regularisation the optimum is at infinity: the weight grows until the gradient,
  // which decays like e^−margin, drops below the tolerance, or the iterations run out.
  sel::domain_classifier_args free;
  free.l2 = 0;
  free.max_iterations = 20;
  const sel::domain_classifier unbounded(source.view(), target.view(), free);
  INFO("l2 = 0: w0 " << unbounded.weights()[0] << " after " << unbounded.iterations()
                     << " iterations; l2 = 1e-3: w0 " << c.weights()[0]);
  CHECK(unbounded.iterations() <= 20);
  CHECK(unbounded.weights()[0] > 2 * c.weights()[0]);
  for (index_t i = 0; i < source.cols; ++i) CHECK(unbounded.logit(&source(0, i)) < 0);
  for (index_t i = 0; i < target.cols; ++i) CHECK(unbounded.logit(&target(0, i)) > 0);
}

TEST_CASE("domain_classifier's solution zeroes a naive gradient of the documented objective") {
  // Overlapping Gaussians (not separable), features of different scales and offsets.
  host_matrix source = gaussian_features(4, 300, 0.0, 31),
              target = gaussian_features(4, 200, 0.7, 32);
  for (host_matrix* m : {&source, &target})
    for (index_t i = 0; i < m->cols; ++i) {
      (*m)(1, i) = 100.0f + 50.0f * (*m)(1, i);
      (*m)(3, i) = 0.01f * (*m)(3, i) - 3.0f;
    }
  for (const bool balanced : {false, true}) {
    CAPTURE(balanced);
    sel::domain_classifier_args args;
    args.l2 = 0.01;
    args.tolerance = 1e-10;
    args.balance_domains = balanced;
    const sel::domain_classifier c(source.view(), target.view(), args);
    REQUIRE(c.converged());
    // Naive: pooled mean and population standard deviation, then ∇J by its definition.
    const index_t d = 4, ns = source.cols, nt = target.cols, n = ns + nt;
    const auto at = [&](index_t k, index_t i) {
      return i < ns ? double(source(k, i)) : double(target(k, i - ns));
    };
    std::vector<double> mu(d, 0.0), sd(d, 0.0), grad(d + 1, 0.0);
    for (index_t k = 0; k < d; ++k) {
      for (index_t i = 0; i < n; ++i) mu[k] += at(k, i) / double(n);
      for (index_t i = 0; i < n; ++i) sd[k] += (at(k, i) - mu[k]) * (at(k, i) - mu[k]) / double(n);
      sd[k] = std::sqrt(sd[k]);
      CHECK(c.feature_mean()[k] == doctest::Approx(mu[k]).epsilon(1e-12));
      CHECK(c.feature_scale()[k] == doctest::Approx(sd[k]).epsilon(1e-12));
    }
    double objective = 0;
    for (index_t i = 0; i < n; ++i) {
      double z = c.bias();
      for (index_t k = 0; k < d; ++k) z += c.weights()[k] * (at(k, i) - mu[k]) / sd[k];
      const double y = i < ns ? 0 : 1;
      const double a = balanced ? double(n) / (2.0 * double(i < ns ? ns : nt)) : 1.0;
      const double p = 1 / (1 + std::exp(-z));
      objective -= a * (y * std::log(p) + (1 - y) * std::log(1 - p)) / double(n);
      for (index_t k = 0; k < d; ++k)
        grad[k] += a * (p - y) * (at(k, i) - mu[k]) / sd[k] / double(n);
      grad[d] += a * (p - y) / double(n);
    }
    for (index_t k = 0; k < d; ++k) {
      grad[k] += args.l2 * c.weights()[k];
      objective += 0.5 * args.l2 * c.weights()[k] * c.weights()[k];
    }
    for (index_t k = 0; k <= d; ++k) CHECK(std::abs(grad[k]) < 1e-9);
    CHECK(c.objective() == doctest::Approx(objective).epsilon(1e-12));
    // The shift is on coordinate 0: it dominates the fitted direction.
    CHECK(c.weights()[0] > 0.3);
  }
}

TEST_CASE("domain_classifier is deterministic: the same data give bitwise the same model") {
  const host_matrix source = gaussian_features(5, 400, 0.0, 41),
                    target = gaussian_features(5, 300, 0.5, 42);
  const sel::domain_classifier a(source.view(), target.view()), b(source.view(), target.view());
  CHECK(a.weights() == b.weights());
  CHECK(a.bias() == b.bias());
  CHECK(a.iterations() == b.iterations());
}

// --- proxy_a_distance -----------------------------------------------------------------------

TEST_CASE("proxy_a_distance is near 0 for two samples of the same distribution") {
  const host_matrix source = gaussian_features(5, 2000, 0.0, 51),
                    target = gaussian_features(5, 2000, 0.0, 52);
  for (const std::uint64_t seed : {0u, 1u, 2u}) {
    CAPTURE(seed);
    sel::pad_args args;
    args.seed = seed;
    const double pad = sel::proxy_a_distance(source.view(), target.view(), args);
    INFO("PAD of identical distributions, seed " << seed << ": " << pad);
    CHECK(std::abs(pad) < 0.3);
    CHECK(pad == sel::proxy_a_distance(source.view(), target.view(), args));  // deterministic
  }
}

TEST_CASE("proxy_a_distance is 2 for linearly separable domains") {
  host_matrix source = gaussian_features(3, 500, 0.0, 61),
              target = gaussian_features(3, 301, 0.0, 62);
  for (index_t i = 0; i < source.cols; ++i) source(0, i) = -0.5f - std::abs(source(0, i));
  for (index_t i = 0; i < target.cols; ++i) target(0, i) = 0.5f + std::abs(target(0, i));
  CHECK(sel::proxy_a_distance(source.view(), target.view()) == 2.0);
}

TEST_CASE("proxy_a_distance grows with the shift between the domains") {
  double previous = -3;
  for (const double shift : {0.0, 0.5, 1.5, 4.0}) {
    CAPTURE(shift);
    const host_matrix source = gaussian_features(4, 1000, 0.0, 71);
    const host_matrix target = gaussian_features(4, 1000, shift, 72);
    const double pad = sel::proxy_a_distance(source.view(), target.view());
    CHECK(pad > previous);
    previous = pad;
  }
  // One-dimensional shift s between unit Gaussians: the best error is Φ(−s/2), so PAD ≈
  // 2(1 − 2Φ(−2)) = 1.82 at s = 4.
  CHECK(previous == doctest::Approx(2 * (1 - std::erfc(2 / std::sqrt(2.0)))).epsilon(0.05));
}

TEST_CASE("proxy_a_distance of identical points is exactly 0: every logit is 0, half an error") {
  host_matrix source(2, 10), target(2, 6);
  for (float& v : source.values) v = 1.5f;
  for (float& v : target.values) v = 1.5f;
  sel::pad_args args;
  args.classifier.balance_domains = true;
  CHECK(sel::proxy_a_distance(source.view(), target.view(), args) == 0.0);
}

// --- deep_embedded_validation and dev_risk --------------------------------------------------

TEST_CASE("dev_risk of a constant loss is that loss whatever the weights") {
  const std::vector<double> w{0.2, 3.0, 0.7, 1.1, 0.05}, loss(5, 0.8);
  CHECK(sel::dev_risk(w, loss) == doctest::Approx(0.8).epsilon(1e-14));
}

TEST_CASE("dev_risk with identical weights is the mean weighted loss, not NaN") {
  const std::vector<double> loss{0.1, 0.4, 2.0, 0.5};
  CHECK(sel::dev_risk(std::vector<double>(4, 1.0), loss) == doctest::Approx(0.75).epsilon(1e-15));
  CHECK(sel::dev_risk(std::vector<double>(4, 2.5), loss) ==
        doctest::Approx(2.5 * 0.75).epsilon(1e-15));
  CHECK(sel::dev_risk(std::vector<double>(4, 0.0), loss) == 0.0);
}

TEST_CASE("dev_risk follows the control-variate formula of You et al.") {
  const std::vector<double> w{0.5, 1.5, 1.0, 2.0, 0.25}, loss{1.0, 0.2, 0.6, 0.1, 2.0};
  double mw = 0, ml = 0;
  for (std::size_t i = 0; i < w.size(); ++i) {
    mw += w[i] / 5;
    ml += w[i] * loss[i] / 5;
  }
  double cov = 0, var = 0;
  for (std::size_t i = 0; i < w.size(); ++i) {
    cov += (w[i] * loss[i] - ml) * (w[i] - mw) / 4;
    var += (w[i] - mw) * (w[i] - mw) / 4;
  }
  const double eta = -cov / var;
  CHECK(sel::dev_risk(w, loss) == doctest::Approx(ml + eta * mw - eta).epsilon(1e-14));
}

TEST_CASE("deep_embedded_validation of identical domains is close to the mean source loss") {
  const host_matrix source = gaussian_features(3, 1000, 0.0, 81),
                    target = gaussian_features(3, 1000, 0.0, 82);
  counter_rng rng(83, rng_stream::user);
  std::vector<double> loss(1000);
  double mean_loss = 0;
  for (double& l : loss) mean_loss += (l = 2 * rng.uniform<double>()) / 1000;
  const sel::domain_classifier c(source.view(), target.view());
  for (const double w : sel::importance_weights(c, source.view())) {
    CHECK(w > 0.75);
    CHECK(w < 1.33);
  }
  const double dev =
      sel::deep_embedded_validation(source.view(), std::span<const double>(loss), target.view());
  INFO("DEV " << dev << ", mean source loss " << mean_loss);
  CHECK(dev == doctest::Approx(mean_loss).epsilon(0.02));
}

TEST_CASE(
    "deep_embedded_validation moves toward the losses of the source samples the target favours") {
  // Source: half at −1 (loss 0.1), half at +1 (loss 2.0); target: 10% at −1, 90% at +1.
  // True weights 0.2 and 1.8, target risk 0.1·0.1 + 0.9·2.0 = 1.81; the source mean is 1.05.
  const two_point_domains d(100, 100, 20, 180);
  std::vector<double> loss(200);
  for (index_t i = 0; i < 200; ++i) loss[std::size_t(i)] = i < 100 ? 0.1 : 2.0;
  sel::dev_args exact;
  exact.classifier.l2 = 0;
  exact.classifier.tolerance = 1e-12;
  const double dev = sel::deep_embedded_validation(d.source.view(), std::span<const double>(loss),
                                                   d.target.view(), exact);
  CHECK(dev == doctest::Approx(1.81).epsilon(1e-8));
  // The default, regularised classifier shrinks the weights toward 1 a little.
  const double dev_default = sel::deep_embedded_validation(
      d.source.view(), std::span<const double>(loss), d.target.view());
  CHECK(dev_default > 1.78);  // 1.808
  CHECK(dev_default <= 1.81 + 1e-9);
  // Float losses give the same risk.
  const std::vector<float> loss_f(loss.begin(), loss.end());
  CHECK(sel::deep_embedded_validation(d.source.view(), std::span<const float>(loss_f),
                                      d.target.view()) ==
        doctest::Approx(dev_default).epsilon(1e-6));
}

// --- misuse ---------------------------------------------------------------------------------

TEST_CASE("prediction validators reject inputs that are not probability distributions") {
  const host_matrix empty(3, 0);
  host_matrix negative = uniform_predictions(3, 4), nan = negative, logits = negative;
  negative(1, 2) = -0.1f;
  nan(0, 3) = std::numeric_limits<float>::quiet_NaN();
  logits(0, 1) = 2.0f;
  const host_matrix no_classes(0, 4);
  CHECK(throws_naming([&] { (void)sel::mean_entropy(empty.view()); },
                      {"select::mean_entropy", "probabilities", "sample"}));
  CHECK(throws_naming([&] { (void)sel::mean_entropy(no_classes.view()); },
                      {"select::mean_entropy", "probabilities", "row"}));
  CHECK(
      throws_naming([&] { (void)sel::information_maximization(negative.view()); },
                    {"select::information_maximization", "probabilities", "non-negative", "-0.1"}));
  CHECK(throws_naming([&] { (void)sel::information_maximization(nan.view()); },
                      {"probabilities", "finite", "sample 3"}));
  CHECK(throws_naming([&] { (void)sel::mean_entropy(logits.view()); },
                      {"probabilities", "sum to 1", "sample 1"}));
  CHECK(throws_naming([&] { (void)sel::soft_neighborhood_density(logits.view()); },
                      {"select::soft_neighborhood_density", "probabilities"}));
  const host_matrix one = uniform_predictions(3, 1);
  CHECK(throws_naming([&] { (void)sel::soft_neighborhood_density(one.view()); },
                      {"select::soft_neighborhood_density", "probabilities", "at least 2"}));
  const host_matrix ok = uniform_predictions(3, 4);
  for (const double tau : {0.0, -1.0, std::numeric_limits<double>::infinity(),
                           std::numeric_limits<double>::quiet_NaN()}) {
    CAPTURE(tau);
    CHECK(throws_naming([&] { (void)sel::soft_neighborhood_density(ok.view(), tau); },
                        {"select::soft_neighborhood_density", "temperature"}));
  }
}

TEST_CASE("BNM, MaNo and EnsV reject bad inputs, naming the function and the argument") {
  const host_matrix empty(3, 0), no_classes(0, 4), ok = uniform_predictions(3, 10);
  host_matrix logits = ok, nan = ok;
  logits(0, 1) = 2.0f;
  nan(2, 3) = std::numeric_limits<float>::quiet_NaN();
  // batch_nuclear_norm
  CHECK(throws_naming([&] { (void)sel::batch_nuclear_norm(logits.view()); },
                      {"select::batch_nuclear_norm", "probabilities", "sum to 1", "not logits"}));
  CHECK(throws_naming([&] { (void)sel::batch_nuclear_norm(empty.view()); },
                      {"select::batch_nuclear_norm", "probabilities", "at least 1 sample"}));
  CHECK(throws_naming([&] { (void)sel::batch_nuclear_norm(no_classes.view()); },
                      {"select::batch_nuclear_norm", "probabilities", "row"}));
  // mano
  CHECK(throws_naming([&] { (void)sel::mano(logits.view()); },
                      {"select::mano", "probabilities", "sum to 1"}));
  CHECK(throws_naming([&] { (void)sel::mano(empty.view()); },
                      {"select::mano", "probabilities", "at least 1 sample"}));
  for (const double p :
       {0.5, std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN()}) {
    CAPTURE(p);
    CHECK(throws_naming([&] { (void)sel::mano(ok.view(), p); }, {"select::mano", "norm_order"}));
    CHECK(throws_naming([&] { (void)sel::mano_from_logits(ok.view(), {.norm_order = p}); },
                        {"select::mano_from_logits", "args.norm_order"}));
  }
  // mano_from_logits and mano_criterion take logits: any finite values
  CHECK(throws_naming([&] { (void)sel::mano_from_logits(nan.view()); },
                      {"select::mano_from_logits", "logits", "finite", "sample 3"}));
  CHECK(throws_naming([&] { (void)sel::mano_from_logits(empty.view()); },
                      {"select::mano_from_logits", "logits", "at least 1 sample"}));
  CHECK(throws_naming(
      [&] {
        (void)sel::mano_from_logits(ok.view(),
                                    {.threshold = std::numeric_limits<double>::quiet_NaN()});
      },
      {"select::mano_from_logits", "args.threshold", "NaN"}));
  CHECK(throws_naming([&] { (void)sel::mano_criterion(no_classes.view()); },
                      {"select::mano_criterion", "logits", "row"}));
  // ensemble_validation and ensemble_pseudo_labels
  CHECK(throws_naming([] { (void)sel::ensemble_validation({}); },
                      {"select::ensemble_validation", "candidates", "at least one", "none"}));
  CHECK(throws_naming([] { (void)sel::ensemble_pseudo_labels({}); },
                      {"select::ensemble_pseudo_labels", "candidates", "none"}));
  const host_matrix fewer_samples = uniform_predictions(3, 9),
                    more_classes = uniform_predictions(4, 10);
  CHECK(throws_naming(
      [&] {
        (void)sel::ensemble_validation(views_of({ok, fewer_samples}));
      },
      {"select::ensemble_validation", "candidates[1]", "3x10 matrix", "the shape of candidates[0]",
       "found 3x9 matrix"}));
  CHECK(throws_naming(
      [&] {
        (void)sel::ensemble_validation(views_of({ok, ok, more_classes}));
      },
      {"select::ensemble_validation", "candidates[2]", "found 4x10 matrix"}));
  CHECK(throws_naming(
      [&] {
        (void)sel::ensemble_validation(views_of({ok, logits}));
      },
      {"select::ensemble_validation", "candidates[1]", "sum to 1", "sample 1"}));
  CHECK(throws_naming(
      [&] {
        (void)sel::ensemble_validation(views_of({empty, empty}));
      },
      {"select::ensemble_validation", "candidates[0]", "at least 1 sample"}));
}

TEST_CASE("feature validators reject mismatched widths, too few samples and non-finite values") {
  const host_matrix s = gaussian_features(3, 10, 0.0, 91), t = gaussian_features(3, 8, 0.0, 92);
  const host_matrix narrow = gaussian_features(2, 8, 0.0, 93),
                    one = gaussian_features(3, 1, 0.0, 94);
  host_matrix inf = t;
  inf(2, 5) = std::numeric_limits<float>::infinity();
  CHECK(throws_naming([&] { (void)sel::proxy_a_distance(s.view(), narrow.view()); },
                      {"select::proxy_a_distance", "target_features", "3 rows", "2 rows"}));
  CHECK(throws_naming([&] { (void)sel::proxy_a_distance(one.view(), t.view()); },
                      {"select::proxy_a_distance", "source_features", "at least 2"}));
  CHECK(throws_naming([&] { (void)sel::proxy_a_distance(s.view(), inf.view()); },
                      {"target_features", "finite", "sample 5"}));
  CHECK(throws_naming([&] { (void)sel::domain_classifier(s.view(), narrow.view()); },
                      {"select::domain_classifier", "target"}));
  sel::domain_classifier_args bad;
  bad.l2 = -1;
  CHECK(throws_naming([&] { (void)sel::domain_classifier(s.view(), t.view(), bad); },
                      {"select::domain_classifier", "args.l2"}));
  bad = {};
  bad.max_iterations = 0;
  CHECK(throws_naming([&] { (void)sel::domain_classifier(s.view(), t.view(), bad); },
                      {"args.max_iterations"}));
  const sel::domain_classifier c(s.view(), t.view());
  CHECK(throws_naming([&] { (void)c.logits(narrow.view()); },
                      {"select::domain_classifier::logits", "x", "3 rows"}));
  CHECK(throws_naming([&] { (void)sel::importance_weights(c, narrow.view()); },
                      {"select::domain_classifier::density_ratios", "x"}));
}

TEST_CASE("deep_embedded_validation and dev_risk reject losses that do not match the samples") {
  const host_matrix s = gaussian_features(3, 10, 0.0, 95), t = gaussian_features(3, 8, 0.0, 96);
  const host_matrix narrow = gaussian_features(2, 8, 0.0, 97);
  const std::vector<double> short_loss(9, 1.0);
  std::vector<double> loss(10, 1.0);
  CHECK(throws_naming(
      [&] {
        (void)sel::deep_embedded_validation(s.view(), std::span<const double>(short_loss),
                                            t.view());
      },
      {"select::deep_embedded_validation", "source_losses", "10 values", "found 9"}));
  CHECK(throws_naming(
      [&] {
        (void)sel::deep_embedded_validation(s.view(), std::span<const double>(loss), narrow.view());
      },
      {"select::deep_embedded_validation", "target_features"}));
  loss[4] = -0.5;
  CHECK(throws_naming(
      [&] {
        (void)sel::deep_embedded_validation(s.view(), std::span<const double>(loss), t.view());
      },
      {"source_losses", "-0.5", "sample 4"}));
  loss[4] = std::numeric_limits<double>::quiet_NaN();
  CHECK(throws_naming(
      [&] {
        (void)sel::deep_embedded_validation(s.view(), std::span<const double>(loss), t.view());
      },
      {"source_losses", "finite"}));
  CHECK(
      throws_naming([] { (void)sel::dev_risk(std::vector<double>{1.0}, std::vector<double>{1.0}); },
                    {"select::dev_risk", "weights", "at least 2"}));
  CHECK(throws_naming(
      [] {
        (void)sel::dev_risk(std::vector<double>{1.0, 2.0}, std::vector<double>{1.0});
      },
      {"select::dev_risk", "losses"}));
  CHECK(throws_naming(
      [] {
        (void)sel::dev_risk(std::vector<double>{1.0, -2.0}, std::vector<double>{1.0, 1.0});
      },
      {"select::dev_risk", "weights", "-2"}));
}

}  // namespace select_validators_test
