// clip × head × optimizer in precision::fp16<df::loss_scale::dynamic> (see combinations.hpp).
#define DAFUSE_TEST_PRECISION df::precision::fp16<df::loss_scale::dynamic>
#include "combinations.hpp"
