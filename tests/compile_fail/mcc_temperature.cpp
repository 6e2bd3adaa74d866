// MCC's temperature is a positive std::ratio: a zero (or anything but a ratio) is refused.
// expect: dafuse: head::mcc<S, T>'s temperature T is a positive std::ratio
#include <dafuse/head/mcc.hpp>
#include "common.hpp"
#ifdef DAFUSE_COMPILE_FAIL
using head = df::head::mcc<df::schedule::ganin, std::ratio<0>>;
#else
using head = df::head::mcc<df::schedule::ganin, std::ratio<3, 2>>;
#endif
using step = df::train_step<good_net,
                            df::loader::sync,
                            df::precision::fp32,
                            df::clip::none,
                            head,
                            df::optim::sgd>;
static_assert(sizeof(step) > 0);
