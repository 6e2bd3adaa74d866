// head::mmd's first argument is its λ schedule (the estimator comes second): anything else is
// refused with a sentence naming the slot.
// expect: dafuse: head::mmd<S, E> takes a schedule such as schedule::ganin
#include <dafuse/head/mmd.hpp>
#include "common.hpp"
#ifdef DAFUSE_COMPILE_FAIL
using head = df::head::mmd<df::optim::sgd>;
#else
using head = df::head::mmd<df::schedule::constant, df::head::mmd_estimator::linear>;
#endif
using step = df::train_step<good_net,
                            df::loader::sync,
                            df::precision::fp32,
                            df::clip::none,
                            head,
                            df::optim::sgd>;
static_assert(sizeof(step) > 0);
