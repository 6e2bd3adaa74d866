// The one doctest main shared by every test executable. Built twice (tests/meson.build): for the
// plain target, and with the kernel tests' instruction set, whose CPU check (cpu_check.hpp) then
// ends a test built for instructions this CPU lacks with status 77, which Meson counts as
// skipped (scripts/test --isa avx512 on a CPU without AVX-512).
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <dafuse/backend/host/cpu_check.hpp>
