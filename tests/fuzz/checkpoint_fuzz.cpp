// SPDX-License-Identifier: Apache-2.0
// libFuzzer target for train/checkpoint.hpp: the input is a checkpoint file for a small step.
// load_checkpoint must either load it, leaving a step and run position a run could have reached,
// or throw dafuse::error leaving the step exactly as it was; anything else (another exception, a
// crash, a sanitizer report, a hang, a large allocation) is a finding.
//
// Input layout:
//   byte 0   flags: bit 0 - rewrite the payload's CRC-32 after the input's edits, so that edits
//            inside the payload reach the field checks instead of stopping at the checksum;
//            bit 1 - load with the caller settings of `expected` below
//   then     the checkpoint file
//
// Seeds: run with DAFUSE_FUZZ_WRITE_SEEDS=DIR to write valid checkpoints of this step (at
// steps 0 and 7, with and without settings, with each flag) into DIR and exit; scripts/fuzz does.
#include <dafuse/head/dann.hpp>
#include <dafuse/step/train_step.hpp>
#include <dafuse/train/checkpoint.hpp>

#include "fuzz_file.hpp"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

namespace {

namespace df = dafuse;
using df::fuzz::finding;

using net = df::nn::dann_net<df::nn::mlp<2, 8, df::nn::tanh>,
                             df::nn::linear<8, 2>,
                             df::nn::mlp<8, 4, 1, df::nn::relu>>;
using step_type = df::train_step<net,
                                 df::loader::sync,
                                 df::precision::fp32,
                                 df::clip::global_norm,
                                 df::head::dann<df::schedule::ganin>,
                                 df::optim::sgd>;
const df::fit_args args{.steps = 20, .batch = 4, .lr = 0.05f, .momentum = 0.9f, .seed = 3};
const std::vector<df::run_setting> expected{{"--preprocess", "none"},
                                            {"source data", "10 rows x 2, CRC-32 0"}};

std::vector<std::uint32_t> bits(const step_type& s) {
  std::vector<std::uint32_t> b(s.parameters().size() + s.optimizer_state().size());
  std::memcpy(b.data(), s.parameters().data(), s.parameters().size_bytes());
  std::memcpy(b.data() + s.parameters().size(), s.optimizer_state().data(),
              s.optimizer_state().size_bytes());
  return b;
}

void write_seeds(const std::filesystem::path& dir) {
  std::filesystem::create_directories(dir);
  step_type step(args);
  int n = 0;
  for (int at : {0, 7}) {
    while (step.step_index() < at) step.run();  // on the batch as initialised: enough for seeds
    for (bool with_settings : {false, true}) {
      const std::filesystem::path tmp = dir / "checkpoint.tmp";
      df::save_checkpoint(tmp.string(), step,
                          {.source_rows = 10,
                           .target_rows = 10,
                           .best_score = at > 0 ? 0.5 : std::nan(""),
                           .best_step = at > 0 ? at : -1},
                          with_settings ? std::span<const df::run_setting>(expected)
                                        : std::span<const df::run_setting>());
      const std::vector<unsigned char> file = [&] {
        std::FILE* f = std::fopen(tmp.c_str(), "rb");
        std::vector<unsigned char> b;
        for (int c; (c = std::fgetc(f)) != EOF;) b.push_back(static_cast<unsigned char>(c));
        std::fclose(f);
        return b;
      }();
      std::filesystem::remove(tmp);
      for (unsigned char flags : {0, 1, 3}) {
        std::vector<unsigned char> input{flags};
        input.insert(input.end(), file.begin(), file.end());
        const std::filesystem::path seed = dir / ("seed_" + std::to_string(n++));
        df::fuzz::write_file(seed, input.data(), input.size());
      }
    }
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
  std::vector<unsigned char> file(data + 1, data + size);
  if ((flags & 1) && file.size() >= 24) {
    const std::uint32_t crc = df::detail::crc32(file.data() + 24, file.size() - 24);
    std::memcpy(file.data() + 12, &crc, 4);
  }
  static const std::filesystem::path path = df::fuzz::scratch_dir() / "input.ckpt";
  df::fuzz::write_file(path, file.data(), file.size());

  step_type step(args);
  const std::vector<std::uint32_t> before = bits(step);
  df::run_position run;
  try {
    run = (flags & 2) ? df::load_checkpoint(path.string(), step, expected)
                      : df::load_checkpoint(path.string(), step);
  } catch (const df::error&) {
    if (bits(step) != before || step.step_index() != 0) finding("a refused load changed the step");
    return 0;
  }
  // Loaded: what a run could have reached.
  const df::index_t at = step.step_index();
  if (at < 0 || at > args.steps) finding("step index out of range");
  for (const float v : step.parameters())
    if (!std::isfinite(v)) finding("a non-finite parameter was loaded");
  for (const float v : step.optimizer_state())
    if (!std::isfinite(v)) finding("a non-finite optimizer state was loaded");
  if (!(step.loss_scale().scale > 0) || !std::isfinite(step.loss_scale().scale))
    finding("a loss scale that is not finite and positive was loaded");
  if (run.best_step != -1 && (run.best_step < 1 || run.best_step > at))
    finding("an impossible best step was loaded");
  if ((run.best_step == -1) != std::isnan(run.best_score)) finding("a best score without a step");
  if (run.evaluations_since_best < 0) finding("a negative evaluation count was loaded");
  // It trains on from there without a fault.
  if (at < args.steps) step.run();
  return 0;
}
