// The whole step's gradients against central finite differences of its losses, in double
// (gradient_checks.hpp says what each module's gradient must be), for dense networks.
#include <dafuse/head/dann.hpp>
#include <dafuse/head/source_only.hpp>
#include <dafuse/step/train_step.hpp>

#include "../check.hpp"
#include "gradient_checks.hpp"

#include <vector>

namespace step_gradient_check_test {

namespace df = dafuse;

namespace {

// Smooth activations everywhere so finite differences are exact to O(h²); one ReLU network too.
using smooth_net = df::nn::dann_net<df::nn::mlp<5, 7, 4, df::nn::tanh>,
                                    df::nn::linear<4, 3>,
                                    df::nn::mlp<4, 6, 1, df::nn::sigmoid>>;
using leaky_net = df::nn::dann_net<df::nn::mlp<5, 6, 4, df::nn::leaky_relu_t{0.2f}>,
                                   df::nn::mlp<4, 5, 3, df::nn::tanh>,
                                   df::nn::mlp<4, 3, 1, df::nn::leaky_relu_t{0.2f}>>;

template <class Net, class Head>
using fp64_step = df::
    train_step<Net, df::loader::sync, df::precision::fp64, df::clip::none, Head, df::optim::sgd>;

template <class Net, class Head>
void check_step_gradients(double lambda) {
  fp64_step<Net, Head> step(df::fit_args{.batch = 5, .seed = 3});
  df::test::fill_batch(step, [](df::counter_rng& rng) { return rng.normal<double>(); });
  df::test::check_step_gradients(step, lambda);
}

}  // namespace

TEST_CASE("DANN step gradients equal finite differences through the reversal (tanh, sigmoid)") {
  check_step_gradients<smooth_net, df::head::dann<df::schedule::ganin>>(0.7);
}

TEST_CASE("DANN step gradients equal finite differences with leaky ReLU and an mlp classifier") {
  check_step_gradients<leaky_net, df::head::dann<df::schedule::constant>>(0.35);
}

TEST_CASE("with lambda = 0 the feature gradient ignores the discriminator") {
  check_step_gradients<smooth_net, df::head::dann<df::schedule::ganin>>(0.0);
}

TEST_CASE("source-only step gradients equal finite differences of the label loss") {
  check_step_gradients<smooth_net, df::head::source_only<>>(0.0);
}

}  // namespace step_gradient_check_test
