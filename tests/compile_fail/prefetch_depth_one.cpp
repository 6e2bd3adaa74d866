// loader::prefetch with a ring of one buffer.
// expect: dafuse: loader::prefetch<Workers, Depth> needs Depth >= 2 buffers
#include "common.hpp"
#ifdef DAFUSE_COMPILE_FAIL
using loader = df::loader::prefetch<2, 1>;
#else
using loader = df::loader::prefetch<2, 2>;
#endif
static_assert(df::loader_policy<loader>);
