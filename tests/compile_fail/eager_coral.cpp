// The eager baseline runs DANN's passes only: a head with a loss of its own (CORAL) would be
// silently dropped there, so it is refused with a sentence.
// expect: dafuse: eager_step runs head::source_only and head::dann
#include <dafuse/head/coral.hpp>
#include <dafuse/step/eager_step.hpp>
#include "common.hpp"
#ifdef DAFUSE_COMPILE_FAIL
using head = df::head::coral<>;
#else
using head = df::head::source_only<>;
#endif
using step = df::eager_step<good_net,
                            df::loader::sync,
                            df::precision::fp32,
                            df::clip::global_norm,
                            head,
                            df::optim::sgd>;
static_assert(sizeof(step) > 0);
