// Plain references of the losses of the heads without a discriminator, written out as their
// papers state them, on the reference outputs of head_checks.hpp: the tests of each head and of
// their sums (head::combine) differentiate them.
#pragma once
#include "head_checks.hpp"

#include <cmath>
#include <optional>
#include <vector>

namespace dafuse::test::heads {

// ‖C_s − C_t‖²_F / (4F²), C the unbiased covariance of the first or last `batch` columns of h.
inline double reference_coral(const reference_outputs& out, index_t batch) {
  constexpr index_t f = features;
  std::vector<double> difference(std::size_t(f * f), 0.0);
  for (int domain = 0; domain < 2; ++domain) {
    const double sign = domain == 0 ? 1.0 : -1.0;
    const double* h = out.h.data() + domain * batch * f;
    std::vector<double> mean(std::size_t(f), 0.0);
    for (index_t c = 0; c < batch; ++c)
      for (index_t j = 0; j < f; ++j) mean[std::size_t(j)] += h[c * f + j] / double(batch);
    for (index_t a = 0; a < f; ++a)
      for (index_t b = 0; b < f; ++b) {
        double sum = 0;
        for (index_t c = 0; c < batch; ++c)
          sum += (h[c * f + a] - mean[std::size_t(a)]) * (h[c * f + b] - mean[std::size_t(b)]);
        difference[std::size_t(a * f + b)] += sign * sum / double(batch - 1);
      }
  }
  double loss = 0;
  for (const double d : difference) loss += d * d;
  return loss / (4.0 * double(f * f));
}

inline double squared_distance(const reference_outputs& out, index_t i, index_t j) {
  double d = 0;
  for (index_t f = 0; f < features; ++f) {
    const double v = out.h[std::size_t(i * features + f)] - out.h[std::size_t(j * features + f)];
    d += v * v;
  }
  return d;
}

// The pairs an estimator reads, each (i, j, c) with its coefficient, written out as in the
// papers: all pairs of the unbiased estimator, or the linear one's quad-tuples.
struct pair {
  index_t i, j;
  double c;
};
inline std::vector<pair> estimator_pairs(index_t b, bool linear) {
  std::vector<pair> pairs;
  if (linear) {
    for (index_t i = 0; i < b / 2; ++i) {
      const index_t s = 2 * i, t = b + 2 * i;
      pairs.push_back({s, s + 1, 2.0 / double(b)});
      pairs.push_back({t, t + 1, 2.0 / double(b)});
      pairs.push_back({s, t + 1, -2.0 / double(b)});
      pairs.push_back({s + 1, t, -2.0 / double(b)});
    }
    return pairs;
  }
  // Σ_{i≠j} k(s_i, s_j)/(B(B−1)) + Σ_{i≠j} k(t_i, t_j)/(B(B−1)) − 2·Σ_{i,j} k(s_i, t_j)/B²,
  // over ordered pairs.
  for (index_t i = 0; i < 2 * b; ++i)
    for (index_t j = 0; j < 2 * b; ++j) {
      if (i == j) continue;
      const bool same = (i < b) == (j < b);
      pairs.push_back({i, j, same ? 1.0 / double(b * (b - 1)) : -1.0 / double(b * b)});
    }
  return pairs;
}

// MMD² of the reference outputs; the mean distance m̄ is taken from `fixed_mean` when given
// (the gradient holds it constant), else from these outputs, and returned in `seen`.
inline double reference_mmd(const reference_outputs& out,
                            index_t b,
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

// L_MCC of the target rows (columns b..2b of z) at temperature t; the row weights are taken from
// `fixed` when given, else computed from these logits and returned in `seen`.
inline double reference_mcc(const reference_outputs& out,
                            index_t b,
                            double t,
                            const std::vector<double>* fixed,
                            std::vector<double>* seen = nullptr) {
  std::vector<double> y(static_cast<std::size_t>(b * classes)), w(static_cast<std::size_t>(b));
  double weight_sum = 0;
  for (index_t i = 0; i < b; ++i) {
    const double* z = &out.z[std::size_t((b + i) * classes)];
    double total = 0;
    for (index_t k = 0; k < classes; ++k) total += std::exp(z[k] / t);
    double entropy = 0;
    for (index_t k = 0; k < classes; ++k) {
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
  for (index_t j = 0; j < classes; ++j)
    for (index_t k = 0; k < classes; ++k)
      for (index_t i = 0; i < b; ++i)
        c[std::size_t(j * classes + k)] +=
            use[std::size_t(i)] * y[std::size_t(i * classes + j)] * y[std::size_t(i * classes + k)];
  double loss = 0;
  for (index_t k = 0; k < classes; ++k) {
    double column = 0;
    for (index_t j = 0; j < classes; ++j) column += c[std::size_t(j * classes + k)];
    for (index_t j = 0; j < classes; ++j)
      if (j != k) loss += c[std::size_t(j * classes + k)] / column;
  }
  return loss / double(classes);
}

}  // namespace dafuse::test::heads
