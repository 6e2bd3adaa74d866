// Loader and precision swapped.
// expect: dafuse: train_step's 2nd argument must be a loader policy
#include "common.hpp"
#ifdef DAFUSE_COMPILE_FAIL
using step = df::train_step<good_net,
                            df::precision::fp32,
                            df::loader::sync,
                            df::clip::none,
                            df::head::dann<>,
                            df::optim::sgd>;
#else
using step = df::train_step<good_net,
                            df::loader::sync,
                            df::precision::fp32,
                            df::clip::none,
                            df::head::dann<>,
                            df::optim::sgd>;
#endif
step* instantiate = nullptr;
static_assert(sizeof(step) > 0);
