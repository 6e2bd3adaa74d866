// SPDX-License-Identifier: Apache-2.0
// libFuzzer target for data/npy_map.hpp: the input is one NPY file, mapped as each element type.
// A mapping must either agree with its header and with load_npy (same shape, same bits) or
// throw dafuse::error with load_npy's message; anything else (another exception, a crash, a
// sanitizer report, a read past the mapping, a hang) is a finding.
#include <dafuse/data/npy_map.hpp>

#include "fuzz_file.hpp"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>

namespace {

namespace dd = dafuse::data;
using dafuse::fuzz::finding;

template <class T>
void try_map(const std::filesystem::path& path, std::size_t file_size) {
  std::string mapped_error, loaded_error;
  try {
    dd::mapped_npy<T> m(path);
    std::size_t n = 1;
    for (const std::size_t d : m.shape()) n *= d;  // no overflow: the header's size was checked
    if (m.values().size() != n) finding("values().size() != product(shape)");
    if (n * sizeof(T) > file_size) finding("the values run past the end of the file");
    // Every value is read: a span past the mapping faults under AddressSanitizer or SIGBUS.
    unsigned char sum = 0;
    const auto* bytes = reinterpret_cast<const unsigned char*>(m.values().data());
    for (std::size_t i = 0; i < n * sizeof(T); ++i)
      sum = static_cast<unsigned char>(sum ^ bytes[i]);
    (void)sum;
    // The same bits as load_npy, unless only the alignment rule refused the mapping.
    const dd::host_array<T> loaded = dd::load_npy<T>(path);
    if (loaded.shape != m.shape()) finding("mapped shape differs from load_npy's");
    if (n != 0 && std::memcmp(loaded.values.data(), m.values().data(), n * sizeof(T)) != 0)
      finding("mapped values differ from load_npy's");
    const dd::mapped_npy<T> moved(std::move(m));
    if (moved.values().size() != n || !m.values().empty()) finding("a move lost the mapping");
    return;
  } catch (const dafuse::error& e) {
    mapped_error = e.what();
  }
  try {
    (void)dd::load_npy<T>(path);
  } catch (const dafuse::error& e) {
    loaded_error = e.what();
  }
  // load_npy copies what mapping refuses for alignment only; otherwise the messages agree.
  if (mapped_error.find(": header length: expected data starting on a multiple") ==
          std::string::npos &&
      mapped_error != loaded_error)
    finding("mapped_npy and load_npy refuse a file with different messages");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::filesystem::path path = dafuse::fuzz::scratch_dir() / "input.npy";
  dafuse::fuzz::write_file(path, data, size);
  try_map<float>(path, size);
  try_map<std::int32_t>(path, size);
  try_map<std::uint8_t>(path, size);
  return 0;
}
