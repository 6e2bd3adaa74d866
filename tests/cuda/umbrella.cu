// Compiled by nvcc only: the umbrella header and one step type must compile and link in a CUDA
// translation unit. Running it needs no GPU (the host backend runs on the host); a GPU test
// suite arrives with the CUDA backend.
#include <dafuse/dafuse.hpp>

#include <cstdio>

namespace df = dafuse;

using net = df::nn::dann_net<df::nn::mlp<4, 8, df::nn::relu>,
                             df::nn::linear<8, 2>,
                             df::nn::mlp<8, 4, 1, df::nn::relu>>;
using step = df::train_step<net,
                            df::loader::resident,
                            df::precision::fp32,
                            df::clip::global_norm,
                            df::head::dann<df::schedule::ganin>,
                            df::optim::sgd>;

int main() {
  step s(df::fit_args{.steps = 10, .batch = 2});
  s.input().data[0] = 1.0f;
  const df::step_report r = s.run();
  std::printf("nvcc-built dafuse step ran: label loss %.4f\n", r.label_loss);
  return 0;
}
