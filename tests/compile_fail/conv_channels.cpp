// The second convolution reads 16 channels; the first makes 32.
// expect: dafuse: nn::conv2d's InChannels must equal the channels of its input
#include <dafuse/nn/conv2d.hpp>
#include "common.hpp"
#ifdef DAFUSE_COMPILE_FAIL
constexpr df::index_t second_in = 16;
#else
constexpr df::index_t second_in = 32;
#endif
using features = df::nn::conv_net<df::nn::image<12, 12, 1>,
                                  df::nn::conv2d<1, 32, 5>,
                                  df::nn::max_pool2d<2>,
                                  df::nn::conv2d<second_in, 8, 3>,
                                  df::nn::flatten>;
static_assert(features::stack<true>::param_count > 0);
