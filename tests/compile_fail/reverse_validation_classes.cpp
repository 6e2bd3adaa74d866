// reverse_validation's reverse step must predict the model's classes from the model's inputs.
// expect: dafuse: reverse_validation: the reverse step must read the model's inputs
#include <dafuse/head/source_only.hpp>
#include <dafuse/train/reverse_validation.hpp>
#include "common.hpp"
using model_step = df::train_step<good_net,
                                  df::loader::sync,
                                  df::precision::fp32,
                                  df::clip::none,
                                  df::head::dann<df::schedule::ganin>,
                                  df::optim::sgd>;
#ifdef DAFUSE_COMPILE_FAIL
// Three classes against the model's two.
using reverse_net = df::nn::dann_net<df::nn::mlp<4, 8, df::nn::relu>,
                                     df::nn::linear<8, 3>,
                                     df::nn::mlp<8, 4, 1, df::nn::relu>>;
#else
using reverse_net = good_net;
#endif
using reverse_step = df::train_step<reverse_net,
                                    df::loader::sync,
                                    df::precision::fp32,
                                    df::clip::none,
                                    df::head::source_only<df::schedule::ganin>,
                                    df::optim::sgd>;
// Taking its address instantiates the function, and so its check; the pointer's type picks
// the overload that trains with fit(…) (the other takes fit_options).
inline double (*const reverse_validation_of)(model_step&,
                                             const df::data::dataset&,
                                             const df::data::dataset&,
                                             const df::fit_args&) =
    &df::reverse_validation<reverse_step, model_step, df::data::dataset>;
