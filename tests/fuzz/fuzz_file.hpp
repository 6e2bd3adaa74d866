// SPDX-License-Identifier: Apache-2.0
// Shared by the fuzz targets: the readers take paths, so each input is written to a file first,
// in /dev/shm (memory-backed) when it exists so that the file round trip costs little.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>

#include <unistd.h>

namespace dafuse::fuzz {

//! A directory of this process's own for the files it writes, removed at exit.
inline const std::filesystem::path& scratch_dir() {
  static const std::filesystem::path dir = [] {
    std::error_code ec;
    const std::filesystem::path base = std::filesystem::is_directory("/dev/shm", ec)
                                           ? std::filesystem::path("/dev/shm")
                                           : std::filesystem::temp_directory_path();
    std::filesystem::path d = base / ("dafuse_fuzz_" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    std::atexit([] {
      std::error_code ignored;
      std::filesystem::remove_all(scratch_dir(), ignored);
    });
    return d;
  }();
  return dir;
}

//! Writes `size` bytes at `data` to `path`, replacing what was there; aborts on an I/O error
//! (that is the harness failing, not the reader).
inline void write_file(const std::filesystem::path& path,
                       const std::uint8_t* data,
                       std::size_t size) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) std::abort();
  if (size != 0 && std::fwrite(data, 1, size, f) != size) std::abort();
  if (std::fclose(f) != 0) std::abort();
}

//! Stops the run with a message: libFuzzer saves the input as a crash.
[[noreturn]] inline void finding(const char* what) {
  std::fprintf(stderr, "dafuse fuzz finding: %s\n", what);
  std::abort();
}

}  // namespace dafuse::fuzz
