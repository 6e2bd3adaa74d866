// SPDX-License-Identifier: Apache-2.0
// libFuzzer target for data/npy.hpp: the input is one NPY file. Every reader must either return
// an array that agrees with its header or throw dafuse::error; anything else (another exception,
// a crash, a sanitizer report, a hang) is a finding.
#include <dafuse/data/npy.hpp>

#include "fuzz_file.hpp"

#include <cstddef>
#include <cstdint>
#include <span>

namespace {

namespace dd = dafuse::data;
using dafuse::fuzz::finding;

std::size_t product(const std::vector<std::size_t>& shape) {
  std::size_t n = 1;
  for (const std::size_t d : shape) n *= d;  // no overflow: the loader checked the byte count
  return n;
}

template <class Array>
void check_array(const Array& a) {
  if (a.values.size() != product(a.shape)) finding("values.size() != product(shape)");
}

template <class T>
void try_load(const std::filesystem::path& path) {
  try {
    check_array(dd::load_npy<T>(path));
  } catch (const dafuse::error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // The header parser works on bytes in memory.
  try {
    const dd::npy_header h =
        dd::parse_npy_header(std::span<const unsigned char>(data, size), "fuzz.npy");
    if (h.data_offset > size) finding("data_offset past the end of the input");
    if (h.fortran_order) finding("fortran_order accepted");
  } catch (const dafuse::error&) {
  }

  // The loaders read files.
  static const std::filesystem::path path = dafuse::fuzz::scratch_dir() / "input.npy";
  dafuse::fuzz::write_file(path, data, size);
  try_load<float>(path);
  try_load<std::int32_t>(path);
  try_load<std::uint8_t>(path);
  try_load<double>(path);
  try_load<std::int64_t>(path);
  try {
    check_array(dd::load_npy_as_float(path));
  } catch (const dafuse::error&) {
  }
  try {
    check_array(dd::load_npy_as_int32(path));
  } catch (const dafuse::error&) {
  }
  return 0;
}
