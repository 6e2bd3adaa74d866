// SPDX-License-Identifier: Apache-2.0
// dafuse-train's checks of a command-line network's data before its program is compiled or run:
// what the options and the NPY files' headers and labels say, so a mistake costs no compile.
#pragma once
#include "config.hpp"

namespace dafuse_train {

//! Checks the data of `c` against its network (c.network, completed): each features file reads
//! as the program would read it, with rows as wide as --features' first width, and its labels
//! (required as the program requires them) are one per row and classes in [0, K) for
//! --classifier's last width K. Reads the NPY headers and the labels, never the features, so it
//! takes milliseconds. Throws usage_error for a missing option and dafuse::error for a file,
//! naming it and what was expected (the program's own messages where it has one).
void check_network_data(const config& c);

}  // namespace dafuse_train
