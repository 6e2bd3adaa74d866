// dafuse's CUDA step against the clock, for the side-by-side table with PyTorch on the same GPU
// (bench/pytorch/cuda_bench.py; scripts/gpu-check runs both). One JSON line per measurement.
//
// Configurations (G_f, G_y, G_d, B source + B target rows; DANN with Ganin's schedules, SGD
// with momentum 0.9, no clipping, fp32 without TF32):
//   demo         256 → 256 → 128 ReLU   128 → 10   128 → 128 ReLU → 1              B = 64
//   office-head  2048 → 256 ReLU        256 → 31   256 → 1024 → 1024 ReLU → 1      B = 32
//   digits-mlp   784 → 256 → 256 ReLU   256 → 10   256 → 256 ReLU → 1              B = 4096
// "step" times enqueue() (the step's captured CUDA graph replayed) on a batch already in device
// memory; "fit step" adds the resident loader's draw and gather of each batch on the device
// (train_step::load_resident, as fit does). Each figure is the median over rounds of the mean
// step time of a round (steps queued back to back, then waited for), after warm-up steps.
// digits-mlp's rate is the model's multiply-adds (6 · Σ in·out per row: forward, ∂W, δx) per
// second, and is printed beside the GPU's dense bf16 rate measured here (a cuBLASLt bf16
// product of 8192³ with fp32 accumulation).
//
//   cuda_step_bench [--rounds 5] [--steps 200] [--configs demo,office-head,digits-mlp]
#include <dafuse/dafuse.hpp>

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace df = dafuse;

namespace {

struct demo {
  static constexpr const char* name = "demo";
  using net = df::nn::dann_net<df::nn::mlp<256, 256, 128, df::nn::relu>,
                               df::nn::linear<128, 10>,
                               df::nn::mlp<128, 128, 1, df::nn::relu>>;
  static constexpr df::index_t batch = 64;
};
struct office_head {
  static constexpr const char* name = "office-head";
  using net = df::nn::dann_net<df::nn::mlp<2048, 256, df::nn::relu>,
                               df::nn::linear<256, 31>,
                               df::nn::mlp<256, 1024, 1024, 1, df::nn::relu>>;
  static constexpr df::index_t batch = 32;
};
struct digits_mlp {
  static constexpr const char* name = "digits-mlp";
  using net = df::nn::dann_net<df::nn::mlp<784, 256, 256, df::nn::relu>,
                               df::nn::linear<256, 10>,
                               df::nn::mlp<256, 256, 1, df::nn::relu>>;
  static constexpr df::index_t batch = 4096;
};

template <class Net>
using cuda_step = df::train_step<Net,
                                 df::loader::resident,
                                 df::precision::fp32,
                                 df::clip::none,
                                 df::head::dann<df::schedule::ganin>,
                                 df::optim::sgd,
                                 df::system::cuda>;

// Multiply-adds × 2 of one step over every layer of a stack on `cols` samples: forward, ∂W and,
// but for the network's first layer, δx.
template <class Stack>
double stack_flops(double cols, bool first_module) {
  double f = 0;
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    ((f += 2.0 * double(Stack::template layer<I>::in * Stack::template layer<I>::out) * cols *
           (I == 0 && first_module ? 2.0 : 3.0)),
     ...);
  }
  (std::make_index_sequence<Stack::depth>{});
  return f;
}

template <class Net>
double step_flops(df::index_t batch) {
  const double rows = 2.0 * double(batch);
  return stack_flops<typename Net::feature_stack>(rows, true) +
         stack_flops<typename Net::classifier_stack>(double(batch), false) +
         stack_flops<typename Net::discriminator_stack>(rows, false);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

df::data::dataset random_set(df::index_t rows, df::index_t width, df::data::domain side) {
  df::counter_rng rng(7, df::rng_stream::user, std::uint32_t(side));
  df::data::host_array<float> x{{std::size_t(rows), std::size_t(width)},
                                std::vector<float>(std::size_t(rows * width))};
  for (float& v : x.values) v = rng.uniform<float>();
  std::vector<std::int32_t> y(static_cast<std::size_t>(rows));
  for (auto& l : y) l = std::int32_t(rng.below(10));
  return df::data::make_dataset("random rows", side, std::move(x), std::move(y));
}

template <class Config>
void run_config(int rounds, int steps) {
  using step_type = cuda_step<typename Config::net>;
  constexpr df::index_t width = step_type::input_width;
  const df::fit_args args{
      .steps = 1000000, .batch = Config::batch, .lr = 0.01f, .momentum = 0.9f, .seed = 1};
  const df::index_t set_rows = std::max<df::index_t>(4 * Config::batch, 2000);
  const df::data::dataset source = random_set(set_rows, width, df::data::domain::source);
  const df::data::dataset target = random_set(set_rows, width, df::data::domain::target);
  // `plain` steps on the batch in its input; `loaded` draws each batch from its resident data.
  step_type plain(args), loaded(args);
  loaded.load_resident(source, target);
  loaded.enqueue();  // a first batch with valid labels, for `plain` too
  (void)loaded.last_report();
  std::vector<float> first(std::size_t(width * step_type::rows_for(Config::batch)));
  std::vector<std::int32_t> labels(static_cast<std::size_t>(Config::batch));
  df::system::cuda::download(first.data(), loaded.input().data, first.size() * sizeof(float));
  df::system::cuda::download(labels.data(), loaded.source_labels().data(),
                             labels.size() * sizeof(std::int32_t));
  df::system::cuda::upload(plain.input().data, first.data(), first.size() * sizeof(float));
  df::system::cuda::upload(plain.source_labels().data(), labels.data(),
                           labels.size() * sizeof(std::int32_t));
  const auto timed = [&](step_type& step) {
    for (int k = 0; k < 20; ++k) step.enqueue();  // the first captures the graph
    (void)step.last_report();
    std::vector<double> per_step;
    for (int r = 0; r < rounds; ++r) {
      const auto start = std::chrono::steady_clock::now();
      for (int k = 0; k < steps; ++k) step.enqueue();
      (void)step.last_report();  // waits for the last step
      per_step.push_back(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / steps);
    }
    return median(per_step);
  };
  const double step_s = timed(plain), fit_step_s = timed(loaded);
  const double flops = step_flops<typename Config::net>(Config::batch);
  std::printf(
      "{\"bench\": \"cuda_step\", \"config\": \"%s\", \"impl\": \"dafuse-cuda-fp32\", "
      "\"batch\": %ld, \"us_per_step\": %.3f, \"us_per_fit_step\": %.3f, \"tflops\": %.3f}\n",
      Config::name, long(Config::batch), 1e6 * step_s, 1e6 * fit_step_s, flops / step_s / 1e12);
  std::fflush(stdout);
}

// The GPU's dense bf16 rate: D = A·B, 8192³, bf16 operands, fp32 accumulation, through cuBLASLt.
void bf16_ceiling() {
  const std::uint64_t n = 8192;
  void *a = nullptr, *b = nullptr, *d = nullptr, *ws = nullptr;
  const std::size_t ws_bytes = std::size_t(64) << 20;
  df::backend::cuda::check(cudaMalloc(&a, n * n * 2), "cudaMalloc");
  df::backend::cuda::check(cudaMalloc(&b, n * n * 2), "cudaMalloc");
  df::backend::cuda::check(cudaMalloc(&d, n * n * 2), "cudaMalloc");
  df::backend::cuda::check(cudaMalloc(&ws, ws_bytes), "cudaMalloc");
  cudaMemset(a, 0, n * n * 2);
  cudaMemset(b, 0, n * n * 2);
  cublasLtHandle_t lt;
  df::backend::cuda::check(cublasLtCreate(&lt), "cublasLtCreate");
  cublasLtMatmulDesc_t desc;
  cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
  cublasLtMatrixLayout_t la, lb, ld;
  cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, n, n, n);
  cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, n, n, n);
  cublasLtMatrixLayoutCreate(&ld, CUDA_R_16BF, n, n, n);
  cublasLtMatmulPreference_t pref;
  cublasLtMatmulPreferenceCreate(&pref);
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes,
                                       sizeof ws_bytes);
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, ld, ld, pref, 1, &result, &found);
  double tflops = 0;
  if (found > 0) {
    const float alpha = 1, beta = 0;
    const auto product = [&] {
      df::backend::cuda::check(cublasLtMatmul(lt, desc, &alpha, a, la, b, lb, &beta, d, ld, d, ld,
                                              &result.algo, ws, result.workspaceSize, nullptr),
                               "cublasLtMatmul");
    };
    for (int k = 0; k < 5; ++k) product();
    std::vector<double> rates;
    for (int r = 0; r < 5; ++r) {
      cudaDeviceSynchronize();
      const auto start = std::chrono::steady_clock::now();
      for (int k = 0; k < 20; ++k) product();
      cudaDeviceSynchronize();
      const double s =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / 20;
      rates.push_back(2.0 * double(n) * double(n) * double(n) / s / 1e12);
    }
    tflops = median(rates);
  }
  std::printf("{\"bench\": \"bf16_ceiling\", \"impl\": \"cublaslt-bf16-8192\", \"tflops\": %.1f}\n",
              tflops);
  std::fflush(stdout);
  cublasLtMatmulPreferenceDestroy(pref);
  cublasLtMatrixLayoutDestroy(ld);
  cublasLtMatrixLayoutDestroy(lb);
  cublasLtMatrixLayoutDestroy(la);
  cublasLtMatmulDescDestroy(desc);
  cublasLtDestroy(lt);
  cudaFree(ws);
  cudaFree(d);
  cudaFree(b);
  cudaFree(a);
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 5, steps = 200;
  std::string configs = "demo,office-head,digits-mlp";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string opt = argv[i];
    if (opt == "--rounds")
      rounds = std::atoi(argv[i + 1]);
    else if (opt == "--steps")
      steps = std::atoi(argv[i + 1]);
    else if (opt == "--configs")
      configs = argv[i + 1];
    else {
      std::fprintf(stderr, "cuda_step_bench: unknown option %s\n", opt.c_str());
      return 2;
    }
  }
  if (!df::backend::cuda::device_available()) {
    std::printf("cuda_step_bench: no CUDA device: nothing measured\n");
    return 77;
  }
  const auto wanted = [&](const char* name) {
    return (',' + configs + ',').find(',' + std::string(name) + ',') != std::string::npos;
  };
  try {
    bf16_ceiling();
    if (wanted(demo::name)) run_config<demo>(rounds, steps);
    if (wanted(office_head::name)) run_config<office_head>(rounds, steps);
    if (wanted(digits_mlp::name)) run_config<digits_mlp>(rounds, std::max(steps / 4, 10));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cuda_step_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
