// CDAN's discriminator reads softmax(g) ⊗ h (2 classes × 8 features = 16 values), not h.
// expect: dafuse: head::cdan's domain discriminator reads softmax(g)
#include "common.hpp"
#ifdef DAFUSE_COMPILE_FAIL
using net = good_net;  // G_d reads 8 values
#else
using net = df::nn::dann_net<df::nn::mlp<4, 8, df::nn::relu>,
                             df::nn::linear<8, 2>,
                             df::nn::mlp<16, 4, 1, df::nn::relu> >;
#endif
using step = df::train_step<net,
                            df::loader::sync,
                            df::precision::fp32,
                            df::clip::none,
                            df::head::cdan<>,
                            df::optim::sgd>;
static_assert(sizeof(step) > 0);
