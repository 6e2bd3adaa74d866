// A dense layer straight after an image layer: the flatten between them is missing.
// expect: dafuse: put nn::flatten between the image layers and the first nn::dense
#include <dafuse/nn/conv2d.hpp>
#include "common.hpp"
#ifdef DAFUSE_COMPILE_FAIL
using features = df::nn::conv_net<df::nn::image<8, 8, 1>,
                                  df::nn::conv2d<1, 4, 3>,
                                  df::nn::dense<144, 10, df::nn::relu>,
                                  df::nn::flatten>;
#else
using features = df::nn::conv_net<df::nn::image<8, 8, 1>,
                                  df::nn::conv2d<1, 4, 3>,
                                  df::nn::flatten,
                                  df::nn::dense<144, 10, df::nn::relu> >;
#endif
static_assert(features::out == 10);
