// SPDX-License-Identifier: Apache-2.0
// eager_step against train_step on the wide network, whose products split by W's columns with
// per-thread partial sums on two threads or more (eager_step_cases.hpp).
#include "eager_step_cases.hpp"

namespace step_eager_step_wide_test {

using namespace eager_cases;

TEST_CASE_TEMPLATE("eager_step trains the weights train_step trains from the same arguments",
                   Case,
                   wide_global_norm_fp64,
                   wide_adam_fp32) {
  check_trains_alike<Case>();
}

TEST_CASE_TEMPLATE("eager_step's raw gradients are train_step's, batch after batch (double)",
                   Case,
                   wide_global_norm_fp64) {
  check_raw_gradients<Case>();
}

}  // namespace step_eager_step_wide_test
