// The all-pairs subset's fp16 rows, dynamic and fixed loss scale (see combinations.hpp).
#include "combinations.hpp"

namespace step_combinations_pairs_fp16_test {

TEST_CASE_TEMPLATE_APPLY(trains, combinations::pairwise_fp16);

}  // namespace step_combinations_pairs_fp16_test
