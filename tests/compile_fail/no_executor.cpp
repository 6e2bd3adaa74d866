// A step on a system that has no executor fails with advice, not an instantiation backtrace.
// expect: dafuse: no executor for this system
#include "common.hpp"

// Device memory the host cannot read: no executor is specialised for it here.
struct device_only_system {
  template <class T>
  using vector = df::system::omp::vector<T>;
  static constexpr bool host_accessible = false;
};
#ifdef DAFUSE_COMPILE_FAIL
using step_system = device_only_system;
#else
using step_system = df::system::cpp;
#endif
using step = df::train_step<good_net,
                            df::loader::sync,
                            df::precision::fp32,
                            df::clip::none,
                            df::head::dann<>,
                            df::optim::sgd,
                            step_system>;
static_assert(sizeof(step) > 0);
