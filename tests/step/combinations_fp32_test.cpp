// clip × head × optimizer in precision::fp32 (see combinations.hpp).
#define DAFUSE_TEST_PRECISION df::precision::fp32
#include "combinations.hpp"
