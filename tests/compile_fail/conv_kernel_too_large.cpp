// A 7 × 7 kernel on a 6 × 6 image without padding has no output pixel.
// expect: dafuse: nn::conv2d's kernel is larger than its padded input image
#include <dafuse/nn/conv2d.hpp>
#include "common.hpp"
#ifdef DAFUSE_COMPILE_FAIL
constexpr df::index_t padding = 0;
#else
constexpr df::index_t padding = 1;
#endif
using features =
    df::nn::conv_net<df::nn::image<6, 6, 1>, df::nn::conv2d<1, 4, 7, 1, padding>, df::nn::flatten>;
static_assert(features::out == 4 * 2 * 2);
