// The classifier reads 5 features; the extractor makes 8.
// expect: dafuse: the label classifier's input width must equal the feature extractor's output
// width
#include "common.hpp"
#ifdef DAFUSE_COMPILE_FAIL
using net = df::nn::dann_net<df::nn::mlp<4, 8, df::nn::relu>,
                             df::nn::linear<5, 2>,
                             df::nn::mlp<8, 4, 1, df::nn::relu>>;
#else
using net = good_net;
#endif
static_assert(net::param_count > 0);
