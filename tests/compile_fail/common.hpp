// A valid network and step the compile-fail cases start from. It includes the step and its heads
// rather than dafuse.hpp, so that each case parses a little over half as much; a case that needs
// another part includes it.
#pragma once
#include <dafuse/head/cdan.hpp>
#include <dafuse/head/dann.hpp>
#include <dafuse/step/train_step.hpp>

namespace df = dafuse;
using good_net = df::nn::dann_net<df::nn::mlp<4, 8, df::nn::relu>,
                                  df::nn::linear<8, 2>,
                                  df::nn::mlp<8, 4, 1, df::nn::relu>>;
