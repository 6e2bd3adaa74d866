// fp16 without a loss scaler: small gradients would flush to zero.
// expect: dafuse: precision::fp16 needs a loss scaler
#include "common.hpp"
#ifdef DAFUSE_COMPILE_FAIL
using precision = df::precision::fp16<>;
#else
using precision = df::precision::fp16<df::loss_scale::dynamic>;
#endif
using step = df::train_step<good_net,
                            df::loader::sync,
                            precision,
                            df::clip::global_norm,
                            df::head::dann<>,
                            df::optim::sgd>;
static_assert(sizeof(step) > 0);
