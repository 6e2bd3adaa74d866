// The products of the LeNet-like DANN step (bench/configs.hpp's lenet, B = 64 + 64 rows through
// G_f) one by one, beside the machine's fp32 GEMM ceiling measured in the same process: each
// product's FLOPs, its median time over repeated calls, its rate and its share of the ceiling.
// The convolutions run as the step runs them (backend/host/conv.hpp: im2col into a chunk of
// patches, then the product, chunk by chunk), so their times include the im2col (and the kernel
// flip of the transposed input gradient); the dense layers are single products. The ceiling is a
// 2048³ product on dafuse's gemm (as dann_bench measures it), before and after the products.
// On one thread the times are the thread's CPU time, so that a busy machine's preemptions do not
// count (each product and the ceiling alike); on more, wall time.
// With --bf16 the products and the ceiling run on the bf16 kernel (mixed_products<bf16>: operands
// rounded to bf16, fp32 sums), as a precision::bf16 step runs them.
// Run: OMP_NUM_THREADS=1 build/bench/conv_products [--reps 20] [--bf16]
#include "configs.hpp"

#include <dafuse/backend/host/conv.hpp>
#include <dafuse/backend/host/gemm.hpp>
#include <dafuse/backend/host/products.hpp>

#if defined(_OPENMP)
#include <omp.h>
#endif

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <string>
#include <vector>

namespace {

namespace df = dafuse;
namespace host = df::backend::host;
using df::index_t;
using host::op;

//! Seconds on the clock the run uses: with one thread, the thread's CPU time (what it ran,
//! whatever else the cores ran meanwhile: a busy machine's preemptions do not count); with more,
//! wall time.
bool cpu_clock = false;
double now() {
  if (cpu_clock) {
    timespec t{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

//! Median seconds of `f` over `reps` calls after 3 untimed ones.
double median_seconds(int reps, const std::function<void()>& f) {
  for (int w = 0; w < 3; ++w) f();
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    const double t0 = now();
    f();
    t.push_back(now() - t0);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

std::vector<float> values(std::size_t n, float scale) {
  df::counter_rng rng(11, df::rng_stream::user);
  std::vector<float> v(n);
  for (float& e : v) e = scale * rng.uniform<float>(-1.0f, 1.0f);
  return v;
}

//! Every product of the step on `ws` (gemm_workspace<float>: fp32; mixed_products<bf16>: bf16
//! operands, fp32 sums), beside a 2048³ product on the same `ws`: the ceiling of that precision.
template <class Products>
void measure(Products& ws, const char* precision, int reps, int threads) {
  using stack = bench::lenet::net::feature_stack;
  using conv1 = stack::layer<0>;
  using conv2 = stack::layer<2>;
  using fc1 = stack::layer<4>;
  using fc2 = stack::layer<5>;
  constexpr index_t n = 2 * bench::lenet::batch;  // rows through G_f

  const index_t big = 2048;
  const std::vector<float> a = values(std::size_t(big * big), 1.0f), b = a;
  std::vector<float> c(std::size_t(big * big));
  const auto ceiling = [&] {
    const double s = median_seconds(5, [&] {
      ws.template product<op::none, op::none>(big, big, big, 1.0f, a.data(), big, b.data(), big,
                                              0.0f, c.data(), big);
    });
    return 2.0 * double(big) * double(big) * double(big) / s / 1e9;
  };
  const double before = ceiling();

  // One part per thread, as the step deals its convolutions (conv.hpp).
  std::vector<float> patches(std::size_t(host::conv_scratch_elements<stack>(threads)));
  const host::conv_scratch<float> parts =
      host::conv_scratch<float>::of<stack>(patches.data(), threads);
  const std::vector<float> x0 = values(std::size_t(conv1::in * n), 1.0f);
  const std::vector<float> w1 = values(std::size_t(conv1::weight_count), 0.2f);
  const std::vector<float> x1 = values(std::size_t(conv2::in * n), 1.0f);  // pool1's output
  const std::vector<float> w2 = values(std::size_t(conv2::weight_count), 0.03f);
  const std::vector<float> x2 = values(std::size_t(fc1::in * n), 1.0f);  // pool2's output
  const std::vector<float> wf1 = values(std::size_t(fc1::weight_count), 0.03f);
  const std::vector<float> x3 = values(std::size_t(fc2::in * n), 1.0f);
  const std::vector<float> wf2 = values(std::size_t(fc2::weight_count), 0.1f);
  std::vector<float> y1(std::size_t(conv1::out * n)), dz1 = values(y1.size(), 0.01f);
  std::vector<float> y2(std::size_t(conv2::out * n)), dz2 = values(y2.size(), 0.01f);
  std::vector<float> dx1(x1.size()), g1(std::size_t(conv1::param_count));
  std::vector<float> g2(std::size_t(conv2::param_count));
  std::vector<float> yf(std::size_t(fc1::out * n)), dzf = values(yf.size(), 0.01f);
  std::vector<float> dxf(x2.size()), gf(std::size_t(fc1::weight_count));
  std::vector<float> yf2(std::size_t(fc2::out * n)), dzf2 = values(yf2.size(), 0.01f);
  std::vector<float> dxf2(x3.size()), gf2(std::size_t(fc2::weight_count));
  const auto no_finish = [](float*) { return host::no_finish{}; };
  const auto view = [](const std::vector<float>& v, index_t rows) {
    return df::matrix_view<const float>{v.data(), rows, n};
  };

  struct product {
    std::string name;
    double mflop;
    std::function<void()> run;
  };
  const auto flop = [](index_t m, index_t cols, index_t k) {
    return 2.0 * double(m) * double(cols) * double(k) / 1e6;
  };
  const std::vector<product> products = {
      {"conv1 forward [32 x 800]·[25 x 32768]", flop(32, n * conv1::pixels, conv1::patch),
       [&] {
         host::conv_forward<conv1>(ws, w1.data(), view(x0, conv1::in), y1.data(), parts, no_finish);
       }},
      {"conv1 dL/dW", flop(32, n * conv1::pixels, conv1::patch),
       [&] {
         host::conv_weight_gradient<conv1>(ws, dz1.data(), view(x0, conv1::in), g1.data(), parts,
                                           host::no_finish{});
       }},
      {"conv2 forward [48 x 800]·[800 x 8192]", flop(48, n * conv2::pixels, conv2::patch),
       [&] {
         host::conv_forward<conv2>(ws, w2.data(), view(x1, conv2::in), y2.data(), parts, no_finish);
       }},
      {"conv2 dL/dW", flop(48, n * conv2::pixels, conv2::patch),
       [&] {
         host::conv_weight_gradient<conv2>(ws, dz2.data(), view(x1, conv2::in), g2.data(), parts,
                                           host::no_finish{});
       }},
      {"conv2 dL/dx (transposed conv)", flop(48, n * conv2::pixels, conv2::patch),
       [&] {
         host::conv_input_gradient<conv2>(ws, w2.data(), dz2.data(), n, dx1.data(), 1.0f, false,
                                          parts);
       }},
      {"fc 768->100 forward", flop(100, n, 768),
       [&] {
         ws.template product<op::none, op::none>(100, n, 768, 1.0f, wf1.data(), 100, x2.data(), 768,
                                                 0.0f, yf.data(), 100);
       }},
      {"fc 768->100 dL/dW", flop(100, n, 768),
       [&] {
         ws.template product<op::none, op::transpose>(100, 768, n, 1.0f, dzf.data(), 100, x2.data(),
                                                      768, 0.0f, gf.data(), 100);
       }},
      {"fc 768->100 dL/dx", flop(100, n, 768),
       [&] {
         ws.template product<op::transpose, op::none>(768, n, 100, 1.0f, wf1.data(), 100,
                                                      dzf.data(), 100, 0.0f, dxf.data(), 768);
       }},
      {"fc 100->100 forward", flop(100, n, 100),
       [&] {
         ws.template product<op::none, op::none>(100, n, 100, 1.0f, wf2.data(), 100, x3.data(), 100,
                                                 0.0f, yf2.data(), 100);
       }},
      {"fc 100->100 dL/dW", flop(100, n, 100),
       [&] {
         ws.template product<op::none, op::transpose>(100, 100, n, 1.0f, dzf2.data(), 100,
                                                      x3.data(), 100, 0.0f, gf2.data(), 100);
       }},
      {"fc 100->100 dL/dx", flop(100, n, 100),
       [&] {
         ws.template product<op::transpose, op::none>(100, n, 100, 1.0f, wf2.data(), 100,
                                                      dzf2.data(), 100, 0.0f, dxf2.data(), 100);
       }},
  };
  std::vector<double> seconds;
  for (const product& p : products) seconds.push_back(median_seconds(reps, p.run));
  const double after = ceiling();
  const double ceil = std::max(before, after);

  std::printf(
      "lenet step products in %s, %d thread(s) (%s), B = %ld + %ld; 2048^3 ceiling (dafuse's "
      "%s products): %.1f GFLOP/s before, %.1f after (the larger is used)\n",
      precision, threads, cpu_clock ? "thread CPU time" : "wall time", long(bench::lenet::batch),
      long(bench::lenet::batch), precision, before, after);
  std::printf(
      "| product | MFLOP | median ms | GFLOP/s | %% of ceiling |\n| --- | --- | --- | --- | "
      "--- |\n");
  double total_mflop = 0, total_s = 0;
  for (std::size_t i = 0; i < products.size(); ++i) {
    const double rate = products[i].mflop / 1e3 / seconds[i];
    std::printf("| %s | %.1f | %.3f | %.1f | %.0f %% |\n", products[i].name.c_str(),
                products[i].mflop, 1e3 * seconds[i], rate, 100 * rate / ceil);
    total_mflop += products[i].mflop;
    total_s += seconds[i];
  }
  std::printf("| all of the above | %.1f | %.3f | %.1f | %.0f %% |\n", total_mflop, 1e3 * total_s,
              total_mflop / 1e3 / total_s, 100 * total_mflop / 1e3 / total_s / ceil);
  std::printf("(checksums %.4g %.4g %.4g %.4g)\n", double(y2[7]), double(g2[3]), double(dx1[5]),
              double(c[1]));
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 20;
  bool bf16 = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--bf16") == 0) bf16 = true;
    if (i + 1 < argc && std::strcmp(argv[i], "--reps") == 0)
      reps = std::max(3, std::atoi(argv[i + 1]));
  }
#if defined(_OPENMP)
  const int threads = omp_get_max_threads();
#else
  const int threads = 1;
#endif
  cpu_clock = threads == 1;
  // Room for the ceiling's 2048³ and for the convolutions' chunk products.
  const index_t big = std::max<index_t>(2048, bench::lenet::net::feature_stack::max_product_side);
  if (bf16) {
    host::mixed_products<df::number_format::bf16> ws(big, big, big);
    measure(ws, "bf16", reps, threads);
  } else {
    host::gemm_workspace<float> ws(big, big, big, threads);
    measure(ws, "fp32", reps, threads);
  }
}
