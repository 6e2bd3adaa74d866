// A step on a device system has no span of host memory over its parameters: asking for one says
// which copies to use instead.
// expect: dafuse: parameters() is a span of host memory, which a step on a device system
// errors: 1
#include <dafuse/backend/omp_device/executor.hpp>
#include "common.hpp"

#include <vector>

using step = df::train_step<good_net,
                            df::loader::resident,
                            df::precision::fp32,
                            df::clip::none,
                            df::head::dann<>,
                            df::optim::sgd,
                            df::system::omp_device>;
inline float first_parameter(step& s) {
#ifdef DAFUSE_COMPILE_FAIL
  return s.parameters()[0];
#else
  std::vector<float> p(static_cast<std::size_t>(step::parameter_count()));
  s.read_parameters(p);
  return p[0];
#endif
}
