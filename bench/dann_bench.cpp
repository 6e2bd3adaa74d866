// The benchmark suite's C++ side: six DANN configurations (batch = B source + B target rows),
// each timed in several executions of the same maths, side by side in one process:
//
// moons, digits-mlp, office-head, amazon, demo and lenet (bench/configs.hpp; amazon on the real
// Amazon reviews, dvd → books, or synthetic rows of the same density without them).
//
// Executions: the eager step (eager_step: one primitive per operation, every intermediate
// materialised), the fused step (train_step) in fp32, bf16 and fp16 with and without global-norm
// clipping, and the fused step fed by each loader (sync, prefetch, resident: fill + step). For
// each: median and interquartile range of the time per step over many steps after warm-up,
// steps/s, GFLOP/s and its share of the machine's GEMM ceiling and of the core's FMA peak (both
// measured here, first: fma_peak.hpp), and the bytes of the step's own buffers. Then the table the
// seed asked for: speed-up and memory of each execution over eager.
//
// Run: build/bench/dann_bench [--configs a,b] [--steps N | --seconds S] [--json FILE] [--data DIR]
// (--machine alone prints the CPU model and the FMA peak loop's ISA, and stops; scripts/bench
// starts with it.)
// (scripts/bench runs it, with --vs-pytorch also bench/pytorch, and prints the ratios). --seconds
// times each execution for S seconds (at least 20 steps, at most 5000) instead of a count of steps
// set by its FLOPs; it wins over --steps.
#include <dafuse/dafuse.hpp>
#include <dafuse/step/eager_step.hpp>

#include "configs.hpp"
#include "fma_peak.hpp"
#include "timing.hpp"

#include <Eigen/Core>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace df = dafuse;

namespace {

using namespace bench;
std::filesystem::path data_dir = DAFUSE_SHARED_DATA_DIR;

// ---- Configurations -------------------------------------------------------------------------

using dann = df::head::dann<df::schedule::ganin>;
template <class Cfg,
          class Precision = df::precision::fp32,
          class Clip = df::clip::none,
          class Loader = df::loader::resident>
using fused = df::train_step<typename Cfg::net, Loader, Precision, Clip, dann, df::optim::sgd>;
template <class Cfg, class Clip = df::clip::none>
using eager = df::eager_step<typename Cfg::net,
                             df::loader::resident,
                             df::precision::fp32,
                             Clip,
                             dann,
                             df::optim::sgd>;
using fp16 = df::precision::fp16<df::loss_scale::dynamic>;

// ---- FLOPs ----------------------------------------------------------------------------------

// 2·in·out per sample for each product a layer runs: forward, weight gradient, and input
// gradient (every layer but the first of G_f, whose input is data). A sparse first layer does
// 2·nnz·out for its forward and its weight gradient.
// Multiply-adds of one product of layer L per sample: in·out for a dense layer, C_out·K·K·C_in per
// output pixel for a convolution (nn/conv2d.hpp), none for max-pooling.
template <class L>
constexpr double layer_macs() {
  if constexpr (df::nn::kind_of<L>() == df::nn::layer_kind::conv2d)
    return double(L::weight_count) * double(L::pixels);
  else if constexpr (df::nn::kind_of<L>() == df::nn::layer_kind::max_pool2d)
    return 0.0;
  else
    return double(L::in) * double(L::out);
}
template <class Stack>
double stack_flops(double rows, bool input_gradient_of_first, double first_layer_density = 1) {
  double f = 0;
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    ((f += 2.0 * layer_macs<typename Stack::template layer<I>>() * rows *
           (I == 0 ? first_layer_density * 2 + (input_gradient_of_first ? 1 : 0) : 3)),
     ...);
  }
  (std::make_index_sequence<Stack::depth>{});
  return f;
}
template <class Net>
double step_flops(double batch, double density = 1) {
  return stack_flops<typename Net::feature_stack>(2 * batch, false, density) +
         stack_flops<typename Net::classifier_stack>(batch, true) +
         stack_flops<typename Net::discriminator_stack>(2 * batch, true);
}

// ---- Data -----------------------------------------------------------------------------------

// ---- Timing ---------------------------------------------------------------------------------

struct result {
  std::string config, execution;
  double median_us = 0, q1_us = 0, q3_us = 0;
  double flops = 0;
  //! The 2-thread ceiling measured next to this configuration's executions (0: not measured).
  double nearby_ceiling = 0;
  std::size_t memory_bytes = 0;
  long steps = 0;
};

// --seconds S: each execution is timed for S seconds (after S/10 of warm-up) instead of for a
// count of steps; 0 (the default) keeps the counts below.
double seconds_per_execution = 0;

long steps_for(double flops, long requested) {
  if (requested > 0) return requested;
  // About 1.5 s of measurement per execution at ~100 GFLOP/s, between 200 and 5000 steps.
  return std::clamp(long(1.5e11 / std::max(flops, 1.0)), 200L, 5000L);
}

template <class F>
result time_steps(
    const char* config, const std::string& execution, double flops, long steps, F&& one_step) {
  const bench::timing t = seconds_per_execution > 0
                              ? bench::time_calls_for(seconds_per_execution / 10,
                                                      seconds_per_execution, 20, 5000, one_step)
                              : bench::time_calls(std::max(20L, steps / 10), steps, one_step);
  result r;
  r.median_us = t.median;
  r.q1_us = t.q1;
  r.q3_us = t.q3;
  r.config = config;
  r.execution = execution;
  r.flops = flops;
  r.steps = t.calls;
  return r;
}

//! A step's batch filled once with the data set's first rows (the step alone is timed).
template <class Step, class Data>
void fill_once(Step& s, const Data& source, const Data& target) {
  if constexpr (Step::sparse_input) {
    df::data::sparse_batcher b(source, target, s.args().batch, 1, true);
    b.fill(s.sparse_batch(), s.source_labels());
  } else {
    df::data::batcher<df::loader::sync, df::system::omp> b(source, target, s.args().batch, 1, true);
    b.fill(s.input(), s.source_labels());
  }
}

df::fit_args bench_args(df::index_t batch) {
  // eval_chunk = B: the inference scratch (unused here) then costs what one batch does, so the
  // memory column compares the training buffers of the executions.
  return {.steps = 1000000,
          .batch = batch,
          .lr = 0.01f,
          .momentum = 0.9f,
          .max_grad_norm = 1.0f,
          .seed = 1,
          .eval_chunk = batch};
}
//! The same for a configuration's data: a sparse batch holds room for the densest batch the data
//! can draw (fit_args::sparse_nonzeros), as fit sizes the steps it builds.
df::fit_args bench_args(df::index_t batch, const df::data::dataset&, const df::data::dataset&) {
  return bench_args(batch);
}
df::fit_args bench_args(df::index_t batch,
                        const df::data::sparse_dataset& source,
                        const df::data::sparse_dataset& target) {
  df::fit_args a = bench_args(batch);
  a.sparse_nonzeros = df::data::densest_batch_nonzeros(source, target, batch);
  return a;
}

template <class Step, class Cfg, class Data>
result step_only(const std::string& execution,
                 const Data& source,
                 const Data& target,
                 double flops,
                 long steps) {
  Step s(bench_args(Cfg::batch, source, target));
  fill_once(s, source, target);
  result r = time_steps(Cfg::name, execution, flops, steps_for(flops, steps), [&] { s.run(); });
  r.memory_bytes = s.memory_bytes();
  return r;
}

template <class Step, class Cfg>
result with_loader(const std::string& execution,
                   const df::data::dataset& source,
                   const df::data::dataset& target,
                   double flops,
                   long steps) {
  Step s(bench_args(Cfg::batch));
  df::data::batcher<typename Step::loader_type, df::system::omp> b(source, target, Cfg::batch, 1,
                                                                   true);
  result r = time_steps(Cfg::name, execution, flops, steps_for(flops, steps), [&] {
    b.fill(s.input(), s.source_labels());
    s.run();
  });
  r.memory_bytes = s.memory_bytes();
  return r;
}

double dafuse_gemm_gflops(long n, int threads);

template <class Cfg>
void dense_config(std::vector<result>& out, long steps, int threads) {
  // The host's speed drifts by a quarter within a run (docs/benchmarks.md), so the ceiling is
  // measured again right before and right after this configuration's executions, and the better
  // of the two is what its steps are also compared with.
  const std::size_t first = out.size();
  const double before = dafuse_gemm_gflops(2048, threads);
  using net = typename Cfg::net;
  const df::index_t classes = net::class_count;
  const auto source = random_rows(4096, net::input_width, classes, df::data::domain::source);
  const auto target = random_rows(4096, net::input_width, classes, df::data::domain::target);
  const double flops = step_flops<net>(double(Cfg::batch));
  using clip = df::clip::global_norm;
  out.push_back(step_only<eager<Cfg>, Cfg>("eager fp32", source, target, flops, steps));
  out.push_back(
      step_only<eager<Cfg, clip>, Cfg>("eager fp32 + clip", source, target, flops, steps));
  out.push_back(step_only<fused<Cfg>, Cfg>("fused fp32", source, target, flops, steps));
  out.push_back(step_only<fused<Cfg, df::precision::fp32, clip>, Cfg>("fused fp32 + clip", source,
                                                                      target, flops, steps));
  out.push_back(
      step_only<fused<Cfg, df::precision::bf16>, Cfg>("fused bf16", source, target, flops, steps));
  out.push_back(step_only<fused<Cfg, df::precision::bf16, clip>, Cfg>("fused bf16 + clip", source,
                                                                      target, flops, steps));
  out.push_back(
      step_only<fused<Cfg, fp16, clip>, Cfg>("fused fp16 + clip", source, target, flops, steps));
  using none = df::clip::none;
  out.push_back(with_loader<fused<Cfg, df::precision::fp32, none, df::loader::sync>, Cfg>(
      "fused fp32, sync loader", source, target, flops, steps));
  out.push_back(with_loader<fused<Cfg, df::precision::fp32, none, df::loader::prefetch<>>, Cfg>(
      "fused fp32, prefetch loader", source, target, flops, steps));
  out.push_back(with_loader<fused<Cfg, df::precision::fp32, none, df::loader::resident>, Cfg>(
      "fused fp32, resident loader", source, target, flops, steps));
  const double after = dafuse_gemm_gflops(2048, threads);
  const double nearby = std::max(before, after);
  std::printf(
      "%s: 2-thread ceiling (dafuse's gemm, 2048^3) %.1f GFLOP/s before its executions, "
      "%.1f after\n",
      Cfg::name, before, after);
  for (std::size_t i = first; i < out.size(); ++i) out[i].nearby_ceiling = nearby;
}

// A convolutional configuration: fp32 and bf16 (conv_net refuses fp16 steps).
template <class Cfg>
void conv_config(std::vector<result>& out, long steps, int threads) {
  const std::size_t first = out.size();
  const double before = dafuse_gemm_gflops(2048, threads);
  using net = typename Cfg::net;
  const auto source =
      random_rows(4096, net::input_width, net::class_count, df::data::domain::source);
  const auto target =
      random_rows(4096, net::input_width, net::class_count, df::data::domain::target);
  const double flops = step_flops<net>(double(Cfg::batch));
  using clip = df::clip::global_norm;
  out.push_back(step_only<eager<Cfg>, Cfg>("eager fp32", source, target, flops, steps));
  out.push_back(step_only<fused<Cfg>, Cfg>("fused fp32", source, target, flops, steps));
  out.push_back(step_only<fused<Cfg, df::precision::fp32, clip>, Cfg>("fused fp32 + clip", source,
                                                                      target, flops, steps));
  out.push_back(
      with_loader<fused<Cfg, df::precision::fp32, df::clip::none, df::loader::resident>, Cfg>(
          "fused fp32, resident loader", source, target, flops, steps));
  out.push_back(
      step_only<fused<Cfg, df::precision::bf16>, Cfg>("fused bf16", source, target, flops, steps));
  out.push_back(step_only<fused<Cfg, df::precision::bf16, clip>, Cfg>("fused bf16 + clip", source,
                                                                      target, flops, steps));
  const double after = dafuse_gemm_gflops(2048, threads);
  std::printf(
      "%s: 2-thread ceiling (dafuse's gemm, 2048^3) %.1f GFLOP/s before its executions, "
      "%.1f after\n",
      Cfg::name, before, after);
  for (std::size_t i = first; i < out.size(); ++i) out[i].nearby_ceiling = std::max(before, after);
}

void amazon_config(std::vector<result>& out, long steps) {
  using Cfg = amazon;
  const sparse_pair d = amazon_data(data_dir);
  const double density =
      double(d.source.features.nnz()) / (double(d.source.rows()) * double(d.source.width()));
  const double flops = step_flops<amazon::net>(double(Cfg::batch), density);
  std::printf("amazon data: %s, %.2f %% non-zeros\n", d.origin.c_str(), 100 * density);
  using clip = df::clip::global_norm;
  out.push_back(step_only<eager<Cfg>, Cfg>("eager fp32", d.source, d.target, flops, steps));
  out.push_back(
      step_only<eager<Cfg, clip>, Cfg>("eager fp32 + clip", d.source, d.target, flops, steps));
  out.push_back(step_only<fused<Cfg>, Cfg>("fused fp32", d.source, d.target, flops, steps));
  out.push_back(step_only<fused<Cfg, df::precision::fp32, clip>, Cfg>("fused fp32 + clip", d.source,
                                                                      d.target, flops, steps));
  out.push_back(step_only<fused<Cfg, df::precision::bf16>, Cfg>("fused bf16", d.source, d.target,
                                                                flops, steps));
  out.push_back(step_only<fused<Cfg, df::precision::bf16, clip>, Cfg>("fused bf16 + clip", d.source,
                                                                      d.target, flops, steps));
  // Sparse batches are always gathered on the host (data::sparse_batcher): fill + step.
  fused<Cfg> s(bench_args(Cfg::batch, d.source, d.target));
  df::data::sparse_batcher b(d.source, d.target, Cfg::batch, 1, true);
  result r =
      time_steps(Cfg::name, "fused fp32, sparse batcher", flops, steps_for(flops, steps), [&] {
        b.fill(s.sparse_batch(), s.source_labels());
        s.run();
      });
  r.memory_bytes = s.memory_bytes();
  out.push_back(r);
}

// ---- The GEMM ceiling -----------------------------------------------------------------------

//! Best GFLOP/s of five timed fp32 n³ products after one warm-up.
template <class F>
double best_gflops(long n, F&& product) {
  product();
  double best = 0;
  for (int rep = 0; rep < 5; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    product();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, 2.0 * double(n) * double(n) * double(n) / s / 1e9);
  }
  return best;
}

//! The fp32 GEMM ceiling on `threads` threads: a plain n³ product with Eigen (its own OpenMP
//! threading) and with dafuse's gemm (the products the step runs), each the best of five.
struct ceiling {
  double eigen = 0, dafuse = 0;
  double best() const { return std::max(eigen, dafuse); }
};
ceiling gemm_ceiling(long n, int threads) {
  const Eigen::MatrixXf a = Eigen::MatrixXf::Random(n, n), b = Eigen::MatrixXf::Random(n, n);
  Eigen::MatrixXf c(n, n);
  ceiling r;
  Eigen::setNbThreads(threads);
  r.eigen = best_gflops(n, [&] { c.noalias() = a * b; });
  Eigen::setNbThreads(0);
  r.dafuse = dafuse_gemm_gflops(n, threads);
  return r;
}

//! dafuse's gemm on an n³ fp32 product, the best of five (the faster side of the ceiling).
double dafuse_gemm_gflops(long n, int threads) {
  const Eigen::MatrixXf a = Eigen::MatrixXf::Random(n, n), b = Eigen::MatrixXf::Random(n, n);
  Eigen::MatrixXf c(n, n);
  namespace host = dafuse::backend::host;
  host::gemm_workspace<float> ws(n, n, n, threads);
  return best_gflops(n, [&] {
    host::gemm<host::op::none, host::op::none>(ws, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f,
                                               c.data(), n);
  });
}

std::string json_number(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

//! `text` as a JSON string: quotes and backslashes escaped, control characters dropped.
std::string json_string(const std::string& text) {
  std::string out = "\"";
  for (const char ch : text) {
    if (ch == '"' || ch == '\\') out += '\\';
    if (static_cast<unsigned char>(ch) >= 0x20) out += ch;
  }
  return out + "\"";
}

}  // namespace

int main(int argc, char** argv) {
  const std::string machine =
      "cpu: " + bench::cpu_model() + "; FMA peak loop: " + std::string(bench::fma_isa);
  if (argc == 2 && std::strcmp(argv[1], "--machine") == 0) {
    std::printf("%s\n", machine.c_str());
    return 0;
  }
  long steps = 0;
  std::string configs = "moons,digits-mlp,office-head,amazon,demo,lenet", json;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string option = argv[i];
    if (option == "--steps")
      steps = std::max(20L, std::atol(argv[i + 1]));
    else if (option == "--configs")
      configs = argv[i + 1];
    else if (option == "--json")
      json = argv[i + 1];
    else if (option == "--seconds")
      seconds_per_execution = std::max(0.0, std::atof(argv[i + 1]));
    else if (option == "--data")
      data_dir = argv[i + 1];
    else {
      std::fprintf(stderr,
                   "dann_bench: unknown option %s (--configs, --steps, --seconds, --json, "
                   "--data; or --machine alone)\n",
                   option.c_str());
      return 2;
    }
  }
  const auto wanted = [&](const char* name) {
    return ("," + configs + ",").find("," + std::string(name) + ",") != std::string::npos;
  };
#if defined(_OPENMP)
  const int threads = omp_get_max_threads();
#else
  const int threads = 1;
#endif
  // The ceiling is the faster of the two plain products; each step's share is of that.
  const ceiling measured_1 = gemm_ceiling(2048, 1);
  const ceiling measured_n = threads > 1 ? gemm_ceiling(2048, threads) : measured_1;
  const double ceiling_1 = measured_1.best(), ceiling_n = measured_n.best();
  std::printf(
      "fp32 GEMM ceiling (2048^3, the faster of Eigen and dafuse's gemm): %.1f GFLOP/s on "
      "1 thread (Eigen %.1f, dafuse %.1f), %.1f on %d (Eigen %.1f, dafuse %.1f)\n",
      ceiling_1, measured_1.eigen, measured_1.dafuse, ceiling_n, threads, measured_n.eigen,
      measured_n.dafuse);
  // The physical limit: independent FMAs on registers, on 1 thread and on the run's threads.
  const double peak_1 = bench::fma_peak_gflops(1);
  const double peak_n = threads > 1 ? bench::fma_peak_gflops(threads) : peak_1;
  std::printf("%s\nfp32 FMA peak (registers only): %.1f GFLOP/s on 1 thread, %.1f on %d\n",
              machine.c_str(), peak_1, peak_n, threads);

  std::vector<result> results;
  if (wanted("moons")) dense_config<moons>(results, steps, threads);
  if (wanted("digits-mlp")) dense_config<digits_mlp>(results, steps, threads);
  if (wanted("office-head")) dense_config<office_head>(results, steps, threads);
  if (wanted("amazon")) amazon_config(results, steps);
  if (wanted("demo")) dense_config<demo>(results, steps, threads);
  if (wanted("lenet")) conv_config<lenet>(results, steps, threads);

  // "% ceil": of the ceiling measured first; "% near": of the one measured next to the
  // configuration (dense ones only); "% peak": of the FMA peak on the run's threads.
  std::printf("\n%-12s %-28s %10s %21s %9s %8s %7s %7s %7s %9s\n", "config", "execution",
              "median us", "IQR us", "steps/s", "GFLOP/s", "% ceil", "% near", "% peak", "MiB");
  for (const result& r : results) {
    const double gflops = r.flops / r.median_us / 1e3;
    char near[16] = "";
    if (r.nearby_ceiling > 0)
      std::snprintf(near, sizeof near, "%6.1f%%", 100 * gflops / r.nearby_ceiling);
    std::printf("%-12s %-28s %10.1f [%8.1f, %8.1f] %9.0f %8.1f %6.1f%% %7s %6.1f%% %9.2f\n",
                r.config.c_str(), r.execution.c_str(), r.median_us, r.q1_us, r.q3_us,
                1e6 / r.median_us, gflops, 100 * gflops / ceiling_n, near, 100 * gflops / peak_n,
                double(r.memory_bytes) / (1 << 20));
  }

  // The seed's table: each execution against the eager one of its configuration.
  std::printf("\n%-12s %-28s %12s %14s\n", "config", "execution", "speed-up", "memory");
  for (const result& r : results) {
    const auto e = std::find_if(results.begin(), results.end(), [&](const result& x) {
      return x.config == r.config && x.execution == "eager fp32";
    });
    if (e == results.end() || &*e == &r) continue;
    std::printf("%-12s %-28s %11.2fx %13.2fx\n", r.config.c_str(), r.execution.c_str(),
                e->median_us / r.median_us, double(r.memory_bytes) / double(e->memory_bytes));
  }

  if (!json.empty()) {
    std::string j =
        "{\n  \"threads\": " + std::to_string(threads) +
        ",\n  \"gemm_ceiling_gflops\": {\"1\": " + json_number(ceiling_1) + ", \"" +
        std::to_string(threads) + "\": " + json_number(ceiling_n) +
        "},\n  \"gemm_ceiling_sources\": {\"eigen\": {\"1\": " + json_number(measured_1.eigen) +
        ", \"" + std::to_string(threads) + "\": " + json_number(measured_n.eigen) +
        "}, \"dafuse\": {\"1\": " + json_number(measured_1.dafuse) + ", \"" +
        std::to_string(threads) + "\": " + json_number(measured_n.dafuse) + "}}" +
        ",\n  \"fma_peak_gflops\": {\"1\": " + json_number(peak_1) + ", \"" +
        std::to_string(threads) + "\": " + json_number(peak_n) +
        "},\n  \"fma_isa\": " + json_string(bench::fma_isa) +
        ",\n  \"cpu_model\": " + json_string(bench::cpu_model()) + ",\n  \"results\": [";
    for (std::size_t i = 0; i < results.size(); ++i) {
      const result& r = results[i];
      j += std::string(i ? ",\n    " : "\n    ") + "{\"config\": \"" + r.config +
           "\", \"execution\": \"" + r.execution +
           "\", \"median_us\": " + json_number(r.median_us) +
           ", \"p25_us\": " + json_number(r.q1_us) + ", \"p75_us\": " + json_number(r.q3_us) +
           ", \"steps\": " + std::to_string(r.steps) +
           ", \"steps_per_second\": " + json_number(1e6 / r.median_us) +
           ", \"mflop_per_step\": " + json_number(r.flops / 1e6) +
           ", \"gflops\": " + json_number(r.flops / r.median_us / 1e3) +
           ", \"ceiling_fraction\": " + json_number(r.flops / r.median_us / 1e3 / ceiling_n) +
           ", \"peak_fraction\": " + json_number(r.flops / r.median_us / 1e3 / peak_n) +
           (r.nearby_ceiling > 0 ? ", \"nearby_ceiling_gflops\": " + json_number(r.nearby_ceiling) +
                                       ", \"nearby_ceiling_fraction\": " +
                                       json_number(r.flops / r.median_us / 1e3 / r.nearby_ceiling)
                                 : std::string()) +
           ", \"memory_bytes\": " + std::to_string(r.memory_bytes) + "}";
    }
    j += "\n  ]\n}\n";
    std::ofstream(json) << j;
  }
}
