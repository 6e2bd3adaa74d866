// After flatten a 6 × 6 × 4 image is 144 values; the dense layer reads 128.
// expect: dafuse: a dense layer's input width must equal the width before it
#include <dafuse/nn/conv2d.hpp>
#include "common.hpp"
#ifdef DAFUSE_COMPILE_FAIL
constexpr df::index_t flat = 128;
#else
constexpr df::index_t flat = 144;
#endif
using features = df::nn::conv_net<df::nn::image<8, 8, 1>,
                                  df::nn::conv2d<1, 4, 3>,
                                  df::nn::flatten,
                                  df::nn::dense<flat, 10, df::nn::relu>>;
static_assert(features::out == 10);
