// reverse_validation: the score is the accuracy on the source labels of a reverse model trained on
// the target rows labelled by the model's predictions, equal to that plain recipe done by hand;
// good predictions score high and wrong ones low; an unlabelled source is refused by field.
#include <dafuse/head/dann.hpp>
#include <dafuse/head/source_only.hpp>
#include <dafuse/train/reverse_validation.hpp>

#include "../check.hpp"
#include "blobs.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace train_reverse_validation_test {

namespace df = dafuse;

namespace {
using net = df::nn::dann_net<df::nn::mlp<3, 16, df::nn::tanh>,
                             df::nn::linear<16, 2>,
                             df::nn::mlp<16, 8, 1, df::nn::relu>>;
template <class Head>
using step_of = df::train_step<net,
                               df::loader::resident,
                               df::precision::fp32,
                               df::clip::none,
                               Head,
                               df::optim::sgd>;
using source_only_step = step_of<df::head::source_only<df::schedule::ganin>>;
using dann_step = step_of<df::head::dann<df::schedule::ganin>>;

// Two Gaussian blobs, class = sign of the first coordinate; the target is shifted by `shift`.
df::data::dataset blobs(df::data::domain side, float shift, df::index_t rows, std::uint32_t sub) {
  return df::test::blobs({.seed = 5, .spread = 0.6f, .class0_mean = -1.f, .class1_mean = 1.f}, side,
                         rows, 3, shift, "blobs", sub);
}
}  // namespace

TEST_CASE("reverse_validation equals the recipe done by hand, and reads no target label") {
  const df::test::thread_count one(1);
  const auto s = blobs(df::data::domain::source, 0, 200, 0),
             t = blobs(df::data::domain::target, 0.4f, 160, 1);
  const df::fit_args args{.steps = 150, .batch = 16, .lr = 0.05f, .momentum = 0.9f, .seed = 3};
  dann_step model(args);
  df::fit(model, s, t);
  const df::fit_args reverse_args{.steps = 120, .batch = 16, .lr = 0.05f, .seed = 7};
  const double score = df::reverse_validation<source_only_step>(model, s, t, reverse_args);
  // By hand: the model's classes of the target rows by a loop over the rows, those rows as a
  // labelled source, a source-only step fitted on them, its accuracy on the source rows.
  std::vector<std::int32_t> pseudo;
  for (df::index_t i = 0; i < t.rows; ++i) {
    std::int32_t c = -1;
    model.predict(t.row(i), 1, &c);
    pseudo.push_back(c);
  }
  df::data::dataset reverse_source = t;
  reverse_source.side = df::data::domain::source;
  reverse_source.labels = pseudo;
  df::data::dataset reverse_target = s;
  reverse_target.side = df::data::domain::target;
  source_only_step reverse(reverse_args);
  df::fit(reverse, reverse_source, reverse_target);
  std::size_t correct = 0;
  for (df::index_t i = 0; i < s.rows; ++i) {
    std::int32_t c = -1;
    reverse.predict(s.row(i), 1, &c);
    correct += c == s.labels[std::size_t(i)];
  }
  CHECK(score == double(correct) / double(s.rows));
  CHECK(df::predicted_classes(model, t) == pseudo);
  // The target's labels are not read: the same target without them gives the same score.
  df::data::dataset unlabelled = t;
  unlabelled.labels.clear();
  CHECK(df::reverse_validation<source_only_step>(model, s, unlabelled, reverse_args) == score);
  // Through fit's options path with the default options: the same training, the same score.
  CHECK(df::reverse_validation<source_only_step>(model, s, t, reverse_args, df::fit_options{}) ==
        score);
}

TEST_CASE("reverse_validation scores right predictions high and wrong or collapsed ones low") {
  const df::test::thread_count one(1);
  const auto s = blobs(df::data::domain::source, 0, 200, 0),
             t = blobs(df::data::domain::target, 0.4f, 160, 1);
  const df::fit_args args{.steps = 150, .batch = 16, .lr = 0.05f, .momentum = 0.9f, .seed = 3};
  const df::fit_args reverse_args{.steps = 120, .batch = 16, .lr = 0.05f, .seed = 7};
  source_only_step good(args);
  df::fit(good, s, t);
  CHECK(df::accuracy(good, t) > 0.9);
  // A model trained on swapped source labels predicts the wrong class on most target rows: as
  // confident as the good one, and its reverse model learns the swap.
  df::data::dataset swapped = s;
  for (std::int32_t& y : swapped.labels) y = 1 - y;
  source_only_step wrong(args);
  df::fit(wrong, swapped, t);
  CHECK(df::accuracy(wrong, t) < 0.1);
  const double good_score = df::reverse_validation<source_only_step>(good, s, t, reverse_args);
  const double wrong_score = df::reverse_validation<source_only_step>(wrong, s, t, reverse_args);
  CHECK(good_score > 0.9);
  CHECK(wrong_score < 0.1);
  // A model whose every target prediction is one class (trained on one-class labels): the
  // reverse model sees one class and is right on that class's half of the source only.
  df::data::dataset one_class = s;
  for (std::int32_t& y : one_class.labels) y = 1;
  source_only_step collapsed(args);
  df::fit(collapsed, one_class, t);
  const std::vector<std::int32_t> c = df::predicted_classes(collapsed, t);
  CHECK(std::count(c.begin(), c.end(), 1) == std::ptrdiff_t(c.size()));
  CHECK(df::reverse_validation<source_only_step>(collapsed, s, t, reverse_args) ==
        doctest::Approx(0.5));
}

TEST_CASE("reverse_validation refuses an unlabelled source, naming it") {
  const auto s = blobs(df::data::domain::source, 0, 40, 0),
             t = blobs(df::data::domain::target, 0.4f, 40, 1);
  df::data::dataset unlabelled = s;
  unlabelled.labels.clear();
  source_only_step model(df::fit_args{.steps = 5, .batch = 8, .lr = 0.05f});
  CHECK_THROWS_WITH_AS(
      df::reverse_validation<source_only_step>(model, unlabelled, t, {.steps = 5, .batch = 8}),
      "dafuse: reverse_validation: source: expected labelled source rows (the reverse model is "
      "scored on them), found an unlabelled data set (blobs)",
      df::error);
}

}  // namespace train_reverse_validation_test
