// SPDX-License-Identifier: Apache-2.0
//! @file select/validators.hpp
//! @brief Label-free model-selection validators for unsupervised domain adaptation (entropy, IM,
//! SND, BNM, MaNo, EnsV, PAD, DEV) and the logistic domain classifier PAD and DEV are built on.
//!
//! Every validator is a pure function of numbers the caller already has: target predictions,
//! features of both domains, per-sample source losses. None reads a target label, so each may be
//! used to pick a checkpoint or a hyper-parameter in a genuinely unsupervised setting; a figure
//! chosen with target labels is "oracle" selection and the caller reports it separately.
//!
//! Shapes follow core/buffer.hpp: `probabilities` is a column-major [classes, n] matrix, one
//! sample's distribution per contiguous column; `features` is [width, n]. All arithmetic is in
//! double. Costs: entropy, IM and MaNo O(n·c); BNM O(n·c²); EnsV O(K·n·c) for K candidates; SND
//! O(n²·c) time and O(n·c + 256·n) memory (fine for a few thousand samples, slow for 10⁵); the
//! domain classifier O(iterations·n·d) time and a standardised double copy of its training data
//! (8·n·d bytes).
//!
//! The validators that use Eigen (SND, the domain classifier, PAD, DEV) are templates on their
//! arithmetic type `Real` (double unless a caller asks otherwise): a non-template inline
//! function's Eigen expressions are instantiated in every translation unit that includes this
//! header, used or not; a template's only where it is called (about 1.5 CPU-s for a translation
//! unit that trains without evaluating; docs/benchmarks.md, "Compile time").
#pragma once
#include <dafuse/config.hpp>
#include <dafuse/core/buffer.hpp>
#include <dafuse/core/error.hpp>
#include <dafuse/core/meta.hpp>
#include <dafuse/core/rng.hpp>
#include <dafuse/select/validator.hpp>

#include <Eigen/Core>

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace dafuse::select {

//! How far a column's sum may be from 1 and still count as a probability distribution. A float
//! softmax over C classes sums to 1 within about C·6e-8, so 1e-3 admits any realistic C while
//! still catching logits or unnormalised scores passed by mistake. Columns within the tolerance
//! are divided by their sum (in double) before use.
inline constexpr double probability_tolerance = 1e-3;

//! The counter_rng stream that draws PAD's random halves (substream 0: source, 1: target). Its
//! own id (rng_stream::domain_split), so PAD's halves never repeat another consumer's draws for
//! the same seed.
inline constexpr rng_stream split_stream = rng_stream::domain_split;

namespace detail {

//! `v` in the shortest form that reads back exactly, locale-independent.
inline std::string number(double v) {
  char buf[32];
  return std::string(buf, std::to_chars(buf, buf + sizeof buf, v).ptr);
}

inline std::string shape_of(matrix_view<const float> x) {
  return std::to_string(x.rows) + "x" + std::to_string(x.cols) + " matrix";
}

//! Checks `x` is a [rows ≥ 1, cols ≥ min_cols] view holding finite values.
inline void check_matrix(std::string_view where,
                         std::string_view field,
                         matrix_view<const float> x,
                         index_t min_cols,
                         std::string_view rows_are) {
  if (x.rows < 1)
    fail(where, field, "at least one row (" + std::string(rows_are) + ")", shape_of(x));
  if (x.cols < min_cols)
    fail(where, field, "at least " + std::to_string(min_cols) + " sample(s) (columns)",
         shape_of(x));
  if (x.data == nullptr) fail(where, field, "a view with data", "a null data pointer");
  for (index_t i = 0; i < x.cols; ++i)
    for (index_t k = 0; k < x.rows; ++k)
      if (!std::isfinite(x(k, i)))
        fail(where, field, "finite values",
             number(x(k, i)) + " at row " + std::to_string(k) + " of sample " + std::to_string(i));
}

//! Checks every column of `p` is a distribution: non-negative, finite, summing to 1 within
//! probability_tolerance.
inline void check_probabilities(std::string_view where,
                                std::string_view field,
                                matrix_view<const float> p,
                                index_t min_cols) {
  check_matrix(where, field, p, min_cols, "classes");
  for (index_t i = 0; i < p.cols; ++i) {
    double sum = 0;
    for (index_t k = 0; k < p.rows; ++k) {
      if (p(k, i) < 0)
        fail(
            where, field, "non-negative probabilities",
            number(p(k, i)) + " at class " + std::to_string(k) + " of sample " + std::to_string(i));
      sum += p(k, i);
    }
    if (std::abs(sum - 1.0) > probability_tolerance)
      fail(where, field,
           "columns that each sum to 1 within " + number(probability_tolerance) +
               " (softmax outputs, not logits)",
           "sample " + std::to_string(i) + " summing to " + number(sum));
  }
}

//! Checks two feature matrices can be compared: same width, enough samples, finite values.
inline void check_feature_pair(std::string_view where,
                               std::string_view source_field,
                               matrix_view<const float> source,
                               index_t source_min,
                               std::string_view target_field,
                               matrix_view<const float> target,
                               index_t target_min) {
  check_matrix(where, source_field, source, source_min, "features");
  check_matrix(where, target_field, target, target_min, "features");
  if (target.rows != source.rows)
    fail(where, target_field,
         std::to_string(source.rows) + " rows, the feature width of " + std::string(source_field),
         std::to_string(target.rows) + " rows");
}

//! Shannon entropy in nats of one column p[0, classes) after dividing it by its sum; 0·log 0 = 0.
inline double entropy(const float* p, index_t classes) {
  double sum = 0;
  for (index_t k = 0; k < classes; ++k) sum += p[k];
  double h = 0;
  for (index_t k = 0; k < classes; ++k) {
    const double q = double(p[k]) / sum;
    if (q > 0) h -= q * std::log(q);
  }
  return h;
}

//! The logistic function σ(z) = 1/(1 + e^−z), without overflow for any z.
inline double sigmoid(double z) {
  if (z >= 0) return 1.0 / (1.0 + std::exp(-z));
  const double e = std::exp(z);
  return e / (1.0 + e);
}

//! Columns `order[first, first + count)` of `x`, copied into a contiguous [rows, count] block.
inline std::vector<float> gather_columns(matrix_view<const float> x,
                                         const std::vector<index_t>& order,
                                         index_t first,
                                         index_t count) {
  std::vector<float> out(static_cast<std::size_t>(x.rows * count));
  for (index_t j = 0; j < count; ++j)
    std::copy_n(x.data + order[std::size_t(first + j)] * x.rows, x.rows, out.begin() + j * x.rows);
  return out;
}

//! A seeded uniform permutation of [0, n) (Fisher–Yates with counter_rng::below).
inline std::vector<index_t> shuffled(index_t n, std::uint64_t seed, std::uint32_t substream) {
  std::vector<index_t> order(static_cast<std::size_t>(n));
  std::iota(order.begin(), order.end(), index_t(0));
  counter_rng rng(seed, split_stream, substream);
  for (index_t i = n - 1; i > 0; --i)
    std::swap(order[std::size_t(i)], order[rng.below(static_cast<std::uint32_t>(i + 1))]);
  return order;
}

}  // namespace detail

// --- Prediction-based validators ------------------------------------------------------------

//! Mean Shannon entropy (nats) of the per-sample predicted class distributions:
//!   H̄ = (1/n) Σ_i H(p_i),   H(p) = −Σ_k p_k log p_k.
//! **Lower is better.** Range [0, log C]. Minimum-entropy selection/regularisation: Morerio,
//! Cavazza, Murino, "Minimal-entropy correlation alignment for unsupervised deep domain
//! adaptation", ICLR 2018; benchmarked as a validator by Musgrave, Belongie, Lim, "Benchmarking
//! validation methods for unsupervised domain adaptation", 2022. Caveat: a model that collapses
//! onto one class with full confidence scores the best possible 0.
//! probabilities: [classes, n], n ≥ 1, each column a distribution (see probability_tolerance).
inline double mean_entropy(matrix_view<const float> probabilities) {
  detail::check_probabilities("select::mean_entropy", "probabilities", probabilities, 1);
  double total = 0;
  for (index_t i = 0; i < probabilities.cols; ++i)
    total += detail::entropy(probabilities.data + i * probabilities.rows, probabilities.rows);
  return total / double(probabilities.cols);
}

//! Information maximization, the mutual information between input and predicted class under the
//! empirical distribution:
//!   IM = H(p̄) − (1/n) Σ_i H(p_i),   p̄ = (1/n) Σ_i p_i.
//! **Higher is better.** Range [0, log C]: log C for confident predictions spread evenly over the
//! C classes, 0 for uniform predictions and for a collapse onto one class. Gomes, Krause, Perona,
//! "Discriminative clustering by regularized information maximization", NeurIPS 2010; Shi & Sha,
//! "Information-theoretical learning of discriminative clusters for unsupervised domain
//! adaptation", ICML 2012; as a validator: Musgrave et al. 2022. IM ≥ 0 by concavity of H; the
//! result is clamped at 0 so rounding never reports a tiny negative value.
inline double information_maximization(matrix_view<const float> probabilities) {
  detail::check_probabilities("select::information_maximization", "probabilities", probabilities,
                              1);
  const index_t c = probabilities.rows, n = probabilities.cols;
  std::vector<double> mean(static_cast<std::size_t>(c), 0.0);
  double mean_h = 0;
  for (index_t i = 0; i < n; ++i) {
    const float* p = probabilities.data + i * c;
    double sum = 0;
    for (index_t k = 0; k < c; ++k) sum += p[k];
    for (index_t k = 0; k < c; ++k) mean[std::size_t(k)] += double(p[k]) / sum;
    mean_h += detail::entropy(p, c);
  }
  double h_mean = 0;
  for (const double m : mean) {
    const double q = m / double(n);
    if (q > 0) h_mean -= q * std::log(q);
  }
  return std::max(0.0, h_mean - mean_h / double(n));
}

//! Soft neighbourhood density (SND): Saito, Kim, Teterwak, Sclaroff, Darrell, Saenko, "Tune it
//! the right way: unsupervised validation of domain adaptation via soft neighborhood density",
//! ICCV 2021. With x̂_i = p_i/‖p_i‖₂ (target predictions, L2-normalised):
//!   S_ij = x̂_iᵀx̂_j / τ (j ≠ i),  q_ij = exp(S_ij) / Σ_{l≠i} exp(S_il),
//!   SND = (1/n) Σ_i H(q_i) = −(1/n) Σ_i Σ_{j≠i} q_ij log q_ij.
//! **Higher is better**: samples sitting in dense clusters spread their soft neighbour
//! distribution over many near neighbours (high entropy); isolated samples put it on a few.
//! Range [0, log(n − 1)]. Self-similarity is excluded exactly; the authors' code fills the
//! diagonal with −1/τ instead, which gives the self term a weight below e^−1/τ (2·10⁻⁹ at τ = 0.05)
//! of any neighbour's, since probability vectors have similarities ≥ 0. Caveat: whenever all
//! samples look alike — a collapse onto one class, or uniformly unsure predictions — every sample
//! is every other's near neighbour and SND approaches its maximum log(n − 1).
//! Cost O(n²·c) time (an Eigen product per block of 256 samples) and O(256·n) extra memory:
//! fine for a few thousand samples, slow for 10⁵.
//! probabilities: [classes, n], n ≥ 2; temperature τ > 0 (0.05 in the paper). `Real`: the
//! arithmetic's type (see the file comment).
template <class Real = double>
double soft_neighborhood_density(matrix_view<const float> probabilities,
                                 double temperature = 0.05) {
  using matrix = Eigen::Matrix<Real, Eigen::Dynamic, Eigen::Dynamic>;
  constexpr std::string_view where = "select::soft_neighborhood_density";
  detail::check_probabilities(where, "probabilities", probabilities, 2);
  if (!(temperature > 0) || !std::isfinite(temperature))
    fail(where, "temperature", "a finite value > 0 (Saito et al. use 0.05)",
         detail::number(temperature));
  const index_t c = probabilities.rows, n = probabilities.cols;
  // xhat: [c, n], unit columns (a column summing to ~1 has ‖p‖₂ ≥ 1/√c, never 0).
  matrix xhat(c, n);
  for (index_t i = 0; i < n; ++i) {
    double sq = 0;
    for (index_t k = 0; k < c; ++k) sq += double(probabilities(k, i)) * probabilities(k, i);
    const double inv = 1.0 / std::sqrt(sq);
    for (index_t k = 0; k < c; ++k) xhat(k, i) = probabilities(k, i) * inv;
  }
  const double inv_t = 1.0 / temperature;
  std::vector<double> row_entropy(static_cast<std::size_t>(n));
  constexpr index_t block = 256;
  matrix s;  // [n, b]: column r holds S/τ of sample i0 + r to every sample
  for (index_t i0 = 0; i0 < n; i0 += block) {
    const index_t b = std::min(block, n - i0);
    s.resize(n, b);
    s.noalias() = inv_t * (xhat.transpose() * xhat.middleCols(i0, b));
    for (index_t r = 0; r < b; ++r) {
      const index_t i = i0 + r;
      const Real* sim = s.col(r).data();  // S_ij/τ
      double top = -std::numeric_limits<double>::infinity();
      for (index_t j = 0; j < n; ++j)
        if (j != i) top = std::max(top, sim[j]);
      // H(q) = log Z − Σ_j q_j a_j with a_j = S_ij/τ − top and Z = Σ_j e^(a_j).
      double z = 0, za = 0;
      for (index_t j = 0; j < n; ++j) {
        if (j == i) continue;
        const double a = sim[j] - top;
        const double e = std::exp(a);
        z += e;
        za += e * a;
      }
      row_entropy[std::size_t(i)] = std::max(0.0, std::log(z) - za / z);  // ≥ 0 up to rounding
    }
  }
  double total = 0;  // summed in sample order, so the result does not depend on threads
  for (const double h : row_entropy) total += h;
  return total / double(n);
}

namespace detail {

//! The eigenvalues of the symmetric matrix `a`: [m, m], column-major, by cyclic Jacobi rotations
//! (Golub & Van Loan, "Matrix computations", §8.5): each rotation zeroes one off-diagonal pair,
//! and sweeps over every pair repeat until the off-diagonal mass is below ε²‖A‖_F² (quadratic
//! convergence: a handful of sweeps of about 6m³ flops). Deterministic: a fixed order of rotations.
//! Written here rather than taken from Eigen: <Eigen/Eigenvalues> costs every translation unit
//! that includes this header about 0.11 CPU-s of parsing, and BNM's matrices are small.
inline std::vector<double> symmetric_eigenvalues(std::vector<double> a, index_t m) {
  const auto at = [&a, m](index_t r, index_t c) -> double& { return a[std::size_t(c * m + r)]; };
  double frobenius2 = 0;  // ‖A‖_F², which rotations keep
  for (const double v : a) frobenius2 += v * v;
  const double eps = std::numeric_limits<double>::epsilon();
  for (int sweep = 0; sweep < 100; ++sweep) {
    double off = 0;
    for (index_t q = 1; q < m; ++q)
      for (index_t p = 0; p < q; ++p) off += 2 * at(p, q) * at(p, q);
    if (off <= eps * eps * frobenius2) break;
    for (index_t q = 1; q < m; ++q)
      for (index_t p = 0; p < q; ++p) {
        const double apq = at(p, q);
        if (apq == 0) continue;
        // J = [c s; −s c] on rows and columns p, q makes JᵀAJ's (p, q) entry 0 (GVL's sym.schur2;
        // τ² may overflow to ∞ for a negligible a_pq: then t = 0, no rotation).
        const double tau = (at(q, q) - at(p, p)) / (2 * apq);
        const double t = (tau >= 0 ? 1.0 : -1.0) / (std::abs(tau) + std::sqrt(1 + tau * tau));
        const double c = 1 / std::sqrt(1 + t * t), s = t * c;
        for (index_t k = 0; k < m; ++k) {  // A ← A·J: columns p and q
          const double kp = at(k, p), kq = at(k, q);
          at(k, p) = c * kp - s * kq;
          at(k, q) = s * kp + c * kq;
        }
        for (index_t k = 0; k < m; ++k) {  // A ← Jᵀ·A: rows p and q
          const double pk = at(p, k), qk = at(q, k);
          at(p, k) = c * pk - s * qk;
          at(q, k) = s * pk + c * qk;
        }
        at(p, q) = at(q, p) = 0;  // zero exactly, not to rounding
      }
  }
  std::vector<double> lambda(static_cast<std::size_t>(m));
  for (index_t k = 0; k < m; ++k) lambda[std::size_t(k)] = at(k, k);
  return lambda;
}

}  // namespace detail

//! Batch nuclear-norm (BNM): Cui, Wang, Zhuo, Li, Huang, Tian, "Towards discriminability and
//! diversity: batch nuclear-norm maximization under label insufficient situations", CVPR 2020;
//! as a validator: Musgrave et al. 2022 (their BNMValidator), Hu et al. 2024. With P the
//! [n, C] prediction matrix (row i: p_i) and σ_j its singular values,
//!   BNM = ‖P‖_* / n = (1/n) Σ_j σ_j(P),
//! the normalisation of the paper's loss (−‖A‖_*/B) and of Musgrave et al.'s validator. The
//! authors' training code takes the mean of the singular values (÷ min(n, C)) instead: the same
//! ranking of models scored on the same samples.
//! **Higher is better**: ‖P‖_* grows with confidence (the rows' norms) and with diversity (the
//! rank: predictions spread over many classes). Closed forms: confident predictions balanced
//! over the C classes √(C/n), the largest possible when n ≥ C; a confident collapse onto one
//! class 1/√n; uniform predictions 1/√(n·C). Caveats: it scales as 1/√n, so compare scores over
//! the same number of samples only; like IM it prefers balanced predicted classes.
//! Computed in double as Σ_j √λ_j over the eigenvalues of the smaller Gram matrix (PᵀP, [C, C],
//! or PPᵀ when n < C; detail::symmetric_eigenvalues): O(n·m² + sweeps·m³) time, m = min(n, C):
//! 6 ms for C = 65 and 0.5 s for C = 345 (n = 2000, one core of the development machine).
//! Rounding in the Gram matrix moves σ_j by about (n + C)·ε·σ_max²/σ_j; eigenvalues below it,
//! (n + C)·ε·σ_max², count as 0; so σ_j is off by √((n + C)·ε)·σ_max at most: far below what
//! separates two models.
//! probabilities: [classes, n], n ≥ 1, each column a distribution (see probability_tolerance).
inline double batch_nuclear_norm(matrix_view<const float> probabilities) {
  detail::check_probabilities("select::batch_nuclear_norm", "probabilities", probabilities, 1);
  const index_t c = probabilities.rows, n = probabilities.cols;
  std::vector<double> q(static_cast<std::size_t>(c * n));  // Pᵀ: [c, n], columns over their sums
  for (index_t i = 0; i < n; ++i) {
    double sum = 0;
    for (index_t k = 0; k < c; ++k) sum += probabilities(k, i);
    for (index_t k = 0; k < c; ++k) q[std::size_t(i * c + k)] = double(probabilities(k, i)) / sum;
  }
  // PᵀP: [c, c] (a sum of the samples' outer products, in sample order), or PPᵀ: [n, n] (their
  // dot products): the same non-zero eigenvalues σ_j².
  const index_t m = std::min(c, n);
  std::vector<double> gram(static_cast<std::size_t>(m * m), 0.0);
  if (c <= n) {
    for (index_t i = 0; i < n; ++i) {
      const double* x = q.data() + i * c;
      for (index_t b = 0; b < c; ++b)
        for (index_t a = 0; a <= b; ++a) gram[std::size_t(b * c + a)] += x[a] * x[b];
    }
  } else {
    for (index_t j = 0; j < n; ++j)
      for (index_t i = 0; i <= j; ++i) {
        double dot = 0;
        for (index_t k = 0; k < c; ++k)
          dot += q[std::size_t(i * c + k)] * q[std::size_t(j * c + k)];
        gram[std::size_t(j * n + i)] = dot;
      }
  }
  for (index_t b = 0; b < m; ++b)  // the lower triangle from the upper one
    for (index_t a = b + 1; a < m; ++a) gram[std::size_t(b * m + a)] = gram[std::size_t(a * m + b)];
  // An eigenvalue within the Gram matrix's rounding, (n + c)·ε·λ_max, of 0 cannot be told from
  // 0 and counts as 0 (otherwise a rank-deficient P, a collapse onto one class, would gain
  // √((n + c)·ε·λ_max) per such eigenvalue).
  const std::vector<double> lambda = detail::symmetric_eigenvalues(std::move(gram), m);
  const double noise = double(n + c) * std::numeric_limits<double>::epsilon() *
                       *std::max_element(lambda.begin(), lambda.end());
  double nuclear = 0;
  for (const double l : lambda)
    if (l > noise) nuclear += std::sqrt(l);
  return nuclear / double(n);
}

namespace detail {

//! ((1/(n·C)) Σ_i Σ_k q_ik^p)^(1/p) of the rows `normalise(column i, q)` writes: the scaled
//! entry-wise L_p norm of MaNo's normalised prediction matrix Q.
template <class Normalise>
double scaled_lp_norm(matrix_view<const float> x, double p, Normalise normalise) {
  std::vector<double> q(static_cast<std::size_t>(x.rows));
  double total = 0;
  for (index_t i = 0; i < x.cols; ++i) {
    normalise(x.data + i * x.rows, q.data());
    for (const double v : q) total += std::pow(v, p);
  }
  return std::pow(total / (double(x.rows) * double(x.cols)), 1.0 / p);
}

inline void check_norm_order(std::string_view where, std::string_view field, double p) {
  if (!(p >= 1) || !std::isfinite(p))
    fail(where, field, "a finite value ≥ 1 (Xie et al. use 4)", number(p));
}

}  // namespace detail

//! MaNo over probabilities: Xie, Odonnat, Feofanov, Deng, Zhang, An, "MaNo: exploiting matrix
//! norm for unsupervised accuracy estimation under distribution shifts", NeurIPS 2024. With Q the
//! [n, C] matrix of normalised predictions,
//!   MaNo = ‖Q‖_p / (n·C)^(1/p) = ((1/(n·C)) Σ_i Σ_k q_ik^p)^(1/p),   p = 4 in the paper.
//! The paper normalises logits with softmax when the model looks confident (criterion Φ > η,
//! see mano_criterion) and with a Taylor form of softmax otherwise. Probabilities are softmax
//! outputs already, so this is the softmax branch, Q = P (columns divided by their sums); for
//! logits, mano_from_logits chooses as the paper does.
//! **Higher is better** (the paper estimates accuracy with it). Range [1/C, C^(−1/p)]: 1/C for
//! uniform predictions, C^(−1/p) for one-hot predictions of any classes. Caveat: like entropy,
//! it rewards confidence — a confident collapse onto one class scores the maximum. O(n·C).
//! probabilities: [classes, n], n ≥ 1, each column a distribution; norm_order p ≥ 1, finite.
inline double mano(matrix_view<const float> probabilities, double norm_order = 4) {
  constexpr std::string_view where = "select::mano";
  detail::check_probabilities(where, "probabilities", probabilities, 1);
  detail::check_norm_order(where, "norm_order", norm_order);
  const index_t c = probabilities.rows;
  return detail::scaled_lp_norm(probabilities, norm_order, [c](const float* p, double* q) {
    double sum = 0;
    for (index_t k = 0; k < c; ++k) sum += p[k];
    for (index_t k = 0; k < c; ++k) q[k] = double(p[k]) / sum;
  });
}

//! MaNo's calibration criterion: the mean cross-entropy between the uniform distribution u and
//! each sample's softmax (Xie et al. 2024, and the authors' code),
//!   Φ = −(1/(n·C)) Σ_i Σ_k log softmax(z_i)_k = (1/n) Σ_i (log Σ_k e^z_ik − (1/C) Σ_k z_ik)
//!     = log C + (1/n) Σ_i KL(u ‖ softmax(z_i)).
//! Φ ≥ log C, with equality for uniform predictions; it grows as predictions grow confident.
//! logits: [classes, n], n ≥ 1, finite.
inline double mano_criterion(matrix_view<const float> logits) {
  detail::check_matrix("select::mano_criterion", "logits", logits, 1, "classes");
  const index_t c = logits.rows, n = logits.cols;
  double total = 0;
  for (index_t i = 0; i < n; ++i) {
    const float* z = logits.data + i * c;
    const double top = *std::max_element(z, z + c);
    double sum_exp = 0, sum_z = 0;
    for (index_t k = 0; k < c; ++k) {
      sum_exp += std::exp(double(z[k]) - top);
      sum_z += z[k];
    }
    total += top + std::log(sum_exp) - sum_z / double(c);
  }
  return total / double(n);
}

//! Run-time settings of `mano_from_logits` (Xie et al.'s defaults).
struct mano_args {
  double norm_order = 4;  //!< p of the entry-wise L_p norm (≥ 1)
  double threshold = 5;   //!< η: softmax when mano_criterion(logits) > η, else the Taylor form
};

//! MaNo from logits, as Xie et al. 2024 define it (see mano): normalise each sample's logits z
//! with the paper's softrun,
//!   σ(z) = softmax(z)      if Φ > η (mano_criterion: the model looks confident),
//!   σ(z) = v / Σ_k v_k     otherwise, v_k = 1 + z_k + z_k²/2,
//! v the second-order Taylor expansion of e^z (≥ 1/2, so σ(z) is a distribution), and return
//! ((1/(n·C)) Σ_i Σ_k σ(z_i)_k^p)^(1/p). The Taylor form grows polynomially, not exponentially,
//! so one large logit does not make an uncertain model look confident. **Higher is better**;
//! range [1/C, C^(−1/p)]. The authors' code also subtracts each row's smallest v_k before
//! dividing; not here: with two classes that makes every row one-hot, and every model score
//! the same C^(−1/p). O(n·C).
//! logits: [classes, n], n ≥ 1, finite; args.norm_order ≥ 1, finite; args.threshold not NaN.
inline double mano_from_logits(matrix_view<const float> logits, const mano_args& args = {}) {
  constexpr std::string_view where = "select::mano_from_logits";
  detail::check_matrix(where, "logits", logits, 1, "classes");
  detail::check_norm_order(where, "args.norm_order", args.norm_order);
  if (std::isnan(args.threshold))
    fail(where, "args.threshold", "a number (Xie et al. use 5)", "NaN");
  const index_t c = logits.rows;
  if (mano_criterion(logits) > args.threshold)
    return detail::scaled_lp_norm(logits, args.norm_order, [c](const float* z, double* q) {
      const double top = *std::max_element(z, z + c);
      double sum = 0;
      for (index_t k = 0; k < c; ++k) sum += (q[k] = std::exp(double(z[k]) - top));
      for (index_t k = 0; k < c; ++k) q[k] /= sum;
    });
  return detail::scaled_lp_norm(logits, args.norm_order, [c](const float* z, double* q) {
    double sum = 0;
    for (index_t k = 0; k < c; ++k) sum += (q[k] = 1.0 + z[k] + 0.5 * double(z[k]) * z[k]);
    for (index_t k = 0; k < c; ++k) q[k] /= sum;
  });
}

// --- Validators over a set of candidates ----------------------------------------------------

namespace detail {

//! ensemble_pseudo_labels, its errors naming `where`.
inline std::vector<std::int32_t> ensemble_pseudo_labels(
    std::span<const matrix_view<const float>> candidates, std::string_view where) {
  if (candidates.empty()) fail(where, "candidates", "at least one candidate's predictions", "none");
  const index_t c = candidates[0].rows, n = candidates[0].cols;
  for (std::size_t m = 0; m < candidates.size(); ++m) {
    const std::string field = "candidates[" + std::to_string(m) + "]";
    if (m > 0 && (candidates[m].rows != c || candidates[m].cols != n))
      fail(where, field,
           shape_of(candidates[0]) + ", the shape of candidates[0] (the same classes and samples)",
           shape_of(candidates[m]));
    check_probabilities(where, field, candidates[m], 1);
  }
  std::vector<std::int32_t> labels(static_cast<std::size_t>(n));
  std::vector<double> mean(static_cast<std::size_t>(c));
  for (index_t i = 0; i < n; ++i) {
    std::fill(mean.begin(), mean.end(), 0.0);
    for (const matrix_view<const float>& p : candidates) {  // summed in candidate order
      double sum = 0;
      for (index_t k = 0; k < c; ++k) sum += p(k, i);
      for (index_t k = 0; k < c; ++k) mean[std::size_t(k)] += double(p(k, i)) / sum;
    }
    // The 1/K factor changes no argmax; the first maximum wins.
    labels[std::size_t(i)] =
        std::int32_t(std::max_element(mean.begin(), mean.end()) - mean.begin());
  }
  return labels;
}

}  // namespace detail

//! The pseudo-labels of an ensemble of K candidates' target predictions: the argmax of
//! p̄_i = (1/K) Σ_k p_i^(k) (columns divided by their sums), the lowest class index on ties.
//! candidates: K ≥ 1 matrices [classes, n] of one shape, n ≥ 1, each column a distribution.
inline std::vector<std::int32_t> ensemble_pseudo_labels(
    std::span<const matrix_view<const float>> candidates) {
  return detail::ensemble_pseudo_labels(candidates, "select::ensemble_pseudo_labels");
}

//! Ensemble validation (EnsV): Hu, Luo, Liang, Foo, "Towards reliable model selection for
//! unsupervised domain adaptation: an empirical study and a certified baseline", NeurIPS 2024
//! (Datasets and Benchmarks). Given K candidates' target predictions on the same n samples,
//!   p̄_i = (1/K) Σ_k p_i^(k),   ŷ_i = argmax_c p̄_ic,
//!   score_k = (1/n) Σ_i [argmax_c p_ic^(k) = ŷ_i]:
//! each candidate's accuracy against the ensemble's pseudo-labels. Returns the K scores, in the
//! candidates' order. **Higher is better**; range [0, 1]; K identical candidates all score 1.
//! Not a per-model score: adding or removing a candidate changes every score. Ties, in p̄ and in
//! a candidate's own prediction, go to the lowest class index (as torch.max in the authors'
//! code). Caveat: the ensemble is a good labeller only when the candidates' errors differ; a
//! mistake most candidates share becomes the pseudo-label and is rewarded. O(K·n·C).
//! candidates: K ≥ 1 matrices [classes, n] of one shape, n ≥ 1, each column a distribution.
inline std::vector<double> ensemble_validation(
    std::span<const matrix_view<const float>> candidates) {
  const std::vector<std::int32_t> labels =
      detail::ensemble_pseudo_labels(candidates, "select::ensemble_validation");
  std::vector<double> scores;
  scores.reserve(candidates.size());
  for (const matrix_view<const float>& p : candidates) {
    std::size_t agree = 0;
    for (index_t i = 0; i < p.cols; ++i) {
      const float* column = p.data + i * p.rows;
      agree += (std::max_element(column, column + p.rows) - column) == labels[std::size_t(i)];
    }
    scores.push_back(double(agree) / double(p.cols));
  }
  return scores;
}

// --- The domain classifier ------------------------------------------------------------------

//! Run-time settings of `domain_classifier`.
struct domain_classifier_args {
  double l2 = 1e-3;               //!< λ ≥ 0 in J (on standardised features; the bias is free)
  index_t max_iterations = 1000;  //!< L-BFGS iterations at most (≥ 1)
  double tolerance = 1e-8;        //!< stop once ‖∇J‖∞ ≤ tolerance (≥ 0)
  bool balance_domains = false;   //!< weight samples so each domain carries half of the loss
};

//! Logistic regression in double that tells target (label 1) from source (label 0) features:
//!   p(t|x) = σ(wᵀ(x − μ)/s + b),
//!   J(w, b) = (1/n) Σ_i a_i·BCE(p(t|x_i), y_i) + (λ/2)‖w‖²,
//! with μ, s the per-feature mean and standard deviation of the pooled training features
//! (features constant to 1e-12 relative keep s = 1), a_i = 1, or n/(2·n_domain) when
//! balance_domains. J is strictly convex for λ > 0; it is minimised by L-BFGS (10 pairs,
//! backtracking line search, see fit) from w = 0 and b at the training prior log-odds. Fully
//! deterministic: no randomness, a fixed order of sums. With λ = 0 on separable data the optimum
//! is at infinity: the weights grow until ‖∇J‖∞ (which decays like e^−margin) falls below the
//! tolerance or max_iterations is reached. converged() is false when the iterations ran out or
//! the line search could improve neither J nor its slope (rounding); the classifier is usable
//! either way.
class domain_classifier {
 public:
  //! An unfitted classifier (width 0).
  domain_classifier() = default;

  //! Fits on source: [d, n_s] (label 0) and target: [d, n_t] (label 1), n_s, n_t ≥ 1, in `Real`
  //! arithmetic (see the file comment).
  template <class Real = double>
  domain_classifier(matrix_view<const float> source,
                    matrix_view<const float> target,
                    const domain_classifier_args& args = {},
                    std::type_identity<Real> = {}) {
    constexpr std::string_view where = "select::domain_classifier";
    detail::check_feature_pair(where, "source", source, 1, "target", target, 1);
    if (!(args.l2 >= 0) || !std::isfinite(args.l2))
      fail(where, "args.l2", "a finite value ≥ 0", detail::number(args.l2));
    if (args.max_iterations < 1)
      fail(where, "args.max_iterations", "at least 1", std::to_string(args.max_iterations));
    if (!(args.tolerance >= 0) || !std::isfinite(args.tolerance))
      fail(where, "args.tolerance", "a finite value ≥ 0", detail::number(args.tolerance));
    fit<Real>(source, target, args);
  }

  //! Feature width d the classifier was fitted on (0 when unfitted).
  index_t width() const { return index_t(mean_.size()); }

  //! log p(t|x)/p(s|x) for one sample x: [d] (the caller guarantees its width).
  double logit(const float* x) const {
    double z = bias_;
    for (std::size_t k = 0; k < mean_.size(); ++k)
      z += weights_[k] * ((double(x[k]) - mean_[k]) / scale_[k]);
    return z;
  }

  //! p(t|x) for one sample x: [d].
  double probability_target(const float* x) const { return detail::sigmoid(logit(x)); }

  //! Estimated density ratio p_t(x)/p_s(x) = exp(logit(x) − log prior odds), the prior odds
  //! being the training weight of target over that of source (n_t/n_s, or 1 when balanced). The
  //! exponent is clamped to ±700 so the ratio stays finite.
  double density_ratio(const float* x) const {
    return std::exp(std::clamp(logit(x) - log_prior_odds_, -700.0, 700.0));
  }

  //! logit of every column of x: [d, n] (checks the width).
  std::vector<double> logits(matrix_view<const float> x) const {
    check_input(x, "logits");
    std::vector<double> out(static_cast<std::size_t>(x.cols));
    for (index_t i = 0; i < x.cols; ++i) out[std::size_t(i)] = logit(x.data + i * x.rows);
    return out;
  }

  //! density_ratio of every column of x: [d, n] (checks the width).
  std::vector<double> density_ratios(matrix_view<const float> x) const {
    check_input(x, "density_ratios");
    std::vector<double> out(static_cast<std::size_t>(x.cols));
    for (index_t i = 0; i < x.cols; ++i) out[std::size_t(i)] = density_ratio(x.data + i * x.rows);
    return out;
  }

  const std::vector<double>& feature_mean() const { return mean_; }    //!< μ: [d]
  const std::vector<double>& feature_scale() const { return scale_; }  //!< s: [d]
  const std::vector<double>& weights() const { return weights_; }      //!< w (standardised): [d]
  double bias() const { return bias_; }                                //!< b
  double log_prior_odds() const { return log_prior_odds_; }  //!< log(Σ target a / Σ source a)
  index_t iterations() const { return iterations_; }         //!< L-BFGS steps taken
  bool converged() const { return converged_; }            //!< ‖∇J‖∞ ≤ tolerance reached
  double objective() const { return objective_; }          //!< J at the solution
  double gradient_norm() const { return gradient_norm_; }  //!< ‖∇J‖∞ at the solution

 private:
  void check_input(matrix_view<const float> x, std::string_view what) const {
    const std::string where = "select::domain_classifier::" + std::string(what);
    detail::check_matrix(where, "x", x, 0, "features");
    if (x.rows != width())
      fail(where, "x", std::to_string(width()) + " rows, the width the classifier was fitted on",
           std::to_string(x.rows) + " rows");
  }

  template <class Real>
  void fit(matrix_view<const float> source,
           matrix_view<const float> target,
           const domain_classifier_args& args) {
    using matrix = Eigen::Matrix<Real, Eigen::Dynamic, Eigen::Dynamic>;
    using vector = Eigen::Matrix<Real, Eigen::Dynamic, 1>;
    const index_t d = source.rows, ns = source.cols, nt = target.cols, n = ns + nt;
    const auto value = [&](index_t k, index_t i) {
      return i < ns ? double(source(k, i)) : double(target(k, i - ns));
    };
    // Standardise on the pooled training features (two passes: mean, then spread).
    mean_.assign(std::size_t(d), 0.0);
    scale_.assign(std::size_t(d), 1.0);
    for (index_t i = 0; i < n; ++i)
      for (index_t k = 0; k < d; ++k) mean_[std::size_t(k)] += value(k, i);
    for (double& m : mean_) m /= double(n);
    std::vector<double> ss(static_cast<std::size_t>(d), 0.0);
    for (index_t i = 0; i < n; ++i)
      for (index_t k = 0; k < d; ++k) {
        const double dev = value(k, i) - mean_[std::size_t(k)];
        ss[std::size_t(k)] += dev * dev;
      }
    for (index_t k = 0; k < d; ++k) {
      const double sd = std::sqrt(ss[std::size_t(k)] / double(n));
      // A constant feature's spread is rounding noise around its mean: do not amplify it.
      if (sd > 1e-12 * std::abs(mean_[std::size_t(k)]) && sd > 0) scale_[std::size_t(k)] = sd;
    }
    matrix x(d, n);  // [d, n] standardised
    for (index_t i = 0; i < n; ++i)
      for (index_t k = 0; k < d; ++k)
        x(k, i) = (value(k, i) - mean_[std::size_t(k)]) / scale_[std::size_t(k)];
    // Sample weights a_i; both choices sum to n.
    const double a_source = args.balance_domains ? double(n) / (2.0 * double(ns)) : 1.0;
    const double a_target = args.balance_domains ? double(n) / (2.0 * double(nt)) : 1.0;
    log_prior_odds_ = std::log((a_target * double(nt)) / (a_source * double(ns)));
    const double lambda = args.l2;

    // theta = [w; b]: [d + 1]. Returns J and writes ∇J: dJ/dw = X·r + λw, dJ/db = Σ r, with
    // r_i = a_i(σ(z_i) − y_i)/n.
    vector z(n), r(n);
    const auto evaluate = [&](const vector& theta, vector& grad) {
      z.noalias() = x.transpose() * theta.head(d);
      const double b = theta(d);
      double f = 0;
      for (index_t i = 0; i < n; ++i) {
        const double zi = z(i) + b, y = i < ns ? 0.0 : 1.0, a = i < ns ? a_source : a_target;
        // BCE with logits, as nn::binary_cross_entropy_with_logit: max(z,0) − z·y + log1p(e^−|z|).
        f += a * (std::max(zi, 0.0) - zi * y + std::log1p(std::exp(-std::abs(zi))));
        r(i) = a * (detail::sigmoid(zi) - y) / double(n);
      }
      grad.resize(d + 1);
      grad.head(d).noalias() = x * r;
      grad.head(d) += lambda * theta.head(d);
      grad(d) = r.sum();
      return f / double(n) + 0.5 * lambda * theta.head(d).squaredNorm();
    };

    constexpr std::size_t memory = 10;  // L-BFGS pairs kept (Nocedal & Wright suggest 3–20)
    std::vector<vector> s_hist, y_hist;
    std::vector<double> rho_hist;
    vector theta = vector::Zero(d + 1), g, theta_new, g_new;
    theta(d) = log_prior_odds_;
    double f = evaluate(theta, g);
    iterations_ = 0;
    converged_ = false;
    while (true) {
      if (g.template lpNorm<Eigen::Infinity>() <= args.tolerance) {
        converged_ = true;
        break;
      }
      if (iterations_ >= args.max_iterations) break;
      // Two-loop recursion: p = −H·g with H the L-BFGS inverse-Hessian estimate.
      const std::size_t m = s_hist.size();
      vector q = g;
      std::vector<double> alpha(m);
      for (std::size_t j = m; j-- > 0;) {
        alpha[j] = rho_hist[j] * s_hist[j].dot(q);
        q -= alpha[j] * y_hist[j];
      }
      // H₀ = γI: sᵀy/yᵀy of the newest pair; before any pair, a step of length ≤ 1.
      q *= m > 0 ? s_hist.back().dot(y_hist.back()) / y_hist.back().squaredNorm()
                 : 1.0 / std::max(1.0, g.norm());
      for (std::size_t j = 0; j < m; ++j) {
        const double beta = rho_hist[j] * y_hist[j].dot(q);
        q += (alpha[j] - beta) * s_hist[j];
      }
      vector p = -q;
      double slope = g.dot(p);
      if (!(slope < 0)) {  // not a descent direction: forget the history, go downhill
        s_hist.clear();
        y_hist.clear();
        rho_hist.clear();
        p = -g / std::max(1.0, g.norm());
        slope = g.dot(p);
      }
      // Backtracking from step 1. Armijo's sufficient decrease, or, once the decrease is below
      // what J's rounding can show (near the optimum J changes by ~‖∇J‖², so ‖∇J‖ ≲ 1e-8 cannot
      // be resolved through J), Hager & Zhang's approximate Wolfe test on the slope instead
      // (SIAM J. Optim. 2005): J not above its rounding band and |∇J(θ + αp)ᵀp| ≤ 0.9|∇Jᵀp|.
      const double band = 16 * std::numeric_limits<double>::epsilon() * std::abs(f);
      double step = 1, f_new = 0;
      bool accepted = false;
      for (int tries = 0; tries < 60 && !accepted; ++tries, step *= 0.5) {
        theta_new = theta + step * p;
        f_new = evaluate(theta_new, g_new);
        accepted = f_new <= f + 1e-4 * step * slope ||  // Armijo; false for NaN
                   (f_new <= f + band && std::abs(g_new.dot(p)) <= 0.9 * std::abs(slope));
      }
      if (!accepted) break;  // neither J nor its slope can improve further in double
      vector s_k = theta_new - theta, y_k = g_new - g;
      const double sy = s_k.dot(y_k);
      if (sy > 1e-12 * s_k.norm() * y_k.norm()) {  // curvature pair is usable
        if (s_hist.size() == memory) {
          s_hist.erase(s_hist.begin());
          y_hist.erase(y_hist.begin());
          rho_hist.erase(rho_hist.begin());
        }
        s_hist.push_back(std::move(s_k));
        y_hist.push_back(std::move(y_k));
        rho_hist.push_back(1.0 / sy);
      }
      theta.swap(theta_new);
      g.swap(g_new);
      f = f_new;
      ++iterations_;
    }
    weights_.assign(theta.data(), theta.data() + d);
    bias_ = theta(d);
    objective_ = f;
    gradient_norm_ = g.template lpNorm<Eigen::Infinity>();
  }

  std::vector<double> mean_, scale_, weights_;
  double bias_ = 0;
  double log_prior_odds_ = 0;
  index_t iterations_ = 0;
  bool converged_ = false;
  double objective_ = 0;
  double gradient_norm_ = 0;
};

// --- Feature-based validators ---------------------------------------------------------------

//! Run-time settings of `proxy_a_distance`.
struct pad_args {
  std::uint64_t seed = 0;  //!< picks the random halves (stream select::split_stream)
  //! The linear domain classifier; balanced, so ε is the balanced error (see proxy_a_distance).
  domain_classifier_args classifier{.balance_domains = true};
};

//! Proxy A-distance: PAD = 2(1 − 2ε), ε the held-out error of a linear classifier telling the
//! two domains apart. Ben-David, Blitzer, Crammer, Pereira, "Analysis of representations for
//! domain adaptation", NIPS 19 (2007); Ganin et al., "Domain-adversarial training of neural
//! networks", JMLR 2016, §5. **Lower is better** (more domain-invariant features); it measures
//! invariance, not accuracy — features that forget the task are perfectly invariant.
//! Each domain is shuffled with counter_rng(seed, split_stream, 0 for source / 1 for target); a
//! domain_classifier (args.classifier) is fitted on the first ⌊n/2⌋ of each and tested on the
//! rest. ε = (ε_s + ε_t)/2, the mean of the two held-out per-domain error rates (a logit of
//! exactly 0 counts half an error): the plain error when the test halves are equally large, and
//! the quantity for which 1 − 2ε = Pr_T(h = t) − Pr_S(h = t), the A-distance's form, otherwise.
//! Not clamped: range [−2, 2], and a value below 0 (ε > 1/2: the classifier does worse than
//! chance on held-out data, noise on indistinguishable domains) reads as "indistinguishable".
//! source_features: [d, n_s], target_features: [d, n_t], n_s, n_t ≥ 2.
//! `Real`: the domain classifier's arithmetic (see the file comment).
template <class Real = double>
double proxy_a_distance(matrix_view<const float> source_features,
                        matrix_view<const float> target_features,
                        const pad_args& args = {}) {
  constexpr std::string_view where = "select::proxy_a_distance";
  detail::check_feature_pair(where, "source_features", source_features, 2, "target_features",
                             target_features, 2);
  constexpr index_t max_samples = std::numeric_limits<std::uint32_t>::max();
  if (source_features.cols > max_samples || target_features.cols > max_samples)
    fail(where, "source_features/target_features", "fewer than 2^32 samples per domain",
         detail::shape_of(source_features) + " and " + detail::shape_of(target_features));
  const index_t d = source_features.rows;
  const index_t ns = source_features.cols, nt = target_features.cols;
  const index_t ns_fit = ns / 2, nt_fit = nt / 2;
  const std::vector<index_t> order_s = detail::shuffled(ns, args.seed, 0);
  const std::vector<index_t> order_t = detail::shuffled(nt, args.seed, 1);
  const std::vector<float> fit_s = detail::gather_columns(source_features, order_s, 0, ns_fit);
  const std::vector<float> fit_t = detail::gather_columns(target_features, order_t, 0, nt_fit);
  const domain_classifier c({fit_s.data(), d, ns_fit}, {fit_t.data(), d, nt_fit}, args.classifier,
                            std::type_identity<Real>{});
  // Held-out error of one domain: predicted the other side (logit sign), ties count half.
  const auto held_out_error = [&](matrix_view<const float> x, const std::vector<index_t>& order,
                                  index_t first, double sign) {
    double errors = 0;
    for (index_t j = first; j < x.cols; ++j) {
      const double z = sign * c.logit(x.data + order[std::size_t(j)] * x.rows);
      errors += z < 0 ? 1.0 : z == 0 ? 0.5 : 0.0;
    }
    return errors / double(x.cols - first);
  };
  const double error_s = held_out_error(source_features, order_s, ns_fit, -1.0);
  const double error_t = held_out_error(target_features, order_t, nt_fit, +1.0);
  const double epsilon = 0.5 * (error_s + error_t);
  return 2.0 * (1.0 - 2.0 * epsilon);
}

//! Importance weights w_i = p_t(x_i)/p_s(x_i) of source samples x: [d, n] from a fitted domain
//! classifier: (n_s/n_t)·p(t|x)/p(s|x) for an unbalanced fit (You et al. 2019).
inline std::vector<double> importance_weights(const domain_classifier& classifier,
                                              matrix_view<const float> features) {
  return classifier.density_ratios(features);
}

//! The control-variate DEV risk of You et al. 2019 from importance weights w_i and
//! per-sample source validation losses ℓ_i:
//!   L_i = w_i·ℓ_i,  η = −Cov(L, w)/Var(w),  DEV = mean(L) + η·mean(w) − η.
//! Since E[w] = 1 under the source distribution, η·(mean(w) − 1) has mean 0 and cancels the part
//! of mean(L)'s variance that comes from the weights: with a constant loss k, DEV = k exactly.
//! Cov and Var are sample estimates (the same normaliser, so it cancels). When the weights are
//! constant (Var(w) ≤ (1e-12·mean(w))², i.e. rounding noise) there is nothing to correct with
//! and η = 0: DEV = mean(L). **Lower is better.**
//! weights, losses: [n], n ≥ 2, finite and ≥ 0.
inline double dev_risk(std::span<const double> weights, std::span<const double> losses) {
  constexpr std::string_view where = "select::dev_risk";
  if (weights.size() < 2)
    fail(where, "weights", "at least 2 samples", std::to_string(weights.size()));
  if (losses.size() != weights.size())
    fail(where, "losses", std::to_string(weights.size()) + " values, one per weight",
         std::to_string(losses.size()));
  const auto n = double(weights.size());
  double mean_w = 0, mean_l = 0;
  for (std::size_t i = 0; i < weights.size(); ++i) {
    if (!(weights[i] >= 0) || !std::isfinite(weights[i]))
      fail(where, "weights", "finite values ≥ 0",
           detail::number(weights[i]) + " at sample " + std::to_string(i));
    if (!(losses[i] >= 0) || !std::isfinite(losses[i]))
      fail(where, "losses", "finite values ≥ 0",
           detail::number(losses[i]) + " at sample " + std::to_string(i));
    mean_w += weights[i];
    mean_l += weights[i] * losses[i];
  }
  mean_w /= n;
  mean_l /= n;
  double cov = 0, var = 0;
  for (std::size_t i = 0; i < weights.size(); ++i) {
    const double dw = weights[i] - mean_w;
    cov += (weights[i] * losses[i] - mean_l) * dw;
    var += dw * dw;
  }
  cov /= n - 1;
  var /= n - 1;
  const double limit = 1e-12 * mean_w;
  const double eta = var <= limit * limit ? 0.0 : -cov / var;
  return mean_l + eta * mean_w - eta;
}

//! Run-time settings of `deep_embedded_validation`.
struct dev_args {
  //! The domain classifier. Unbalanced by default, as in You et al.; either way the density
  //! ratio divides out the training prior odds (domain_classifier::density_ratio).
  domain_classifier_args classifier{};
};

namespace detail {
template <class Loss, class Real>
double deep_embedded_validation(matrix_view<const float> source_features,
                                std::span<const Loss> source_losses,
                                matrix_view<const float> target_features,
                                const dev_args& args) {
  constexpr std::string_view where = "select::deep_embedded_validation";
  check_feature_pair(where, "source_features", source_features, 2, "target_features",
                     target_features, 1);
  if (index_t(source_losses.size()) != source_features.cols)
    fail(where, "source_losses",
         std::to_string(source_features.cols) + " values, one per column of source_features",
         std::to_string(source_losses.size()));
  std::vector<double> losses(source_losses.size());
  for (std::size_t i = 0; i < losses.size(); ++i) {
    losses[i] = double(source_losses[i]);
    if (!(losses[i] >= 0) || !std::isfinite(losses[i]))
      fail(where, "source_losses", "finite values ≥ 0 (per-sample losses)",
           number(losses[i]) + " at sample " + std::to_string(i));
  }
  const domain_classifier c(source_features, target_features, args.classifier,
                            std::type_identity<Real>{});
  const std::vector<double> w = c.density_ratios(source_features);
  return dev_risk(w, losses);
}
}  // namespace detail

//! Deep embedded validation (DEV): You, Wang, Long, Jordan, "Towards accurate model selection in
//! deep unsupervised domain adaptation", ICML 2019. Estimates the target risk from labelled
//! source validation samples re-weighted by p_t(x)/p_s(x), with a control variate:
//!   w_i = (n_s/n_t)·p(t|x_i)/p(s|x_i),  L_i = w_i·ℓ_i,  η = −Cov(L, w)/Var(w),
//!   DEV = mean(L) + η·mean(w) − η   (see dev_risk).
//! **Lower is better.** The domain classifier is fitted on source_features (the source
//! *validation* features) against target_features and the weights are read on the same source
//! samples. The paper fits it on source *training* features instead, so the weights come from
//! data the classifier did not see; here a linear, L2-regularised classifier with n ≫ d adds
//! little in-sample optimism, and the caller needs only one source set. To follow the paper
//! exactly, fit a domain_classifier on the training features and call importance_weights and
//! dev_risk. The estimate is only as good as the density ratio: with nearly separable domains a
//! few huge weights dominate (the control variate reduces, but cannot remove, that variance).
//! source_features: [d, n_s], n_s ≥ 2; source_losses: [n_s], the model's loss on each (e.g.
//! cross-entropy, or 0/1 error), finite and ≥ 0; target_features: [d, n_t], n_t ≥ 1. `Real`: the
//! domain classifier's arithmetic (see the file comment).
template <class Real = double>
double deep_embedded_validation(matrix_view<const float> source_features,
                                std::span<const double> source_losses,
                                matrix_view<const float> target_features,
                                const dev_args& args = {}) {
  return detail::deep_embedded_validation<double, Real>(source_features, source_losses,
                                                        target_features, args);
}

//! The same with float losses.
template <class Real = double>
double deep_embedded_validation(matrix_view<const float> source_features,
                                std::span<const float> source_losses,
                                matrix_view<const float> target_features,
                                const dev_args& args = {}) {
  return detail::deep_embedded_validation<float, Real>(source_features, source_losses,
                                                       target_features, args);
}

}  // namespace dafuse::select
