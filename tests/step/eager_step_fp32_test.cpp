// SPDX-License-Identifier: Apache-2.0
// eager_step against train_step on the small dense networks in fp32 (to 1e-5: the passes sum in
// other orders), its interface and argument checks, and its errors (eager_step_cases.hpp).
#include "eager_step_cases.hpp"

namespace step_eager_step_fp32_test {

using namespace eager_cases;

TEST_CASE_TEMPLATE("eager_step trains the weights train_step trains from the same arguments",
                   Case,
                   sgd_momentum_fp32,
                   dampened_global_norm_fp32,
                   adamw_per_module_norm_fp32,
                   adam_value_fp32,
                   source_only_adamw_fp32) {
  check_trains_alike<Case>();
}

TEST_CASE_TEMPLATE("a non-finite batch skips the update in both steps alike",
                   Case,
                   sgd_momentum_fp32) {
  check_skips_non_finite<Case>();
}

TEST_CASE("eager_step offers train_step's interface and argument checks") {
  using f = sgd_momentum_fp32::fused;
  using e = sgd_momentum_fp32::eager;
  static_assert(
      e::input_width == f::input_width && e::class_count == f::class_count &&
      e::feature_width == f::feature_width && e::draws_target_rows == f::draws_target_rows &&
      e::sparse_input == f::sparse_input && e::trained_param_count == f::trained_param_count &&
      std::is_same_v<e::value_type, f::value_type> &&
      std::is_same_v<e::accumulate_type, f::accumulate_type> &&
      std::is_same_v<e::schedule_type, f::schedule_type> &&
      std::is_same_v<e::arguments, df::fit_args> && std::is_same_v<e::fused_type, f>);
  static_assert(sparse_adam_fp32::eager::sparse_input);
  static_assert(!source_only_adamw_fp32::eager::trains_discriminator);

  for (const df::fit_args& a : {df::fit_args{}, df::fit_args{.batch = 0}, df::fit_args{.lr = -1},
                                df::fit_args{.nesterov = true}, df::fit_args{.lambda_max = -1}})
    CHECK(e::can_implement(a).message == f::can_implement(a).message);
  CHECK(adam_value_fp32::eager::can_implement({.max_grad_value = 0})
            .message.find("fit_args.max_grad_value") != std::string::npos);
  CHECK_THROWS_WITH_AS(e(df::fit_args{.batch = -3}),
                       doctest::Contains("dafuse: fit_args.batch: expected at least 1"), df::error);

  e dense(df::fit_args{.batch = 5});
  CHECK(dense.feature_rows() == 10);
  CHECK(dense.input().rows == 6);
  CHECK(dense.input().cols == 10);
  CHECK(dense.source_labels().size() == 5);
  CHECK(dense.parameters().size() == std::size_t(mixed_net::param_count));
  CHECK(dense.gradients().size() == std::size_t(mixed_net::param_count));
  CHECK(dense.optimizer_state().size() == std::size_t(mixed_net::param_count));
  CHECK(dense.args().batch == 5);
  CHECK(dense.step_index() == 0);
  // Every intermediate has its own buffer: more memory than the fused step's scratch (without
  // the fused step's evaluation buffers, which eager_step does not have).
  CHECK(dense.memory_bytes() > f(df::fit_args{.batch = 5, .eval_chunk = 1}).memory_bytes());
  source_only_adamw_fp32::eager source(df::fit_args{.batch = 5});
  CHECK(source.input().cols == 5);  // only source rows
  CHECK(source.optimizer_state().size() == 2 * std::size_t(relu_net::param_count));

  sparse_adam_fp32::eager sparse(df::fit_args{.batch = 4});
  sparse_adam_fp32::fused sparse_fused(df::fit_args{.batch = 4});
  CHECK(sparse.sparse_batch().offsets.size() == sparse_fused.sparse_batch().offsets.size());
  CHECK(sparse.sparse_batch().indices.size() == sparse_fused.sparse_batch().indices.size());
  CHECK(sparse.sparse_batch().values.size() == sparse_fused.sparse_batch().values.size());
}

TEST_CASE("bad labels and sparse batches are errors that name the slot and change nothing") {
  sgd_momentum_fp32::eager dense(sgd_momentum_fp32::args());
  fill(dense, 0);
  dense.source_labels()[2] = 4;
  const std::vector<float> before(dense.parameters().begin(), dense.parameters().end());
  CHECK_THROWS_WITH_AS(dense.run(),
                       doctest::Contains("eager_step: source_labels()[2]: expected a class in "
                                         "[0, 4)"),
                       df::error);
  CHECK(std::equal(before.begin(), before.end(), dense.parameters().begin()));
  CHECK(dense.step_index() == 0);

  sparse_adam_fp32::eager sparse(sparse_adam_fp32::args());
  fill(sparse, 0);
  auto slots = sparse.sparse_batch();
  const std::int32_t saved = slots.indices[3];
  slots.indices[3] = 30;
  CHECK_THROWS_WITH_AS(
      sparse.run(),
      doctest::Contains("eager_step: sparse_batch().indices[3]: expected a feature in [0, 30)"),
      df::error);
  slots.indices[3] = saved;
  slots.offsets[2] = slots.offsets[1] - 1;
  CHECK_THROWS_WITH_AS(sparse.run(), doctest::Contains("sparse_batch().offsets[2]"), df::error);
  fill(sparse, 0);
  CHECK_NOTHROW(sparse.run());  // usable again after the errors
}

}  // namespace step_eager_step_fp32_test
