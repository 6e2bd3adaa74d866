// The all-pairs subset's fp32 and bf16 rows (see combinations.hpp).
#include "combinations.hpp"

namespace step_combinations_pairs_fp32_bf16_test {

TEST_CASE_TEMPLATE_APPLY(trains, combinations::pairwise_fp32_bf16);

}  // namespace step_combinations_pairs_fp32_bf16_test
