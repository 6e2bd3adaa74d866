// 02_amazon_reviews — DANN on sparse text features: Amazon sentiment, dvd → books by default.
//
// The data of Ganin et al., JMLR 2016, section 5.1 (Blitzer et al. 2007 reviews as 5000-dim
// unigram/bigram counts, CSR, from ../shared/data/amazon_reviews; see its README): source =
// <source>_train (2000 labelled reviews), target = <target>_train (2000, labels unused),
// accuracy on <target>_test. Raw counts, no preprocessing. Network: G_f 5000 → 100 ReLU through a
// sparse first layer (nn::sparse_input: only the ~92 non-zeros per review are multiplied),
// G_y 100 → 2, G_d a logistic regression on the features (100 → 1); B = 64 + 64; 2000 steps of
// SGD (lr 0.01, momentum 0.9) with Ganin's schedules and λ_max = 0.1; PyTorch's default
// initialisation. Source-only trains the same network without G_d. Each seed trains both.
//
//   examples/02_amazon_reviews [--seeds 5] [--steps 2000] [--source dvd] [--target books]
//                              [--data DIR]
#include <dafuse/dafuse.hpp>

#include "common.hpp"

#include <cstdio>
#include <string>
#include <vector>

namespace df = dafuse;

constexpr df::index_t vocabulary = 5000;
using net = df::nn::dann_net<df::nn::sparse_input<df::nn::mlp<vocabulary, 100, df::nn::relu>>,
                             df::nn::linear<100, 2>,   // G_y
                             df::nn::linear<100, 1>>;  // G_d: logistic regression on h
template <class Head>
using step_with = df::
    train_step<net, df::loader::sync, df::precision::fp32, df::clip::none, Head, df::optim::sgd>;
using source_only_step = step_with<df::head::source_only<df::schedule::ganin>>;
using dann_step = step_with<df::head::dann<df::schedule::ganin>>;

int main(int argc, char** argv) try {
  examples::check_options(argc, argv, {"--seeds", "--steps", "--source", "--target", "--data"},
                          "[--seeds 5] [--steps 2000] [--source dvd] [--target books] "
                          "[--data DIR]");
  const long seeds = examples::option(argc, argv, "--seeds", 5);
  const long steps = examples::option(argc, argv, "--steps", 2000);
  const std::string source_name = examples::text_option(argc, argv, "--source", "dvd");
  const std::string target_name = examples::text_option(argc, argv, "--target", "books");
  const std::filesystem::path dir = examples::text_option(
      argc, argv, "--data", std::string(DAFUSE_SHARED_DATA_DIR) + "/amazon_reviews");
  if (!std::filesystem::is_directory(dir)) {
    std::printf("no Amazon reviews data in %s (pass --data DIR): nothing to do\n",
                dir.string().c_str());
    return 0;
  }
  const auto load = [&](const std::string& domain, const std::string& split,
                        df::data::domain side) {
    const std::filesystem::path prefix = dir / (domain + "_" + split);
    return df::data::load_sparse_dataset(prefix, dir / (domain + "_" + split + "_labels.npy"), side,
                                         vocabulary);
  };
  const df::data::sparse_dataset source = load(source_name, "train", df::data::domain::source);
  const df::data::sparse_dataset target = load(target_name, "train", df::data::domain::target);
  const df::data::sparse_dataset test = load(target_name, "test", df::data::domain::target);
  std::printf(
      "%s -> %s: %ld source rows, %ld target rows, %ld test rows (%.1f non-zeros per row), "
      "%ld steps, %ld seed(s)\n",
      source_name.c_str(), target_name.c_str(), long(source.rows()), long(target.rows()),
      long(test.rows()), double(source.features.nnz()) / double(source.rows()), steps, seeds);

  std::vector<double> source_only, dann;
  double seconds = 0;
  for (long seed = 1; seed <= seeds; ++seed) {
    const df::fit_args args{
        .steps = steps,
        .batch = 64,
        .lr = 0.01f,
        .momentum = 0.9f,
        .lambda_max = 0.1f,
        .seed = std::uint64_t(seed),
        .init = df::nn::weight_init::torch_default,
        // the batch buffers sized for these data's densest batch, not
        // for 128 rows of 5000 non-zeros
        .sparse_nonzeros = df::data::densest_batch_nonzeros(source, target, 64)};
    source_only_step so(args);
    const df::fit_result r_so = df::fit(so, source, target);
    dann_step da(args);
    const df::fit_result r_da = df::fit(da, source, target);
    source_only.push_back(df::accuracy(so, test));
    dann.push_back(df::accuracy(da, test));
    seconds += r_so.seconds + r_da.seconds;
    std::printf("seed %ld: source-only %.2f %% (%.3f s)   DANN %.2f %% (%.3f s)\n", seed,
                100 * source_only.back(), r_so.seconds, 100 * dann.back(), r_da.seconds);
  }
  const auto so = examples::summarize(source_only), da = examples::summarize(dann);
  std::printf(
      "target test accuracy over %ld seed(s): source-only %.2f ± %.2f %%, DANN %.2f ± "
      "%.2f %%\n",
      seeds, 100 * so.mean, 100 * so.std, 100 * da.mean, 100 * da.std);
  std::printf("training time: %.2f s in all, %.3f s per run of %ld steps\n", seconds,
              seconds / double(2 * seeds), steps);
  std::printf(
      "{\"task\": \"%s->%s\", \"source_only_target_acc\": %.4f, \"source_only_target_acc_std\": "
      "%.4f, \"dann_target_acc\": %.4f, \"dann_target_acc_std\": %.4f, \"steps\": %ld, "
      "\"seeds\": %ld, \"seconds\": %.3f}\n",
      source_name.c_str(), target_name.c_str(), so.mean, so.std, da.mean, da.std, steps, seeds,
      seconds);
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "%s\n", e.what());
  return 1;
}
