// The discriminator reads 6 features; the extractor makes 8 (head::dann's G_d reads h).
// expect: dafuse: the domain discriminator's input width must equal the feature extractor's
#include "common.hpp"
#ifdef DAFUSE_COMPILE_FAIL
using net = df::nn::dann_net<df::nn::mlp<4, 8, df::nn::relu>,
                             df::nn::linear<8, 2>,
                             df::nn::mlp<6, 4, 1, df::nn::relu>>;
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
