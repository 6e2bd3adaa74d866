// A clip policy where fp16's loss scaler goes.
// expect: dafuse: precision::fp16<Scaler> takes a loss scaler
#include "common.hpp"
#ifdef DAFUSE_COMPILE_FAIL
using precision = df::precision::fp16<df::clip::global_norm>;
#else
using precision = df::precision::fp16<df::loss_scale::fixed<4096> >;
#endif
using step = df::train_step<good_net,
                            df::loader::sync,
                            precision,
                            df::clip::none,
                            df::head::dann<>,
                            df::optim::sgd>;
static_assert(sizeof(step) > 0);
