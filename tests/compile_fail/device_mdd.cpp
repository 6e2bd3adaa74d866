// MDD's loss runs on the host executor only for now: a device system (system::cuda;
// system::omp_device here, its CPU stand-in) refuses it with a sentence.
// expect: dafuse: head::coral, head::mmd, head::mcc, head::mdd and head::combine run on
// errors: 1
#include <dafuse/backend/omp_device/executor.hpp>
#include <dafuse/head/mdd.hpp>
#include "common.hpp"
using mdd_net = df::nn::dann_net<df::nn::mlp<4, 8, df::nn::relu>,
                                 df::nn::linear<8, 2>,
                                 df::nn::mlp<8, 4, 2, df::nn::relu>>;
#ifdef DAFUSE_COMPILE_FAIL
using head = df::head::mdd<>;
using net = mdd_net;
#else
using head = df::head::dann<>;
using net = good_net;
#endif
using step = df::train_step<net,
                            df::loader::resident,
                            df::precision::fp32,
                            df::clip::global_norm,
                            head,
                            df::optim::sgd,
                            df::system::omp_device>;
static_assert(sizeof(step) > 0);
