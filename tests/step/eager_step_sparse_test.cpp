// SPDX-License-Identifier: Apache-2.0
// eager_step against train_step with a sparse first layer (CSR batches), fp64 and fp32
// (eager_step_cases.hpp).
#include "eager_step_cases.hpp"

namespace step_eager_step_sparse_test {

using namespace eager_cases;

TEST_CASE_TEMPLATE("eager_step trains the weights train_step trains from the same arguments",
                   Case,
                   sparse_global_norm_fp64,
                   sparse_adam_fp32,
                   sparse_source_only_per_module_norm_fp64) {
  check_trains_alike<Case>();
}

TEST_CASE_TEMPLATE("eager_step's raw gradients are train_step's, batch after batch (double)",
                   Case,
                   sparse_global_norm_fp64,
                   sparse_source_only_per_module_norm_fp64) {
  check_raw_gradients<Case>();
}

TEST_CASE_TEMPLATE("a non-finite batch skips the update in both steps alike",
                   Case,
                   sparse_adam_fp32) {
  check_skips_non_finite<Case>();
}

}  // namespace step_eager_step_sparse_test
