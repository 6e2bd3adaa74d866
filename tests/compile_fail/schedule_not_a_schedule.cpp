// head::dann given an optimizer instead of a schedule.
// expect: dafuse: head::dann<S> takes a schedule such as schedule::ganin
#include "common.hpp"
#ifdef DAFUSE_COMPILE_FAIL
using head = df::head::dann<df::optim::sgd>;
#else
using head = df::head::dann<df::schedule::ganin>;
#endif
static_assert(head::draws_target_rows);
