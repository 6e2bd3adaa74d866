// SPDX-License-Identifier: Apache-2.0
// Tests for backend/host/working_copy.hpp against a plain loop of round(): a mixed-precision
// step's copy holds every parameter rounded (on one thread, on a team split as the update, or
// dealt as a sparse batch), or only the biases where the products round their operands
// themselves; it follows the master parameters when a user writes them; an fp32 step has no
// copy at all.
#include <dafuse/backend/host/working_copy.hpp>
#include "../check.hpp"

#include <dafuse/core/half.hpp>
#include <dafuse/core/rng.hpp>
#include <dafuse/core/system.hpp>
#include <dafuse/nn/dann_net.hpp>

#include <array>
#include <cstddef>
#include <vector>

namespace backend_working_copy_test {

namespace {

namespace host = dafuse::backend::host;
namespace nn = dafuse::nn;
using dafuse::index_t;

//! More than update_parallel_min parameters, so a split refresh runs on every thread.
using net =
    nn::dann_net<nn::mlp<512, 300, nn::relu>, nn::linear<300, 3>, nn::mlp<300, 40, 1, nn::relu>>;
static_assert(net::param_count >= host::update_parallel_min);

//! What working_copy reads of a step.
template <bool Mixed, bool Sparse>
struct step {
  using net_type = net;
  using value_type = float;
  static constexpr bool mixed = Mixed;
  static constexpr bool sparse_input = Sparse;
};

//! Rounding to bf16; `RoundsOperands`: a kernel that rounds its operands as it packs them.
template <bool RoundsOperands>
struct bf16_products {
  static constexpr bool rounds_operands = RoundsOperands;
  static float round(float x) { return dafuse::round_to_bf16(x); }
};

std::vector<float> master_values(std::uint64_t seed) {
  dafuse::counter_rng rng(seed, dafuse::rng_stream::user);
  std::vector<float> v(static_cast<std::size_t>(net::param_count));
  for (float& x : v) x = rng.uniform(-1.0f, 1.0f);
  return v;
}

//! Whether parameter i is a bias: past its layer's weights.
std::vector<bool> bias_mask() {
  std::vector<bool> bias(std::size_t(net::param_count), false);
  const auto mark = [&]<class Stack>(index_t offset, Stack*) {
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      ((std::fill(bias.begin() + (offset + Stack::template param_offset<I>() +
                                  Stack::template layer<I>::weight_count),
                  bias.begin() + (offset + Stack::template param_offset<I>() +
                                  Stack::template layer<I>::param_count),
                  true)),
       ...);
    }
    (std::make_index_sequence<Stack::depth>{});
  };
  mark(net::features_offset, static_cast<net::feature_stack*>(nullptr));
  mark(net::classifier_offset, static_cast<net::classifier_stack*>(nullptr));
  mark(net::discriminator_offset, static_cast<net::discriminator_stack*>(nullptr));
  return bias;
}

//! The weight matrices, each split by its columns among `threads` parts (the update's split).
std::array<host::weight_block, 4> weight_blocks(int threads) {
  const auto block = [&](index_t begin, index_t rows, index_t cols) {
    return host::weight_block{
        begin, rows, cols,
        host::detail::product_split::even(host::split_along::columns, cols, threads, 1)};
  };
  using ds = net::discriminator_stack;
  return {block(net::features_offset, 300, 512), block(net::classifier_offset, 3, 300),
          block(net::discriminator_offset, 40, 300),
          block(net::discriminator_offset + ds::param_offset<1>(), 1, 40)};
}

//! Checks a copy against round(master) where `rounded` says so.
void check_copy(const float* working,
                const std::vector<float>& master,
                const std::vector<bool>& rounded) {
  index_t wrong = 0;
  for (std::size_t i = 0; i < master.size(); ++i)
    if (rounded[i] && working[i] != dafuse::round_to_bf16(master[i])) ++wrong;
  CHECK(wrong == 0);
}

}  // namespace

TEST_CASE("an fp32 step computes with its master parameters and holds no copy") {
  host::working_copy<step<false, false>, dafuse::system::omp, bf16_products<false>> copy;
  std::vector<float> master = master_values(1);
  const host::sparse_batch_preparer<float, dafuse::system::omp> listed;
  CHECK(copy.refresh(master.data(), {}, listed) == master.data());
  CHECK(copy.product_weights(master.data(), master.data()) == master.data());
  CHECK(copy.memory_bytes() == 0);
}

TEST_CASE("a mixed-precision copy holds every parameter rounded, however the threads split it") {
  using copy_type =
      host::working_copy<step<true, false>, dafuse::system::omp, bf16_products<false>>;
  static_assert(!copy_type::products_read_master);
  const std::vector<bool> all(std::size_t(net::param_count), true);
  const host::sparse_batch_preparer<float, dafuse::system::omp> listed;
  for (const int threads : {1, 2, 3}) {
    CAPTURE(threads);
    dafuse::test::thread_count team(threads);
    copy_type copy;
    CHECK(copy.memory_bytes() == std::size_t(net::param_count) * sizeof(float));
    std::vector<float> master = master_values(2);
    const auto blocks = weight_blocks(threads);
    const float* working = copy.refresh(master.data(), blocks, listed);
    CHECK(working != master.data());
    CHECK(copy.product_weights(master.data(), working) == working);
    check_copy(working, master, all);
    // A user writes the master parameters between steps: the next refresh follows them.
    master = master_values(3);
    check_copy(copy.refresh(master.data(), blocks, listed), master, all);
    // Unsplit, the same values.
    check_copy(copy.refresh(master.data(), {}, listed), master, all);
  }
}

TEST_CASE("a sparse step dealt among threads rounds its whole copy on the deal's threads") {
  using copy_type = host::working_copy<step<true, true>, dafuse::system::omp, bf16_products<true>>;
  static_assert(!copy_type::products_read_master, "a sparse first layer reads W unrounded");
  const std::vector<bool> all(std::size_t(net::param_count), true);
  dafuse::test::thread_count team(2);
  const host::sparse_batch_preparer<float, dafuse::system::omp> dealt(512, 300, 8, 64, 2);
  CHECK(dealt.dealt());
  copy_type copy;
  const std::vector<float> master = master_values(4);
  std::array<host::weight_block, 4> blocks = weight_blocks(2);
  blocks[0].dealt_columns = dealt.block();
  check_copy(copy.refresh(master.data(), blocks, dealt), master, all);
}

TEST_CASE("where the products round their operands, only the biases are rounded into the copy") {
  using copy_type = host::working_copy<step<true, false>, dafuse::system::omp, bf16_products<true>>;
  static_assert(copy_type::products_read_master);
  const std::vector<bool> biases = bias_mask();
  const host::sparse_batch_preparer<float, dafuse::system::omp> listed;
  copy_type copy;
  const std::vector<float> master = master_values(5);
  const float* working = copy.refresh(master.data(), weight_blocks(2), listed);
  CHECK(copy.product_weights(master.data(), working) == master.data());
  check_copy(working, master, biases);
  // The weights' places keep the zeros they were allocated with: nothing reads them.
  index_t written = 0;
  for (std::size_t i = 0; i < master.size(); ++i) written += !biases[i] && working[i] != 0.0f;
  CHECK(written == 0);
}

}  // namespace backend_working_copy_test
