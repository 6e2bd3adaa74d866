// SPDX-License-Identifier: Apache-2.0
// Tests for the policy concepts: every shipped policy fills exactly its own slot, look-alikes
// with a wrong member are turned away, and head::dann checks lambda_max.
#include <dafuse/head/cdan.hpp>
#include <dafuse/head/dann.hpp>
#include <dafuse/head/source_only.hpp>
#include <dafuse/policy/clip.hpp>
#include <dafuse/policy/loader.hpp>
#include <dafuse/policy/optim.hpp>
#include <dafuse/policy/precision.hpp>
#include <dafuse/policy/schedule.hpp>
#include "../check.hpp"

#include <limits>
#include <string>

namespace policy_concepts_test {

namespace {

namespace df = dafuse;

enum class slot { clip, optim, schedule, head, loader, precision };

//! The slot each shipped policy is meant to fill.
template <class P>
struct slot_of;
template <>
struct slot_of<df::clip::none> {
  static constexpr slot value = slot::clip;
};
template <>
struct slot_of<df::clip::global_norm> {
  static constexpr slot value = slot::clip;
};
template <>
struct slot_of<df::optim::sgd> {
  static constexpr slot value = slot::optim;
};
template <>
struct slot_of<df::schedule::ganin> {
  static constexpr slot value = slot::schedule;
};
template <>
struct slot_of<df::schedule::constant> {
  static constexpr slot value = slot::schedule;
};
template <class S>
struct slot_of<df::head::source_only<S>> {
  static constexpr slot value = slot::head;
};
template <class S>
struct slot_of<df::head::dann<S>> {
  static constexpr slot value = slot::head;
};
template <class S, bool E>
struct slot_of<df::head::cdan<S, E>> {
  static constexpr slot value = slot::head;
};
template <>
struct slot_of<df::loader::sync> {
  static constexpr slot value = slot::loader;
};
template <>
struct slot_of<df::loader::resident> {
  static constexpr slot value = slot::loader;
};
template <>
struct slot_of<df::precision::fp32> {
  static constexpr slot value = slot::precision;
};
template <>
struct slot_of<df::precision::fp64> {
  static constexpr slot value = slot::precision;
};
template <>
struct slot_of<df::precision::bf16> {
  static constexpr slot value = slot::precision;
};
template <class Scaler>
struct slot_of<df::precision::fp16<Scaler>> {
  static constexpr slot value = slot::precision;
};

// A few of the cross checks spelled out, so a failure names the pair at compile time.
static_assert(!df::clip_policy<df::precision::fp32>);
static_assert(!df::loader_policy<df::clip::none>);
static_assert(!df::optim_policy<df::clip::global_norm>);
static_assert(!df::head_policy<df::schedule::ganin>);
static_assert(!df::schedule_policy<df::head::dann<>>);
static_assert(!df::precision_policy<df::loader::resident>);

//! A clip look-alike whose scales() returns the wrong type.
struct clip_returning_double {
  using clip_tag = void;
  static double scales(const df::grad_norms&, const df::fit_args&) { return 1; }
  static df::status can_implement(const df::fit_args&) { return df::status::ok(); }
};

//! A precision look-alike that stores integers (everything else in place).
struct integer_precision {
  using precision_tag = void;
  using master_type = int;
  using accumulate_type = int;
  using loss_scale_type = df::loss_scale::none;
  static constexpr df::number_format compute_format = df::number_format::fp32;
};

//! A precision whose loss scaler is not one.
struct precision_with_bad_scaler {
  using precision_tag = void;
  using master_type = float;
  using accumulate_type = float;
  using loss_scale_type = int;
  static constexpr df::number_format compute_format = df::number_format::fp16;
};
static_assert(!df::precision_policy<precision_with_bad_scaler>);

//! A loader look-alike without the data_in_step_memory flag.
struct loader_without_flag {
  using loader_tag = void;
};

//! A head whose schedule_type is not a schedule.
struct head_with_bad_schedule : df::head::defaults {
  using schedule_type = int;
};

//! A head that says what it reads in the wrong type.
struct head_with_bad_input : df::head::defaults {
  using schedule_type = df::schedule::ganin;
  static constexpr int discriminator_reads = 1;
};

//! An optimizer look-alike without a state size.
struct optim_without_state {
  using optim_tag = void;
  template <class T>
  struct coefficients {};
  template <class T>
  static coefficients<T> make(const df::fit_args&, double, df::index_t) {
    return {};
  }
  template <class T>
  static void update(df::index_t, T, T*, T*, df::index_t, const coefficients<T>&) {}
  static df::status can_implement(const df::fit_args&) { return df::status::ok(); }
};

df::fit_args with_lambda_max(float lambda_max) {
  df::fit_args a;
  a.lambda_max = lambda_max;
  return a;
}

}  // namespace

TEST_CASE_TEMPLATE("each shipped policy satisfies its own slot's concept and no other",
                   P,
                   df::clip::none,
                   df::clip::global_norm,
                   df::optim::sgd,
                   df::schedule::ganin,
                   df::schedule::constant,
                   df::head::source_only<>,
                   df::head::source_only<df::schedule::ganin>,
                   df::head::dann<>,
                   df::head::dann<df::schedule::constant>,
                   df::head::cdan<>,
                   df::head::cdan_e<df::schedule::tllib>,
                   df::loader::sync,
                   df::loader::resident,
                   df::precision::fp32,
                   df::precision::fp64,
                   df::precision::bf16,
                   df::precision::fp16<df::loss_scale::dynamic>,
                   df::precision::fp16<df::loss_scale::fixed<1024>>) {
  constexpr slot s = slot_of<P>::value;
  CHECK(df::clip_policy<P> == (s == slot::clip));
  CHECK(df::optim_policy<P> == (s == slot::optim));
  CHECK(df::schedule_policy<P> == (s == slot::schedule));
  CHECK(df::head_policy<P> == (s == slot::head));
  CHECK(df::loader_policy<P> == (s == slot::loader));
  CHECK(df::precision_policy<P> == (s == slot::precision));
}

TEST_CASE_TEMPLATE("types that are not policies satisfy no policy concept",
                   T,
                   int,
                   double,
                   df::fit_args,
                   df::grad_norms,
                   df::status) {
  CHECK_FALSE(df::clip_policy<T>);
  CHECK_FALSE(df::optim_policy<T>);
  CHECK_FALSE(df::schedule_policy<T>);
  CHECK_FALSE(df::head_policy<T>);
  CHECK_FALSE(df::loader_policy<T>);
  CHECK_FALSE(df::precision_policy<T>);
}

TEST_CASE("a look-alike with the right tag but a wrong member does not fill the slot") {
  CHECK_FALSE(df::clip_policy<clip_returning_double>);
  CHECK_FALSE(df::precision_policy<integer_precision>);
  CHECK_FALSE(df::loader_policy<loader_without_flag>);
  CHECK_FALSE(df::head_policy<head_with_bad_schedule>);
  CHECK_FALSE(df::head_policy<head_with_bad_input>);
  CHECK_FALSE(df::optim_policy<optim_without_state>);
}

TEST_CASE("the loaders say where the data set lives") {
  CHECK_FALSE(df::loader::sync::data_in_step_memory);
  CHECK(df::loader::resident::data_in_step_memory);
}

TEST_CASE("each head says what it reads and trains") {
  using df::discriminator_input;
  CHECK_FALSE(df::head::source_only<>::draws_target_rows);
  CHECK_FALSE(df::head::source_only<>::classifier_reads_target);
  CHECK(df::head::source_only<>::discriminator_reads == discriminator_input::none);
  CHECK(df::head::dann<>::draws_target_rows);
  CHECK_FALSE(df::head::dann<>::classifier_reads_target);
  CHECK(df::head::dann<>::discriminator_reads == discriminator_input::features);
  CHECK(df::head::cdan<>::draws_target_rows);
  CHECK(df::head::cdan<>::classifier_reads_target);
  CHECK(df::head::cdan<>::discriminator_reads == discriminator_input::multilinear);
  CHECK_FALSE(df::head::cdan<>::entropy_conditioning);
  CHECK(df::head::cdan_e<>::entropy_conditioning);
}

TEST_CASE("a head's weight is lambda_max times its schedule's lambda, and 0 without adaptation") {
  const df::fit_args a = with_lambda_max(0.5f);
  for (const df::index_t step : {0, 250, 1000}) {
    const df::progress now{step, 1000};
    CAPTURE(step);
    CHECK(df::head::source_only<df::schedule::ganin>::weight(a, now) == 0.0);
    CHECK(df::head::dann<>::weight(a, now) == 0.5 * df::schedule::ganin::lambda(now));
    CHECK(df::head::cdan_e<>::weight(a, now) == 0.5 * df::schedule::ganin::lambda(now));
  }
  const df::step_rates r = df::scheduled_rates<df::head::dann<>>(a, 250);
  CHECK(r.lambda == 0.5 * df::schedule::ganin::lambda({250, a.steps}));
  CHECK(r.lr == double(a.lr) * df::schedule::ganin::lr_factor({250, a.steps}));
}

TEST_CASE("head::dann accepts a finite lambda_max of zero or more") {
  for (const float ok : {0.0f, 0.1f, 1.0f, 10.0f}) {
    CAPTURE(ok);
    CHECK(bool(df::head::dann<>::can_implement(with_lambda_max(ok))));
  }
}

TEST_CASE("head::dann rejects a negative, NaN or infinite lambda_max naming the field") {
  for (const float bad : {-1e-3f, -1.0f, std::numeric_limits<float>::quiet_NaN(),
                          std::numeric_limits<float>::infinity()}) {
    CAPTURE(bad);
    const df::status s = df::head::dann<>::can_implement(with_lambda_max(bad));
    CHECK_FALSE(bool(s));
    CHECK(s.message.find("fit_args.lambda_max") != std::string::npos);
  }
  // source_only reads no λ, so it does not care.
  CHECK(bool(df::head::source_only<>::can_implement(with_lambda_max(-1.0f))));
}

}  // namespace policy_concepts_test
