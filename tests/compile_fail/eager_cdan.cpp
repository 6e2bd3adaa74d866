// The eager baseline runs DANN's passes only: CDAN is refused with a sentence.
// expect: dafuse: eager_step runs head::source_only and head::dann
#include <dafuse/step/eager_step.hpp>
#include "common.hpp"
#ifdef DAFUSE_COMPILE_FAIL
using head = df::head::cdan<>;
using net = df::nn::dann_net<df::nn::mlp<4, 8, df::nn::relu>,
                             df::nn::linear<8, 2>,
                             df::nn::mlp<16, 4, 1, df::nn::relu>>;
#else
using head = df::head::dann<>;
using net = good_net;
#endif
using step = df::eager_step<net,
                            df::loader::sync,
                            df::precision::fp32,
                            df::clip::global_norm,
                            head,
                            df::optim::sgd>;
static_assert(sizeof(step) > 0);
