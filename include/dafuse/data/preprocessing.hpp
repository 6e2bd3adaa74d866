// SPDX-License-Identifier: Apache-2.0
//! @file data/preprocessing.hpp
//! @brief A fitted preprocessing as data: the steps and statistics a model applies to raw rows.
//!
//! The transforms of data/transform.hpp and data/csr.hpp change data sets in place before
//! training. A model trained on transformed rows needs the same transform on every row it reads
//! later; `preprocessing` holds what that takes (the steps in order, standardize's statistics)
//! so that a model file can carry it (train/model_file.hpp) and `model<Net>` apply it to raw rows
//! (step/model.hpp). Each step runs the same arithmetic as the transform it records (the shared
//! detail functions), so a raw row goes through bit for bit as the training rows went.
#pragma once
#include <dafuse/config.hpp>
#include <dafuse/core/error.hpp>
#include <dafuse/core/meta.hpp>
#include <dafuse/data/csr.hpp>
#include <dafuse/data/dataset.hpp>
#include <dafuse/data/transform.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dafuse::data {

//! What one step does to a row, and the transform it records.
enum class preprocess_kind {
  standardize,       //!< (x − mean[k]) / stddev[k] (only centred where stddev is 0): standardize
  l2,                //!< each row to unit L2 norm: l2_normalize_rows, dense or sparse
  log1p,             //!< log(1 + x): the log1p transform (dense), log1p_values (sparse)
  binarize,          //!< 1 where x > threshold, else 0: the binarize transform (dense)
  binarize_nonzero,  //!< 1 for every stored non-zero: binarize_values (sparse)
};

//! The name of `k` in model files and messages: "standardize", "l2", "log1p", "binarize",
//! "binarize_nonzero".
constexpr std::string_view name(preprocess_kind k) {
  switch (k) {
    case preprocess_kind::standardize:
      return "standardize";
    case preprocess_kind::l2:
      return "l2";
    case preprocess_kind::log1p:
      return "log1p";
    case preprocess_kind::binarize:
      return "binarize";
    case preprocess_kind::binarize_nonzero:
      return "binarize_nonzero";
  }
  return "?";
}

//! One fitted step.
struct preprocess_step {
  preprocess_kind kind = preprocess_kind::l2;
  std::vector<double> mean;    //!< standardize: [width], the statistics applied to target rows
  std::vector<double> stddev;  //!< standardize: [width], 0 for a feature that is only centred
  float threshold = 0.0f;      //!< binarize: values strictly above it become 1
};

//! The steps a model's raw rows go through before its network, in order.
class preprocessing {
 public:
  //! The steps, in the order applied.
  const std::vector<preprocess_step>& steps() const { return steps_; }
  bool empty() const { return steps_.empty(); }

  //! Appends a step that needs no statistics (l2, log1p, binarize_nonzero; binarize with
  //! `threshold`).
  void add(preprocess_kind kind, float threshold = 0.0f) {
    if (kind == preprocess_kind::standardize)
      fail("preprocessing", "step", "statistics for standardize (add_standardize)", "none");
    if (!std::isfinite(threshold))
      fail("preprocessing", "binarize threshold", "a finite value", std::to_string(threshold));
    steps_.push_back({kind, {}, {}, threshold});
  }

  //! Appends standardize with the statistics `s` (what standardize::statistics(domain::target)
  //! returns: the source's in fit_on::source).
  void add_standardize(const feature_stats& s) {
    if (s.mean.empty() || s.stddev.size() != s.mean.size())
      fail("preprocessing", "standardize statistics",
           "a mean and a standard deviation per feature, at least one",
           std::to_string(s.mean.size()) + " means and " + std::to_string(s.stddev.size()) +
               " standard deviations");
    for (std::size_t k = 0; k < s.mean.size(); ++k)
      if (!std::isfinite(s.mean[k]) || !(std::isfinite(s.stddev[k]) && s.stddev[k] >= 0))
        fail("preprocessing", "standardize statistics[" + std::to_string(k) + "]",
             "a finite mean and a finite standard deviation >= 0",
             std::to_string(s.mean[k]) + " and " + std::to_string(s.stddev[k]));
    steps_.push_back({preprocess_kind::standardize, s.mean, s.stddev, 0.0f});
  }

  //! Checks the steps fit a network reading rows of `width` features, dense or `sparse`: the
  //! statistics' width, and only the steps that keep zeros zero on sparse rows. `where` names
  //! the owner in messages (a model file).
  void check(index_t width, bool sparse, std::string_view where) const {
    for (std::size_t i = 0; i < steps_.size(); ++i) {
      const preprocess_step& s = steps_[i];
      const std::string field = "preprocess[" + std::to_string(i) + "]";
      const bool dense_only =
          s.kind == preprocess_kind::standardize || s.kind == preprocess_kind::binarize;
      if (sparse && dense_only)
        fail(where, field, "l2, log1p or binarize_nonzero (sparse rows keep their zeros)",
             std::string(name(s.kind)));
      if (!sparse && s.kind == preprocess_kind::binarize_nonzero)
        fail(where, field, "standardize, l2, log1p or binarize (dense rows)",
             std::string(name(s.kind)));
      if (s.kind == preprocess_kind::standardize && index_t(s.mean.size()) != width)
        fail(where, field + " statistics",
             std::to_string(width) + " features (the network's input width)",
             std::to_string(s.mean.size()));
    }
  }

  //! Applies every step to `n` dense rows of `width` features at `rows` (row-major), in place.
  void apply(float* rows, index_t n, index_t width) const {
    const std::size_t count = std::size_t(n) * std::size_t(width);
    for (const preprocess_step& s : steps_) {
      switch (s.kind) {
        case preprocess_kind::standardize:
          for (std::size_t i = 0; i < count; ++i) {
            const std::size_t k = i % std::size_t(width);
            rows[i] = float(detail::standardized(rows[i], s.mean[k], s.stddev[k]));
          }
          break;
        case preprocess_kind::l2:
          for (index_t r = 0; r < n; ++r) detail::l2_normalize_row(rows + r * width, width);
          break;
        case preprocess_kind::log1p:
          for (std::size_t i = 0; i < count; ++i) rows[i] = float(detail::log1p_of(rows[i]));
          break;
        case preprocess_kind::binarize:
          for (std::size_t i = 0; i < count; ++i) rows[i] = detail::binarized(rows[i], s.threshold);
          break;
        case preprocess_kind::binarize_nonzero:
          for (std::size_t i = 0; i < count; ++i) rows[i] = detail::nonzero_value(rows[i]);
          break;
      }
    }
  }

  //! Applies every step to the stored values of `n` sparse rows, row r's at
  //! values[offsets[r] − offsets[0] .. offsets[r + 1] − offsets[0]), in place.
  void apply_sparse(const std::int32_t* offsets, float* values, index_t n) const {
    const std::size_t count = std::size_t(offsets[n] - offsets[0]);
    for (const preprocess_step& s : steps_) {
      switch (s.kind) {
        case preprocess_kind::l2:
          for (index_t r = 0; r < n; ++r)
            detail::l2_normalize_values(values + (offsets[r] - offsets[0]),
                                        std::size_t(offsets[r + 1] - offsets[r]));
          break;
        case preprocess_kind::log1p:
          for (std::size_t i = 0; i < count; ++i) values[i] = detail::log1p_value(values[i]);
          break;
        case preprocess_kind::binarize_nonzero:
          for (std::size_t i = 0; i < count; ++i) values[i] = detail::nonzero_value(values[i]);
          break;
        case preprocess_kind::standardize:
        case preprocess_kind::binarize:
          fail("preprocessing", name(s.kind), "a step that keeps zeros zero on sparse rows",
               "a dense step");
      }
    }
  }

 private:
  std::vector<preprocess_step> steps_;
};

}  // namespace dafuse::data
