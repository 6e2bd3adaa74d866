// The all-pairs subset's fp16 rows, dynamic and fixed loss scale (see combinations.hpp).
#include "combinations.hpp"

TEST_CASE_TEMPLATE_APPLY(trains, combinations::pairwise_fp16);
