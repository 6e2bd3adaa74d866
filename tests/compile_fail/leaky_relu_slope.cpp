// A leaky ReLU with a negative slope: its derivative could not be read from its output.
// expect: dafuse: nn::leaky_relu_t needs negative_slope > 0
#include "common.hpp"
#ifdef DAFUSE_COMPILE_FAIL
using features = df::nn::mlp<4, 8, df::nn::leaky_relu_t{-0.1f}>;
#else
using features = df::nn::mlp<4, 8, df::nn::leaky_relu_t{0.1f}>;
#endif
static_assert(features::stack<true>::param_count == 40);
