// The eager execution runs fp32 and fp64 only: bf16 is refused with a sentence, not a backtrace.
// expect: dafuse: eager_step runs precision::fp32 and precision::fp64 only
#include <dafuse/step/eager_step.hpp>
#include "common.hpp"
#ifdef DAFUSE_COMPILE_FAIL
using precision = df::precision::bf16;
#else
using precision = df::precision::fp32;
#endif
using step = df::eager_step<good_net,
                            df::loader::sync,
                            precision,
                            df::clip::global_norm,
                            df::head::dann<>,
                            df::optim::sgd>;
static_assert(sizeof(step) > 0);
