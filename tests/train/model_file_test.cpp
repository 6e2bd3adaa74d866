// SPDX-License-Identifier: Apache-2.0
// Tests for train/model_file.hpp: a trained step's weights survive save and load exactly, load
// into a step of other policies and into a model, and every file of another network is refused
// with the target left as it was; a conv net's members are in PyTorch's NCHW layout.
#include <dafuse/train/model_file.hpp>

#include "../check.hpp"
#include "blobs.hpp"

#include <dafuse/data/dataset.hpp>
#include <dafuse/head/dann.hpp>
#include <dafuse/nn/conv2d.hpp>
#include <dafuse/nn/init.hpp>
#include <dafuse/step/train_step.hpp>
#include <dafuse/train/fit.hpp>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <span>
#include <string>
#include <vector>

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
