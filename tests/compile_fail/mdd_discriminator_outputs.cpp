// MDD's adversarial classifier f' is the net's G_d: a one-logit domain discriminator (the
// network of DANN) is refused, naming the width it needs.
// expect: dafuse: head::mdd's adversarial classifier f' (the net's G_d) gives one logit a class
// errors: 1
#include <dafuse/head/mdd.hpp>
#include "common.hpp"
#ifdef DAFUSE_COMPILE_FAIL
using net = good_net;
#else
using net = df::nn::dann_net<df::nn::mlp<4, 8, df::nn::relu>,
                             df::nn::linear<8, 2>,
                             df::nn::mlp<8, 4, 2, df::nn::relu> >;
#endif
using step = df::train_step<net,
                            df::loader::sync,
                            df::precision::fp32,
                            df::clip::none,
                            df::head::mdd<>,
                            df::optim::sgd>;
static_assert(sizeof(step) > 0);
