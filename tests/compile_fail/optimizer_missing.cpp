// The schedule given where the optimizer goes.
// expect: dafuse: train_step's 6th argument must be an optimizer policy
#include "common.hpp"
#ifdef DAFUSE_COMPILE_FAIL
using step = df::train_step<good_net,
                            df::loader::sync,
                            df::precision::fp32,
                            df::clip::none,
                            df::head::dann<>,
                            df::schedule::ganin>;
#else
using step = df::train_step<good_net,
                            df::loader::sync,
                            df::precision::fp32,
                            df::clip::none,
                            df::head::dann<>,
                            df::optim::sgd>;
#endif
static_assert(sizeof(step) > 0);
