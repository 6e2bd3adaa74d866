// A loader type with no batcher behind it.
// expect: dafuse: no batcher for this loader policy
#include "common.hpp"

#include <dafuse/data/batcher.hpp>
struct my_loader {
  using loader_tag = void;
  static constexpr bool data_in_step_memory = false;
};
#ifdef DAFUSE_COMPILE_FAIL
using batches = df::data::batcher<my_loader, df::system::omp>;
#else
using batches = df::data::batcher<df::loader::sync, df::system::omp>;
#endif
static_assert(sizeof(batches) > 0);
