// SPDX-License-Identifier: Apache-2.0
//! @file train/reverse_validation.hpp
//! @brief Reverse validation: a model's target predictions, taken as labels, train a fresh
//! reverse model, whose accuracy on the labelled source rows scores the model.
//!
//! Zhong, Fan, Yang, Verscheure, Ren, "Cross validation framework to choose amongst models and
//! datasets for transfer learning", ECML PKDD 2010; Ganin et al., "Domain-adversarial training
//! of neural networks", JMLR 2016, section 5.1, chose DANN's hyperparameters on the Amazon reviews
//! with it. The validators of select/ read the target predictions only, so a model that is
//! confident and wrong on part of the target scores as well as one that is confident and right;
//! reverse validation asks whether the predictions carry the source labels' meaning back: labels
//! that are wrong on a part of the target, or that collapse onto one class, train a reverse model
//! that does worse on the source. It reads no target label. Higher is better.
#pragma once
#include <dafuse/config.hpp>
#include <dafuse/core/error.hpp>
#include <dafuse/train/fit.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace dafuse {

//! The class `step` predicts for every row of `d` (dense or sparse), in row order.
template <class Step, class Data>
std::vector<std::int32_t> predicted_classes(Step& step, const Data& d) {
  data::check_width(d, Step::input_width);
  std::vector<std::int32_t> classes(static_cast<std::size_t>(detail::row_count(d)));
  detail::infer_rows(step, d, {.classes = classes.data()});
  return classes;
}

namespace detail {
//! Trains a fresh ReverseStep with `train(step, reverse_source, reverse_target)` and scores it:
//! reverse_validation's recipe, the training left to the caller.
template <class ReverseStep, class Step, class Data, class Train>
double reverse_score(
    Step& model, const Data& source, const Data& target, const fit_args& args, Train train) {
  static_assert(ReverseStep::input_width == Step::input_width &&
                    ReverseStep::class_count == Step::class_count,
                "dafuse: reverse_validation: the reverse step must read the model's inputs and "
                "predict its classes (the same input width and class count)");
  if (!source.has_labels())
    fail("reverse_validation", "source",
         "labelled source rows (the reverse model is scored on them)",
         "an unlabelled data set (" + source.origin + ")");
  Data reverse_source = target;  // the target rows, labelled by the model
  reverse_source.side = data::domain::source;
  reverse_source.labels = predicted_classes(model, target);
  reverse_source.labels_origin = "the model's predictions on " + target.origin;
  reverse_source.origin = "reverse_validation: " + target.origin + " (pseudo-labelled)";
  Data reverse_target = source;  // scored with its labels; never trained on them
  reverse_target.side = data::domain::target;
  ReverseStep reverse(args);
  train(reverse, reverse_source, reverse_target);
  return accuracy(reverse, reverse_target);
}
}  // namespace detail

//! Reverse validation of `model` (see the file comment): the target rows, labelled with the
//! model's predicted classes, are the labelled source of a fresh `ReverseStep` trained by
//! `fit<ReverseStep>(…, args)`, with the source rows as its unlabelled target (read only by a
//! ReverseStep whose head draws target rows); the score is the reverse model's accuracy on the
//! source rows' labels. Ganin et al. train a reverse DANN; a source-only ReverseStep is the
//! cheaper form. `ReverseStep` reads the model's inputs and predicts its classes (checked at
//! compile time); `source` must be labelled. Target labels, if any, are not read.
template <class ReverseStep, class Step, class Data>
double reverse_validation(Step& model,
                          const Data& source,
                          const Data& target,
                          const fit_args& args) {
  return detail::reverse_score<ReverseStep>(
      model, source, target, args,
      [](ReverseStep& r, const Data& s, const Data& t) { (void)fit(r, s, t); });
}

//! The same, the reverse model trained by `fit(…, reverse_options)`. With fit_options{} (no
//! evaluation, no held-out rows) that is the same training as above, through the options' code,
//! which a program that fits with options has compiled already: the overload above would
//! compile a second training loop for ReverseStep.
template <class ReverseStep, class Step, class Data>
double reverse_validation(Step& model,
                          const Data& source,
                          const Data& target,
                          const fit_args& args,
                          const fit_options& reverse_options) {
  return detail::reverse_score<ReverseStep>(
      model, source, target, args,
      [&](ReverseStep& r, const Data& s, const Data& t) { (void)fit(r, s, t, reverse_options); });
}

}  // namespace dafuse
