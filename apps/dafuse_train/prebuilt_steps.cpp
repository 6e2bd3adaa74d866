// SPDX-License-Identifier: Apache-2.0
// The code every network's program shares, compiled once into dafuse-train's prebuilt part
// (meson.build, dafuse-train-cli.o): a run of a few reference step types, one for each loader and
// precision a network of the command line can have. What they instantiate that no width decides
// (fit's evaluation, validators, checkpoints, the product kernels, the update, the reports) is
// then defined here; jit.cpp links this object before a network's unit and compiles that unit
// with -flto, so the linker keeps these copies and GCC compiles only the network's own code
// (docs/benchmarks.md, "Compile time").
#include "registry.hpp"
#include "run.hpp"

namespace dafuse_train {

template <class Features, class Loader, class Precision, class Clip>
using reference_step =
    df::train_step<df::nn::dann_net<Features, df::nn::linear<15, 2>, df::nn::linear<15, 1>>,
                   Loader,
                   Precision,
                   Clip,
                   df::head::dann<df::schedule::ganin>,
                   df::optim::sgd>;
using dense = df::nn::mlp<2, 15, df::nn::relu>;
using sparse = df::nn::sparse_input<df::nn::mlp<2, 15, df::nn::relu>>;

template int
run_model<reference_step<dense, df::loader::resident, df::precision::fp32, df::clip::none>>(
    const config&, const model_entry&);
template int
run_model<reference_step<dense, df::loader::resident, df::precision::fp32, df::clip::global_norm>>(
    const config&, const model_entry&);
template int
run_model<reference_step<dense, df::loader::resident, df::precision::bf16, df::clip::none>>(
    const config&, const model_entry&);
template int
run_model<reference_step<sparse, df::loader::sync, df::precision::fp32, df::clip::none>>(
    const config&, const model_entry&);

}  // namespace dafuse_train
