// A head written by deriving from MCC and overriding classifier_reads_target would write the
// gradient of logits G_y never computed: the step refuses the head's contract.
// expect: dafuse: this head writes the target rows' logit gradient, so G_y must run on them
// errors: 1
#include <dafuse/head/mcc.hpp>
#include "common.hpp"
struct source_logits_mcc : df::head::mcc<> {
#ifdef DAFUSE_COMPILE_FAIL
  static constexpr bool classifier_reads_target = false;
#endif
};
using step = df::train_step<good_net,
                            df::loader::sync,
                            df::precision::fp32,
                            df::clip::none,
                            source_logits_mcc,
                            df::optim::sgd>;
static_assert(sizeof(step) > 0);
