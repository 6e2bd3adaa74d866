// A clip policy where the precision goes.
// expect: dafuse: train_step's 3rd argument must be a precision policy
// errors: 1
#include "common.hpp"
#ifdef DAFUSE_COMPILE_FAIL
using step = df::train_step<good_net,
                            df::loader::sync,
                            df::clip::global_norm,
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
static_assert(sizeof(step) > 0);
