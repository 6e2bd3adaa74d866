// SPDX-License-Identifier: Apache-2.0
//! @file train/checkpoint.hpp
//! @brief Checkpoints: everything a training run needs to resume bitwise, in a checked file.
//!
//! A checkpoint holds the step's parameters and optimizer state, its step index (the position of
//! every schedule and of Adam's bias corrections), the loss scaler's state, the loader's position
//! (the samplers are counter-based, so the seed and the number of batches drawn are their whole
//! state) and the training loop's model-selection bookkeeping. Resuming from step k and training
//! to step n gives bitwise the weights of an uninterrupted run to n (tests/train/checkpoint_test).
//!
//! File layout, little-endian (checked at load):
//!
//!     offset  size  field
//!     0       8     magic "DAFUSECK"
//!     8       4     format version (checkpoint_version)
//!     12      4     CRC-32 (IEEE 802.3) of the payload
//!     16      8     payload size in bytes
//!     24      …     payload: the step's type and shape, fit_args.steps/batch/seed, the run
//!                   position, then the parameters and the optimizer state as raw values
//!
//! Saving writes a temporary file beside the target, flushes it to disk and renames it over the
//! target, so a crash mid-write leaves the previous checkpoint intact. Loading checks the whole
//! file (magic, version, size, checksum, type, shapes, arguments) before it writes anything into
//! the step: a refused checkpoint leaves the step as it was.
#pragma once
#include <dafuse/config.hpp>
#include <dafuse/core/crc32.hpp>
#include <dafuse/core/error.hpp>
#include <dafuse/core/meta.hpp>
#include <dafuse/policy/arguments.hpp>
#include <dafuse/policy/precision.hpp>

#include <array>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <fcntl.h>
#include <unistd.h>

namespace dafuse {

//! Version of the file layout this build writes and reads. 2: each module's parameters start on
//! a 64-byte boundary (nn::dann_net::module_alignment), so a network whose G_f or G_y size is not
//! a multiple of 16 holds more values than in a version-1 file, which is refused by its version.
inline constexpr std::uint32_t checkpoint_version = 2;

//! Where a training run stands besides the step itself: what `fit` needs to continue its loop.
struct run_position {
  std::uint64_t source_rows = 0;  //!< rows of the source the loader drew from (checked on resume)
  std::uint64_t target_rows = 0;  //!< rows of the target
  //! Selection so far (train/fit.hpp): the best validator score, the step it was reached at
  //! (-1: none yet) and the evaluations since then (for early stopping).
  double best_score = std::numeric_limits<double>::quiet_NaN();
  std::int64_t best_step = -1;
  std::int64_t evaluations_since_best = 0;
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

//! Writes `bytes` to `path` atomically: a temporary file beside it, flushed to disk, renamed.
inline void write_file_atomically(const std::string& path,
                                  const std::vector<unsigned char>& bytes) {
  const std::string temporary = path + ".tmp-" + std::to_string(::getpid());
  const auto os_error = [&](const char* what) {
    const std::string reason = std::strerror(errno);
    ::unlink(temporary.c_str());
    fail(path, std::string(what) + ": " + reason);
  };
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail(path, "cannot create " + temporary + ": " + std::strerror(errno));
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t w = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      ::close(fd);
      os_error("cannot write");
    }
    done += std::size_t(w);
  }
  if (::fsync(fd) != 0) {
    ::close(fd);
    os_error("cannot flush to disk");
  }
  if (::close(fd) != 0) os_error("cannot close");
  if (std::rename(temporary.c_str(), path.c_str()) != 0) os_error("cannot rename into place");
}

inline std::vector<unsigned char> read_file(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) fail(path, std::string("cannot open checkpoint: ") + std::strerror(errno));
  std::vector<unsigned char> bytes;
  std::array<unsigned char, 1 << 16> chunk;
  for (std::size_t n; (n = std::fread(chunk.data(), 1, chunk.size(), f)) > 0;)
    bytes.insert(bytes.end(), chunk.data(), chunk.data() + n);
  const bool failed = std::ferror(f);
  std::fclose(f);
  if (failed) fail(path, "cannot read checkpoint");
  return bytes;
}

inline constexpr std::array<char, 8> checkpoint_magic{'D', 'A', 'F', 'U', 'S', 'E', 'C', 'K'};
inline constexpr std::size_t checkpoint_header_bytes = 24;

}  // namespace detail

//! Saves `step` (and the loop's `run`) to `path`, replacing any file there only once the new
//! one is complete on disk. Throws dafuse::error naming the path and the OS reason on failure.
template <class Step>
void save_checkpoint(const std::string& path, const Step& step, const run_position& run = {}) {
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
  detail::write_file_atomically(path, file.bytes());
}

//! Loads a checkpoint saved from the same step type with the same fit_args steps, batch and seed
//! into `step`, and returns the loop's position. Every field is checked before the step is
//! touched; a file that is not a checkpoint, of another version, truncated, corrupt, or from
//! another step type or set-up is refused with a message naming the file and the field.
template <class Step>
run_position load_checkpoint(const std::string& path, Step& step) {
  using value_type = typename Step::value_type;
  const std::vector<unsigned char> bytes = detail::read_file(path);
  if (bytes.size() < detail::checkpoint_header_bytes ||
      std::memcmp(bytes.data(), detail::checkpoint_magic.data(), 8) != 0)
    fail(path, "header", "a dafuse checkpoint (starting \"DAFUSECK\")",
         bytes.size() < 8 ? std::to_string(bytes.size()) + " bytes" : "another kind of file");
  detail::byte_reader header(path, bytes.data() + 8, detail::checkpoint_header_bytes - 8);
  const auto version = header.get<std::uint32_t>("version");
  if (version != checkpoint_version)
    fail(path, "version", std::to_string(checkpoint_version), std::to_string(version));
  const auto crc = header.get<std::uint32_t>("checksum");
  const auto size = header.get<std::uint64_t>("payload size");
  const std::size_t stored = bytes.size() - detail::checkpoint_header_bytes;
  if (size != stored)
    fail(path, "payload size", std::to_string(size) + " bytes",
         std::to_string(stored) +
             (stored < size ? " (the file is truncated)" : " (trailing bytes)"));
  const unsigned char* body = bytes.data() + detail::checkpoint_header_bytes;
  if (const std::uint32_t actual = detail::crc32(body, stored); actual != crc)
    fail(path, "checksum", "CRC-32 " + std::to_string(crc) + " as stored",
         std::to_string(actual) + " (the file is corrupt)");

  detail::byte_reader in(path, body, stored);
  const std::string type = in.get_string("step type");
  if (type != detail::type_name<Step>()) fail(path, "step type", detail::type_name<Step>(), type);
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
  run_position run;
  run.source_rows = in.get<std::uint64_t>("source rows");
  run.target_rows = in.get<std::uint64_t>("target rows");
  run.best_score = in.get<double>("best score");
  run.best_step = in.get<std::int64_t>("best step");
  run.evaluations_since_best = in.get<std::int64_t>("evaluations since best");
  const auto param_count = std::size_t(Step::parameter_count());
  const auto state_size = std::size_t(Step::optimizer_state_size());
  const unsigned char* params = in.values<value_type>("parameters", param_count);
  const unsigned char* state = in.values<value_type>("optimizer state", state_size);
  if (!in.at_end()) fail(path, "payload", "nothing after the optimizer state", "more bytes");

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
