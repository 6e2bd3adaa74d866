// SPDX-License-Identifier: Apache-2.0
// bench/compile_time.sh: the umbrella header alone (what every user TU parses).
#include <dafuse/dafuse.hpp>
