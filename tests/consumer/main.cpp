// A program outside dafuse's tree: trains a tiny DANN through the umbrella header. Built by
// check.sh as a Meson subproject user and as a Make user through pkg-config.
#include <dafuse/dafuse.hpp>

#include <cstdio>
#include <vector>

namespace df = dafuse;

using net = df::nn::dann_net<df::nn::mlp<2, 8, df::nn::tanh>,
                             df::nn::linear<8, 2>,
                             df::nn::mlp<8, 4, 1, df::nn::relu>>;
using step = df::train_step<net,
                            df::loader::sync,
                            df::precision::fp32,
                            df::clip::global_norm,
                            df::head::dann<df::schedule::ganin>,
                            df::optim::sgd>;

int main() {
  df::data::host_array<float> xs{{40, 2}, std::vector<float>(80)};
  std::vector<std::int32_t> ys(40);
  df::counter_rng rng(3, df::rng_stream::user);
  for (std::size_t i = 0; i < 40; ++i) {
    ys[i] = std::int32_t(i % 2);
    xs.values[2 * i] = rng.normal<float>() * 0.3f + (ys[i] ? 1.f : -1.f);
    xs.values[2 * i + 1] = rng.normal<float>() * 0.3f;
  }
  df::data::host_array<float> xt = xs;
  for (float& v : xt.values) v += 0.2f;
  const auto source = df::data::make_dataset("consumer source", df::data::domain::source, xs, ys);
  const auto target = df::data::make_dataset("consumer target", df::data::domain::target, xt, ys);
  const df::fit_result r =
      df::fit<step>(source, target, df::fit_args{.steps = 200, .batch = 8, .lr = 0.1f});
  std::printf("consumer: target accuracy %.2f\n", r.target_accuracy);
  return r.target_accuracy > 0.8 ? 0 : 1;
}
