// Loader and precision swapped: both slots say so, and nothing else is reported, not even by
// fit, which uses the step.
// expect: dafuse: train_step's 2nd argument must be a loader policy
// errors: 2
#include "common.hpp"

#include <dafuse/train/fit.hpp>
#ifdef DAFUSE_COMPILE_FAIL
using step = df::train_step<good_net,
                            df::precision::fp32,
                            df::loader::sync,
                            df::clip::none,
                            df::head::dann<>,
                            df::optim::sgd>;
#else
using step = df::train_step<good_net,
                            df::loader::sync,
                            df::precision::fp32,
                            df::clip::none,
                            df::head::dann<>,
                            df::optim::sgd>;
#endif
step* instantiate = nullptr;
static_assert(sizeof(step) > 0);
inline df::fit_result train(const df::data::dataset& s, const df::data::dataset& t) {
  return df::fit<step>(s, t, {});
}
