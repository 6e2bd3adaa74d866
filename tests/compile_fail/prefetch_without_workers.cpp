// loader::prefetch with no worker thread: the caller would wait for batches nobody assembles.
// expect: dafuse: loader::prefetch<Workers, Depth> needs Workers >= 1 worker thread
#include "common.hpp"
#ifdef DAFUSE_COMPILE_FAIL
using loader = df::loader::prefetch<0, 4>;
#else
using loader = df::loader::prefetch<1, 4>;
#endif
static_assert(df::loader_policy<loader>);
