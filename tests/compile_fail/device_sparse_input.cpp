// A sparse first layer runs on the host systems only for now: on a device system it is refused
// with a sentence, not a backtrace.
// expect: dafuse: a sparse first layer (nn::sparse_input) runs on the host systems only for now
// errors: 1
#include <dafuse/backend/omp_device/executor.hpp>
#include "common.hpp"
#ifdef DAFUSE_COMPILE_FAIL
using features = df::nn::sparse_input<df::nn::mlp<4, 8, df::nn::relu>>;
#else
using features = df::nn::mlp<4, 8, df::nn::relu>;
#endif
using sparse_net =
    df::nn::dann_net<features, df::nn::linear<8, 2>, df::nn::mlp<8, 4, 1, df::nn::relu>>;
using step = df::train_step<sparse_net,
                            df::loader::resident,
                            df::precision::fp32,
                            df::clip::none,
                            df::head::dann<>,
                            df::optim::sgd,
                            df::system::omp_device>;
static_assert(sizeof(step) > 0);
