// The benchmarks' DANN configurations and their data, shared by dann_bench and busy_bench:
//
//   moons        G_f 2 → 15 sigmoid, G_y 15 → 2, G_d 15 → 15 → 1 (ReLU), B = 32
//   digits-mlp   G_f 784 → 256 → 256 ReLU, G_y 256 → 10, G_d 256 → 256 → 1, B = 64
//   office-head  G_f 2048 → 256 ReLU, G_y 256 → 31, G_d 256 → 1024 → 1024 → 1, B = 32
//   amazon       G_f sparse 5000 → 100 ReLU, G_y 100 → 2, G_d 100 → 1, B = 64
//   demo         G_f 256 → 256 → 128 ReLU, G_y 128 → 10, G_d 128 → 128 → 1 (ReLU), B = 64
//                (scripts/demo's MNIST → USPS network, on random rows here)
//   lenet        G_f 16×16 conv 5×5 (32, pad 2) → pool 2 → conv 5×5 (48, pad 2) → pool 2 → 768
//                → 100 → 100 ReLU, G_y 100 → 10, G_d 100 → 100 → 1, B = 64 (fp32 only)
#pragma once
#include <dafuse/dafuse.hpp>

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace bench {

namespace df = dafuse;

struct moons {
  static constexpr const char* name = "moons";
  using net = df::nn::dann_net<df::nn::mlp<2, 15, df::nn::sigmoid>,
                               df::nn::linear<15, 2>,
                               df::nn::mlp<15, 15, 1, df::nn::relu>>;
  static constexpr df::index_t batch = 32;
};
struct digits_mlp {
  static constexpr const char* name = "digits-mlp";
  using net = df::nn::dann_net<df::nn::mlp<784, 256, 256, df::nn::relu>,
                               df::nn::linear<256, 10>,
                               df::nn::mlp<256, 256, 1, df::nn::relu>>;
  static constexpr df::index_t batch = 64;
};
struct office_head {
  static constexpr const char* name = "office-head";
  using net = df::nn::dann_net<df::nn::mlp<2048, 256, df::nn::relu>,
                               df::nn::linear<256, 31>,
                               df::nn::mlp<256, 1024, 1024, 1, df::nn::relu>>;
  static constexpr df::index_t batch = 32;
};
struct demo {
  static constexpr const char* name = "demo";
  using net = df::nn::dann_net<df::nn::mlp<256, 256, 128, df::nn::relu>,
                               df::nn::linear<128, 10>,
                               df::nn::mlp<128, 128, 1, df::nn::relu>>;
  static constexpr df::index_t batch = 64;
};
struct amazon {
  static constexpr const char* name = "amazon";
  using net = df::nn::dann_net<df::nn::sparse_input<df::nn::mlp<5000, 100, df::nn::relu>>,
                               df::nn::linear<100, 2>,
                               df::nn::linear<100, 1>>;
  static constexpr df::index_t batch = 64;
};

struct lenet {
  static constexpr const char* name = "lenet";
  using features = df::nn::digits_lenet;  // dafuse/nn/lenet.hpp
  using net = df::nn::digits_lenet_dann;
  static constexpr df::index_t batch = 64;
};

//! Random dense rows in [0, 1) and labels: the dense configurations' data (not timed).
inline df::data::dataset random_rows(df::index_t rows,
                                     df::index_t width,
                                     df::index_t classes,
                                     df::data::domain side) {
  df::counter_rng rng(7, df::rng_stream::user, std::uint32_t(side));
  df::data::host_array<float> x{{std::size_t(rows), std::size_t(width)},
                                std::vector<float>(std::size_t(rows * width))};
  for (float& v : x.values) v = rng.uniform<float>();
  std::vector<std::int32_t> y(static_cast<std::size_t>(rows));
  for (auto& l : y) l = std::int32_t(rng.below(std::uint32_t(classes)));
  return df::data::make_dataset("random rows", side, std::move(x), std::move(y));
}

struct sparse_pair {
  df::data::sparse_dataset source, target;
  std::string origin;
};
//! The Amazon reviews (dvd → books) from `data_dir`, or synthetic rows of their density without
//! them.
inline sparse_pair amazon_data(const std::filesystem::path& data_dir) {
  const std::filesystem::path dir = data_dir / "amazon_reviews";
  if (std::filesystem::exists(dir / "dvd_train_indptr.npy")) {
    auto load = [&](const char* prefix, df::data::domain side) {
      return df::data::load_sparse_dataset(dir / prefix,
                                           dir / (std::string(prefix) + "_labels.npy"), side, 5000);
    };
    return {load("dvd_train", df::data::domain::source),
            load("books_train", df::data::domain::target), "dvd_train -> books_train"};
  }
  // Without the data: rows with the reviews' density (about 1 % non-zeros).
  auto synthetic = [](df::data::domain side) {
    df::counter_rng rng(3, df::rng_stream::user, std::uint32_t(side));
    std::vector<float> dense(std::size_t(2000) * 5000, 0.f);
    for (float& v : dense)
      if (rng.below(100) == 0) v = 1.f + rng.uniform<float>();
    std::vector<std::int32_t> y(2000);
    for (auto& l : y) l = std::int32_t(rng.below(2));
    return df::data::make_sparse_dataset("synthetic", side,
                                         df::data::to_csr(dense.data(), 2000, 5000), y);
  };
  return {synthetic(df::data::domain::source), synthetic(df::data::domain::target),
          "synthetic, 1 % dense"};
}

}  // namespace bench
