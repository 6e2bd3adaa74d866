// SPDX-License-Identifier: Apache-2.0
// For tests/train/model_export_test.sh: writes model files of four networks (every activation,
// a sparse first layer, a conv net) with random weights, saved and loaded back, and the rows and
// the classes the loaded model<Net> predicts for them, which tools/check_model_export.py then
// compares with PyTorch's; and three models that carry their preprocessing (every step), whose
// rows are raw. Usage: model_export_program OUT_DIR (writes NAME.npz, NAME_rows*.npy,
// NAME_classes.npy for NAME = dense_a, dense_b, sparse, conv, pre_dense, pre_binarize,
// pre_sparse).
#include <dafuse/core/rng.hpp>
#include <dafuse/data/csr.hpp>
#include <dafuse/data/dataset.hpp>
#include <dafuse/data/npy.hpp>
#include <dafuse/data/preprocessing.hpp>
#include <dafuse/data/transform.hpp>
#include <dafuse/nn/conv2d.hpp>
#include <dafuse/nn/dann_net.hpp>
#include <dafuse/nn/init.hpp>
#include <dafuse/step/model.hpp>
#include <dafuse/train/model_file.hpp>

#include <cstdint>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace df = dafuse;
namespace fs = std::filesystem;

namespace {

// Every activation: tanh and leaky ReLU in G_f and G_y, sigmoid in G_d (exported too).
using dense_a = df::nn::dann_net<df::nn::mlp<6, 16, 12, df::nn::tanh>,
                                 df::nn::mlp<12, 8, 3, df::nn::leaky_relu_t{0.2f}>,
                                 df::nn::mlp<12, 8, 1, df::nn::sigmoid>>;
using dense_b = df::nn::dann_net<df::nn::mlp<6, 20, df::nn::relu>,
                                 df::nn::mlp<20, 10, 3, df::nn::sigmoid>,
                                 df::nn::linear<20, 1>>;
using sparse = df::nn::dann_net<df::nn::sparse_input<df::nn::mlp<50, 12, df::nn::relu>>,
                                df::nn::linear<12, 3>,
                                df::nn::linear<12, 1>>;

// Images of 10 × 9 × 2 (channels last, as dafuse reads them): padding, stride 2, a pooling that
// floors, a dense layer reading the flattened image, and activations in the image layers.
using conv =
    df::nn::dann_net<df::nn::conv_net<df::nn::image<10, 9, 2>,
                                      df::nn::conv2d<2, 4, 3, 1, 1, df::nn::tanh>,
                                      df::nn::max_pool2d<2>,
                                      df::nn::conv2d<4, 5, 3, 2, 1, df::nn::leaky_relu_t{0.2f}>,
                                      df::nn::flatten,
                                      df::nn::dense<3 * 2 * 5, 12, df::nn::sigmoid>>,
                     df::nn::mlp<12, 8, 3, df::nn::relu>,
                     df::nn::linear<12, 1>>;

constexpr df::index_t rows = 600;

// PyTorch's initialisation plus noise on every value, biases included.
template <class Net>
df::model<Net> random_model(std::uint64_t seed) {
  df::model<Net> m;
  df::nn::initialize_parameters<Net>(m.parameters().data(), seed,
                                     df::nn::weight_init::torch_default);
  df::counter_rng rng(seed + 1, df::rng_stream::synthetic_data);
  for (float& p : m.parameters()) p += rng.normal<float>();
  return m;
}

// Saves a random model, loads it back and writes what the loaded one predicts.
template <class Net>
df::model<Net> round_trip(const fs::path& out, const std::string& name, std::uint64_t seed) {
  df::save_model(out / (name + ".npz"), random_model<Net>(seed));
  return df::load_model<Net>(out / (name + ".npz"));
}

// Whether every class is predicted for at least 1 row in 40.
bool balanced(const std::vector<std::int32_t>& classes) {
  std::vector<std::size_t> counts(3, 0);
  for (const std::int32_t c : classes) ++counts.at(std::size_t(c));
  for (const std::size_t n : counts)
    if (n < classes.size() / 40) return false;
  return true;
}

// The first model from `seed` on whose classes of the rows `predict(model, classes)` writes are
// balanced: unit-norm rows (l2) leave a random model's logits to its biases, often one class.
template <class Net, class Predict>
df::model<Net> balanced_model(std::uint64_t seed, Predict predict) {
  std::vector<std::int32_t> classes(static_cast<std::size_t>(rows));
  for (std::uint64_t s = seed; s < seed + 1000; s += 7) {
    df::model<Net> m = random_model<Net>(s);
    predict(m, classes);
    if (balanced(classes)) return m;
  }
  throw std::runtime_error("no seed from " + std::to_string(seed) + " predicts every class");
}

// Every class is predicted for some rows, so that agreeing classes say something.
void write_classes(const fs::path& path, const std::vector<std::int32_t>& classes) {
  std::vector<std::size_t> counts(3, 0);
  for (const std::int32_t c : classes) ++counts.at(std::size_t(c));
  for (std::size_t c = 0; c < counts.size(); ++c)
    if (counts[c] < classes.size() / 40)
      throw std::runtime_error(path.string() + ": class " + std::to_string(c) + " predicted for " +
                               std::to_string(counts[c]) + " rows only (choose other seeds)");
  df::data::save_npy<std::int32_t>(path, {classes.size()}, std::span<const std::int32_t>(classes));
}

// `shape` is the rows' file shape after N: {input_width}, or an image's {H, W, C}.
template <class Net>
void dense(const fs::path& out,
           const std::string& name,
           std::uint64_t seed,
           std::vector<std::size_t> shape = {std::size_t(Net::input_width)}) {
  const df::model<Net> m = round_trip<Net>(out, name, seed);
  df::counter_rng rng(seed + 2, df::rng_stream::synthetic_data);
  std::vector<float> x(std::size_t(rows * Net::input_width));
  for (float& v : x) v = 2.0f * rng.normal<float>();
  std::vector<std::int32_t> classes(static_cast<std::size_t>(rows));
  m.predict(x.data(), rows, classes.data());
  shape.insert(shape.begin(), std::size_t(rows));
  df::data::save_npy<float>(out / (name + "_rows.npy"), shape, std::span<const float>(x));
  write_classes(out / (name + "_classes.npy"), classes);
}

void sparse_rows(const fs::path& out) {
  const df::model<sparse> m = round_trip<sparse>(out, "sparse", 61);
  df::counter_rng rng(63, df::rng_stream::synthetic_data);
  std::vector<std::int32_t> offsets{0}, indices;
  std::vector<float> values;
  for (df::index_t r = 0; r < rows; ++r) {
    for (df::index_t j = 0; j < sparse::input_width; ++j)
      if (rng.uniform<float>() < 0.1f) {
        indices.push_back(std::int32_t(j));
        values.push_back(1.0f + 2.0f * rng.uniform<float>());
      }
    offsets.push_back(std::int32_t(indices.size()));
  }
  std::vector<std::int32_t> classes(static_cast<std::size_t>(rows));
  m.predict(df::sparse_matrix_view<const float>{offsets.data(), indices.data(), values.data(),
                                                sparse::input_width, rows},
            classes.data());
  df::data::save_npy<std::int32_t>(out / "sparse_rows_indptr.npy", {offsets.size()},
                                   std::span<const std::int32_t>(offsets));
  df::data::save_npy<std::int32_t>(out / "sparse_rows_indices.npy", {indices.size()},
                                   std::span<const std::int32_t>(indices));
  df::data::save_npy<float>(out / "sparse_rows_data.npy", {values.size()},
                            std::span<const float>(values));
  write_classes(out / "sparse_classes.npy", classes);
}

// Raw rows of counts-like values (≥ 0, some exact zeros), a model trained on them transformed
// as dafuse-train's --preprocess would (each step fitted on the rows the steps before left),
// saved with the preprocessing and loaded back: the loaded model's classes of the raw rows must
// be those of the model without preprocessing on the transformed rows, and are written for the
// raw rows.
template <class Net>
void dense_preprocessed(const fs::path& out,
                        const std::string& name,
                        std::uint64_t seed,
                        const std::vector<df::data::preprocess_kind>& steps) {
  using df::data::preprocess_kind;
  df::counter_rng rng(seed + 2, df::rng_stream::synthetic_data);
  std::vector<float> x(std::size_t(rows * Net::input_width));
  for (float& v : x) v = rng.uniform<float>() < 0.2f ? 0.0f : 5.0f * rng.uniform<float>();
  df::data::dataset d = df::data::make_dataset(
      name, df::data::domain::source, {{std::size_t(rows), std::size_t(Net::input_width)}, x});
  df::data::dataset target = d;
  target.side = df::data::domain::target;
  df::data::preprocessing p;
  for (const preprocess_kind k : steps) {
    if (k == preprocess_kind::standardize) {
      df::data::standardize s;
      s.fit(d, target);
      s.apply(d);
      p.add_standardize(s.statistics(df::data::domain::target));
    } else if (k == preprocess_kind::l2) {
      df::data::l2_normalize_rows(d);
      p.add(k);
    } else if (k == preprocess_kind::log1p) {
      df::data::log1p{}.apply(d);
      p.add(k);
    } else {
      df::data::binarize{2.5f}.apply(d);
      p.add(k, 2.5f);
    }
    target.features = d.features;
  }
  df::model<Net> m = balanced_model<Net>(seed, [&](const df::model<Net>& c, auto& out) {
    c.predict(d.features.data(), rows, out.data());
  });
  std::vector<std::int32_t> want(static_cast<std::size_t>(rows)), classes(want.size());
  m.predict(d.features.data(), rows, want.data());
  m.set_preprocessing(p);
  df::save_model(out / (name + ".npz"), m);
  df::load_model<Net>(out / (name + ".npz")).predict(x.data(), rows, classes.data());
  if (classes != want) throw std::runtime_error(name + ": raw rows predict other classes");
  df::data::save_npy<float>(out / (name + "_rows.npy"),
                            {std::size_t(rows), std::size_t(Net::input_width)},
                            std::span<const float>(x));
  write_classes(out / (name + "_classes.npy"), classes);
}

// The same for a sparse first layer: log1p then l2 on the stored values of raw CSR rows.
void sparse_preprocessed(const fs::path& out) {
  df::counter_rng rng(73, df::rng_stream::synthetic_data);
  std::vector<float> dense_rows(std::size_t(rows * sparse::input_width), 0.0f);
  for (float& v : dense_rows)
    if (rng.uniform<float>() < 0.1f) v = float(1 + int(9 * rng.uniform<float>()));
  const df::data::csr_matrix raw = df::data::to_csr(dense_rows.data(), rows, sparse::input_width);
  df::data::sparse_dataset d =
      df::data::make_sparse_dataset("pre_sparse", df::data::domain::source, raw);
  df::data::log1p_values(d);
  df::data::l2_normalize_rows(d);
  df::data::preprocessing p;
  p.add(df::data::preprocess_kind::log1p);
  p.add(df::data::preprocess_kind::l2);
  const auto view = [](const df::data::csr_matrix& c) {
    return df::sparse_matrix_view<const float>{c.indptr.data(), c.indices.data(), c.values.data(),
                                               sparse::input_width, rows};
  };
  df::model<sparse> m = balanced_model<sparse>(
      71, [&](const df::model<sparse>& c, auto& out) { c.predict(view(d.features), out.data()); });
  std::vector<std::int32_t> want(static_cast<std::size_t>(rows)), classes(want.size());
  m.predict(view(d.features), want.data());
  m.set_preprocessing(p);
  df::save_model(out / "pre_sparse.npz", m);
  df::load_model<sparse>(out / "pre_sparse.npz").predict(view(raw), classes.data());
  if (classes != want) throw std::runtime_error("pre_sparse: raw rows predict other classes");
  df::data::save_npy<std::int32_t>(out / "pre_sparse_rows_indptr.npy", {raw.indptr.size()},
                                   std::span<const std::int32_t>(raw.indptr));
  df::data::save_npy<std::int32_t>(out / "pre_sparse_rows_indices.npy", {raw.indices.size()},
                                   std::span<const std::int32_t>(raw.indices));
  df::data::save_npy<float>(out / "pre_sparse_rows_data.npy", {raw.values.size()},
                            std::span<const float>(raw.values));
  write_classes(out / "pre_sparse_classes.npy", classes);
}

}  // namespace

int main(int argc, char** argv) try {
  if (argc != 2) {
    std::fprintf(stderr, "usage: model_export_program OUT_DIR\n");
    return 2;
  }
  const fs::path out = argv[1];
  dense<dense_a>(out, "dense_a", 11);
  dense<dense_b>(out, "dense_b", 21);
  sparse_rows(out);
  dense<conv>(out, "conv", 331, {10, 9, 2});
  using df::data::preprocess_kind;
  dense_preprocessed<dense_a>(
      out, "pre_dense", 41,
      {preprocess_kind::log1p, preprocess_kind::standardize, preprocess_kind::l2});
  dense_preprocessed<dense_b>(out, "pre_binarize", 51,
                              {preprocess_kind::binarize, preprocess_kind::standardize});
  sparse_preprocessed(out);
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "%s\n", e.what());
  return 1;
}
