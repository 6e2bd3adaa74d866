// Slow suite: clip × head × optimizer in fp16_dynamic (see combinations.hpp).
#include "combinations.hpp"

TEST_CASE_TEMPLATE_APPLY(trains, combinations::every_combination<combinations::fp16_dynamic>);
