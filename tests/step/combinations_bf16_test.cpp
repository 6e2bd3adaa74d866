// clip × head × optimizer in precision::bf16 (see combinations.hpp).
#define DAFUSE_TEST_PRECISION df::precision::bf16
#include "combinations.hpp"
