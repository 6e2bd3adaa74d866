// SPDX-License-Identifier: Apache-2.0
// Tests for step/model.hpp: logits and classes against a naive forward pass in double, for dense,
// convolutional and sparse input, across a chunk boundary; and the refusal of malformed sparse
// rows; the preprocessing a model applies to raw rows, chunk by chunk.
#include <dafuse/step/model.hpp>

#include "../check.hpp"
#include "../reference_forward.hpp"

#include <dafuse/core/rng.hpp>
#include <dafuse/nn/loss.hpp>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace step_model_test {

namespace df = dafuse;

namespace {

using dense_net = df::nn::dann_net<df::nn::mlp<7, 12, 9, df::nn::tanh>,
                                   df::nn::mlp<9, 6, 4, df::nn::leaky_relu_t{0.2f}>,
                                   df::nn::mlp<9, 5, 1, df::nn::sigmoid>>;
// A conv G_f (padding, stride 2, two channels, an odd size the pool floors) before dense layers.
using conv_net = df::nn::dann_net<df::nn::conv_net<df::nn::image<9, 7, 2>,
                                                   df::nn::conv2d<2, 5, 3, 1, 1>,
                                                   df::nn::max_pool2d<2>,
                                                   df::nn::conv2d<5, 6, 3, 2, 1, df::nn::tanh>,
                                                   df::nn::flatten,
                                                   df::nn::dense<2 * 2 * 6, 8, df::nn::relu>>,
                                  df::nn::linear<8, 4>,
                                  df::nn::linear<8, 1>>;
using sparse_net = df::nn::dann_net<df::nn::sparse_input<df::nn::mlp<40, 10, df::nn::relu>>,
                                    df::nn::linear<10, 3>,
                                    df::nn::linear<10, 1>>;

// 1500 rows: one full chunk of model::chunk_rows and a partial one.
constexpr df::index_t rows = 1500;

template <class Net>
df::model<Net> random_model(std::uint64_t seed) {
  df::model<Net> m;
  df::nn::initialize_parameters<Net>(m.parameters().data(), seed,
                                     df::nn::weight_init::torch_default);
  // Non-zero biases, so that a missed bias shows.
  df::counter_rng rng(seed + 1, df::rng_stream::synthetic_data);
  for (float& p : m.parameters()) p += 0.05f * rng.normal<float>();
  return m;
}

// G_y(G_f(x)) in double by explicit loops: [n, class_count] row-major.
template <class Net>
std::vector<double> reference_logits(const df::model<Net>& m,
                                     const std::vector<double>& x,
                                     df::index_t n) {
  const std::vector<double> p(m.parameters().begin(), m.parameters().end());
  const std::vector<double> gf(p.begin() + Net::features_offset, p.end());
  const std::vector<double> gy(p.begin() + Net::classifier_offset, p.end());
  const auto h = df::test::naive_forward<typename Net::feature_stack>(gf, x, n).y.back();
  return df::test::naive_forward<typename Net::classifier_stack>(gy, h, n).y.back();
}

// The classes of reference logits agree with `classes` wherever the top two logits differ by
// more than rounding; returns the rows compared.
df::index_t check_classes(const std::vector<double>& z,
                          df::index_t classes_per_row,
                          const std::vector<std::int32_t>& classes) {
  df::index_t compared = 0;
  for (std::size_t i = 0; i < classes.size(); ++i) {
    const double* row = z.data() + i * std::size_t(classes_per_row);
    const std::int32_t best = df::nn::argmax(row, classes_per_row);
    double second = -INFINITY;
    for (df::index_t c = 0; c < classes_per_row; ++c)
      if (c != best) second = std::max(second, row[c]);
    if (row[best] - second < 1e-4) continue;
    ++compared;
    CHECK(classes[i] == best);
  }
  return compared;
}

}  // namespace

TEST_CASE("model: dense logits and classes equal a naive forward pass in double") {
  const df::model<dense_net> m = random_model<dense_net>(11);
  df::counter_rng rng(4, df::rng_stream::synthetic_data);
  std::vector<float> x(std::size_t(rows * dense_net::input_width));
  for (float& v : x) v = rng.normal<float>();
  const std::vector<double> ref =
      reference_logits(m, std::vector<double>(x.begin(), x.end()), rows);

  std::vector<float> z(std::size_t(rows * dense_net::class_count));
  m.logits(x.data(), rows, z.data());
  for (std::size_t i = 0; i < z.size(); ++i)
    CHECK(double(z[i]) == doctest::Approx(ref[i]).epsilon(1e-4));

  std::vector<std::int32_t> classes(std::size_t(rows), -1);
  m.predict(x.data(), rows, classes.data());
  CHECK(check_classes(ref, dense_net::class_count, classes) > rows * 9 / 10);

  // No rows: nothing written, nothing read.
  m.predict(x.data(), 0, classes.data());
}

TEST_CASE("model: a conv net's logits and classes equal a naive forward pass in double") {
  const df::model<conv_net> m = random_model<conv_net>(13);
  df::counter_rng rng(6, df::rng_stream::synthetic_data);
  std::vector<float> x(std::size_t(rows * conv_net::input_width));
  for (float& v : x) v = rng.uniform<float>();
  const std::vector<double> ref =
      reference_logits(m, std::vector<double>(x.begin(), x.end()), rows);
  std::vector<float> z(std::size_t(rows * conv_net::class_count));
  m.logits(x.data(), rows, z.data());
  for (std::size_t i = 0; i < z.size(); ++i)
    CHECK(double(z[i]) == doctest::Approx(ref[i]).epsilon(1e-4));
  std::vector<std::int32_t> classes(std::size_t(rows), -1);
  m.predict(x.data(), rows, classes.data());
  CHECK(check_classes(ref, conv_net::class_count, classes) > rows * 9 / 10);
  // One row at a time: products far narrower than the conv layers' chunks.
  std::vector<float> one(static_cast<std::size_t>(conv_net::class_count));
  m.logits(x.data() + 7 * conv_net::input_width, 1, one.data());
  for (df::index_t c = 0; c < conv_net::class_count; ++c)
    CHECK(double(one[std::size_t(c)]) ==
          doctest::Approx(ref[std::size_t(7 * conv_net::class_count + c)]).epsilon(1e-4));
}

TEST_CASE("model: sparse input equals the dense forward pass of the same rows") {
  const df::model<sparse_net> m = random_model<sparse_net>(12);
  df::counter_rng rng(5, df::rng_stream::synthetic_data);
  constexpr df::index_t width = sparse_net::input_width;
  std::vector<std::int32_t> offsets{0}, indices;
  std::vector<float> values;
  std::vector<double> dense(std::size_t(rows * width), 0.0);
  for (df::index_t r = 0; r < rows; ++r) {
    for (df::index_t j = 0; j < width; ++j)
      if (rng.uniform<float>() < 0.15f) {
        indices.push_back(std::int32_t(j));
        values.push_back(1.0f + float(j % 3));
        dense[std::size_t(r * width + j)] = values.back();
      }
    offsets.push_back(std::int32_t(indices.size()));
  }
  const df::sparse_matrix_view<const float> view{offsets.data(), indices.data(), values.data(),
                                                 width, rows};
  const std::vector<double> ref = reference_logits(m, dense, rows);
  std::vector<float> z(std::size_t(rows * sparse_net::class_count));
  m.logits(view, z.data());
  for (std::size_t i = 0; i < z.size(); ++i)
    CHECK(double(z[i]) == doctest::Approx(ref[i]).epsilon(1e-4));
  std::vector<std::int32_t> classes(std::size_t(rows), -1);
  m.predict(view, classes.data());
  CHECK(check_classes(ref, sparse_net::class_count, classes) > rows * 9 / 10);

  SUBCASE("a feature index out of range is refused, naming the sample") {
    indices[std::size_t(offsets[3])] = width;
    const std::string e = df::test::error_message([&] { m.predict(view, classes.data()); });
    CHECK(e ==
          "dafuse: model::logits: sparse rows: expected feature indices in [0, 40), found 40 "
          "in sample 3");
  }
  SUBCASE("decreasing offsets are refused, naming the sample") {
    REQUIRE(offsets[5] < offsets[6]);
    std::swap(offsets[5], offsets[6]);
    CHECK(df::test::error_message([&] { m.predict(view, classes.data()); }) ==
          "dafuse: model::logits: sparse rows: expected non-decreasing offsets, found offsets[6] "
          "= " +
              std::to_string(offsets[6]) + " < offsets[5] = " + std::to_string(offsets[5]));
  }
  SUBCASE("rows of another width are refused") {
    const df::sparse_matrix_view<const float> narrow{offsets.data(), indices.data(), values.data(),
                                                     width - 1, rows};
    CHECK(df::test::error_message([&] { m.predict(narrow, classes.data()); }) ==
          "dafuse: model::logits: sparse rows: expected 40 features, found 39");
  }
}

TEST_CASE("model: with preprocessing, raw rows give the logits of the transformed rows") {
  // Across the chunk boundary: each chunk of raw rows is copied and transformed on its own.
  df::counter_rng rng(9, df::rng_stream::synthetic_data);
  SUBCASE("dense: standardize then l2") {
    df::model<dense_net> m = random_model<dense_net>(3);
    constexpr df::index_t width = dense_net::input_width;
    std::vector<float> raw(std::size_t(rows * width));
    for (float& v : raw) v = 3.0f * rng.normal<float>();
    df::data::preprocessing p;
    p.add_standardize({"fitted", std::vector<double>(width, 0.5), std::vector<double>(width, 2.0)});
    p.add(df::data::preprocess_kind::l2);
    std::vector<float> transformed = raw;
    p.apply(transformed.data(), rows, width);
    std::vector<float> want(std::size_t(rows * dense_net::class_count)), got(want.size());
    m.logits(transformed.data(), rows, want.data());
    m.set_preprocessing(p);
    m.logits(raw.data(), rows, got.data());
    CHECK(got == want);
    CHECK(raw[0] != transformed[0]);  // the caller's rows are left as they were
  }
  SUBCASE("sparse: log1p then l2, on a view that starts inside the matrix") {
    df::model<sparse_net> m = random_model<sparse_net>(4);
    constexpr df::index_t width = sparse_net::input_width;
    std::vector<std::int32_t> offsets{0}, indices;
    std::vector<float> values;
    for (df::index_t r = 0; r < rows + 5; ++r) {
      for (df::index_t j = 0; j < width; ++j)
        if (rng.uniform<float>() < 0.15f) {
          indices.push_back(std::int32_t(j));
          values.push_back(1.0f + float(j % 7));
        }
      offsets.push_back(std::int32_t(indices.size()));
    }
    df::data::preprocessing p;
    p.add(df::data::preprocess_kind::log1p);
    p.add(df::data::preprocess_kind::l2);
    std::vector<float> transformed = values;
    p.apply_sparse(offsets.data(), transformed.data(), rows + 5);
    const auto view = [&](const std::vector<float>& v) {
      return df::sparse_matrix_view<const float>{offsets.data() + 5, indices.data() + offsets[5],
                                                 v.data() + offsets[5], width, rows};
    };
    std::vector<float> want(std::size_t(rows * sparse_net::class_count)), got(want.size());
    m.logits(view(transformed), want.data());
    m.set_preprocessing(p);
    m.logits(view(values), got.data());
    CHECK(got == want);
  }
}

}  // namespace step_model_test
