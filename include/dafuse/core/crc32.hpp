// SPDX-License-Identifier: Apache-2.0
//! @file core/crc32.hpp
//! @brief CRC-32 (IEEE 802.3), the checksum of checkpoints and of ZIP (NPZ) members.
#pragma once
#include <dafuse/config.hpp>

#include <array>
#include <cstddef>
#include <cstdint>

namespace dafuse::detail {

//! CRC-32 (IEEE 802.3, reflected polynomial 0xEDB88320) of `bytes`, continuing from `crc` (the
//! CRC of the bytes before, 0 to start): detects every burst error up to 32 bits, which is what a
//! torn or bit-flipped file looks like.
inline std::uint32_t crc32(const unsigned char* bytes, std::size_t n, std::uint32_t crc = 0) {
  static const std::array<std::uint32_t, 256> table = [] {
    std::array<std::uint32_t, 256> t{};
    for (std::uint32_t i = 0; i < 256; ++i) {
      std::uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  std::uint32_t c = crc ^ 0xFFFFFFFFu;
  for (std::size_t i = 0; i < n; ++i) c = table[(c ^ bytes[i]) & 0xFFu] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

}  // namespace dafuse::detail
