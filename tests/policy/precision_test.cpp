// SPDX-License-Identifier: Apache-2.0
// Tests for policy/precision.hpp: the loss scalers' rules (GradScaler's for loss_scale::dynamic)
// against a plain replay of the rule, their argument checks, and each precision's formats.
#include <dafuse/policy/precision.hpp>
#include "../check.hpp"

#include <string>
#include <vector>

namespace policy_precision_test {

namespace {

namespace df = dafuse;

// GradScaler.update's rule written as a loop over a history of overflow flags: the scale after
// each step and the growth tracker.
std::vector<double> gradscaler_scales(
    const std::vector<bool>& overflows, double init, double growth, double backoff, int interval) {
  std::vector<double> out;
  double scale = init;
  int tracker = 0;
  for (const bool inf : overflows) {
    if (inf) {
      scale *= backoff;
      tracker = 0;
    } else {
      tracker += 1;
      if (tracker == interval) {
        scale *= growth;
        tracker = 0;
      }
    }
    out.push_back(scale);
  }
  return out;
}

}  // namespace

TEST_CASE("loss_scale::dynamic follows GradScaler: back off on overflow, grow after an interval") {
  const df::fit_args args{.loss_scale_init = 1024.0f,
                          .loss_scale_growth = 4.0f,
                          .loss_scale_backoff = 0.25f,
                          .loss_scale_interval = 3};
  const std::vector<bool> history{false, false, true, false, false, false, false, false,
                                  false, true,  true, false, false, false, false, false};
  const std::vector<double> expected = gradscaler_scales(history, 1024, 4, 0.25, 3);
  df::loss_scale_state s{df::loss_scale::dynamic::initial(args), 0};
  CHECK(s.scale == 1024.0);
  for (std::size_t i = 0; i < history.size(); ++i) {
    CAPTURE(i);
    df::loss_scale::dynamic::update(s, history[i], args);
    CHECK(s.scale == expected[i]);
  }
  // The history above both backs off and grows, so the comparison is not vacuous.
  CHECK(expected[2] < 1024.0);
  CHECK(expected.back() > expected[10]);
}

TEST_CASE("GradScaler's defaults are fit_args' defaults") {
  const df::fit_args defaults;
  CHECK(defaults.loss_scale_init == 65536.0f);
  CHECK(defaults.loss_scale_growth == 2.0f);
  CHECK(defaults.loss_scale_backoff == 0.5f);
  CHECK(defaults.loss_scale_interval == 2000);
  CHECK(df::loss_scale::dynamic::can_implement(defaults));
}

TEST_CASE("loss_scale::fixed and loss_scale::none never change their scale") {
  const df::fit_args args;
  df::loss_scale_state fixed{df::loss_scale::fixed<512>::initial(args), 0};
  df::loss_scale_state none{df::loss_scale::none::initial(args), 0};
  for (const bool overflow : {true, false, false, true}) {
    df::loss_scale::fixed<512>::update(fixed, overflow, args);
    df::loss_scale::none::update(none, overflow, args);
  }
  CHECK(fixed.scale == 512.0);
  CHECK(none.scale == 1.0);
#if __cpp_nontype_template_args >= 201911L  // floating-point template arguments (clang >= 18)
  CHECK(df::loss_scale::fixed<0.5f>::value == 0.5);
#endif
}

TEST_CASE("loss_scale::dynamic names the field and the expected value of a bad argument") {
  const auto message = [](df::fit_args a) {
    return df::loss_scale::dynamic::can_implement(a).message;
  };
  CHECK(message({.loss_scale_init = 0.0f})
            .find("fit_args.loss_scale_init: expected a finite value > 0") == 0);
  CHECK(message({.loss_scale_growth = 1.0f})
            .find("fit_args.loss_scale_growth: expected a finite factor > 1") == 0);
  CHECK(message({.loss_scale_backoff = 1.0f})
            .find("fit_args.loss_scale_backoff: expected a factor in (0, 1)") == 0);
  CHECK(message({.loss_scale_backoff = 0.0f}).find("loss_scale_backoff") != std::string::npos);
  CHECK(message({.loss_scale_interval = 0})
            .find("fit_args.loss_scale_interval: expected at least 1 step for loss_scale::dynamic, "
                  "found 0") == 0);
  CHECK(message({.loss_scale_min = 0.0f})
            .find("fit_args.loss_scale_min: expected a number in (0, loss_scale_init] for "
                  "loss_scale::dynamic, found 0") == 0);
  CHECK(message({.loss_scale_init = 8.0f, .loss_scale_min = 16.0f}).find("loss_scale_min") == 9);
  CHECK(message({.loss_scale_min = NAN}).find("loss_scale_min") == 9);
  CHECK(message({.loss_scale_init = 8.0f, .loss_scale_min = 8.0f}).empty());
}

TEST_CASE("a dynamic loss scale backs off no further than loss_scale_min") {
  // GradScaler's halving alone reaches S = 0 after about 1100 overflows in a row (2^16 · 2^-1090
  // is below the smallest double); the floor keeps S where gradients still mean something.
  df::fit_args a;
  df::loss_scale_state s{.scale = df::loss_scale::dynamic::initial(a)};
  for (int k = 0; k < 2000; ++k) df::loss_scale::dynamic::update(s, true, a);
  CHECK(s.scale == 1.0);
  a.loss_scale_min = 0.25f;
  for (int k = 0; k < 3; ++k) df::loss_scale::dynamic::update(s, true, a);
  CHECK(s.scale == 0.25);
  // Growth still works from the floor.
  a.loss_scale_interval = 2;
  df::loss_scale::dynamic::update(s, false, a);
  df::loss_scale::dynamic::update(s, false, a);
  CHECK(s.scale == 0.5);
}

TEST_CASE("each precision names its formats and its loss scaler") {
  using df::number_format;
  static_assert(df::precision::fp32::compute_format == number_format::fp32);
  static_assert(df::precision::bf16::compute_format == number_format::bf16);
  static_assert(std::is_same_v<df::precision::bf16::master_type, float>);
  static_assert(std::is_same_v<df::precision::bf16::loss_scale_type, df::loss_scale::none>);
  using fp16 = df::precision::fp16<df::loss_scale::dynamic>;
  static_assert(fp16::compute_format == number_format::fp16);
  static_assert(std::is_same_v<fp16::master_type, float>);
  static_assert(std::is_same_v<fp16::loss_scale_type, df::loss_scale::dynamic>);
  static_assert(df::precision_policy<df::precision::fp16<df::loss_scale::fixed<128>>>);
  static_assert(!df::loss_scale_policy<df::precision::fp32>);
  CHECK(true);
}

}  // namespace policy_precision_test
