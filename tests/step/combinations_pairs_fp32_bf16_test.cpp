// The all-pairs subset's fp32 and bf16 rows (see combinations.hpp).
#include "combinations.hpp"

TEST_CASE_TEMPLATE_APPLY(trains, combinations::pairwise_fp32_bf16);
