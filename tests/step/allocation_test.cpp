// Proves a training step allocates nothing: malloc and friends are replaced in this executable
// by counting wrappers around glibc's own allocator, and the count must not move while steps run
// (operator new ends in malloc, Eigen's aligned_malloc too, so every heap path is seen). The
// wrappers also keep the bytes held (malloc_usable_size), against which a step's memory_bytes()
// is checked. Built only without sanitizers, which intercept malloc themselves.
#include <dafuse/data/batcher.hpp>
#include <dafuse/data/sparse_batcher.hpp>
#include <dafuse/head/cdan.hpp>
#include <dafuse/head/combine.hpp>
#include <dafuse/head/coral.hpp>
#include <dafuse/head/dann.hpp>
#include <dafuse/head/mcc.hpp>
#include <dafuse/head/mdd.hpp>
#include <dafuse/head/mmd.hpp>
#include <dafuse/head/source_only.hpp>
#include <dafuse/nn/conv2d.hpp>
#include <dafuse/step/eager_step.hpp>
#include <dafuse/step/train_step.hpp>

#include "../check.hpp"

#include <malloc.h>

#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <vector>

extern "C" {
void* __libc_malloc(std::size_t);
void* __libc_calloc(std::size_t, std::size_t);
void* __libc_realloc(void*, std::size_t);
void* __libc_memalign(std::size_t, std::size_t);
void __libc_free(void*);
}

namespace {
std::atomic<long> allocations{0};
std::atomic<long> held_bytes{0};  // Σ malloc_usable_size of the blocks not yet freed
void* note_allocated(void* p) {
  allocations.fetch_add(1, std::memory_order_relaxed);
  if (p) held_bytes.fetch_add(long(malloc_usable_size(p)), std::memory_order_relaxed);
  return p;
}
void note_freed(void* p) {
  if (p) held_bytes.fetch_sub(long(malloc_usable_size(p)), std::memory_order_relaxed);
}
}  // namespace

extern "C" {
void* malloc(std::size_t n) {
  return note_allocated(__libc_malloc(n));
}
void* calloc(std::size_t n, std::size_t size) {
  return note_allocated(__libc_calloc(n, size));
}
void* realloc(void* p, std::size_t n) {
  const long old = p ? long(malloc_usable_size(p)) : 0;
  void* q = __libc_realloc(p, n);
  if (q || n == 0) held_bytes.fetch_sub(old, std::memory_order_relaxed);  // p was released
  return note_allocated(q);
}
void* aligned_alloc(std::size_t alignment, std::size_t n) {
  return note_allocated(__libc_memalign(alignment, n));
}
void* memalign(std::size_t alignment, std::size_t n) {
  return note_allocated(__libc_memalign(alignment, n));
}
int posix_memalign(void** out, std::size_t alignment, std::size_t n) {
  *out = note_allocated(__libc_memalign(alignment, n));
  return *out ? 0 : 12;  // ENOMEM
}
void free(void* p) {
  note_freed(p);
  __libc_free(p);
}
}

namespace df = dafuse;

namespace {
// A LeNet-like feature extractor on the same 256 inputs as 16 × 16 images.
using conv_net = df::nn::dann_net<df::nn::conv_net<df::nn::image<16, 16, 1>,
                                                   df::nn::conv2d<1, 8, 5, 1, 2>,
                                                   df::nn::max_pool2d<2>,
                                                   df::nn::conv2d<8, 12, 3, 1, 1>,
                                                   df::nn::max_pool2d<2>,
                                                   df::nn::flatten,
                                                   df::nn::dense<192, 64, df::nn::relu>>,
                                  df::nn::linear<64, 10>,
                                  df::nn::mlp<64, 32, 1, df::nn::relu>>;
// The demo's shapes: wide enough that Eigen takes its blocked, threaded GEMM path.
using net = df::nn::dann_net<df::nn::mlp<256, 256, 128, df::nn::relu>,
                             df::nn::linear<128, 10>,
                             df::nn::mlp<128, 128, 1, df::nn::relu>>;

df::data::dataset random_set(df::data::domain side, df::index_t rows) {
  df::counter_rng rng(1, df::rng_stream::synthetic_data, std::uint32_t(side));
  df::data::host_array<float> x{{std::size_t(rows), 256}, std::vector<float>(rows * 256)};
  std::vector<std::int32_t> y(static_cast<std::size_t>(rows));
  for (float& v : x.values) v = rng.uniform<float>();
  for (auto& l : y) l = std::int32_t(rng.below(10));
  return df::data::make_dataset("random", side, std::move(x), std::move(y));
}

template <class Loader,
          class Clip,
          class Head,
          class Precision = df::precision::fp32,
          template <class...> class Step = df::train_step,
          class Net = net>
long allocations_in_steps() {
  using step_type = Step<Net, Loader, Precision, Clip, Head, df::optim::sgd>;
  const auto source = random_set(df::data::domain::source, 300);
  const auto target = random_set(df::data::domain::target, 200);
  const df::fit_args args{.steps = 50, .batch = 64, .lr = 0.01f, .momentum = 0.9f};
  step_type step(args);
  df::data::batcher<Loader, df::system::omp> batches(source, target, args.batch, args.seed,
                                                     step_type::draws_target_rows);
  // One warm-up step: the OpenMP runtime creates its thread pool on first use.
  batches.fill(step.input(), step.source_labels());
  step.run();
  const long before = allocations.load();
  for (int t = 0; t < 20; ++t) {  // 20 × 64 rows: several epochs of the 300/200-row sets
    batches.fill(step.input(), step.source_labels());
    step.run();
  }
  return allocations.load() - before;
}
}  // namespace

TEST_CASE("counting works: a std::vector allocation is seen") {
  const long before = allocations.load();
  std::vector<int>* v = new std::vector<int>(100);
  CHECK(allocations.load() - before >= 2);
  delete v;
}

TEST_CASE("a DANN step with loader::resident and global-norm clipping allocates nothing") {
  CHECK(allocations_in_steps<df::loader::resident, df::clip::global_norm,
                             df::head::dann<df::schedule::ganin>>() == 0);
}

TEST_CASE("a DANN step with loader::sync allocates nothing") {
  CHECK(allocations_in_steps<df::loader::sync, df::clip::none,
                             df::head::dann<df::schedule::ganin>>() == 0);
}

TEST_CASE("a DANN step with loader::prefetch allocates nothing, in the caller or the workers") {
  // The count is process-wide, so the workers' batch assembly during the 20 steps is counted.
  CHECK(allocations_in_steps<df::loader::prefetch<2, 4>, df::clip::global_norm,
                             df::head::dann<df::schedule::ganin>>() == 0);
  CHECK(
      allocations_in_steps<df::loader::prefetch<1, 2>, df::clip::none, df::head::source_only<>>() ==
      0);
}

TEST_CASE("the eager execution allocates nothing per step either (buffers made once)") {
  CHECK(allocations_in_steps<df::loader::resident, df::clip::global_norm,
                             df::head::dann<df::schedule::ganin>, df::precision::fp32,
                             df::eager_step>() == 0);
}

TEST_CASE("a source-only step allocates nothing") {
  CHECK(allocations_in_steps<df::loader::resident, df::clip::none, df::head::source_only<>>() == 0);
}

TEST_CASE("mixed-precision steps allocate nothing (bf16 kernel buffers, loss-scale state)") {
  CHECK(allocations_in_steps<df::loader::resident, df::clip::global_norm,
                             df::head::dann<df::schedule::ganin>, df::precision::bf16>() == 0);
  CHECK(allocations_in_steps<df::loader::resident, df::clip::global_norm,
                             df::head::dann<df::schedule::ganin>,
                             df::precision::fp16<df::loss_scale::dynamic>>() == 0);
}

TEST_CASE("steps of the heads without a discriminator allocate nothing") {
  CHECK(allocations_in_steps<df::loader::resident, df::clip::global_norm, df::head::coral<>>() ==
        0);
  CHECK(allocations_in_steps<df::loader::resident, df::clip::global_norm, df::head::coral<>,
                             df::precision::bf16>() == 0);
  CHECK(allocations_in_steps<df::loader::resident, df::clip::global_norm, df::head::mmd<>>() == 0);
  CHECK(allocations_in_steps<df::loader::resident, df::clip::none, df::head::mmd_linear<>>() == 0);
  CHECK(allocations_in_steps<df::loader::resident, df::clip::global_norm, df::head::mcc<>>() == 0);
}

TEST_CASE("an MDD step (G_d as the adversarial classifier f') allocates nothing") {
  using mdd_net =
      df::nn::dann_net<df::nn::mlp<256, 256, 128, df::nn::relu>, df::nn::linear<128, 10>,
                       df::nn::mlp<128, 128, 10, df::nn::relu>>;
  CHECK(allocations_in_steps<df::loader::resident, df::clip::global_norm, df::head::mdd<>,
                             df::precision::fp32, df::train_step, mdd_net>() == 0);
  CHECK(allocations_in_steps<df::loader::resident, df::clip::global_norm, df::head::mdd<>,
                             df::precision::bf16, df::train_step, mdd_net>() == 0);
}

TEST_CASE("a sum of heads allocates nothing per step (DANN + CORAL + MCC)") {
  CHECK(allocations_in_steps<
            df::loader::resident, df::clip::global_norm,
            df::head::combine<df::head::dann<>, df::head::coral<>, df::head::mcc<>>>() == 0);
}

TEST_CASE("a step with a sparse first layer and its CSR batches allocates nothing") {
  using sparse_net =
      df::nn::dann_net<df::nn::sparse_input<df::nn::mlp<256, 128, df::nn::relu>>,
                       df::nn::linear<128, 10>, df::nn::mlp<128, 128, 1, df::nn::relu>>;
  using step_type = df::train_step<sparse_net, df::loader::sync, df::precision::fp32,
                                   df::clip::global_norm, df::head::dann<>, df::optim::sgd>;
  // Rows with ~10 % non-zeros, as CSR data sets.
  const auto sparse_set = [](df::data::domain side, df::index_t rows) {
    const df::data::dataset d = random_set(side, rows);
    std::vector<float> x = d.features;
    for (std::size_t i = 0; i < x.size(); ++i)
      if (i % 10 != 3) x[i] = 0;
    return df::data::make_sparse_dataset("random", side, df::data::to_csr(x.data(), rows, 256),
                                         d.labels);
  };
  const auto source = sparse_set(df::data::domain::source, 300);
  const auto target = sparse_set(df::data::domain::target, 200);
  const df::fit_args args{.steps = 50, .batch = 64, .lr = 0.01f, .momentum = 0.9f};
  step_type step(args);
  df::data::sparse_batcher batches(source, target, args.batch, args.seed, true);
  batches.fill(step.sparse_batch(), step.source_labels());
  step.run();
  const long before = allocations.load();
  for (int t = 0; t < 20; ++t) {
    batches.fill(step.sparse_batch(), step.source_labels());
    step.run();
  }
  CHECK(allocations.load() - before == 0);
}

TEST_CASE("a step with a convolutional feature extractor allocates nothing, fused or eager") {
  CHECK(allocations_in_steps<df::loader::sync, df::clip::global_norm, df::head::dann<>,
                             df::precision::fp32, df::train_step, conv_net>() == 0);
  CHECK(allocations_in_steps<df::loader::sync, df::clip::global_norm, df::head::dann<>,
                             df::precision::fp32, df::eager_step, conv_net>() == 0);
}

TEST_CASE(
    "a conv step holds the bytes memory_bytes() counts, and besides them only buffers that "
    "do not grow with the batch") {
  // memory_bytes() counts every buffer the step owns but its products' packing buffers and
  // partial sums. Those are sized for the longest product, here a convolution's chunk (10 240
  // columns), and for dense layers' partial sums over fewer samples than inputs (192 for G_f's
  // dense layer): from 192 rows on, neither grows with the batch. A buffer that grows with the
  // batch (the batch, the training scratch, the evaluation scratch that shares it) and is not
  // counted, or is counted and not allocated, would show in the difference.
  using step_type = df::train_step<conv_net, df::loader::sync, df::precision::fp32,
                                   df::clip::global_norm, df::head::dann<>, df::optim::sgd>;
  struct holding {
    long held, counted;
  };
  const auto hold = [](df::index_t batch) {
    const long before = held_bytes.load();
    const step_type step(df::fit_args{.batch = batch, .eval_chunk = batch});
    return holding{held_bytes.load() - before, long(step.memory_bytes())};
  };
  hold(96);                                           // the OpenMP runtime's own first allocations
  const holding small = hold(96), large = hold(160);  // 192 and 320 rows
  CHECK(small.held >= small.counted);
  CHECK(large.held >= large.counted);
  CHECK(large.counted - small.counted > (1 << 20));
  // glibc rounds a block up to 16 bytes, a mapped one up to a page.
  CHECK(std::labs((large.held - large.counted) - (small.held - small.counted)) < 64 * 1024);
}
