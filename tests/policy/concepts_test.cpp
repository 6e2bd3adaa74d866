// SPDX-License-Identifier: Apache-2.0
// Tests for the policy concepts: every shipped policy fills exactly its own slot, look-alikes
// with a wrong member are turned away, and head::dann checks lambda_max.
#include <dafuse/policy/clip.hpp>
#include <dafuse/policy/head.hpp>
#include <dafuse/policy/loader.hpp>
#include <dafuse/policy/optim.hpp>
#include <dafuse/policy/precision.hpp>
#include <dafuse/policy/schedule.hpp>
#include "../check.hpp"

#include <limits>
#include <string>

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
struct head_with_bad_schedule {
  using head_tag = void;
  using schedule_type = int;
  static constexpr bool adversarial = true;
  static df::status can_implement(const df::fit_args&) { return df::status::ok(); }
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
  CHECK_FALSE(df::optim_policy<optim_without_state>);
}

TEST_CASE("the loaders say where the data set lives") {
  CHECK_FALSE(df::loader::sync::data_in_step_memory);
  CHECK(df::loader::resident::data_in_step_memory);
}

TEST_CASE("only head::dann is adversarial") {
  CHECK(df::head::dann<>::adversarial);
  CHECK_FALSE(df::head::source_only<>::adversarial);
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
