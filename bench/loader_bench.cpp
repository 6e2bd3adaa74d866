// Time per training iteration (fill + step) of the demo (MNIST → USPS, DANN, fp32, B = 64 + 64)
// with each loader, and how long each fill waited for data: loader::sync and loader::resident
// wait for the whole fill; loader::prefetch only while its workers have no batch ready. Median
// and interquartile range over many iterations after warm-up. Run: build/bench/loader_bench
// [--steps N] [--data DIR] (DIR holds the JDA MNIST/USPS .npy files, data/jda_mnist_usps).
#include <dafuse/dafuse.hpp>

#include "timing.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <string>
#include <vector>

namespace df = dafuse;

using net = df::nn::dann_net<df::nn::mlp<256, 256, 128, df::nn::relu>,
                             df::nn::linear<128, 10>,
                             df::nn::mlp<128, 128, 1, df::nn::relu>>;
template <class Loader>
using step_t = df::train_step<net,
                              Loader,
                              df::precision::fp32,
                              df::clip::none,
                              df::head::dann<df::schedule::ganin>,
                              df::optim::sgd>;

template <class Loader>
void measure(const char* name,
             const df::data::dataset& source,
             const df::data::dataset& target,
             long steps) {
  using step_type = step_t<Loader>;
  const df::fit_args args{.steps = steps + 20,
                          .batch = 64,
                          .lr = 0.03f,
                          .momentum = 0.9f,
                          .lambda_max = 1.0f,
                          .seed = 1,
                          .init = df::nn::weight_init::torch_default};
  step_type step(args);
  df::data::batcher<Loader, typename step_type::system_type> batches(
      source, target, args.batch, args.seed, step_type::draws_target_rows);
  for (int w = 0; w < 20; ++w) {
    batches.fill(step.input(), step.source_labels());
    step.run();
  }
  std::vector<double> iteration(static_cast<std::size_t>(steps)),
      fill(static_cast<std::size_t>(steps)), wait(static_cast<std::size_t>(steps));
  for (long t = 0; t < steps; ++t) {
    const auto t0 = std::chrono::steady_clock::now();
    batches.fill(step.input(), step.source_labels());
    const auto t1 = std::chrono::steady_clock::now();
    step.run();
    const auto t2 = std::chrono::steady_clock::now();
    iteration[std::size_t(t)] = std::chrono::duration<double, std::micro>(t2 - t0).count();
    fill[std::size_t(t)] = std::chrono::duration<double, std::micro>(t1 - t0).count();
    wait[std::size_t(t)] = 1e6 * batches.last_wait_seconds();
  }
  const bench::timing it = bench::quartiles(iteration), f = bench::quartiles(fill),
                      w = bench::quartiles(wait);
  double wait_sum = 0;
  for (double x : wait) wait_sum += x;
  std::printf("| %-18s | %7.1f [%7.1f, %7.1f] | %6.1f | %6.1f [%6.1f, %6.1f] | %7.2f |\n", name,
              it.median, it.q1, it.q3, f.median, w.median, w.q1, w.q3, wait_sum / double(steps));
}

int main(int argc, char** argv) try {
  long steps = 1000;
  std::filesystem::path dir = std::string(DAFUSE_SOURCE_DIR) + "/data/jda_mnist_usps";
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--steps") == 0) steps = std::max(10L, std::atol(argv[i + 1]));
    if (std::strcmp(argv[i], "--data") == 0) dir = argv[i + 1];
  }
  df::data::dataset mnist = df::data::load_dataset(
      dir / "mnist_images.npy", dir / "mnist_labels.npy", df::data::domain::source);
  df::data::dataset usps = df::data::load_dataset(dir / "usps_images.npy", dir / "usps_labels.npy",
                                                  df::data::domain::target);
  df::data::l2_normalize_rows(mnist);
  df::data::l2_normalize_rows(usps);
  std::printf(
      "MNIST->USPS DANN fp32, network 256-256-128 / 128-10 / 128-128-1, B = 64 + 64, "
      "%ld iterations; times in us\n\n",
      steps);
  std::printf(
      "| loader             | fill+step median [IQR]    | fill   | wait median [IQR]      "
      "| wait mean |\n");
  std::printf(
      "| ---                | ---                       | ---    | ---                    "
      "| ---       |\n");
  measure<df::loader::sync>("sync", mnist, usps, steps);
  measure<df::loader::resident>("resident", mnist, usps, steps);
  measure<df::loader::prefetch<1, 4>>("prefetch<1, 4>", mnist, usps, steps);
  measure<df::loader::prefetch<2, 4>>("prefetch<2, 4>", mnist, usps, steps);
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "%s\n", e.what());
  return 1;
}
