// A valid network and step the compile-fail cases start from.
#pragma once
#include <dafuse/dafuse.hpp>

namespace df = dafuse;
using good_net = df::nn::dann_net<df::nn::mlp<4, 8, df::nn::relu>,
                                  df::nn::linear<8, 2>,
                                  df::nn::mlp<8, 4, 1, df::nn::relu>>;
