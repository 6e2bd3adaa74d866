// SPDX-License-Identifier: Apache-2.0
// Tests for train/model_file.hpp: a trained step's weights survive save and load exactly, load
// into a step of other policies and into a model, and every file of another network is refused
// with the target left as it was; a conv net's members are in PyTorch's NCHW layout; the
// preprocessing travels with the model (version 2) and old files stay version 1.
#include <dafuse/train/model_file.hpp>

#include "../check.hpp"
#include "blobs.hpp"

#include <dafuse/data/csr.hpp>
#include <dafuse/data/dataset.hpp>
#include <dafuse/data/preprocessing.hpp>
#include <dafuse/data/sparse_batcher.hpp>
#include <dafuse/data/transform.hpp>
#include <dafuse/head/dann.hpp>
#include <dafuse/nn/conv2d.hpp>
#include <dafuse/nn/init.hpp>
#include <dafuse/step/train_step.hpp>
#include <dafuse/train/fit.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace train_model_file_test {

namespace df = dafuse;
namespace fs = std::filesystem;

namespace {
using net = df::nn::dann_net<df::nn::mlp<3, 16, df::nn::tanh>,
                             df::nn::linear<16, 2>,
                             df::nn::mlp<16, 8, 1, df::nn::leaky_relu_t{0.2f}>>;
using wider_net = df::nn::dann_net<df::nn::mlp<3, 17, df::nn::tanh>,
                                   df::nn::linear<17, 2>,
                                   df::nn::mlp<17, 8, 1, df::nn::leaky_relu_t{0.2f}>>;
// The same shapes as net, other activations or input: only architecture.json tells them apart.
using relu_net = df::nn::dann_net<df::nn::mlp<3, 16, df::nn::relu>,
                                  df::nn::linear<16, 2>,
                                  df::nn::mlp<16, 8, 1, df::nn::leaky_relu_t{0.2f}>>;
using slope_net = df::nn::dann_net<df::nn::mlp<3, 16, df::nn::tanh>,
                                   df::nn::linear<16, 2>,
                                   df::nn::mlp<16, 8, 1, df::nn::leaky_relu_t{0.1f}>>;
using sparse_net = df::nn::dann_net<df::nn::sparse_input<df::nn::mlp<3, 16, df::nn::tanh>>,
                                    df::nn::linear<16, 2>,
                                    df::nn::mlp<16, 8, 1, df::nn::leaky_relu_t{0.2f}>>;
// A conv G_f: two channels, padding, a pooling whose output the dense layer reads flattened.
using conv_net = df::nn::dann_net<df::nn::conv_net<df::nn::image<6, 5, 2>,
                                                   df::nn::conv2d<2, 3, 3, 1, 1>,
                                                   df::nn::max_pool2d<2>,
                                                   df::nn::flatten,
                                                   df::nn::dense<3 * 2 * 3, 4, df::nn::relu>>,
                                  df::nn::linear<4, 2>,
                                  df::nn::linear<4, 1>>;
// The same widths after the convolution with another pooling: 2 × 1 × 3 values.
using pool3_net = df::nn::dann_net<df::nn::conv_net<df::nn::image<6, 5, 2>,
                                                    df::nn::conv2d<2, 3, 3, 1, 1>,
                                                    df::nn::max_pool2d<3>,
                                                    df::nn::flatten,
                                                    df::nn::dense<2 * 1 * 3, 4, df::nn::relu>>,
                                   df::nn::linear<4, 2>,
                                   df::nn::linear<4, 1>>;
template <class Optim>
using step_t = df::train_step<net,
                              df::loader::sync,
                              df::precision::fp32,
                              df::clip::none,
                              df::head::dann<df::schedule::ganin>,
                              Optim>;

const df::fit_args args{.steps = 30, .batch = 8, .lr = 0.05f, .momentum = 0.9f, .seed = 5};

df::data::dataset blobs(df::data::domain side, df::index_t rows) {
  const bool source = side == df::data::domain::source;
  return df::test::blobs({.seed = 3}, side, rows, 3, 0.f, source ? "source" : "target",
                         std::uint32_t(side));
}

const df::data::dataset source = blobs(df::data::domain::source, 60);
const df::data::dataset target = blobs(df::data::domain::target, 60);

std::vector<std::int32_t> classes_of(auto& predictor) {
  std::vector<std::int32_t> c(std::size_t(source.rows));
  predictor.predict(source.features.data(), source.rows, c.data());
  return c;
}

// The archive at `path` with its members filtered and edited by `edit`, written to `to`.
template <class Edit>
void rewrite(const fs::path& path, const fs::path& to, Edit edit) {
  std::vector<df::data::npz_member> m = df::data::load_npz(path);
  edit(m);
  df::data::save_npz(to, m);
}

std::vector<unsigned char> read_file_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}
void write_file_bytes(const fs::path& path, const std::vector<unsigned char>& b) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
}

}  // namespace

TEST_CASE("model file: a trained step's weights survive save and load exactly") {
  const df::test::temp_dir tmp("model_file_round_trip");
  step_t<df::optim::sgd> step(args);
  (void)df::fit(step, source, target);
  const fs::path path = tmp / "model.npz";
  df::save_model(path, step);
  CHECK_FALSE(fs::exists(fs::path(path.string() + ".tmp")));

  const df::model<net> m = df::load_model<net>(path);
  const auto trained = step.parameters();
  CHECK(std::equal(trained.begin(), trained.end(), m.parameters().begin()));
  CHECK(classes_of(m) == classes_of(step));

  SUBCASE("into a step of other policies, whose other state it leaves alone") {
    step_t<df::optim::adam> other(args);
    (void)df::fit(other, source, target);
    const std::vector<float> state(other.optimizer_state().begin(), other.optimizer_state().end());
    df::load_model(path, other);
    CHECK(std::equal(trained.begin(), trained.end(), other.parameters().begin()));
    CHECK(classes_of(other) == classes_of(step));
    CHECK(std::equal(state.begin(), state.end(), other.optimizer_state().begin()));
  }
  SUBCASE("the members numpy and PyTorch read: names, shapes, architecture") {
    const std::vector<df::data::npz_member> members = df::data::load_npz(path);
    std::vector<std::string> names;
    for (const auto& e : members) names.push_back(e.name);
    CHECK(names == std::vector<std::string>{
                       "features.0.weight.npy", "features.0.bias.npy", "classifier.0.weight.npy",
                       "classifier.0.bias.npy", "discriminator.0.weight.npy",
                       "discriminator.0.bias.npy", "discriminator.1.weight.npy",
                       "discriminator.1.bias.npy", "architecture.json"});
    const auto w = df::data::parse_npy<float>(members[0].bytes, "w");
    CHECK(w.shape == std::vector<std::size_t>{16, 3});
    // Row-major [out, in]: element (o, i) of the step's column-major W.
    CHECK(w.values[5 * 3 + 2] == trained[5 + 2 * 16]);
    CHECK(df::model_architecture<net>() ==
          R"({"format": "dafuse-model", "format_version": 1, "input": {"width": 3, "sparse": )"
          R"(false}, "modules": {"features": [{"in": 3, "out": 16, "activation": "tanh"}], )"
          R"("classifier": [{"in": 16, "out": 2, "activation": "identity"}], "discriminator": )"
          R"([{"in": 16, "out": 8, "activation": "leaky_relu", "negative_slope": 0.2}, {"in": 8, )"
          R"("out": 1, "activation": "identity"}]}})");
  }
  SUBCASE("a file without architecture.json loads by its arrays") {
    rewrite(path, tmp / "bare.npz", [](auto& m) { m.pop_back(); });
    CHECK(df::load_model<net>(tmp / "bare.npz").parameters()[7] == trained[7]);
  }
}

TEST_CASE("model file: a file of another network is refused, the target unchanged") {
  const df::test::temp_dir tmp("model_file_errors");
  step_t<df::optim::sgd> step(args);
  const fs::path path = tmp / "model.npz", bad = tmp / "bad.npz";
  df::save_model(path, step);
  df::save_model(tmp / "wider.npz", df::model<wider_net>());
  const std::vector<float> before(step.parameters().begin(), step.parameters().end());
  const auto refused = [&](const fs::path& p) {
    const std::string e = df::test::error_message([&] { df::load_model(p, step); });
    CHECK(std::equal(before.begin(), before.end(), step.parameters().begin()));
    return e;
  };

  SUBCASE("another architecture: the first field that differs") {
    CHECK(refused(tmp / "wider.npz") ==
          "dafuse: " + (tmp / "wider.npz").string() +
              ": architecture.json: modules.features[0].out: expected 16, found 17");
  }
  SUBCASE("the same shapes with another activation, slope or input") {
    df::save_model(bad, df::model<relu_net>());
    CHECK(refused(bad) == "dafuse: " + bad.string() +
                              ": architecture.json: modules.features[0].activation: expected "
                              "\"tanh\", found \"relu\"");
    df::save_model(bad, df::model<slope_net>());
    CHECK(refused(bad) == "dafuse: " + bad.string() +
                              ": architecture.json: modules.discriminator[0].negative_slope: "
                              "expected 0.2, found 0.1");
    df::save_model(bad, df::model<sparse_net>());
    CHECK(refused(bad) == "dafuse: " + bad.string() +
                              ": architecture.json: input.sparse: expected false, found true");
  }
  SUBCASE("an architecture.json that is not JSON, or has fields of no network") {
    const auto with_architecture = [&](std::string json) {
      rewrite(path, bad, [&](auto& m) { m.back().bytes.assign(json.begin(), json.end()); });
      return refused(bad);
    };
    CHECK(with_architecture("{\"format\": \"dafuse-model\", [") ==
          "dafuse: " + bad.string() +
              ": architecture.json: JSON: expected a string, found '[' at offset 27");
    std::string extra = df::model_architecture<net>();
    extra.insert(1, "\"optimizer\": \"adam\", ");
    CHECK(with_architecture(extra) ==
          "dafuse: " + bad.string() +
              ": architecture.json: optimizer: expected no such field (a network of another "
              "shape?), found \"adam\"");
  }
  SUBCASE("a member given twice") {
    rewrite(path, bad, [](auto& m) { m.insert(m.begin() + 1, m[0]); });
    CHECK(refused(bad) == "dafuse: " + bad.string() +
                              ": features.0.weight.npy: expected each member once, found it twice");
  }
  SUBCASE("a weight that is not finite") {
    rewrite(path, bad, [](auto& m) {
      std::vector<float> w(16 * 3, 0.5f);
      w[7] = std::numeric_limits<float>::infinity();
      m[0].bytes = df::data::npy_bytes<float>({16, 3}, std::span<const float>(w), "w");
    });
    CHECK(refused(bad) == "dafuse: " + bad.string() +
                              ": features.0.weight.npy: values: expected finite numbers, found "
                              "inf at flat index 7");
  }
  SUBCASE("without its architecture, a wrong shape") {
    rewrite(tmp / "wider.npz", bad, [](auto& m) { m.pop_back(); });
    CHECK(refused(bad) == "dafuse: " + bad.string() +
                              ": features.0.weight.npy: shape: expected (16, 3), found (17, 3)");
  }
  SUBCASE("a missing layer") {
    rewrite(path, bad, [](auto& m) { m.erase(m.begin() + 3); });
    const std::string e = refused(bad);
    CHECK(e.find("dafuse: " + bad.string() +
                 ": classifier.0.bias.npy: expected a member holding layer 0 of classifier "
                 "(float32 (2,)), found none; the file has features.0.weight.npy, ") == 0);
  }
  SUBCASE("an extra layer") {
    rewrite(path, bad, [](auto& m) {
      m.insert(m.begin(), df::data::npz_member{"features.1.weight.npy", m[0].bytes});
      m.pop_back();
    });
    CHECK(refused(bad) == "dafuse: " + bad.string() +
                              ": features.1.weight.npy: expected no member beyond the network's "
                              "layers (a different depth?), found this one");
  }
  SUBCASE("another dtype") {
    rewrite(path, bad, [](auto& m) {
      const std::vector<std::int32_t> b(2, 1);
      m[3].bytes = df::data::npy_bytes<std::int32_t>({2}, std::span<const std::int32_t>(b), "b");
      m.pop_back();
    });
    CHECK(refused(bad) == "dafuse: " + bad.string() +
                              ": classifier.0.bias.npy: descr: expected '<f4' (float32), found "
                              "'<i4' (int32); convert with arr.astype(np.float32)");
  }
  SUBCASE("not a model file") {
    CHECK(refused(tmp / "absent.npz").find((tmp / "absent.npz").string()) != std::string::npos);
  }
}

TEST_CASE("model file: a conv net is written in PyTorch's NCHW layout and read back exactly") {
  const df::test::temp_dir tmp("model_file_conv");
  df::model<conv_net> m;
  df::nn::initialize_parameters<conv_net>(m.parameters().data(), 4,
                                          df::nn::weight_init::torch_default);
  const fs::path path = tmp / "conv.npz";
  df::save_model(path, m);
  const df::model<conv_net> back = df::load_model<conv_net>(path);
  CHECK(std::equal(m.parameters().begin(), m.parameters().end(), back.parameters().begin(),
                   back.parameters().end()));

  const std::vector<df::data::npz_member> members = df::data::load_npz(path);
  std::vector<std::string> names;
  for (const auto& e : members) names.push_back(e.name);
  // No members for the pooling (layer 1): the dense layer keeps its index, as in an
  // nn.ModuleList holding nn.MaxPool2d there.
  CHECK(names == std::vector<std::string>{"features.0.weight.npy", "features.0.bias.npy",
                                          "features.2.weight.npy", "features.2.bias.npy",
                                          "classifier.0.weight.npy", "classifier.0.bias.npy",
                                          "discriminator.0.weight.npy", "discriminator.0.bias.npy",
                                          "architecture.json"});
  const std::span<const float> p = m.parameters();
  using stack = conv_net::feature_stack;
  // torch.nn.Conv2d's [C_out, C_in, K, K]: element (o, c, kh, kw) = dafuse's W(o, kh, kw, c) at
  // o + C_out·(c + C_in·(kw + K·kh)).
  const auto conv = df::data::parse_npy<float>(members[0].bytes, "conv");
  CHECK(conv.shape == std::vector<std::size_t>{3, 2, 3, 3});
  for (std::size_t o = 0; o < 3; ++o)
    for (std::size_t c = 0; c < 2; ++c)
      for (std::size_t kh = 0; kh < 3; ++kh)
        for (std::size_t kw = 0; kw < 3; ++kw)
          CHECK(conv.values[((o * 2 + c) * 3 + kh) * 3 + kw] ==
                p[conv_net::features_offset + o + 3 * (c + 2 * (kw + 3 * kh))]);
  // The dense layer after the 3 × 2 × 3 pooled image: torch's columns in C·H·W order, dafuse's in
  // H·W·C order.
  const auto fc = df::data::parse_npy<float>(members[2].bytes, "fc");
  CHECK(fc.shape == std::vector<std::size_t>{4, 18});
  const std::size_t fc_offset = conv_net::features_offset + stack::param_offset<2>();
  for (std::size_t o = 0; o < 4; ++o)
    for (std::size_t c = 0; c < 3; ++c)
      for (std::size_t h = 0; h < 3; ++h)
        for (std::size_t w = 0; w < 2; ++w)
          CHECK(fc.values[o * 18 + c * 6 + h * 2 + w] ==
                p[fc_offset + o + 4 * ((h * 2 + w) * 3 + c)]);
  CHECK(df::model_architecture<conv_net>() ==
        R"({"format": "dafuse-model", "format_version": 1, "input": {"width": 60, "sparse": )"
        R"(false}, "modules": {"features": [{"kind": "conv2d", "in_height": 6, "in_width": 5, )"
        R"("in_channels": 2, "out_channels": 3, "kernel": 3, "stride": 1, "padding": 1, "in": )"
        R"(60, "out": 90, "activation": "relu"}, {"kind": "max_pool2d", "in_height": 6, )"
        R"("in_width": 5, "channels": 3, "kernel": 2, "in": 90, "out": 18}, {"in": 18, "out": )"
        R"(4, "activation": "relu"}], "classifier": [{"in": 4, "out": 2, "activation": )"
        R"("identity"}], "discriminator": [{"in": 4, "out": 1, "activation": "identity"}]}})");

  SUBCASE("another pooling is refused by its field") {
    df::save_model(tmp / "pool3.npz", df::model<pool3_net>());
    CHECK(df::test::error_message([&] { (void)df::load_model<conv_net>(tmp / "pool3.npz"); }) ==
          "dafuse: " + (tmp / "pool3.npz").string() +
              ": architecture.json: modules.features[1].kernel: expected 2, found 3");
  }
  SUBCASE("without its architecture, a convolution of another layout is refused by its shape") {
    rewrite(path, tmp / "flat.npz", [](auto& members) {
      const std::vector<float> w(3 * 18, 0.5f);
      members[0].bytes = df::data::npy_bytes<float>({3, 18}, std::span<const float>(w), "w");
      members.pop_back();
    });
    CHECK(df::test::error_message([&] { (void)df::load_model<conv_net>(tmp / "flat.npz"); }) ==
          "dafuse: " + (tmp / "flat.npz").string() +
              ": features.0.weight.npy: shape: expected (3, 2, 3, 3), found (3, 18)");
  }
}

namespace {

//! The steps dafuse-train's --preprocess standardize,l2 fits on `s` and `t`, applied to them.
df::data::preprocessing standardize_l2(df::data::dataset& s, df::data::dataset& t) {
  df::data::preprocessing p;
  df::data::standardize st;
  st.fit(s, t);
  st.apply(s);
  st.apply(t);
  p.add_standardize(st.statistics(df::data::domain::target));
  df::data::l2_normalize_rows(s);
  df::data::l2_normalize_rows(t);
  p.add(df::data::preprocess_kind::l2);
  return p;
}

//! The text of a model file's architecture.json.
std::string architecture_of(const fs::path& path) {
  const std::vector<df::data::npz_member> members = df::data::load_npz(path);
  const df::data::npz_member* a = df::data::find_member(members, "architecture.json");
  REQUIRE(a != nullptr);
  return std::string(a->bytes.begin(), a->bytes.end());
}

}  // namespace

TEST_CASE("model file: the preprocessing travels with the model, which then reads raw rows") {
  const df::test::temp_dir tmp("model_file_preprocess");
  df::data::dataset s = source, t = target;
  const df::data::preprocessing p = standardize_l2(s, t);
  step_t<df::optim::sgd> step(args);
  (void)df::fit(step, s, t);

  df::model<net> m = df::model_of(step);
  CHECK(m.preprocessing().empty());
  // What the step predicts on the rows it trained on: logits of the transformed target rows.
  std::vector<float> want(std::size_t(t.rows) * 2), got(want.size());
  m.logits(t.features.data(), t.rows, want.data());
  m.set_preprocessing(p);
  const fs::path path = tmp / "model.npz";
  df::save_model(path, m);

  const df::model<net> loaded = df::load_model<net>(path);
  REQUIRE(loaded.preprocessing().steps().size() == 2);
  CHECK(loaded.preprocessing().steps()[0].mean == p.steps()[0].mean);
  CHECK(loaded.preprocessing().steps()[0].stddev == p.steps()[0].stddev);
  // Raw target rows through the loaded model: the same logits, bit for bit.
  loaded.logits(target.features.data(), target.rows, got.data());
  CHECK(std::memcmp(got.data(), want.data(), 4 * want.size()) == 0);

  SUBCASE("version 2, its steps in architecture.json and the statistics as float64 members") {
    CHECK(architecture_of(path).starts_with(
        R"({"format": "dafuse-model", "format_version": 2, "input": {"width": 3, "sparse": )"
        R"(false}, "preprocess": [{"transform": "standardize", "mean": )"
        R"("preprocess.0.mean.npy", "stddev": "preprocess.0.stddev.npy"}, {"transform": "l2"}], )"
        R"("modules": {"features": )"));
    const std::vector<df::data::npz_member> members = df::data::load_npz(path);
    const df::data::npz_member* mean = df::data::find_member(members, "preprocess.0.mean.npy");
    REQUIRE(mean != nullptr);
    CHECK(df::data::parse_npy<double>(mean->bytes, "mean").values == p.steps()[0].mean);
    // Saved again, the loaded model gives the same file.
    df::save_model(tmp / "again.npz", loaded);
    CHECK(df::data::load_npz(tmp / "again.npz").size() == members.size());
    CHECK(architecture_of(tmp / "again.npz") == architecture_of(path));
  }
  SUBCASE("a model without preprocessing is the version 1 file it was") {
    df::save_model(tmp / "plain.npz", df::model_of(step));
    CHECK(architecture_of(tmp / "plain.npz") == df::model_architecture<net>());
    CHECK(architecture_of(tmp / "plain.npz").find(R"("format_version": 1)") != std::string::npos);
    CHECK(df::load_model<net>(tmp / "plain.npz").preprocessing().empty());
  }
  SUBCASE("binarize keeps its threshold; log1p needs nothing") {
    df::data::preprocessing q;
    q.add(df::data::preprocess_kind::log1p);
    q.add(df::data::preprocess_kind::binarize, 0.25f);
    m.set_preprocessing(q);
    df::save_model(tmp / "bin.npz", m);
    CHECK(
        architecture_of(tmp / "bin.npz")
            .find(
                R"("preprocess": [{"transform": "log1p"}, {"transform": "binarize", "threshold": )"
                R"(0.25}])") != std::string::npos);
    const df::model<net> b = df::load_model<net>(tmp / "bin.npz");
    REQUIRE(b.preprocessing().steps().size() == 2);
    CHECK(b.preprocessing().steps()[1].threshold == 0.25f);
  }
}

TEST_CASE("model file: preprocessing a file cannot carry exactly is refused, naming what") {
  const df::test::temp_dir tmp("model_file_preprocess_errors");
  df::data::dataset s = source, t = target;
  df::model<net> m;
  m.set_preprocessing(standardize_l2(s, t));
  const fs::path path = tmp / "model.npz";
  df::save_model(path, m);
  const auto message = [&](const fs::path& p) {
    return df::test::error_message([&] { (void)df::load_model<net>(p); });
  };
  const auto edit_architecture = [&](const fs::path& to, std::string_view from,
                                     std::string_view by) {
    rewrite(path, to, [&](auto& members) {
      std::string a(members.back().bytes.begin(), members.back().bytes.end());
      const std::size_t at = a.find(from);
      REQUIRE(at != std::string::npos);
      a.replace(at, from.size(), by);
      members.back().bytes.assign(a.begin(), a.end());
    });
  };
  SUBCASE("a reader of version 1 only, or a version 1 file with preprocessing") {
    edit_architecture(tmp / "v1.npz", R"("format_version": 2)", R"("format_version": 1)");
    CHECK(message(tmp / "v1.npz") ==
          "dafuse: " + (tmp / "v1.npz").string() +
              ": architecture.json: format_version: expected 2, found 1");
  }
  SUBCASE("an unknown transform") {
    edit_architecture(tmp / "whiten.npz", R"("transform": "l2")", R"("transform": "whiten")");
    CHECK(message(tmp / "whiten.npz") ==
          "dafuse: " + (tmp / "whiten.npz").string() +
              ": architecture.json: preprocess[1].transform: expected \"standardize\", \"l2\", "
              "\"log1p\", \"binarize\" or \"binarize_nonzero\", found \"whiten\"");
  }
  SUBCASE("statistics missing, of another width, or negative") {
    rewrite(path, tmp / "missing.npz", [](auto& members) { members.erase(members.begin() + 8); });
    CHECK(message(tmp / "missing.npz")
              .find("preprocess.0.mean.npy: expected a member holding "
                    "standardize's mean (float64 [3]), found none") != std::string::npos);
    rewrite(path, tmp / "wide.npz", [](auto& members) {
      const std::vector<double> v(4, 1.0);
      members[9].bytes = df::data::npy_bytes<double>({4}, std::span<const double>(v), "s");
    });
    CHECK(message(tmp / "wide.npz") == "dafuse: " + (tmp / "wide.npz").string() +
                                           ": preprocess.0.stddev.npy: shape: expected (3,), found "
                                           "(4,)");
    rewrite(path, tmp / "negative.npz", [](auto& members) {
      const std::vector<double> v{1.0, -1.0, 1.0};
      members[9].bytes = df::data::npy_bytes<double>({3}, std::span<const double>(v), "s");
    });
    CHECK(message(tmp / "negative.npz")
              .find("preprocess.0.stddev.npy: values[1]: expected a finite value >= 0, found "
                    "-1") != std::string::npos);
  }
  SUBCASE("statistics without the architecture that lists them") {
    rewrite(path, tmp / "bare.npz", [](auto& members) { members.pop_back(); });
    CHECK(message(tmp / "bare.npz") == "dafuse: " + (tmp / "bare.npz").string() +
                                           ": preprocess.0.mean.npy: expected a preprocessing "
                                           "member that architecture.json lists, found this one");
  }
  SUBCASE("a dense step on a sparse model") {
    df::model<sparse_net> sm;
    CHECK_THROWS_WITH_AS(sm.set_preprocessing(m.preprocessing()),
                         doctest::Contains("model::set_preprocessing: preprocess[0]: expected l2, "
                                           "log1p or binarize_nonzero"),
                         dafuse::error);
  }
}

TEST_CASE("model file: a sparse model's preprocessing reads raw CSR rows as the transforms did") {
  const df::test::temp_dir tmp("model_file_preprocess_sparse");
  df::model<sparse_net> m;
  df::nn::initialize_parameters<sparse_net>(m.parameters().data(), 7,
                                            df::nn::weight_init::torch_default);
  df::data::sparse_dataset raw = df::data::make_sparse_dataset(
      "raw", df::data::domain::target, df::data::to_csr(source.features.data(), source.rows, 3));
  for (float& v : raw.features.values) v = std::abs(v);  // counts for log1p
  df::data::sparse_dataset d = raw;
  df::data::log1p_values(d);
  df::data::l2_normalize_rows(d);
  std::vector<float> want(std::size_t(d.rows()) * 2), got(want.size());
  m.logits(df::data::sparse_columns(d.features), want.data());
  df::data::preprocessing p;
  p.add(df::data::preprocess_kind::log1p);
  p.add(df::data::preprocess_kind::l2);
  m.set_preprocessing(p);
  df::save_model(tmp / "sparse.npz", m);
  df::load_model<sparse_net>(tmp / "sparse.npz")
      .logits(df::data::sparse_columns(raw.features), got.data());
  CHECK(std::memcmp(got.data(), want.data(), 4 * want.size()) == 0);
}

TEST_CASE("model file: only the members the network needs are read") {
  const df::test::temp_dir tmp("model_file_by_name");
  const df::model<net> m;
  const fs::path path = tmp / "model.npz", extra = tmp / "extra.npz";
  df::save_model(path, m);
  // A member no reader asks for, damaged after it was written: its CRC-32 is never checked.
  rewrite(path, extra, [](auto& members) {
    members.push_back({"notes.bin", std::vector<unsigned char>(64, 'Z')});
  });
  std::vector<unsigned char> file = read_file_bytes(extra);
  const std::string zs(64, 'Z');
  const auto at = std::search(file.begin(), file.end(), zs.begin(), zs.end());
  REQUIRE(at != file.end());
  *at = 'Y';
  write_file_bytes(extra, file);
  const df::model<net> loaded = df::load_model<net>(extra);
  CHECK(std::equal(m.parameters().begin(), m.parameters().end(), loaded.parameters().begin()));
  CHECK(df::test::error_message([&] {
          (void)df::data::load_npz(extra);
        }).find("notes.bin: CRC-32: expected ") != std::string::npos);
}

TEST_CASE("model file: architecture.json's text reaches messages with control bytes escaped") {
  const df::test::temp_dir tmp("model_file_escaped");
  const fs::path path = tmp / "model.npz", bad = tmp / "bad.npz";
  df::save_model(path, df::model<net>());
  const auto refused_with = [&](const std::string& json) {
    rewrite(path, bad, [&](auto& m) { m.back().bytes.assign(json.begin(), json.end()); });
    const std::string e = df::test::error_message([&] { (void)df::load_model<net>(bad); });
    CHECK(e.find('\x1b') == std::string::npos);
    CHECK(e.find('\x07') == std::string::npos);
    return e;
  };
  const std::string a = df::model_architecture<net>();
  const std::string where = "dafuse: " + bad.string() + ": architecture.json: ";
  std::string value = a;
  value.replace(value.find("\"tanh\""), 6, "\"\x1b[2Jtanh\x07\"");
  CHECK(refused_with(value) == where +
                                   "modules.features[0].activation: expected \"tanh\", found "
                                   "'\"\\x1b[2Jtanh\\x07\"'");
  std::string key = a;
  key.insert(1, "\"\x1b]0;title\x07\": 1, ");
  CHECK(refused_with(key) == where +
                                 "'\\x1b]0;title\\x07': expected no such field (a network of "
                                 "another shape?), found 1");
  CHECK(refused_with("{\"format\": \x1b[31m}") ==
        where + "JSON: expected a value, found '\\x1b[31m}' at offset 11");
}

TEST_CASE("model file: a large architecture.json is refused in linear time, naming why") {
  const df::test::temp_dir tmp("model_file_large_architecture");
  const fs::path path = tmp / "model.npz", bad = tmp / "bad.npz";
  df::save_model(path, df::model<net>());
  const std::string a = df::model_architecture<net>();
  const std::string where = "dafuse: " + bad.string() + ": architecture.json: ";
  const auto refused_with = [&](const std::string& json) {
    rewrite(path, bad, [&](auto& m) { m.back().bytes.assign(json.begin(), json.end()); });
    const auto start = std::chrono::steady_clock::now();
    const std::string e = df::test::error_message([&] { (void)df::load_model<net>(bad); });
    // Under a second each even with sanitizers; the quadratic check took over 60 s for 204 KB.
    CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(10));
    return e;
  };
  SUBCASE("over the size cap: refused before it is read") {
    std::string big = a;
    big.insert(1, std::string(df::model_architecture_max_bytes, ' '));
    CHECK(refused_with(big) == where +
                                   "size: expected at most 1048576 bytes (a network's "
                                   "architecture takes a few kilobytes), found " +
                                   std::to_string(big.size()) + " bytes");
  }
  SUBCASE("20 000 fields and one of them twice") {
    std::string many = a;
    std::string fields;
    for (int i = 0; i < 20000; ++i) fields += "\"field" + std::to_string(i) + "\": 0, ";
    many.insert(1, fields + "\"field7\": 1, ");
    CHECK(refused_with(many) == where + "field7: expected each field once, found it twice");
  }
  SUBCASE("a long key above a long array: every element's path would repeat it") {
    std::string zeros = "0";
    for (int i = 0; i < 60000; ++i) zeros += ",0";
    const std::string json = "{\"" + std::string(4000, 'k') + "\": [" + zeros + "]}";
    CHECK(json.size() < df::model_architecture_max_bytes);
    CHECK(refused_with(json).find(where + "JSON: expected at most 16777216 bytes of field paths "
                                          "in all (long keys above long arrays), found ") == 0);
  }
}

}  // namespace train_model_file_test
