// Convolutional feature extractors run on the host systems only for now: on a device system they
// are refused with a sentence.
// expect: dafuse: convolutional feature extractors (nn::conv_net) run on the host systems only
// errors: 1
#include <dafuse/backend/omp_device/executor.hpp>
#include <dafuse/nn/conv2d.hpp>
#include "common.hpp"
#ifdef DAFUSE_COMPILE_FAIL
using features = df::nn::conv_net<df::nn::image<6, 6, 1>,
                                  df::nn::conv2d<1, 4, 3>,
                                  df::nn::max_pool2d<2>,
                                  df::nn::flatten,
                                  df::nn::dense<16, 8, df::nn::relu>>;
#else
using features = df::nn::mlp<36, 8, df::nn::relu>;
#endif
using net = df::nn::dann_net<features, df::nn::linear<8, 2>, df::nn::mlp<8, 4, 1, df::nn::relu>>;
using step = df::train_step<net,
                            df::loader::resident,
                            df::precision::fp32,
                            df::clip::none,
                            df::head::dann<>,
                            df::optim::sgd,
                            df::system::omp_device>;
static_assert(sizeof(step) > 0);
