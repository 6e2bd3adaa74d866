// Time per training step of the demo's network (MNIST → USPS shapes), fused step on the host
// backend, in each precision: median and interquartile range over many steps after warm-up, the
// step's FLOP count from the layer shapes, and the rate it reaches, also as a share of the core's
// FMA peak on the same threads (fma_peak.hpp). Run: build/bench/step_bench [--steps N]. The full
// benchmark suite (eager vs fused, PyTorch side by side) is issue 6.
#include <dafuse/dafuse.hpp>

#include "fma_peak.hpp"
#include "timing.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace df = dafuse;

using net = df::nn::dann_net<df::nn::mlp<256, 256, 128, df::nn::relu>,
                             df::nn::linear<128, 10>,
                             df::nn::mlp<128, 128, 1, df::nn::relu>>;
template <class Head, class Precision = df::precision::fp32>
using step_t = df::
    train_step<net, df::loader::resident, Precision, df::clip::global_norm, Head, df::optim::sgd>;
using fp16 = df::precision::fp16<df::loss_scale::dynamic>;

// 2·in·out per sample per product; forward, weight gradient, and input gradient (not for the
// first layer, whose input is data) each cost one product.
template <class Stack>
double stack_flops(double rows) {
  double f = 0;
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    ((f +=
      2.0 * Stack::template layer<I>::in * Stack::template layer<I>::out * rows * (I == 0 ? 2 : 3)),
     ...);
  }
  (std::make_index_sequence<Stack::depth>{});
  return f;
}

template <class Step>
void measure(const char* name, long steps, double flops, double peak) {
  const df::index_t b = 64;
  Step s(df::fit_args{.steps = steps, .batch = b, .lr = 0.01f, .momentum = 0.9f});
  df::counter_rng rng(1, df::rng_stream::user);
  auto x = s.input();
  for (df::index_t i = 0; i < x.size(); ++i) x.data[i] = rng.uniform<float>();
  for (auto& y : s.source_labels()) y = std::int32_t(rng.below(10));
  const bench::timing t = bench::time_calls(20, steps, [&] { s.run(); });
  std::printf(
      "%-12s median %8.1f us  IQR [%.1f, %.1f]  %6.1f MFLOP/step  %6.1f GFLOP/s  %5.1f%% of the "
      "fp32 FMA peak\n",
      name, t.median, t.q1, t.q3, flops / 1e6, flops / t.median / 1e3,
      100 * flops / t.median / 1e3 / peak);
}

int main(int argc, char** argv) {
  long steps = 500;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "--steps") == 0) steps = std::max(10L, std::atol(argv[i + 1]));
  const double rows = 128, source_rows = 64;
  const double dann_flops = stack_flops<net::feature_stack>(rows) +
                            stack_flops<net::classifier_stack>(source_rows) +
                            stack_flops<net::discriminator_stack>(rows) +
                            2.0 * 128 * 10 * source_rows /* classifier's input gradient */ +
                            2.0 * 128 * 128 * rows /* discriminator's input gradient */;
  const double source_only_flops = stack_flops<net::feature_stack>(source_rows) +
                                   stack_flops<net::classifier_stack>(source_rows) +
                                   2.0 * 128 * 10 * source_rows;
  std::printf("MNIST->USPS network 256-256-128 / 128-10 / 128-128-1, B = 64 + 64\n");
  std::printf("bf16 products on %s\n", df::backend::host::bf16_products_native
                                           ? "AVX512-BF16 (gemm_bf16)"
                                           : "the fp32 kernel (no AVX512-BF16 at compile time)");
#if defined(_OPENMP)
  const int threads = omp_get_max_threads();
#else
  const int threads = 1;
#endif
  const double peak = bench::fma_peak_gflops(threads);
  std::printf("cpu: %s; FMA peak loop: %s\n", bench::cpu_model().c_str(), bench::fma_isa);
  std::printf("fp32 FMA peak, %d thread(s): %.1f GFLOP/s (%s)\n", threads, peak, bench::fma_isa);
  using dann = df::head::dann<df::schedule::ganin>;
  using source_only = df::head::source_only<df::schedule::ganin>;
  measure<step_t<dann>>("dann fp32", steps, dann_flops, peak);
  measure<step_t<dann, df::precision::bf16>>("dann bf16", steps, dann_flops, peak);
  measure<step_t<dann, fp16>>("dann fp16", steps, dann_flops, peak);
  measure<step_t<source_only>>("s-only fp32", steps, source_only_flops, peak);
  measure<step_t<source_only, df::precision::bf16>>("s-only bf16", steps, source_only_flops, peak);
}
