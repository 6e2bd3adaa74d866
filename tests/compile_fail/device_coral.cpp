// The heads without a discriminator run on the host executor only for now: a device system
// (system::cuda; system::omp_device here, its CPU stand-in) refuses them with a sentence.
// expect: dafuse: head::coral, head::mmd, head::mcc, head::mdd and head::combine run on
// errors: 1
#include <dafuse/backend/omp_device/executor.hpp>
#include <dafuse/head/coral.hpp>
#include "common.hpp"
#ifdef DAFUSE_COMPILE_FAIL
using head = df::head::coral<>;
#else
using head = df::head::dann<>;
#endif
using step = df::train_step<good_net,
                            df::loader::resident,
                            df::precision::fp32,
                            df::clip::global_norm,
                            head,
                            df::optim::sgd,
                            df::system::omp_device>;
static_assert(sizeof(step) > 0);
