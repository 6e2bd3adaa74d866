// clip × head × optimizer in precision::fp16<df::loss_scale::fixed<1024>> (see combinations.hpp).
#define DAFUSE_TEST_PRECISION df::precision::fp16<df::loss_scale::fixed<1024>>
#include "combinations.hpp"
