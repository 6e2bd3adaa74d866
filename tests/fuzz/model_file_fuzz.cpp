// SPDX-License-Identifier: Apache-2.0
// libFuzzer target for train/model_file.hpp and data/npz.hpp: the input is a model file of a small
// dense or conv network. load_model must either return a model whose weights are finite and
// which predicts, or throw dafuse::error; anything else (another exception, a crash, a sanitizer
// report, a hang, a large allocation) is a finding. Raw inputs also go through npz_archive and
// load_npz, whose members must lie inside the file and add up to at most its size.
//
// Input layout:
//   byte 0   flags: bit 0 - the rest is a list of members, each [name length: 1 byte][name]
//            [size: 2 bytes, little-endian][bytes] (the last one cut short where the input ends),
//            written with save_npz, so that edits reach the NPY and architecture checks instead
//            of stopping at the ZIP structure and its CRC-32s; clear - the rest is the file as is;
//            bit 1 - load it as the conv network's model instead of the dense one's
//   then     the members, or the file
//
// Seeds: run with DAFUSE_FUZZ_WRITE_SEEDS=DIR to write valid model files of both networks (with
// and without preprocessing), in both layouts, into DIR and exit; scripts/fuzz does.
#include <dafuse/core/file.hpp>
#include <dafuse/data/npz.hpp>
#include <dafuse/nn/conv2d.hpp>
#include <dafuse/train/model_file.hpp>

#include "fuzz_file.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <string>
#include <vector>

namespace {

namespace df = dafuse;
using df::fuzz::finding;

using dense_net = df::nn::dann_net<df::nn::mlp<3, 8, df::nn::tanh>,
                                   df::nn::linear<8, 2>,
                                   df::nn::mlp<8, 4, 1, df::nn::leaky_relu_t{0.2f}>>;
using conv_net = df::nn::dann_net<df::nn::conv_net<df::nn::image<5, 4, 2>,
                                                   df::nn::conv2d<2, 3, 3, 1, 1>,
                                                   df::nn::max_pool2d<2>,
                                                   df::nn::flatten,
                                                   df::nn::dense<3 * 2 * 2, 4, df::nn::relu>>,
                                  df::nn::linear<4, 3>,
                                  df::nn::linear<4, 1>>;

void write_seed(const std::filesystem::path& dir,
                int& n,
                unsigned char network,
                const std::filesystem::path& model) {
  const std::vector<unsigned char> file = df::detail::read_file(model, model.string());
  std::vector<unsigned char> raw{network};
  raw.insert(raw.end(), file.begin(), file.end());
  std::vector<unsigned char> listed{static_cast<unsigned char>(network | 1)};
  for (const df::data::npz_member& m : df::data::load_npz(model)) {
    if (m.name.size() > 0xff || m.bytes.size() > 0xffff) std::abort();
    listed.push_back(static_cast<unsigned char>(m.name.size()));
    listed.insert(listed.end(), m.name.begin(), m.name.end());
    listed.push_back(static_cast<unsigned char>(m.bytes.size()));
    listed.push_back(static_cast<unsigned char>(m.bytes.size() >> 8));
    listed.insert(listed.end(), m.bytes.begin(), m.bytes.end());
  }
  for (const auto* input : {&raw, &listed}) {
    const std::filesystem::path seed = dir / ("seed_" + std::to_string(n++));
    df::fuzz::write_file(seed, input->data(), input->size());
  }
}

void write_seeds(const std::filesystem::path& dir) {
  std::filesystem::create_directories(dir);
  const std::filesystem::path tmp = dir / "model.tmp";
  int n = 0;
  df::model<dense_net> dense;
  for (std::size_t i = 0; i < dense.parameters().size(); ++i)
    dense.parameters()[i] = 0.01f * float(i % 17) - 0.08f;
  df::save_model(tmp, dense);
  write_seed(dir, n, 0, tmp);
  df::data::preprocessing pre;
  df::data::feature_stats s;
  s.mean = {0.0, 1.0, 2.0};
  s.stddev = {1.0, 0.5, 0.0};
  pre.add_standardize(s);
  pre.add(df::data::preprocess_kind::binarize, 0.25f);
  dense.set_preprocessing(pre);
  df::save_model(tmp, dense);
  write_seed(dir, n, 0, tmp);
  df::save_model(tmp, df::model<conv_net>());
  write_seed(dir, n, 2, tmp);
  std::filesystem::remove(tmp);
}

//! Loads the model at `path` as Net's; a loaded model must hold finite weights and predict.
template <class Net>
void load(const std::filesystem::path& path) {
  df::model<Net> m;
  try {
    m = df::load_model<Net>(path);
  } catch (const df::error&) {
    return;
  }
  for (const float v : m.parameters())
    if (!std::isfinite(v)) finding("a non-finite weight was loaded");
  std::vector<float> rows(std::size_t(Net::input_width) * 2);
  for (std::size_t i = 0; i < rows.size(); ++i) rows[i] = float(i % 5) - 1.5f;
  std::int32_t classes[2] = {-1, -1};
  m.predict(rows.data(), 2, classes);
  for (const std::int32_t c : classes)
    if (c < 0 || c >= Net::class_count) finding("a prediction out of the classes");
}

//! The archive's members lie inside the file and add up to at most its size.
void check_archive(const std::filesystem::path& path, std::size_t file_size) {
  try {
    const df::data::npz_archive a(path);
    std::uint64_t total = 0;
    for (const df::data::npz_entry& e : a.entries()) {
      if (e.data > file_size || e.size > file_size - e.data) finding("a member past the file");
      total += e.size;
    }
    if (total > file_size) finding("members adding up to more than the file");
    total = 0;
    for (const df::data::npz_member& m : df::data::load_npz(path)) total += m.bytes.size();
    if (total > file_size) finding("load_npz read more than the file");
  } catch (const df::error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (const char* dir = std::getenv("DAFUSE_FUZZ_WRITE_SEEDS")) {
    write_seeds(dir);
    std::exit(0);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const unsigned flags = data[0];
  static const std::filesystem::path path = df::fuzz::scratch_dir() / "input.npz";
  try {
    if (flags & 1) {
      std::vector<df::data::npz_member> members;
      for (std::size_t at = 1; at < size;) {
        const std::size_t name = std::min<std::size_t>(data[at], size - at - 1);
        ++at;
        df::data::npz_member m;
        m.name.assign(reinterpret_cast<const char*>(data + at), name);
        at += name;
        std::size_t n = 0;
        if (at + 2 <= size) n = std::size_t(data[at]) | std::size_t(data[at + 1]) << 8;
        at = std::min(at + 2, size);
        n = std::min(n, size - at);
        m.bytes.assign(data + at, data + at + n);
        at += n;
        members.push_back(std::move(m));
      }
      try {
        df::data::save_npz(path, members);
      } catch (const df::error&) {
        return 0;  // an empty name: not a model file save_npz writes
      }
    } else {
      df::fuzz::write_file(path, data + 1, size - 1);
      check_archive(path, size - 1);
    }
    if (flags & 2)
      load<conv_net>(path);
    else
      load<dense_net>(path);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dafuse fuzz finding: %s\n", e.what());
    finding("an exception other than dafuse::error");
  }
  return 0;
}
