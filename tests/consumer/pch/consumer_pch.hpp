// The consumer's precompiled header (meson.build's cpp_pch): the umbrella header, parsed once for
// every translation unit of the program (docs/usage.md, "Compile times").
#include <dafuse/dafuse.hpp>
