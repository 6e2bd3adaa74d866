// Convolutions run in fp32, fp64 or bf16: an fp16 step with an nn::conv_net is refused with a
// sentence.
// expect: dafuse: nn::conv_net runs in fp32, fp64 or bf16 on the host
#include <dafuse/nn/conv2d.hpp>
#include "common.hpp"
#ifdef DAFUSE_COMPILE_FAIL
using precision = df::precision::fp16<df::loss_scale::dynamic>;
#else
using precision = df::precision::fp32;
#endif
using features = df::nn::conv_net<df::nn::image<6, 6, 1>,
                                  df::nn::conv2d<1, 4, 3>,
                                  df::nn::max_pool2d<2>,
                                  df::nn::flatten,
                                  df::nn::dense<16, 8, df::nn::relu>>;
using net = df::nn::dann_net<features, df::nn::linear<8, 2>, df::nn::mlp<8, 4, 1, df::nn::relu>>;
using step = df::
    train_step<net, df::loader::sync, precision, df::clip::none, df::head::dann<>, df::optim::sgd>;
// Building the step instantiates its executor.
inline void build(const df::fit_args& args) {
  step s(args);
}
