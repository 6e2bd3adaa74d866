// A 7th argument that is not a system (here a second optimizer) says what the 7th slot is, once.
// expect: dafuse: train_step's 7th argument, when given, is where the step runs
// errors: 1
#include "common.hpp"

#ifdef DAFUSE_COMPILE_FAIL
using step = df::train_step<good_net,
                            df::loader::sync,
                            df::precision::fp32,
                            df::clip::none,
                            df::head::dann<>,
                            df::optim::sgd,
                            df::optim::sgd>;
#else
using step = df::train_step<good_net,
                            df::loader::sync,
                            df::precision::fp32,
                            df::clip::none,
                            df::head::dann<>,
                            df::optim::sgd,
                            df::system::cpp>;
#endif
step* instantiate = nullptr;
static_assert(sizeof(step) > 0);
inline df::step_report train(step& s) {
  return s.run();
}
