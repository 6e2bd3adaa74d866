// Slow suite: clip × head × optimizer in df::precision::bf16 (see combinations.hpp).
#include "combinations.hpp"

TEST_CASE_TEMPLATE_APPLY(trains, combinations::every_combination<df::precision::bf16>);
