// SPDX-License-Identifier: Apache-2.0
// Tests for train/checkpoint.hpp: round trips, bitwise-exact resume for every optimizer state
// and the loss scaler, and a clear refusal (with the step untouched) for every broken file.
#include <dafuse/head/dann.hpp>
#include <dafuse/train/checkpoint.hpp>
#include "../check.hpp"
#include "blobs.hpp"

#include <dafuse/data/batcher.hpp>
#include <dafuse/step/train_step.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

namespace train_checkpoint_test {

namespace df = dafuse;

namespace {
using net = df::nn::dann_net<df::nn::mlp<3, 16, df::nn::tanh>,
                             df::nn::linear<16, 2>,
                             df::nn::mlp<16, 8, 1, df::nn::relu>>;
using wider_net = df::nn::dann_net<df::nn::mlp<3, 17, df::nn::tanh>,
                                   df::nn::linear<17, 2>,
                                   df::nn::mlp<17, 8, 1, df::nn::relu>>;
template <class Optim = df::optim::sgd,
          class Precision = df::precision::fp32,
          class Net = net,
          class Clip = df::clip::global_norm>
using step_t = df::
    train_step<Net, df::loader::sync, Precision, Clip, df::head::dann<df::schedule::ganin>, Optim>;
using sgd_step = step_t<>;

const df::fit_args args{.steps = 40, .batch = 8, .lr = 0.05f, .momentum = 0.9f, .seed = 5};

df::data::dataset blobs(df::data::domain side, df::index_t rows) {
  const bool source = side == df::data::domain::source;
  return df::test::blobs({.seed = 3}, side, rows, 3, 0.f, source ? "source" : "target",
                         std::uint32_t(side));
}

const df::data::dataset source = blobs(df::data::domain::source, 50);
const df::data::dataset target = blobs(df::data::domain::target, 30);

//! Trains `step` from its current step index up to `until`, drawing batches from that position.
template <class Step>
void train_until(Step& step, df::index_t until) {
  df::data::batcher<df::loader::sync, df::system::omp> batches(
      source, target, step.args().batch, step.args().seed, true, std::uint64_t(step.step_index()));
  while (step.step_index() < until) {
    batches.fill(step.input(), step.source_labels());
    step.run();
  }
}

std::vector<unsigned char> read_bytes(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}
void write_bytes(const std::filesystem::path& p, const std::vector<unsigned char>& b) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
}

template <class Step>
std::vector<float> weights(const Step& s) {
  return {s.parameters().begin(), s.parameters().end()};
}
}  // namespace

TEST_CASE_TEMPLATE("resuming from step k gives bitwise the weights of an uninterrupted run",
                   Step,
                   step_t<df::optim::sgd>,
                   step_t<df::optim::adam>,
                   step_t<df::optim::adamw>,
                   step_t<df::optim::sgd, df::precision::fp16<df::loss_scale::dynamic>>) {
  df::test::temp_dir dir("checkpoint_resume");
  const std::string path = (dir.path() / "run.ckpt").string();
  df::fit_args a = args;
  a.loss_scale_init = 1 << 20;  // fp16: overflows and backs off early, so the state matters
  a.loss_scale_interval = 3;    // and grows between checkpoints
  Step straight(a);
  train_until(straight, a.steps);

  Step first(a);
  train_until(first, 17);
  df::save_checkpoint(path, first,
                      {.source_rows = 50,
                       .target_rows = 30,
                       .best_score = 0.75,
                       .best_step = 10,
                       .evaluations_since_best = 2,
                       .selected_target_accuracy = 0.625,
                       .oracle_target_accuracy = 0.875});
  Step resumed(a);
  const df::run_position run = df::load_checkpoint(path, resumed);
  CHECK(run.selected_target_accuracy == 0.625);
  CHECK(run.oracle_target_accuracy == 0.875);
  CHECK(run.source_rows == 50);
  CHECK(run.target_rows == 30);
  CHECK(run.best_score == 0.75);
  CHECK(run.best_step == 10);
  CHECK(run.evaluations_since_best == 2);
  CHECK(resumed.step_index() == 17);
  CHECK(resumed.loss_scale().scale == first.loss_scale().scale);
  CHECK(resumed.loss_scale().good_steps == first.loss_scale().good_steps);
  CHECK(weights(resumed) == weights(first));
  train_until(resumed, a.steps);
  CHECK(weights(resumed) == weights(straight));
  CHECK(std::vector<float>(resumed.optimizer_state().begin(), resumed.optimizer_state().end()) ==
        std::vector<float>(straight.optimizer_state().begin(), straight.optimizer_state().end()));
}

TEST_CASE("a checkpoint at step 0 and one at the last step round trip") {
  df::test::temp_dir dir("checkpoint_roundtrip");
  const std::string path = (dir.path() / "c.ckpt").string();
  sgd_step a(args), b(df::fit_args{args});
  b.initialize_parameters(99);  // different weights, so the load must overwrite them
  df::save_checkpoint(path, a);
  CHECK(df::load_checkpoint(path, b).best_step == -1);
  CHECK(weights(a) == weights(b));
  train_until(a, args.steps);
  df::save_checkpoint(path, a);  // replaces the first file
  df::load_checkpoint(path, b);
  CHECK(weights(a) == weights(b));
  CHECK(b.step_index() == args.steps);
  // Only the checkpoint is left: the temporary file was renamed into place.
  CHECK(std::distance(std::filesystem::directory_iterator(dir.path()),
                      std::filesystem::directory_iterator()) == 1);
}

TEST_CASE("a refused checkpoint names the file and field and leaves the step untouched") {
  df::test::temp_dir dir("checkpoint_refused");
  const std::filesystem::path good = dir.path() / "good.ckpt", bad = dir.path() / "bad.ckpt";
  sgd_step trained(args);
  train_until(trained, 9);
  df::save_checkpoint(good.string(), trained);
  const std::vector<unsigned char> bytes = read_bytes(good);
  REQUIRE(bytes.size() > 200);

  sgd_step step(args);
  const std::vector<float> before = weights(step);
  const auto refused = [&](const std::vector<unsigned char>& file, const std::string& message) {
    CAPTURE(message);
    write_bytes(bad, file);
    CHECK_THROWS_WITH_AS(df::load_checkpoint(bad.string(), step),
                         doctest::Contains(message.c_str()), df::error);
    CHECK_THROWS_WITH_AS(df::load_checkpoint(bad.string(), step),
                         doctest::Contains(bad.string().c_str()), df::error);
    CHECK(weights(step) == before);
    CHECK(step.step_index() == 0);
  };

  SUBCASE("not a checkpoint") {
    refused({'h', 'e', 'l', 'l', 'o'}, "header: expected a dafuse checkpoint");
    refused({}, "found 0 bytes");
    std::vector<unsigned char> text(100, 'x');
    refused(text, "found another kind of file");
  }
  SUBCASE("another version") {
    std::vector<unsigned char> b = bytes;
    b[8] = 7;
    refused(b, "version: expected 4 (or 3, which this build still reads), found 7");
    b[8] = 1;  // the layout before modules were aligned
    refused(b, "version: expected 4 (or 3, which this build still reads), found 1");
    b[8] = 2;  // the layout before settings
    refused(b, "version: expected 4 (or 3, which this build still reads), found 2");
    b[8] = 3;  // read as version 3, the position ends early: the settings' count is the streak
    refused(b, "fit_args.lr: expected 0.05 (this step's fit_args), found no such setting");
  }
  SUBCASE("truncated anywhere") {
    for (std::size_t keep : {std::size_t(20), std::size_t(24), std::size_t(100), bytes.size() - 1})
      refused(std::vector<unsigned char>(bytes.begin(), bytes.begin() + std::ptrdiff_t(keep)),
              keep < 24 ? "header" : "(the file is truncated)");
  }
  SUBCASE("trailing bytes") {
    std::vector<unsigned char> b = bytes;
    b.push_back(0);
    refused(b, "(trailing bytes)");
  }
  SUBCASE("one flipped bit in the payload") {
    for (std::size_t at : {std::size_t(30), bytes.size() / 2, bytes.size() - 1}) {
      std::vector<unsigned char> b = bytes;
      b[at] ^= 0x10;
      refused(b, "checksum: expected CRC-32");
    }
  }
  SUBCASE("a missing file") {
    CHECK_THROWS_WITH_AS(df::load_checkpoint((dir.path() / "none.ckpt").string(), step),
                         doctest::Contains("cannot open for reading: No such file"), df::error);
  }
  SUBCASE("other widths, policies or arguments") {
    step_t<df::optim::sgd, df::precision::fp32, wider_net> wider(args);
    CHECK_THROWS_WITH_AS(df::load_checkpoint(good.string(), wider),
                         doctest::Contains("step type: expected"), df::error);
    step_t<df::optim::adam> adam(args);
    CHECK_THROWS_WITH_AS(df::load_checkpoint(good.string(), adam), doctest::Contains("step type"),
                         df::error);
    step_t<df::optim::sgd, df::precision::fp32, net, df::clip::none> unclipped(args);
    CHECK_THROWS_WITH_AS(df::load_checkpoint(good.string(), unclipped),
                         doctest::Contains("step type"), df::error);
    step_t<df::optim::sgd, df::precision::fp64> fp64(args);
    CHECK_THROWS_WITH_AS(df::load_checkpoint(good.string(), fp64), doctest::Contains("step type"),
                         df::error);
    df::fit_args other = args;
    other.batch = 4;
    sgd_step smaller(other);
    CHECK_THROWS_WITH_AS(
        df::load_checkpoint(good.string(), smaller),
        doctest::Contains("fit_args.batch: expected 4 (this step's fit_args), found 8"), df::error);
    other = args;
    other.seed = 6;
    sgd_step reseeded(other);
    CHECK_THROWS_WITH_AS(df::load_checkpoint(good.string(), reseeded),
                         doctest::Contains("fit_args.seed"), df::error);
    other = args;
    other.steps = 80;
    sgd_step longer(other);
    CHECK_THROWS_WITH_AS(df::load_checkpoint(good.string(), longer),
                         doctest::Contains("fit_args.steps"), df::error);
    CHECK(weights(wider).size() != before.size());  // they were all refused before any write
    CHECK(longer.step_index() == 0);
  }
}

namespace {
//! `b` (a checkpoint's bytes, perhaps edited) with the payload's CRC-32 made right again: what a
//! crafted file looks like, which the checksum alone cannot refuse.
std::vector<unsigned char> with_valid_checksum(std::vector<unsigned char> b) {
  const std::uint32_t crc = df::detail::crc32(b.data() + 24, b.size() - 24);
  std::memcpy(b.data() + 12, &crc, 4);
  return b;
}

//! The message `f` throws as df::error ("" if it does not throw).
template <class F>
std::string error_of(F f) {
  try {
    f();
  } catch (const df::error& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST_CASE("a checkpoint with a valid checksum but impossible contents is refused") {
  df::test::temp_dir dir("checkpoint_impossible");
  const std::string path = (dir.path() / "c.ckpt").string();
  sgd_step trained(args);
  train_until(trained, 9);
  sgd_step step(args);
  const std::vector<float> before = weights(step);
  const auto refused = [&](const std::string& message) {
    CAPTURE(message);
    CHECK_THROWS_WITH_AS(df::load_checkpoint(path, step),
                         doctest::Contains((path + ": " + message).c_str()), df::error);
    CHECK(weights(step) == before);
    CHECK(step.step_index() == 0);
  };

  SUBCASE("a NaN parameter or optimizer state value") {
    sgd_step nan(args);
    train_until(nan, 9);
    nan.parameters()[5] = std::numeric_limits<float>::quiet_NaN();
    df::save_checkpoint(path, nan);
    refused("parameters[5]: expected a finite value, found nan");
    sgd_step inf(args);
    train_until(inf, 9);
    inf.optimizer_state()[0] = -std::numeric_limits<float>::infinity();
    df::save_checkpoint(path, inf);
    refused("optimizer state[0]: expected a finite value, found -inf");
  }
  SUBCASE("a best step the run cannot have reached") {
    df::save_checkpoint(path, trained, {.best_score = 0.5, .best_step = 40});
    refused("best step: expected -1 (none yet) or a step in [1, 9], found 40");
    df::save_checkpoint(path, trained, {.best_score = 0.5, .best_step = 0});
    refused("best step: expected -1 (none yet) or a step in [1, 9], found 0");
    df::save_checkpoint(path, trained, {.best_step = 4});  // a best step without a score
    refused("best score: expected a finite score (the best step is 4), found nan");
    df::save_checkpoint(path, trained, {.best_score = 0.5, .best_step = -1});
    refused("best score: expected NaN (no best step yet), found 0.5");
    df::save_checkpoint(path, trained, {.evaluations_since_best = -2});
    refused("evaluations since best: expected a count in [0, 9], found -2");
    df::save_checkpoint(path, trained, {.selected_target_accuracy = 1.5});
    refused(
        "selected target accuracy: expected NaN (not measured) or an accuracy in [0, 1], "
        "found 1.5");
    df::save_checkpoint(path, trained, {.skipped_in_a_row = 10});
    refused("skipped in a row: expected a count in [0, 9], found 10");
  }
  SUBCASE("the step type is shown with its control bytes escaped") {
    df::save_checkpoint(path, trained);
    std::vector<unsigned char> b = read_bytes(path);
    const char evil[] = "\x1b]0;pwned\x07\x1b[2J\n";
    std::memcpy(b.data() + 32, evil, sizeof evil - 1);  // the type name starts at byte 32
    write_bytes(path, with_valid_checksum(b));
    const std::string message = error_of([&] { df::load_checkpoint(path, step); });
    CHECK(message.find("step type: expected dafuse::train_step<") != std::string::npos);
    CHECK(message.find("found '\\x1b]0;pwned\\x07\\x1b[2J\\x0a") != std::string::npos);
    CHECK(std::none_of(message.begin(), message.end(),
                       [](char c) { return static_cast<unsigned char>(c) < 0x20; }));
  }
  SUBCASE("a stored setting is compared, and shown escaped") {
    const std::vector<df::run_setting> red{{"--preprocess", "\x1b[31mred"}};
    df::save_checkpoint(path, trained, {}, red);
    const std::vector<df::run_setting> none{{"--preprocess", "none"}};
    const std::string message = error_of([&] { df::load_checkpoint(path, step, none); });
    CHECK(message == "dafuse: " + path +
                         ": --preprocess: expected none (this run's), found '\\x1b[31mred' (the "
                         "checkpoint's)");
    CHECK(weights(step) == before);
    const std::vector<df::run_setting> other{{"source data", "3 rows"}};
    CHECK(error_of([&] { df::load_checkpoint(path, step, other); }) ==
          "dafuse: " + path +
              ": source data: expected 3 rows (this run's), found no such setting in the "
              "checkpoint");
    CHECK(df::load_checkpoint(path, step, red).best_step == -1);  // the same setting loads
    CHECK(weights(step) == weights(trained));
  }
  SUBCASE("every fit_args field that changes the maths must match") {
    df::save_checkpoint(path, trained);
    df::fit_args other = args;
    other.weight_decay = 1e-4f;
    sgd_step decayed(other);
    CHECK(error_of([&] { df::load_checkpoint(path, decayed); }) ==
          "dafuse: " + path +
              ": fit_args.weight_decay: expected 1e-04 (this step's fit_args), found 0 (the "
              "checkpoint's)");
    other = args;
    other.nesterov = true;
    sgd_step nesterov(other);
    CHECK(error_of([&] {
            df::load_checkpoint(path, nesterov);
          }).find("fit_args.nesterov: expected true") != std::string::npos);
    other = args;
    other.eval_chunk = 7;  // only splits inference: not compared
    sgd_step chunked(other);
    CHECK(df::load_checkpoint(path, chunked).best_step == -1);
  }
}

TEST_CASE("a version-3 checkpoint still loads, with no steps skipped in a row") {
  // Version 3 is version 4 without the run position's last field (skipped in a row).
  df::test::temp_dir dir("checkpoint_version_3");
  const std::string path = (dir.path() / "c.ckpt").string();
  sgd_step trained(args);
  train_until(trained, 9);
  const df::run_position run{.source_rows = 50,
                             .target_rows = 30,
                             .best_score = 0.75,
                             .best_step = 8,
                             .evaluations_since_best = 1,
                             .selected_target_accuracy = 0.5,
                             .oracle_target_accuracy = 0.625,
                             .skipped_in_a_row = 2};
  df::save_checkpoint(path, trained, run);
  sgd_step step(args);
  CHECK(df::load_checkpoint(path, step).skipped_in_a_row == 2);

  std::vector<unsigned char> b = read_bytes(path);
  std::uint64_t name_bytes = 0;
  std::memcpy(&name_bytes, b.data() + 24, 8);
  // type name; value size; steps, batch, seed; step index; loss scale and its steps; the
  // position's seven version-3 fields.
  const std::size_t streak = 24 + 8 + std::size_t(name_bytes) + 4 + 24 + 8 + 16 + 7 * 8;
  std::int64_t stored = 0;
  std::memcpy(&stored, b.data() + streak, 8);
  REQUIRE(stored == 2);
  b.erase(b.begin() + std::ptrdiff_t(streak), b.begin() + std::ptrdiff_t(streak + 8));
  b[8] = 3;
  const std::uint64_t payload = b.size() - 24;
  std::memcpy(b.data() + 16, &payload, 8);
  write_bytes(path, with_valid_checksum(b));
  sgd_step old(args);
  const df::run_position loaded = df::load_checkpoint(path, old);
  CHECK(loaded.skipped_in_a_row == 0);
  CHECK(loaded.best_step == 8);
  CHECK(loaded.best_score == 0.75);
  CHECK(loaded.evaluations_since_best == 1);
  CHECK(loaded.oracle_target_accuracy == 0.625);
  CHECK(old.step_index() == 9);
  CHECK(weights(old) == weights(trained));
}

TEST_CASE("a checkpoint's payload is bounded by the step before it is read") {
  df::test::temp_dir dir("checkpoint_bounded");
  const std::string path = (dir.path() / "big.ckpt").string();
  sgd_step trained(args);
  df::save_checkpoint(path, trained);
  std::vector<unsigned char> b = read_bytes(path);
  sgd_step step(args);
  // A header promising 4 GiB of payload, in a (sparse) file of that size: the sizes agree, and
  // nothing of the payload may be read before it is refused.
  const std::uint64_t huge = std::uint64_t(1) << 32;
  std::memcpy(b.data() + 16, &huge, 8);
  write_bytes(path, b);
  std::filesystem::resize_file(path, 24 + huge);
  const df::test::peak_memory peak;
  const std::string message = error_of([&] { df::load_checkpoint(path, step); });
  CHECK(message.find(path + ": payload size: expected at most ") != std::string::npos);
  CHECK(message.find("bytes (this step's parameters, state and settings), found 4294967296") !=
        std::string::npos);
  if (peak.usable()) CHECK(peak.growth_bytes() < 4e6);
  // Another model's large checkpoint is named by its type, read alone.
  const char other[] = "dafuse::train_step<another";
  std::memcpy(b.data() + 32, other, sizeof other - 1);
  write_bytes(path, b);
  std::filesystem::resize_file(path, 24 + huge);
  CHECK(error_of([&] {
          df::load_checkpoint(path, step);
        }).find("step type: expected dafuse::train_step<") != std::string::npos);
  const sgd_step fresh(args);
  CHECK(weights(step) == weights(fresh));
}

TEST_CASE("a checkpoint that is not a regular file is refused at once") {
  df::test::temp_dir dir("checkpoint_special");
  sgd_step step(args);
  CHECK(error_of([&] { df::load_checkpoint("/dev/zero", step); }) ==
        "dafuse: /dev/zero: cannot read: it is a character device, not a regular file (dafuse "
        "reads files whose size it can check first)");
  const std::filesystem::path fifo = dir.path() / "pipe.ckpt";
  df::test::make_fifo(fifo);
  std::string message;
  CHECK(df::test::finishes_within(
      10, fifo, [&] { message = error_of([&] { df::load_checkpoint(fifo.string(), step); }); }));
  CHECK(message.find("cannot read: it is a FIFO (named pipe)") != std::string::npos);
}

TEST_CASE("a save removes the temporaries a killed save of the same checkpoint left") {
  df::test::temp_dir dir("checkpoint_debris");
  const std::filesystem::path path = dir.path() / "run.ckpt";
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  REQUIRE(child > 0);
  REQUIRE(::waitpid(child, nullptr, 0) == child);
  // What a save killed mid-write left: full-size temporaries of a process that is gone, named as
  // this version and as dafuse 0.1 named them.
  const std::vector<unsigned char> full(100000, 0xab);
  write_bytes(path.string() + ".tmp-" + std::to_string(child), full);
  write_bytes(path.string() + ".tmp-" + std::to_string(child) + "-0", full);
  sgd_step step(args);
  df::save_checkpoint(path.string(), step);
  CHECK(std::distance(std::filesystem::directory_iterator(dir.path()),
                      std::filesystem::directory_iterator()) == 1);
  CHECK(df::load_checkpoint(path.string(), step).best_step == -1);
}

TEST_CASE("saving into a missing directory fails naming the path and leaves nothing behind") {
  df::test::temp_dir dir("checkpoint_missingdir");
  const std::string path = (dir.path() / "no" / "such" / "dir.ckpt").string();
  sgd_step step(args);
  CHECK_THROWS_WITH_AS(df::save_checkpoint(path, step), doctest::Contains(path.c_str()), df::error);
  CHECK_THROWS_WITH_AS(df::save_checkpoint(path, step),
                       doctest::Contains("for writing: No such file or directory"), df::error);
  CHECK(std::distance(std::filesystem::directory_iterator(dir.path()),
                      std::filesystem::directory_iterator()) == 0);
}

TEST_CASE("crc32 gives the standard check value") {
  // The CRC-32/ISO-HDLC check value of "123456789" (the catalogue's test vector).
  const std::string s = "123456789";
  CHECK(df::detail::crc32(reinterpret_cast<const unsigned char*>(s.data()), s.size()) ==
        0xCBF43926u);
}

}  // namespace train_checkpoint_test
