// loader::sync copies batches from host memory: a step on a device system takes loader::resident,
// and a sync batcher for it is refused with a sentence.
// expect: dafuse: loader::sync copies each batch from host memory into the step's input
// errors: 1
#include <dafuse/backend/omp_device/executor.hpp>
#include <dafuse/data/batcher.hpp>
#include "common.hpp"
#ifdef DAFUSE_COMPILE_FAIL
using loader = df::loader::sync;
#else
using loader = df::loader::resident;
#endif
using batcher = df::data::batcher<loader, df::system::omp_device>;
static_assert(sizeof(batcher) > 0);
