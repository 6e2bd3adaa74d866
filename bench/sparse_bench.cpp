// The sparse first layer against the dense product on the same batch: the Amazon reviews
// network (5000 → 100 ReLU features, 100 → 2, 100 → 1), B = 64 + 64 rows of dvd_train
// (../shared/data/amazon_reviews; synthetic rows with the same density when it is absent).
// Times (median and interquartile range over many repetitions after warm-up):
//   - the first layer alone: forward y = W·x and weight gradient δz·xᵀ, sparse kernels against
//     the dense GEMMs on the densified batch;
//   - the whole DANN step with nn::sparse_input against the same network reading dense rows.
// Run: build/bench/sparse_bench [--reps N]
#include <dafuse/dafuse.hpp>

#include "timing.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <vector>

namespace df = dafuse;
namespace host = df::backend::host;

constexpr df::index_t vocabulary = 5000, hidden = 100, rows = 128;
using features = df::nn::mlp<vocabulary, hidden, df::nn::relu>;
template <class Features>
using step_t =
    df::train_step<df::nn::dann_net<Features, df::nn::linear<hidden, 2>, df::nn::linear<hidden, 1>>,
                   df::loader::sync,
                   df::precision::fp32,
                   df::clip::none,
                   df::head::dann<df::schedule::ganin>,
                   df::optim::sgd>;
using sparse_step = step_t<df::nn::sparse_input<features>>;
using dense_step = step_t<features>;

using bench::timing;

template <class F>
timing time_it(long reps, F&& f) {
  return bench::time_calls(10, reps, f);
}

void print(const char* name, timing t, timing base) {
  std::printf("| %-44s | %9.1f | %9.1f – %-9.1f | %7.1fx |\n", name, t.median, t.q1, t.q3,
              base.median / t.median);
}

int main(int argc, char** argv) {
  long reps = 300;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "--reps") == 0) reps = std::max(10L, std::atol(argv[i + 1]));

  // The batch: the first 128 rows of dvd_train, or synthetic rows of the same density.
  const std::filesystem::path dir =
      std::filesystem::path(DAFUSE_SHARED_DATA_DIR) / "amazon_reviews";
  df::data::csr_matrix m;
  const char* origin = "dvd_train, rows 0-127";
  if (std::filesystem::is_directory(dir)) {
    m = df::data::load_csr(dir / "dvd_train", vocabulary);
  } else {
    origin = "synthetic rows, 92 non-zeros each";
    df::counter_rng rng(1, df::rng_stream::user);
    std::vector<float> dense(std::size_t(rows * vocabulary), 0.0f);
    for (df::index_t r = 0; r < rows; ++r)
      for (int k = 0; k < 92; ++k) dense[std::size_t(r * vocabulary + rng.below(vocabulary))] = 1;
    m = df::data::to_csr(dense.data(), rows, vocabulary);
  }
  const df::index_t nnz = m.indptr[rows];
  const df::fit_args args{.steps = 1000, .batch = rows / 2, .lr = 0.01f, .momentum = 0.9f};
  sparse_step sparse(args);
  dense_step dense(args);
  auto slots = sparse.sparse_batch();
  std::copy_n(m.indptr.begin(), rows + 1, slots.offsets.begin());
  std::copy_n(m.indices.begin(), nnz, slots.indices.begin());
  std::copy_n(m.values.begin(), nnz, slots.values.begin());
  auto x = dense.input();
  std::fill_n(x.data, x.size(), 0.0f);
  for (df::index_t r = 0; r < rows; ++r)
    for (df::index_t k = m.indptr[r]; k < m.indptr[r + 1]; ++k) x(m.indices[k], r) = m.values[k];
  for (auto& y : sparse.source_labels()) y = 1;
  for (auto& y : dense.source_labels()) y = 1;

  // The first layer alone, on the step's own weights.
  std::vector<float> w(sparse.parameters().begin(),
                       sparse.parameters().begin() + vocabulary * hidden);
  std::vector<float> y(std::size_t(hidden * rows)), dz(std::size_t(hidden * rows), 0.01f),
      dw(std::size_t(vocabulary * hidden), 0.0f);
  const df::sparse_matrix_view<const float> xs{m.indptr.data(), m.indices.data(), m.values.data(),
                                               vocabulary, rows};
  host::gemm_workspace<float> ws(vocabulary, vocabulary, vocabulary);
  using identity = host::gemm_workspace<float>;  // supplies round() = identity
  const timing dense_fw = time_it(reps, [&] {
    host::gemm<host::op::none, host::op::none>(ws, hidden, rows, vocabulary, 1.0f, w.data(), hidden,
                                               x.data, vocabulary, 0.0f, y.data(), hidden);
  });
  const timing sparse_fw =
      time_it(reps, [&] { host::sparse_input_product<identity>(w.data(), hidden, xs, y.data()); });
  const timing dense_wg = time_it(reps, [&] {
    host::gemm<host::op::none, host::op::transpose>(ws, hidden, vocabulary, rows, 1.0f, dz.data(),
                                                    hidden, x.data, vocabulary, 0.0f, dw.data(),
                                                    hidden);
  });
  const timing sparse_wg = time_it(
      reps, [&] { host::sparse_weight_gradient<identity>(dz.data(), hidden, xs, dw.data()); });
  const timing dense_run = time_it(reps, [&] { dense.run(); });
  const timing sparse_run = time_it(reps, [&] { sparse.run(); });

  std::printf(
      "Amazon reviews network 5000-100 / 100-2 / 100-1, B = 64 + 64 (%s), %ld non-zeros "
      "(%.2f %% dense), fp32, microseconds\n",
      origin, long(nnz), 100.0 * double(nnz) / double(rows * vocabulary));
  std::printf("| %-44s | %9s | %-21s | %8s |\n", "", "median", "IQR", "speed-up");
  print("first layer forward, dense GEMM", dense_fw, dense_fw);
  print("first layer forward, sparse", sparse_fw, dense_fw);
  print("first layer weight gradient, dense GEMM", dense_wg, dense_wg);
  print("first layer weight gradient, sparse", sparse_wg, dense_wg);
  print("DANN step, dense rows", dense_run, dense_run);
  print("DANN step, sparse first layer", sparse_run, dense_run);
  std::printf("FLOP per first-layer product: dense %.1f M, sparse %.2f M\n",
              2.0 * hidden * vocabulary * rows / 1e6, 2.0 * hidden * double(nnz) / 1e6);
}
