// SPDX-License-Identifier: Apache-2.0
//! @file core/meta.hpp
//! @brief Small compile-time helpers: the index type, round_up and dependent_false.
#pragma once
#include <dafuse/config.hpp>

#include <cstddef>
#include <type_traits>

namespace dafuse {

//! Signed index used for shapes and loops (Eigen's convention, so maps need no casts).
using index_t = std::ptrdiff_t;

//! x rounded up to a multiple of `to` (x ≥ 0, to > 0).
constexpr index_t round_up(index_t x, index_t to) {
  return (x + to - 1) / to * to;
}

//! `static_assert(dependent_false<T>, "dafuse: ...")` fails only when the template is used.
template <class...>
inline constexpr bool dependent_false = false;

}  // namespace dafuse
