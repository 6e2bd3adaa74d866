// SPDX-License-Identifier: Apache-2.0
//! @file data/transform.hpp
//! @brief Preprocessing of dense data sets as composable transforms fitted on the source domain.
#pragma once
#include <dafuse/config.hpp>
#include <dafuse/core/error.hpp>
#include <dafuse/core/meta.hpp>
#include <dafuse/data/dataset.hpp>

#include <algorithm>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

// In unsupervised domain adaptation only the source is labelled, and the usual protocol fits any
// preprocessing on the training sets: statistics come from the source (or from each domain on its
// own, which removes first- and second-order shift, a weak adaptation in itself), never from test
// rows. Each transform here says what it is fitted on:
//
//   transform      fitted on                          applied as
//   standardize    source, or each domain on its own  (x - mean[k]) / std[k] per feature k
//   l2_rows        nothing                            x / ||row||_2 per row
//   log1p          nothing                            log(1 + x) per value
//   binarize       nothing                            x > threshold ? 1 : 0 per value
//   scale          nothing                            factor * x per value
//
// A transform is any type with `fit(source, target)` and `apply(dataset&) const`; `transforms`
// chains several, fitting each on the output of the ones before it.

namespace dafuse::data {

//! What a transform's statistics are fitted on.
enum class fit_on {
  source,       //!< the source set only; the same statistics are applied to every set
  each_domain,  //!< source and target each on their own; a set gets the statistics of its side
};

//! What `transforms` needs of each member: fitted on a (source, target) pair, applied in place.
template <class T>
concept dataset_transform = requires(T& t, const T& ct, const dataset& s, dataset& d) {
  t.fit(s, s);
  ct.apply(d);
};

namespace detail {

//! Checks `source` and `target` can be fitted together: sides as named and the same width.
inline void check_fit_pair(const dataset& source, const dataset& target) {
  if (source.side != domain::source)
    fail(source.origin, "side", "domain::source (fit takes the source set first)",
         "domain::target");
  if (target.side != domain::target)
    fail(target.origin, "side", "domain::target (fit takes the target set second)",
         "domain::source");
  if (target.width != source.width)
    fail(target.origin, "feature width",
         std::to_string(source.width) + " (the width of the source set " + source.origin + ")",
         std::to_string(target.width));
}

//! Stores `v` as feature (i, k) of `d`, failing if it does not fit in a finite float: a
//! `dataset` promises finite features, and a transform must not break that silently.
inline void store(dataset& d, std::size_t i, double v, const char* transform) {
  const auto f = static_cast<float>(v);
  if (!std::isfinite(f)) {
    const std::size_t w = std::size_t(d.width);
    fail(d.origin, "features[" + std::to_string(i / w) + "][" + std::to_string(i % w) + "]",
         std::string("a finite result of ") + transform + " of " + std::to_string(d.features[i]),
         std::to_string(v));
  }
  d.features[i] = f;
}

//! standardize's arithmetic for value `x` of a feature of statistics (mean, stddev): in double,
//! only centred where stddev is 0. Shared with data::preprocessing (a model's raw rows).
inline double standardized(float x, double mean, double stddev) {
  const double centred = double(x) - mean;
  return stddev == 0.0 ? centred : centred / stddev;
}
//! log1p's arithmetic: log(1 + x) in double.
inline double log1p_of(float x) {
  return std::log1p(double(x));
}
//! binarize's rule.
inline float binarized(float x, float threshold) {
  return x > threshold ? 1.0f : 0.0f;
}

}  // namespace detail

//! Per-feature statistics of one data set, as `standardize` fits them.
struct feature_stats {
  std::string origin;          //!< the set they were fitted on (used in messages)
  std::vector<double> mean;    //!< [width]: the mean of each feature
  std::vector<double> stddev;  //!< [width]: the population standard deviation (divides by N);
                               //!< 0 for a feature constant on the fitted set

  //! Features the statistics describe.
  index_t width() const { return index_t(mean.size()); }

  //! Mean and standard deviation of each feature of `d`, in double, two passes (the mean first,
  //! then the squared deviations from it, which does not cancel as E[x²] - E[x]² can).
  static feature_stats of(const dataset& d) {
    // make_dataset never builds an empty set, but a dataset is a plain struct anyone can fill.
    if (d.rows <= 0 || d.width <= 0 || d.features.size() != std::size_t(d.rows * d.width))
      fail(d.origin, "features", "at least one row and one feature to fit statistics on",
           std::to_string(d.rows) + " rows of width " + std::to_string(d.width) + " in " +
               std::to_string(d.features.size()) + " values");
    const auto w = std::size_t(d.width);
    feature_stats s{d.origin, std::vector<double>(w, 0.0), std::vector<double>(w, 0.0)};
    // A feature is constant exactly when its float values are all equal; its std is then 0 by
    // definition, where the double sums could leave a rounding residue of 1e-17 to divide by.
    std::vector<float> lo(d.row(0), d.row(0) + w), hi = lo;
    for (index_t i = 0; i < d.rows; ++i) {
      const float* r = d.row(i);
      for (std::size_t k = 0; k < w; ++k) {
        s.mean[k] += r[k];
        lo[k] = std::min(lo[k], r[k]);
        hi[k] = std::max(hi[k], r[k]);
      }
    }
    for (double& m : s.mean) m /= double(d.rows);
    for (index_t i = 0; i < d.rows; ++i) {
      const float* r = d.row(i);
      for (std::size_t k = 0; k < w; ++k) {
        const double dev = r[k] - s.mean[k];
        s.stddev[k] += dev * dev;
      }
    }
    for (std::size_t k = 0; k < w; ++k)
      s.stddev[k] = lo[k] == hi[k] ? 0.0 : std::sqrt(s.stddev[k] / double(d.rows));
    return s;
  }
};

//! Standardises each feature to zero mean and unit variance: x'[k] = (x[k] - mean[k]) / std[k].
//! Fitted on the source set (`fit_on::source`, the default: both sets are moved by the source's
//! statistics) or on each domain (`fit_on::each_domain`: source rows with the source's statistics,
//! target rows with the target's, chosen by `dataset::side`). A feature constant on the fitted set
//! (std 0) is only centred, not divided: it becomes 0 there, and other sets keep their offset from
//! that constant. The statistics stay in the object, so test sets drawn later are transformed
//! exactly like the training sets, and `statistics` / `set_statistics` save and restore them.
class standardize {
 public:
  explicit standardize(fit_on mode = fit_on::source) : mode_(mode) {}

  //! The mode given at construction.
  fit_on mode() const { return mode_; }
  //! Whether statistics are there to apply (after `fit` or `set_statistics`).
  bool fitted() const {
    return source_.has_value() && (mode_ == fit_on::source || target_.has_value());
  }

  //! Fits the statistics on `source` (and on `target` in `fit_on::each_domain`). `target` is
  //! only checked to be a target set of the source's width in `fit_on::source`.
  void fit(const dataset& source, const dataset& target) {
    detail::check_fit_pair(source, target);
    source_ = feature_stats::of(source);
    target_.reset();
    if (mode_ == fit_on::each_domain) target_ = feature_stats::of(target);
  }

  //! Standardises `d` with the statistics of its side (of the source in `fit_on::source`).
  void apply(dataset& d) const {
    const feature_stats& s = checked_statistics(d);
    const auto w = std::size_t(d.width);
    for (std::size_t i = 0; i < d.features.size(); ++i) {
      const std::size_t k = i % w;
      detail::store(d, i, detail::standardized(d.features[i], s.mean[k], s.stddev[k]),
                    "standardize");
    }
  }

  //! The statistics applied to rows of `side`: the source's for both sides in `fit_on::source`.
  //! Throws when they are not fitted yet.
  const feature_stats& statistics(domain side = domain::source) const {
    const std::optional<feature_stats>& s = slot(side);
    if (!s) unfitted("standardize", side);
    return *s;
  }

  //! Installs statistics fitted earlier (for example saved with `save_npy` and read back) for
  //! rows of `side`; in `fit_on::source` only `domain::source` is accepted.
  void set_statistics(domain side, feature_stats s) {
    const char* where = "standardize::set_statistics";
    if (mode_ == fit_on::source && side == domain::target)
      fail(where, "side", "domain::source (fit_on::source applies the source's statistics)",
           "domain::target");
    if (s.mean.empty() || s.stddev.size() != s.mean.size())
      fail(where, "stddev",
           std::to_string(s.mean.size()) + " values, one per mean, and at least one",
           std::to_string(s.stddev.size()));
    for (std::size_t k = 0; k < s.mean.size(); ++k) {
      if (!std::isfinite(s.mean[k]))
        fail(where, "mean[" + std::to_string(k) + "]", "a finite value", std::to_string(s.mean[k]));
      if (!(std::isfinite(s.stddev[k]) && s.stddev[k] >= 0))
        fail(where, "stddev[" + std::to_string(k) + "]", "a finite value >= 0",
             std::to_string(s.stddev[k]));
    }
    (side == domain::source ? source_ : target_) = std::move(s);
  }

 private:
  const std::optional<feature_stats>& slot(domain side) const {
    return mode_ == fit_on::each_domain && side == domain::target ? target_ : source_;
  }

  [[noreturn]] static void unfitted(const std::string& where, domain side) {
    fail(where, "standardize",
         std::string("statistics fitted on the ") + (side == domain::source ? "source" : "target") +
             " set first (call fit, fit_apply or set_statistics)",
         "an unfitted transform");
  }

  const feature_stats& checked_statistics(const dataset& d) const {
    const std::optional<feature_stats>& s = slot(d.side);
    if (!s) unfitted(d.origin, d.side);
    if (s->width() != d.width)
      fail(d.origin, "feature width",
           std::to_string(s->width()) + " (the width standardize was fitted on, from " + s->origin +
               ")",
           std::to_string(d.width));
    return *s;
  }

  fit_on mode_;
  std::optional<feature_stats> source_;  //!< applied to source rows, and to all in fit_on::source
  std::optional<feature_stats> target_;  //!< applied to target rows in fit_on::each_domain
};

//! Scales each row to unit L2 norm (rows of zeros stay zero); `l2_normalize_rows` as a transform.
//! Fitted on nothing: each row on its own.
struct l2_rows {
  void fit(const dataset&, const dataset&) {}
  void apply(dataset& d) const { l2_normalize_rows(d); }
};

//! log(1 + x) of each value, in double rounded to float; compresses counts (bag-of-words) so a
//! few frequent words do not dominate. Fitted on nothing. Values must be > -1.
struct log1p {
  void fit(const dataset&, const dataset&) {}
  void apply(dataset& d) const {
    for (std::size_t i = 0; i < d.features.size(); ++i) {
      const float x = d.features[i];
      if (!(x > -1.0f)) {
        const std::size_t w = std::size_t(d.width);
        fail(d.origin, "features[" + std::to_string(i / w) + "][" + std::to_string(i % w) + "]",
             "a value > -1 for log1p", std::to_string(x));
      }
      detail::store(d, i, detail::log1p_of(x), "log1p");
    }
  }
};

//! 1 where a value is > `threshold`, else 0 (presence instead of counts). Fitted on nothing.
struct binarize {
  float threshold = 0.0f;  //!< values strictly above it become 1

  void fit(const dataset&, const dataset&) {}
  void apply(dataset& d) const {
    for (float& x : d.features) x = detail::binarized(x, threshold);
  }
};

//! Multiplies every value by `factor` (1/255 for uint8 pixels). Fitted on nothing.
struct scale {
  float factor = 1.0f;  //!< the multiplier; must be finite

  void fit(const dataset&, const dataset&) {}
  void apply(dataset& d) const {
    if (!std::isfinite(factor))
      fail(d.origin, "scale factor", "a finite value", std::to_string(factor));
    for (std::size_t i = 0; i < d.features.size(); ++i)
      detail::store(d, i, double(factor) * double(d.features[i]), "scale");
  }
};

//! Transforms applied in the order given. `fit` fits each on the source and target as the ones
//! before it left them (so `transforms(l2_rows{}, standardize{})` standardises normalised rows);
//! `apply` runs them all in order. Itself a `dataset_transform`, so chains nest.
template <dataset_transform... T>
class transforms {
 public:
  explicit transforms(T... t) : steps_(std::move(t)...) {}

  //! Fits every step without changing `source` and `target` (it transforms copies).
  void fit(const dataset& source, const dataset& target) {
    dataset s = source, t = target;
    fit_apply(s, t);
  }

  //! Fits every step and transforms `source` and `target` in place as it goes (no copies).
  void fit_apply(dataset& source, dataset& target) {
    detail::check_fit_pair(source, target);
    std::apply(
        [&](auto&... step) {
          ((step.fit(source, target), step.apply(source), step.apply(target)), ...);
        },
        steps_);
  }

  //! Transforms `d` with every step, in order.
  void apply(dataset& d) const {
    std::apply([&](const auto&... step) { (step.apply(d), ...); }, steps_);
  }

  //! Step `I`, for example to read or restore `standardize`'s statistics.
  template <std::size_t I>
  auto& get() {
    return std::get<I>(steps_);
  }
  template <std::size_t I>
  const auto& get() const {
    return std::get<I>(steps_);
  }

 private:
  std::tuple<T...> steps_;
};

}  // namespace dafuse::data
