// An mlp whose last argument is a width, not an activation.
// expect: dafuse: the last argument of nn::mlp must be an activation
#include "common.hpp"
#ifdef DAFUSE_COMPILE_FAIL
using features = df::nn::mlp<4, 8, 2>;
#else
using features = df::nn::mlp<4, 8, 2, df::nn::tanh>;
#endif
static_assert(features::out == 2);
