// SPDX-License-Identifier: Apache-2.0
// Tests for policy/schedule.hpp: Ganin et al.'s λ and learning-rate schedules, the constant one,
// and that a user's own schedule plugs into a head.
#include <dafuse/policy/schedule.hpp>
#include "../check.hpp"

#include <dafuse/head/dann.hpp>
#include <dafuse/head/source_only.hpp>

#include <cmath>

namespace policy_schedule_test {

namespace {

using dafuse::schedule::constant;
using dafuse::schedule::ganin;
using dafuse::schedule::tllib;

//! The progress of a run of 10⁶ steps at fraction p (exact for the p used here).
dafuse::progress at(double p) {
  return {dafuse::index_t(std::llround(p * 1e6)), 1'000'000};
}

//! A user schedule: λ ramps linearly, the learning rate halves after the first half.
struct linear_ramp {
  using schedule_tag = void;
  static double lambda(const dafuse::progress& t) { return t.fraction(); }
  static double lr_factor(const dafuse::progress& t) { return t.fraction() < 0.5 ? 1.0 : 0.5; }
};

//! Has both functions but does not say it is a schedule.
struct untagged_ramp {
  static double lambda(const dafuse::progress& t) { return t.fraction(); }
  static double lr_factor(const dafuse::progress&) { return 1.0; }
};

//! Says it is a schedule but has no learning-rate factor.
struct lambda_only {
  using schedule_tag = void;
  static double lambda(const dafuse::progress& t) { return t.fraction(); }
};

static_assert(dafuse::schedule_policy<linear_ramp>);
static_assert(dafuse::head_policy<dafuse::head::dann<linear_ramp>>);
static_assert(dafuse::head_policy<dafuse::head::source_only<linear_ramp>>);
static_assert(!dafuse::schedule_policy<untagged_ramp>);
static_assert(!dafuse::schedule_policy<lambda_only>);

}  // namespace

TEST_CASE("ganin's lambda starts at 0 and reaches 2 / (1 + e^-10) - 1 at the end") {
  CHECK(ganin::lambda(at(0.0)) == 0.0);
  CHECK(ganin::lambda(at(1.0)) ==
        doctest::Approx(2.0 / (1.0 + std::exp(-10.0)) - 1.0).epsilon(1e-15));
  CHECK(ganin::lambda(at(1.0)) == doctest::Approx(0.9999092042625952).epsilon(1e-14));
}

TEST_CASE("ganin's lambda is tanh(5p), the same curve written another way") {
  // 2 / (1 + e^-x) - 1 = tanh(x / 2), so with γ = 10 the ramp is tanh(5p).
  for (int i = 0; i <= 20; ++i) {
    const double p = i / 20.0;
    CAPTURE(p);
    CHECK(ganin::lambda(at(p)) == doctest::Approx(std::tanh(5.0 * p)).epsilon(1e-12));
  }
}

TEST_CASE("ganin's lambda increases and its learning-rate factor decreases over training") {
  double previous_lambda = ganin::lambda(at(0.0)), previous_lr = ganin::lr_factor(at(0.0));
  for (int i = 1; i <= 1000; ++i) {
    const double p = i / 1000.0;
    CAPTURE(p);
    const double l = ganin::lambda(at(p)), f = ganin::lr_factor(at(p));
    CHECK(l > previous_lambda);
    CHECK(f < previous_lr);
    CHECK(l < 1.0);
    CHECK(f > 0.0);
    previous_lambda = l;
    previous_lr = f;
  }
}

TEST_CASE("ganin's learning-rate factor is 1 at the start and 11^-0.75 at the end") {
  CHECK(ganin::lr_factor(at(0.0)) == 1.0);
  CHECK(ganin::lr_factor(at(1.0)) == doctest::Approx(std::pow(11.0, -0.75)).epsilon(1e-15));
  CHECK(ganin::lr_factor(at(1.0)) == doctest::Approx(0.16556002607617018).epsilon(1e-14));
  // lr(p) = (1 + 10p)^-0.75: at p = 0.5 that is 6^-0.75.
  CHECK(ganin::lr_factor(at(0.5)) == doctest::Approx(std::pow(6.0, -0.75)).epsilon(1e-15));
}

TEST_CASE("the constant schedule gives factor 1 for lambda and learning rate throughout") {
  for (const double p : {0.0, 0.1, 0.5, 0.999, 1.0}) {
    CAPTURE(p);
    CHECK(constant::lambda(at(p)) == 1.0);
    CHECK(constant::lr_factor(at(p)) == 1.0);
  }
}

TEST_CASE("a user-defined schedule is what head::dann uses for lambda and learning rate") {
  using head = dafuse::head::dann<linear_ramp>;
  using schedule = head::schedule_type;
  CHECK(schedule::lambda(at(0.25)) == 0.25);
  CHECK(schedule::lr_factor(at(0.25)) == 1.0);
  CHECK(schedule::lr_factor(at(0.75)) == 0.5);
  CHECK(head::draws_target_rows);
  CHECK(bool(head::can_implement(dafuse::fit_args{})));
}

TEST_CASE("tllib's schedule counts iterations: lambda at i = 1000 is 2/(1+e^-1)-1 whatever N is") {
  for (const dafuse::index_t steps : {2000, 100000}) {
    CHECK(tllib::lambda({0, steps}) == 0.0);
    CHECK(tllib::lambda({1000, steps}) == doctest::Approx(2.0 / (1.0 + std::exp(-1.0)) - 1.0));
    CHECK(tllib::lr_factor({0, steps}) == 1.0);
    CHECK(tllib::lr_factor({1000, steps}) == doctest::Approx(std::pow(2.0, -0.75)));
  }
  static_assert(dafuse::head_policy<dafuse::head::dann<tllib>>);
}

}  // namespace policy_schedule_test
