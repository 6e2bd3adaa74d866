// SPDX-License-Identifier: Apache-2.0
//! @file train/checkpoint.hpp
//! @brief Checkpoints: everything a training run needs to resume bitwise, in a checked file.
//!
//! A checkpoint holds the step's parameters and optimizer state, its step index (the position of
//! every schedule and of Adam's bias corrections), the loss scaler's state, the loader's position
//! (the samplers are counter-based, so the seed and the number of batches drawn are their whole
//! state) and the training loop's own state (model selection, steps skipped in a row). Resuming
//! from step k and training to step n gives bitwise the weights of an uninterrupted run to n
//! (tests/train/checkpoint_test).
//!
//! File layout, little-endian (checked at load):
//!
//!     offset  size  field
//!     0       8     magic "DAFUSECK"
//!     8       4     format version (checkpoint_version)
//!     12      4     CRC-32 (IEEE 802.3) of the payload
//!     16      8     payload size in bytes
//!     24      …     payload: the step's type and value size, fit_args.steps/batch/seed, the run
//!                   position, the run's settings (name and value texts: every fit_args field
//!                   that changes the maths, and what the caller adds, such as `fit`'s data
//!                   fingerprints), then the parameters and the optimizer state as raw values
//!
//! Saving writes a temporary file beside the target, flushes it to disk and renames it over the
//! target (core/file.hpp), so a crash mid-write leaves the previous checkpoint intact. Loading
//! reads the 24-byte header first and refuses a payload larger than this step's could be before
//! reading it, then checks the whole file (magic, version, size, checksum, type, shapes,
//! arguments, settings, the run position's consistency, finite values) before it writes anything
//! into the step: a refused checkpoint leaves the step as it was. Text from the file is shown
//! in messages with control bytes escaped.
#pragma once
#include <dafuse/config.hpp>
#include <dafuse/core/crc32.hpp>
#include <dafuse/core/error.hpp>
#include <dafuse/core/file.hpp>
#include <dafuse/core/meta.hpp>
#include <dafuse/policy/arguments.hpp>
#include <dafuse/policy/precision.hpp>

#include <algorithm>
#include <array>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace dafuse {

//! Version of the file layout this build writes and reads. 2: each module's parameters start on
//! a 64-byte boundary (nn::dann_net::module_alignment), so a network whose G_f or G_y size is not
//! a multiple of 16 holds more values than in a version-1 file, which is refused by its version.
//! 3: the run's settings (every fit_args field that changes the maths, data fingerprints) and
//! the selected and oracle target accuracies of the run position. 4: the run position's steps
//! skipped in a row, so that a resumed run stops for divergence where an uninterrupted one does.
inline constexpr std::uint32_t checkpoint_version = 4;
//! The oldest version this build still reads: a version-3 file is read with no skipped steps in
//! a row (what its dafuse assumed on resume).
inline constexpr std::uint32_t checkpoint_oldest_version = 3;

//! One setting of a run that a resumed run must share, as text: `{"fit_args.lr", "0.03"}`,
//! `{"source data", "2000 rows x 256, CRC-32 …"}`. Checkpoints store them; loading compares them
//! and names the first that differs.
struct run_setting {
  std::string name;   //!< what it is, as messages name it ("fit_args.lr", "--preprocess")
  std::string value;  //!< its value, compared as text (numbers in their shortest exact form)
};

//! Where a training run stands besides the step itself: what `fit` needs to continue its loop.
struct run_position {
  std::uint64_t source_rows = 0;  //!< rows of the source the loader drew from (checked on resume)
  std::uint64_t target_rows = 0;  //!< rows of the target
  //! Selection so far (train/fit.hpp): the best validator score, the step it was reached at
  //! (-1: none yet) and the evaluations since then (for early stopping).
  double best_score = std::numeric_limits<double>::quiet_NaN();
  std::int64_t best_step = -1;
  std::int64_t evaluations_since_best = 0;
  //! The target accuracy of the best model (NaN without target labels), and the best target
  //! accuracy of any evaluation (the oracle figure): reports only, kept so that a resumed run
  //! whose best model came before it still reports them.
  double selected_target_accuracy = std::numeric_limits<double>::quiet_NaN();
  double oracle_target_accuracy = std::numeric_limits<double>::quiet_NaN();
  //! The last steps skipped for non-finite gradients, in a row (fit_options::max_skipped_in_a_row
  //! counts them across a resume).
  std::int64_t skipped_in_a_row = 0;
};

namespace detail {

static_assert(std::endian::native == std::endian::little,
              "dafuse: checkpoints are written little-endian; this build needs byte swapping");

//! The compiler's spelling of T, e.g. `dafuse::train_step<…>`: two checkpoints of one step type
//! written by one compiler family carry the same name. __PRETTY_FUNCTION__ (GCC, clang, nvcc)
//! rather than std::source_location, which clang 14 cannot build with libstdc++.
template <class T>
std::string type_name() {
  const std::string_view f = __PRETTY_FUNCTION__;
  const std::size_t at = f.find("T = ");
  if (at == std::string_view::npos) return std::string(f);
  std::string_view rest = f.substr(at + 4);
  const std::size_t end = std::min(rest.find(';'), rest.rfind(']'));
  return std::string(rest.substr(0, end));
}

//! Appends fields to a byte buffer.
class byte_writer {
 public:
  template <class T>
  requires std::is_trivially_copyable_v<T>
  void put(const T& v) {
    const auto* p = reinterpret_cast<const unsigned char*>(&v);
    bytes_.insert(bytes_.end(), p, p + sizeof(T));
  }
  void put(std::string_view s) {
    put(std::uint64_t(s.size()));
    bytes_.insert(bytes_.end(), s.begin(), s.end());
  }
  template <class T>
  void put_values(const T* v, std::size_t n) {
    put(std::uint64_t(n));
    const auto* p = reinterpret_cast<const unsigned char*>(v);
    bytes_.insert(bytes_.end(), p, p + n * sizeof(T));
  }
  std::vector<unsigned char>& bytes() { return bytes_; }

 private:
  std::vector<unsigned char> bytes_;
};

//! Reads fields back, refusing to read past the end with a message naming the file and field.
class byte_reader {
 public:
  byte_reader(const std::string& path, const unsigned char* p, std::size_t n)
      : path_(path), p_(p), n_(n) {}
  template <class T>
  requires std::is_trivially_copyable_v<T> T get(const char* field) {
    need(sizeof(T), field);
    T v;
    std::memcpy(&v, p_ + at_, sizeof(T));
    at_ += sizeof(T);
    return v;
  }
  std::string get_string(const char* field) {
    const std::uint64_t n = get<std::uint64_t>(field);
    need(n, field);
    std::string s(reinterpret_cast<const char*>(p_ + at_), std::size_t(n));
    at_ += std::size_t(n);
    return s;
  }
  //! Where `n` values of T start, after checking the stored count is `expected`.
  template <class T>
  const unsigned char* values(const char* field, std::uint64_t expected) {
    const std::uint64_t n = get<std::uint64_t>(field);
    if (n != expected) fail(path_, field, std::to_string(expected) + " values", std::to_string(n));
    need(n * sizeof(T), field);
    const unsigned char* p = p_ + at_;
    at_ += std::size_t(n * sizeof(T));
    return p;
  }
  bool at_end() const { return at_ == n_; }

 private:
  void need(std::uint64_t bytes, const char* field) const {
    if (bytes > n_ - at_)
      fail(path_, field, std::to_string(bytes) + " more bytes",
           std::to_string(n_ - at_) + " (the payload ends early)");
  }
  const std::string& path_;
  const unsigned char* p_;
  std::size_t n_;
  std::size_t at_ = 0;
};

//! `v` in the fewest digits that read back as the same value (std::to_chars' shortest form).
template <class T>
std::string exact_text(T v) {
  std::array<char, 64> buffer;
  const auto r = std::to_chars(buffer.data(), buffer.data() + buffer.size(), v);
  return std::string(buffer.data(), r.ptr);
}

inline constexpr std::array<char, 8> checkpoint_magic{'D', 'A', 'F', 'U', 'S', 'E', 'C', 'K'};
inline constexpr std::size_t checkpoint_header_bytes = 24;
//! The most settings, and the most bytes of settings, a checkpoint may hold: far above what
//! `fit` and dafuse-train store (about 30 settings of under 100 bytes each).
inline constexpr std::uint64_t checkpoint_max_settings = 4096;
inline constexpr std::uint64_t checkpoint_max_settings_bytes = std::uint64_t(1) << 20;

//! The fit_args fields that change what a step computes, as settings: a resumed run must share
//! every one (fields a policy does not read are compared too: the file cannot tell which those
//! are, and a refusal is safer than a silently different run). steps, batch and seed are stored
//! on their own (checked first); eval_chunk only splits inference.
inline std::vector<run_setting> fit_args_settings(const fit_args& a) {
  return {
      {"fit_args.lr", exact_text(a.lr)},
      {"fit_args.momentum", exact_text(a.momentum)},
      {"fit_args.dampening", exact_text(a.dampening)},
      {"fit_args.nesterov", a.nesterov ? "true" : "false"},
      {"fit_args.weight_decay", exact_text(a.weight_decay)},
      {"fit_args.beta1", exact_text(a.beta1)},
      {"fit_args.beta2", exact_text(a.beta2)},
      {"fit_args.eps", exact_text(a.eps)},
      {"fit_args.lr_mult.features", exact_text(a.lr_mult.features)},
      {"fit_args.lr_mult.classifier", exact_text(a.lr_mult.classifier)},
      {"fit_args.lr_mult.discriminator", exact_text(a.lr_mult.discriminator)},
      {"fit_args.max_grad_norm", exact_text(a.max_grad_norm)},
      {"fit_args.max_grad_norm_discriminator", exact_text(a.max_grad_norm_discriminator)},
      {"fit_args.max_grad_value", exact_text(a.max_grad_value)},
      {"fit_args.lambda_max", exact_text(a.lambda_max)},
      {"fit_args.init", a.init == nn::weight_init::torch_default ? "torch_default" : "glorot_he"},
      {"fit_args.loss_scale_init", exact_text(a.loss_scale_init)},
      {"fit_args.loss_scale_growth", exact_text(a.loss_scale_growth)},
      {"fit_args.loss_scale_backoff", exact_text(a.loss_scale_backoff)},
      {"fit_args.loss_scale_interval", exact_text(a.loss_scale_interval)},
      {"fit_args.loss_scale_min", exact_text(a.loss_scale_min)},
  };
}

//! Bytes of a payload for `Step` without its settings: what the file's size is checked against
//! before the payload is read.
template <class Step>
std::uint64_t checkpoint_fixed_payload_bytes(const Step&) {
  using value_type = typename Step::value_type;
  const std::uint64_t name = 8 + type_name<Step>().size();
  // value size; steps, batch, seed; step index; loss scale and its steps; the run position's
  // eight fields (seven before version 4); the settings' count.
  const std::uint64_t fields = 4 + 3 * 8 + 8 + 2 * 8 + 8 * 8 + 8;
  const std::uint64_t values =
      16 + (std::uint64_t(Step::parameter_count()) + std::uint64_t(Step::optimizer_state_size())) *
               sizeof(value_type);
  return name + fields + values;
}

//! The first value of `values` (a field of the file) that is not finite, checked before the step
//! is touched: a checkpoint of NaN weights resumes nothing.
template <class T>
void check_finite_values(const std::string& path,
                         const char* field,
                         const unsigned char* bytes,
                         std::size_t count) {
  for (std::size_t i = 0; i < count; ++i) {
    T v;
    std::memcpy(&v, bytes + i * sizeof(T), sizeof(T));
    if (!std::isfinite(v))
      fail(path, std::string(field) + "[" + std::to_string(i) + "]", "a finite value",
           exact_text(v));
  }
}

//! A stored report figure: NaN (not measured) or an accuracy in [0, 1].
inline void check_accuracy(const std::string& path, const char* field, double v) {
  if (!std::isnan(v) && !(v >= 0 && v <= 1))
    fail(path, field, "NaN (not measured) or an accuracy in [0, 1]", exact_text(v));
}

}  // namespace detail

//! Saves `step` (and the loop's `run` and the run's `settings`, see run_setting) to `path`,
//! replacing any file there only once the new one is complete on disk (core/file.hpp). Throws
//! dafuse::error naming the path and the OS reason on failure.
template <class Step>
void save_checkpoint(const std::string& path,
                     const Step& step,
                     const run_position& run = {},
                     std::span<const run_setting> settings = {}) {
  using value_type = typename Step::value_type;
  detail::byte_writer payload;
  payload.put(std::string_view(detail::type_name<Step>()));
  payload.put(std::uint32_t(sizeof(value_type)));
  const fit_args& a = step.args();
  payload.put(std::int64_t(a.steps));
  payload.put(std::int64_t(a.batch));
  payload.put(std::uint64_t(a.seed));
  payload.put(std::int64_t(step.step_index()));
  payload.put(step.loss_scale().scale);
  payload.put(std::int64_t(step.loss_scale().good_steps));
  payload.put(run.source_rows);
  payload.put(run.target_rows);
  payload.put(run.best_score);
  payload.put(run.best_step);
  payload.put(run.evaluations_since_best);
  payload.put(run.selected_target_accuracy);
  payload.put(run.oracle_target_accuracy);
  payload.put(run.skipped_in_a_row);
  const std::vector<run_setting> own = detail::fit_args_settings(a);
  // What load_checkpoint accepts, refused here rather than in a file no run could resume from.
  std::uint64_t settings_bytes = 0;
  for (const run_setting& s : own) settings_bytes += 16 + s.name.size() + s.value.size();
  for (const run_setting& s : settings) settings_bytes += 16 + s.name.size() + s.value.size();
  if (own.size() + settings.size() > detail::checkpoint_max_settings ||
      settings_bytes > detail::checkpoint_max_settings_bytes)
    fail(path, "settings",
         "at most " + std::to_string(detail::checkpoint_max_settings) + " settings of " +
             std::to_string(detail::checkpoint_max_settings_bytes) + " bytes in all",
         std::to_string(own.size() + settings.size()) + " of " + std::to_string(settings_bytes) +
             " bytes");
  payload.put(std::uint64_t(own.size() + settings.size()));
  for (const run_setting& s : own) {
    payload.put(std::string_view(s.name));
    payload.put(std::string_view(s.value));
  }
  for (const run_setting& s : settings) {
    payload.put(std::string_view(s.name));
    payload.put(std::string_view(s.value));
  }
  // Copied out of the step's memory (device memory on a device system).
  std::vector<value_type> values(static_cast<std::size_t>(Step::parameter_count()));
  step.read_parameters(values);
  payload.put_values(values.data(), values.size());
  values.resize(static_cast<std::size_t>(Step::optimizer_state_size()));
  step.read_optimizer_state(values);
  payload.put_values(values.data(), values.size());

  const std::vector<unsigned char>& body = payload.bytes();
  detail::byte_writer file;
  for (char c : detail::checkpoint_magic) file.put(c);
  file.put(checkpoint_version);
  file.put(detail::crc32(body.data(), body.size()));
  file.put(std::uint64_t(body.size()));
  file.bytes().insert(file.bytes().end(), body.begin(), body.end());
  detail::write_file_atomically(path, std::span<const unsigned char>(file.bytes()));
}

//! Loads a checkpoint saved from the same step type with the same fit_args into `step`, and
//! returns the loop's position. Every field is checked before the step is touched; a file that
//! is not a checkpoint, of another version, truncated, corrupt, from another step type or set-up,
//! or holding non-finite values or an impossible run position, is refused with a message naming
//! the file and the field. `expected` are the caller's settings (see run_setting): each must be
//! stored with the same value, and the first that is not is named (settings stored but not
//! expected are not compared).
template <class Step>
run_position load_checkpoint(const std::string& path,
                             Step& step,
                             std::span<const run_setting> expected = {}) {
  using value_type = typename Step::value_type;
  const detail::input_file f(path, path);
  std::array<unsigned char, detail::checkpoint_header_bytes> head{};
  const auto got = std::size_t(std::min<std::uint64_t>(f.size(), head.size()));
  f.read_at(0, head.data(), got, "header");
  if (got < detail::checkpoint_header_bytes ||
      std::memcmp(head.data(), detail::checkpoint_magic.data(), 8) != 0)
    fail(path, "header", "a dafuse checkpoint (starting \"DAFUSECK\")",
         got < 8 ? std::to_string(got) + " bytes" : "another kind of file");
  detail::byte_reader header(path, head.data() + 8, detail::checkpoint_header_bytes - 8);
  const auto version = header.get<std::uint32_t>("version");
  if (version < checkpoint_oldest_version || version > checkpoint_version)
    fail(path, "version",
         std::to_string(checkpoint_version) + " (or " + std::to_string(checkpoint_oldest_version) +
             ", which this build still reads)",
         std::to_string(version));
  const auto crc = header.get<std::uint32_t>("checksum");
  const auto size = header.get<std::uint64_t>("payload size");
  const std::uint64_t stored = f.size() - detail::checkpoint_header_bytes;
  if (size != stored)
    fail(path, "payload size", std::to_string(size) + " bytes",
         std::to_string(stored) +
             (stored < size ? " (the file is truncated)" : " (trailing bytes)"));
  // A payload larger than this step's can be is refused before it is read; its type name (read
  // alone) says whether it is another model's.
  const std::uint64_t most =
      detail::checkpoint_fixed_payload_bytes(step) + detail::checkpoint_max_settings_bytes;
  if (size > most) {
    std::uint64_t name_size = 0;
    if (size >= 8) f.read_at(detail::checkpoint_header_bytes, &name_size, 8, "step type");
    if (name_size <= 4096 && name_size <= size - 8) {
      const std::vector<unsigned char> name =
          f.read_bytes(detail::checkpoint_header_bytes + 8, name_size, "step type");
      const std::string_view type(reinterpret_cast<const char*>(name.data()), name.size());
      if (type != detail::type_name<Step>())
        fail(path, "step type", detail::type_name<Step>(), detail::shown(type));
    }
    fail(path, "payload size",
         "at most " + std::to_string(most) + " bytes (this step's parameters, state and settings)",
         std::to_string(size));
  }
  const std::vector<unsigned char> payload =
      f.read_bytes(detail::checkpoint_header_bytes, size, "payload");
  const unsigned char* body = payload.data();
  if (const std::uint32_t actual = detail::crc32(body, payload.size()); actual != crc)
    fail(path, "checksum", "CRC-32 " + std::to_string(crc) + " as stored",
         std::to_string(actual) + " (the file is corrupt)");

  detail::byte_reader in(path, body, payload.size());
  const std::string type = in.get_string("step type");
  if (type != detail::type_name<Step>())
    fail(path, "step type", detail::type_name<Step>(), detail::shown(type));
  const auto value_bytes = in.get<std::uint32_t>("value size");
  if (value_bytes != sizeof(value_type))
    fail(path, "value size", std::to_string(sizeof(value_type)), std::to_string(value_bytes));
  const fit_args& a = step.args();
  const auto check_arg = [&](const char* field, auto expected, auto found) {
    if (expected != found)
      fail(path, field, std::to_string(expected) + " (this step's fit_args)",
           std::to_string(found) + " (the checkpoint's)");
  };
  check_arg("fit_args.steps", std::int64_t(a.steps), in.get<std::int64_t>("fit_args.steps"));
  check_arg("fit_args.batch", std::int64_t(a.batch), in.get<std::int64_t>("fit_args.batch"));
  check_arg("fit_args.seed", std::uint64_t(a.seed), in.get<std::uint64_t>("fit_args.seed"));
  const auto step_index = in.get<std::int64_t>("step index");
  if (step_index < 0 || step_index > a.steps)
    fail(path, "step index", "a step in [0, " + std::to_string(a.steps) + "]",
         std::to_string(step_index));
  loss_scale_state scale;
  scale.scale = in.get<double>("loss scale");
  scale.good_steps = index_t(in.get<std::int64_t>("loss scale steps"));
  if (!(scale.scale > 0) || !std::isfinite(scale.scale))
    fail(path, "loss scale", "a finite value > 0", std::to_string(scale.scale));
  if (scale.good_steps < 0 || scale.good_steps > step_index)
    fail(path, "loss scale steps", "a count in [0, " + std::to_string(step_index) + "]",
         std::to_string(scale.good_steps));
  run_position run;
  run.source_rows = in.get<std::uint64_t>("source rows");
  run.target_rows = in.get<std::uint64_t>("target rows");
  run.best_score = in.get<double>("best score");
  run.best_step = in.get<std::int64_t>("best step");
  run.evaluations_since_best = in.get<std::int64_t>("evaluations since best");
  run.selected_target_accuracy = in.get<double>("selected target accuracy");
  run.oracle_target_accuracy = in.get<double>("oracle target accuracy");
  if (version >= 4) run.skipped_in_a_row = in.get<std::int64_t>("skipped in a row");
  // The selection state must be one a run could reach: no best yet (step -1, score NaN), or a
  // best at an evaluated step no later than the checkpoint's, with a finite score.
  if (run.best_step != -1 && !(run.best_step >= 1 && run.best_step <= step_index))
    fail(path, "best step", "-1 (none yet) or a step in [1, " + std::to_string(step_index) + "]",
         std::to_string(run.best_step));
  if ((run.best_step == -1) != std::isnan(run.best_score) || std::isinf(run.best_score))
    fail(path, "best score",
         run.best_step == -1
             ? "NaN (no best step yet)"
             : "a finite score (the best step is " + std::to_string(run.best_step) + ")",
         detail::exact_text(run.best_score));
  if (run.evaluations_since_best < 0 || run.evaluations_since_best > step_index)
    fail(path, "evaluations since best", "a count in [0, " + std::to_string(step_index) + "]",
         std::to_string(run.evaluations_since_best));
  if (run.skipped_in_a_row < 0 || run.skipped_in_a_row > step_index)
    fail(path, "skipped in a row", "a count in [0, " + std::to_string(step_index) + "]",
         std::to_string(run.skipped_in_a_row));
  detail::check_accuracy(path, "selected target accuracy", run.selected_target_accuracy);
  detail::check_accuracy(path, "oracle target accuracy", run.oracle_target_accuracy);

  const auto count = in.get<std::uint64_t>("settings");
  if (count > detail::checkpoint_max_settings)
    fail(path, "settings", "at most " + std::to_string(detail::checkpoint_max_settings),
         std::to_string(count));
  std::vector<run_setting> stored_settings(static_cast<std::size_t>(count));
  for (run_setting& s : stored_settings) {
    s.name = in.get_string("setting name");
    s.value = in.get_string("setting value");
  }
  // This step's own fit_args first, then the caller's, each in order: the first difference is
  // named, with the stored text escaped.
  const auto compare = [&](const run_setting& want, const char* whose) {
    const auto it = std::find_if(stored_settings.begin(), stored_settings.end(),
                                 [&](const run_setting& s) { return s.name == want.name; });
    if (it == stored_settings.end())
      fail(path, want.name, want.value + " (" + whose + ")", "no such setting in the checkpoint");
    if (it->value != want.value)
      fail(path, want.name, want.value + " (" + whose + ")",
           detail::shown(it->value) + " (the checkpoint's)");
  };
  for (const run_setting& s : detail::fit_args_settings(a)) compare(s, "this step's fit_args");
  for (const run_setting& s : expected) compare(s, "this run's");

  const auto param_count = std::size_t(Step::parameter_count());
  const auto state_size = std::size_t(Step::optimizer_state_size());
  const unsigned char* params = in.values<value_type>("parameters", param_count);
  const unsigned char* state = in.values<value_type>("optimizer state", state_size);
  if (!in.at_end()) fail(path, "payload", "nothing after the optimizer state", "more bytes");
  detail::check_finite_values<value_type>(path, "parameters", params, param_count);
  detail::check_finite_values<value_type>(path, "optimizer state", state, state_size);

  // Everything checked: now the step changes.
  std::vector<value_type> values(param_count);
  std::memcpy(values.data(), params, param_count * sizeof(value_type));
  step.write_parameters(values);
  values.resize(state_size);
  std::memcpy(values.data(), state, state_size * sizeof(value_type));
  step.write_optimizer_state(values);
  step.resume_at(index_t(step_index), scale);
  return run;
}

}  // namespace dafuse
