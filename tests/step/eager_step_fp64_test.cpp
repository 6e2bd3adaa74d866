// SPDX-License-Identifier: Apache-2.0
// eager_step against train_step on the small dense networks in fp64 (to 1e-12 relative): every
// clip policy and optimizer, both heads (eager_step_cases.hpp).
#include "eager_step_cases.hpp"

namespace step_eager_step_fp64_test {

using namespace eager_cases;

TEST_CASE_TEMPLATE("eager_step trains the weights train_step trains from the same arguments",
                   Case,
                   sgd_momentum_fp64,
                   nesterov_global_norm_fp64,
                   adam_per_module_norm_fp64,
                   plain_sgd_value_fp64,
                   source_only_global_norm_fp64) {
  check_trains_alike<Case>();
}

TEST_CASE_TEMPLATE("eager_step's raw gradients are train_step's, batch after batch (double)",
                   Case,
                   sgd_momentum_fp64,
                   source_only_global_norm_fp64) {
  check_raw_gradients<Case>();
}

TEST_CASE_TEMPLATE("a non-finite batch skips the update in both steps alike",
                   Case,
                   adam_per_module_norm_fp64) {
  check_skips_non_finite<Case>();
}

}  // namespace step_eager_step_fp64_test
