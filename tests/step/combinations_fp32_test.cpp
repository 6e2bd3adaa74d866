// Slow suite: clip × head × optimizer in df::precision::fp32 (see combinations.hpp).
#include "combinations.hpp"

TEST_CASE_TEMPLATE_APPLY(trains, combinations::every_combination<df::precision::fp32>);
