// A device system (system::cuda; system::omp_device here, its CPU stand-in) runs fp32 and fp64
// steps for now: bf16 is refused with a sentence naming the way out.
// expect: dafuse: bf16 and fp16 steps run on the host systems only for now
// errors: 1
#include <dafuse/backend/omp_device/executor.hpp>
#include "common.hpp"
#ifdef DAFUSE_COMPILE_FAIL
using precision = df::precision::bf16;
#else
using precision = df::precision::fp32;
#endif
using step = df::train_step<good_net,
                            df::loader::resident,
                            precision,
                            df::clip::global_norm,
                            df::head::dann<>,
                            df::optim::sgd,
                            df::system::omp_device>;
static_assert(sizeof(step) > 0);
