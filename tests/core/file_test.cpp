// SPDX-License-Identifier: Apache-2.0
// Tests for core/file.hpp: reading refuses what is not a regular file without blocking and names
// failed allocations; writing is atomic, durable, unique per writer and cleans up after killed
// writers of its path.
#include <dafuse/core/file.hpp>

#include "../check.hpp"

#include <sys/file.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>
#include <thread>
#include <vector>

namespace core_file_test {

namespace {

namespace fs = std::filesystem;
namespace dd = dafuse::detail;
using dafuse::test::temp_dir;

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  REQUIRE(out.good());
}

//! The names in `dir`, sorted.
std::vector<std::string> names_in(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

//! The id of a process that has exited (and been reaped): no process has it, for now.
long dead_pid() {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  REQUIRE(child > 0);
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  return long(child);
}

//! The message `f` throws as dafuse::error ("" if it does not throw).
template <class F>
std::string error_of(F f) {
  try {
    f();
  } catch (const dafuse::error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("input_file reads a regular file and knows its size before reading") {
  temp_dir dir("file_read");
  write_text(dir / "a.bin", "hello, world");
  const dd::input_file f(dir / "a.bin", "a.bin");
  CHECK(f.size() == 12);
  std::string s(5, '\0');
  f.read_at(7, s.data(), 5, "tail");
  CHECK(s == "world");
  const std::vector<unsigned char> all = f.read_all("file");
  CHECK(std::string(all.begin(), all.end()) == "hello, world");
  CHECK_THROWS_WITH_AS(f.read_bytes(10, 5, "tail"),
                       doctest::Contains("a.bin: tail: expected 5 bytes at offset 10, found a "
                                         "file of 12 bytes (truncated)"),
                       dafuse::error);
}

TEST_CASE("input_file refuses a FIFO without a writer at once instead of blocking") {
  temp_dir dir("file_fifo");
  const fs::path fifo = dir / "pipe";
  dafuse::test::make_fifo(fifo);
  std::string message;
  CHECK(dafuse::test::finishes_within(
      10, fifo, [&] { message = error_of([&] { dd::input_file(fifo, fifo.string()); }); }));
  CHECK(message == "dafuse: " + fifo.string() +
                       ": cannot read: it is a FIFO (named pipe), not a regular file (dafuse reads "
                       "files whose size it can check first)");
}

TEST_CASE("input_file refuses devices, directories and missing files by name") {
  temp_dir dir("file_kinds");
  CHECK(error_of([] { dd::input_file("/dev/zero", "/dev/zero"); }) ==
        "dafuse: /dev/zero: cannot read: it is a character device, not a regular file (dafuse "
        "reads files whose size it can check first)");
  CHECK(error_of([&] { dd::input_file(dir.path(), "d"); }) ==
        "dafuse: d: cannot open for reading: it is a directory");
  CHECK(error_of([&] { dd::input_file(dir / "none", "none"); }) ==
        "dafuse: none: cannot open for reading: No such file or directory");
}

TEST_CASE("a file that shrinks while it is read is reported, not read past its end") {
  temp_dir dir("file_shrink");
  write_text(dir / "a.bin", std::string(100, 'x'));
  const dd::input_file f(dir / "a.bin", "a.bin");
  fs::resize_file(dir / "a.bin", 40);
  std::vector<unsigned char> buffer(100);
  CHECK_THROWS_WITH_AS(f.read_at(0, buffer.data(), 100, "data"),
                       doctest::Contains("a.bin: data: expected 100 bytes at offset 0 of a file "
                                         "of 100, found the end of the file after 40 (the file "
                                         "shrank while it was read)"),
                       dafuse::error);
}

TEST_CASE("allocations larger than the machine's memory, or that fail, name the file and the use") {
  const std::uint64_t memory = dd::physical_memory_bytes();
  REQUIRE(memory > 0);
  const auto too_many = std::size_t(memory / sizeof(float) + 1);
  CHECK(error_of([&] { dd::allocate_values<float>(too_many, "x.npy", "the values"); }) ==
        "dafuse: x.npy: the values: expected at most this machine's memory (" +
            std::to_string(memory) + " bytes) to read it in, found " +
            std::to_string(std::uint64_t(too_many) * sizeof(float)) + " bytes");
  CHECK(error_of([] {
          dd::allocate_values<double>(std::numeric_limits<std::size_t>::max() / 4, "x", "v");
        }).find("x: v: expected a size that fits in memory") != std::string::npos);
  CHECK(dd::allocate_values<int>(3, "x", "v") == std::vector<int>{0, 0, 0});
#if !DAFUSE_TEST_SANITIZED
  // An allocation under the machine's memory that still fails (here: under an address-space
  // limit 256 MiB above what the process maps) is named too, not a bare std::bad_alloc.
  std::ifstream status("/proc/self/status");
  long mapped_kib = -1;
  for (std::string line; std::getline(status, line);)
    if (line.starts_with("VmSize:")) mapped_kib = std::atol(line.c_str() + 7);
  REQUIRE(mapped_kib > 0);
  rlimit previous{};
  REQUIRE(::getrlimit(RLIMIT_AS, &previous) == 0);
  rlimit low = previous;
  low.rlim_cur = rlim_t(mapped_kib) * 1024 + (rlim_t(256) << 20);
  const std::size_t two_gib = std::size_t(2) << 30;
  // Under qemu-user (scripts/test --isa aarch64) the limit binds the emulator's own mappings, not
  // the guest's allocations.
  const bool emulated = std::getenv("DAFUSE_TEST_EMULATED") != nullptr;
  if (emulated) MESSAGE("emulated (DAFUSE_TEST_EMULATED): the address-space limit is not tried");
  if (!emulated && two_gib < memory &&
      (previous.rlim_cur == RLIM_INFINITY || previous.rlim_cur > low.rlim_cur)) {
    REQUIRE(::setrlimit(RLIMIT_AS, &low) == 0);
    const std::string message =
        error_of([&] { dd::allocate_values<unsigned char>(two_gib, "x.npy", "the values"); });
    REQUIRE(::setrlimit(RLIMIT_AS, &previous) == 0);
    CHECK(message == "dafuse: x.npy: cannot allocate " + std::to_string(two_gib) +
                         " bytes for the values: out of memory");
  }
#endif
}

TEST_CASE("write_file_atomically replaces the file whole and leaves nothing else behind") {
  temp_dir dir("file_write");
  const fs::path path = dir / "out.csv";
  dd::write_file_atomically(path, std::string_view("first\n"));
  CHECK(read_text(path) == "first\n");
  dd::write_file_atomically(path, std::string_view("second, longer\n"));
  CHECK(read_text(path) == "second, longer\n");
  CHECK(names_in(dir.path()) == std::vector<std::string>{"out.csv"});
  // A path without a directory part is written in the working directory.
  const fs::path cwd = fs::current_path();
  fs::current_path(dir.path());
  dd::write_file_atomically("plain.txt", std::string_view("x"));
  fs::current_path(cwd);
  CHECK(read_text(dir / "plain.txt") == "x");
}

TEST_CASE("writers of one path on many threads never share a temporary file") {
  temp_dir dir("file_threads");
  const fs::path path = dir / "curves.csv";
  constexpr int threads = 8, writes = 40;
  std::vector<std::string> contents;
  for (int t = 0; t < threads; ++t) contents.push_back(std::string(1000 + 97 * t, char('a' + t)));
  std::atomic<int> failures{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      for (int i = 0; i < writes; ++i) {
        try {
          dd::write_file_atomically(path, std::string_view(contents[std::size_t(t)]));
        } catch (const dafuse::error&) {
          ++failures;
        }
      }
    });
  for (std::thread& t : pool) t.join();
  CHECK(failures == 0);
  // The file is one writer's whole content, and every temporary is gone.
  const std::string final_text = read_text(path);
  CHECK(std::find(contents.begin(), contents.end(), final_text) != contents.end());
  CHECK(names_in(dir.path()) == std::vector<std::string>{"curves.csv"});
}

TEST_CASE("a write removes the temporaries of its path left by killed writers, and only those") {
  temp_dir dir("file_stale");
  const fs::path path = dir / "run.ckpt";
  const std::string dead = std::to_string(dead_pid());
  const std::string alive = std::to_string(::getppid());  // the test's parent runs
  const std::vector<std::string> stale{"run.ckpt.tmp-" + dead + "-0",
                                       "run.ckpt.tmp-" + dead};  // dafuse 0.1's checkpoints
  const std::vector<std::string> kept{
      "run.ckpt.tmp-" + alive + "-3",  // a live writer's
      "run.ckpt.tmp",                  // not a temporary this writer names: maybe the user's
      "run.ckpt.tmpx-" + dead + "-1",
      "run.ckpt.tmp-" + dead + "-1-2",
      "run.ckpt.tmp-x-1",
      "other.ckpt.tmp-" + dead + "-0",
      "run.ckpt.old"};
  for (const std::string& n : stale) write_text(dir / n, std::string(4096, 'z'));
  for (const std::string& n : kept) write_text(dir / n, "keep");
  // A dead pid's temporary that someone holds locked (a writer on another host, or a reused
  // pid) stays too.
  const std::string locked = "run.ckpt.tmp-" + dead + "-7";
  write_text(dir / locked, "locked");
  const int fd = ::open((dir / locked).c_str(), O_RDONLY);
  REQUIRE(fd >= 0);
  REQUIRE(::flock(fd, LOCK_EX) == 0);

  dd::write_file_atomically(path, std::string_view("checkpoint"));
  ::close(fd);
  std::vector<std::string> expected = kept;
  expected.push_back("run.ckpt");
  expected.push_back(locked);
  std::sort(expected.begin(), expected.end());
  CHECK(names_in(dir.path()) == expected);
  CHECK(read_text(dir / "run.ckpt.tmp") == "keep");
}

TEST_CASE("temporary_owner reads the writer's pid from the names writers use") {
  CHECK(dd::temporary_owner("a.csv.tmp-123-4", "a.csv") == 123);
  CHECK(dd::temporary_owner("a.csv.tmp-123", "a.csv") == 123);
  CHECK(dd::temporary_owner("a.csv.tmp", "a.csv") == 0);
  CHECK(dd::temporary_owner("a.csv.tmp-", "a.csv") == 0);
  CHECK(dd::temporary_owner("a.csv.tmp-12-", "a.csv") == 0);
  CHECK(dd::temporary_owner("a.csv.tmp--4", "a.csv") == 0);
  CHECK(dd::temporary_owner("b.csv.tmp-123-4", "a.csv") == 0);
  CHECK(dd::temporary_owner("a.csv.tmp-1234567890123-4", "a.csv") == 0);  // not a pid
  CHECK(dd::temporary_owner("a.csv", "a.csv") == 0);
}

TEST_CASE("a write that runs out of space keeps the old file, removes its temporary and says why") {
  temp_dir dir("file_full");
  const fs::path path = dir / "run.json";
  dd::write_file_atomically(path, std::string_view("{\"old\": true}\n"));
  // A file size limit fails writes past it with EFBIG, as a full disk fails them with ENOSPC.
  const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  rlimit previous{};
  REQUIRE(::getrlimit(RLIMIT_FSIZE, &previous) == 0);
  rlimit low = previous;
  low.rlim_cur = 1000;
  REQUIRE(::setrlimit(RLIMIT_FSIZE, &low) == 0);
  const std::string message =
      error_of([&] { dd::write_file_atomically(path, std::string_view(std::string(5000, 'x'))); });
  REQUIRE(::setrlimit(RLIMIT_FSIZE, &previous) == 0);
  std::signal(SIGXFSZ, old_handler);
  CHECK(message.starts_with("dafuse: " + path.string() + ": cannot write " + path.string() +
                            ".tmp-"));
  CHECK(message.ends_with(": File too large"));
  CHECK(read_text(path) == "{\"old\": true}\n");
  CHECK(names_in(dir.path()) == std::vector<std::string>{"run.json"});
}

TEST_CASE("writing to a device writes straight into it; a directory or a missing one fails") {
  temp_dir dir("file_device");
  dd::write_file_atomically("/dev/null", std::string_view("discarded"));
  struct ::stat st {};
  REQUIRE(::stat("/dev/null", &st) == 0);
  CHECK(S_ISCHR(st.st_mode));
  CHECK(error_of([&] { dd::write_file_atomically(dir.path(), std::string_view("x")); }) ==
        "dafuse: " + dir.path().string() + ": cannot write: it is a directory");
  const fs::path missing = dir / "no" / "such.csv";
  const std::string message =
      error_of([&] { dd::write_file_atomically(missing, std::string_view("x")); });
  CHECK(message.starts_with("dafuse: " + missing.string() + ": cannot open " + missing.string() +
                            ".tmp-"));
  CHECK(message.ends_with(" for writing: No such file or directory"));
}

TEST_CASE("quoted_bytes shows control bytes, quotes and backslashes escaped") {
  CHECK(dd::quoted_bytes("ok") == "'ok'");
  CHECK(dd::quoted_bytes(std::string_view("a\x1b[2Jb\n\\", 8)) == "'a\\x1b[2Jb\\x0a\\x5c'");
  CHECK(dd::quoted_bytes("x", '"') == "\"x\"");
}

}  // namespace core_file_test
