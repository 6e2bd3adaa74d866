// SPDX-License-Identifier: Apache-2.0
//! @file core/meta.hpp
//! @brief Small compile-time helpers: the index type and dependent_false.
#pragma once
#include <dafuse/config.hpp>

#include <cstddef>
#include <type_traits>

namespace dafuse {

//! Signed index used for shapes and loops (Eigen's convention, so maps need no casts).
using index_t = std::ptrdiff_t;

//! `static_assert(dependent_false<T>, "dafuse: ...")` fails only when the template is used.
template <class...>
inline constexpr bool dependent_false = false;

}  // namespace dafuse
