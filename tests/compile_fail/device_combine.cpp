// A sum of heads runs on the host executor only for now (its terms' weights are numbers the host
// computes each step): a device system (system::cuda; system::omp_device here, its CPU stand-in)
// refuses it with a sentence. Each of its heads alone runs there.
// expect: dafuse: head::combine runs on the host systems only for now
// errors: 1
#include <dafuse/backend/omp_device/executor.hpp>
#include <dafuse/head/combine.hpp>
#include <dafuse/head/coral.hpp>
#include "common.hpp"
#ifdef DAFUSE_COMPILE_FAIL
using head = df::head::combine<df::head::dann<>, df::head::coral<>>;
#else
using head = df::head::coral<>;
#endif
using step = df::train_step<good_net,
                            df::loader::resident,
                            df::precision::fp32,
                            df::clip::global_norm,
                            head,
                            df::optim::sgd,
                            df::system::omp_device>;
static_assert(sizeof(step) > 0);
