// The network has one domain discriminator: a sum of two adversarial heads is refused with a
// sentence (a sum of one adversarial head and discrepancies is fine).
// expect: dafuse: head::combine takes at most one head with a domain discriminator
#include <dafuse/head/combine.hpp>
#include <dafuse/head/coral.hpp>
#include "common.hpp"
#ifdef DAFUSE_COMPILE_FAIL
using head = df::head::combine<df::head::dann<>, df::head::dann<df::schedule::constant>>;
#else
using head = df::head::combine<df::head::dann<>, df::head::coral<df::schedule::constant>>;
#endif
using step = df::train_step<good_net,
                            df::loader::sync,
                            df::precision::fp32,
                            df::clip::none,
                            head,
                            df::optim::sgd>;
static_assert(sizeof(step) > 0);
