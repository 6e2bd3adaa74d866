// SPDX-License-Identifier: Apache-2.0
// A user's program for cpu_check.sh: the umbrella header and a main that says it ran.
#include <dafuse/dafuse.hpp>

#include <cstdio>

int main() {
  std::puts("main ran");
  return 0;
}
