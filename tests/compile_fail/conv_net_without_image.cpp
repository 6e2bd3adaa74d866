// A conv_net must start with the input's shape.
// expect: dafuse: nn::conv_net's first argument must be the input's shape
#include <dafuse/nn/conv2d.hpp>
#include "common.hpp"
#ifdef DAFUSE_COMPILE_FAIL
using input = df::nn::conv2d<1, 4, 3>;
#else
using input = df::nn::image<8, 8, 1>;
#endif
using features = df::nn::conv_net<input, df::nn::conv2d<1, 4, 3>, df::nn::flatten>;
static_assert(features::in == 64);
