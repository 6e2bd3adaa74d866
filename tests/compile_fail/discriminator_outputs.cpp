// A discriminator with two outputs.
// expect: dafuse: the domain discriminator must output one logit
#include "common.hpp"
#ifdef DAFUSE_COMPILE_FAIL
using net = df::nn::dann_net<df::nn::mlp<4, 8, df::nn::relu>,
                             df::nn::linear<8, 2>,
                             df::nn::mlp<8, 4, 2, df::nn::relu>>;
#else
using net = good_net;
#endif
using step = df::train_step<net,
                            df::loader::sync,
                            df::precision::fp32,
                            df::clip::none,
                            df::head::dann<>,
                            df::optim::sgd>;
static_assert(sizeof(step) > 0);
