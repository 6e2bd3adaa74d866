// A head written by deriving from CORAL and overriding draws_target_rows would compute its
// covariances on rows the batch does not hold: the step refuses the head's contract.
// expect: dafuse: this head's loss reads the target rows, so the batch must hold them
// errors: 1
#include <dafuse/head/coral.hpp>
#include "common.hpp"
struct source_rows_coral : df::head::coral<> {
#ifdef DAFUSE_COMPILE_FAIL
  static constexpr bool draws_target_rows = false;
#endif
};
using step = df::train_step<good_net,
                            df::loader::sync,
                            df::precision::fp32,
                            df::clip::none,
                            source_rows_coral,
                            df::optim::sgd>;
static_assert(sizeof(step) > 0);
