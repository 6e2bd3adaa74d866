// SPDX-License-Identifier: Apache-2.0
// Tests for select/validator.hpp: every name parses back to its validator, which validators rise
// with quality, which score a set of candidates rather than one model, and an unknown name's
// error. Includes only the light header, which so compiles
// alone with what it needs.
#include <dafuse/select/validator.hpp>
#include "../check.hpp"

#include <string>

namespace select_validator_test {

namespace {

namespace sel = dafuse::select;
using dafuse::test::throws_naming;

TEST_CASE("every validator's name parses back to it") {
  for (const sel::validator v : sel::all_validators) {
    CAPTURE(std::string(sel::name(v)));
    CHECK(sel::parse_validator(sel::name(v)) == v);
    CHECK_FALSE(sel::needs_target_labels(v));
  }
  CHECK(sel::name(sel::validator::information_maximization) == "im");
  CHECK(sel::name(sel::validator::source_accuracy) == "source_accuracy");
  CHECK(sel::name(sel::validator::bnm) == "bnm");
  CHECK(sel::name(sel::validator::mano) == "mano");
  CHECK(sel::name(sel::validator::ensv) == "ensv");
  CHECK(sel::all_validators.back() == sel::validator::ensv);
}

TEST_CASE(
    "higher_is_better holds for accuracy, IM, SND, BNM, MaNo and EnsV, and not for entropy, DEV "
    "and PAD") {
  CHECK(sel::higher_is_better(sel::validator::source_accuracy));
  CHECK(sel::higher_is_better(sel::validator::information_maximization));
  CHECK(sel::higher_is_better(sel::validator::snd));
  CHECK(sel::higher_is_better(sel::validator::bnm));
  CHECK(sel::higher_is_better(sel::validator::mano));
  CHECK(sel::higher_is_better(sel::validator::ensv));  // an agreement with the ensemble
  CHECK_FALSE(sel::higher_is_better(sel::validator::entropy));
  CHECK_FALSE(sel::higher_is_better(sel::validator::dev));
  CHECK_FALSE(sel::higher_is_better(sel::validator::pad));
}

TEST_CASE("only EnsV scores a set of candidates; every other validator scores one model") {
  for (const sel::validator v : sel::all_validators) {
    CAPTURE(std::string(sel::name(v)));
    CHECK(sel::scores_a_set(v) == (v == sel::validator::ensv));
  }
}

TEST_CASE("parse_validator rejects an unknown name, naming the field and every valid name") {
  CHECK(throws_naming([] { (void)sel::parse_validator("accuracy", "--select"); },
                      {"select::parse_validator", "--select", "\"accuracy\"", "source_accuracy",
                       "entropy", "im", "snd", "dev", "pad", "bnm", "mano", "ensv"}));
  CHECK(throws_naming([] { (void)sel::parse_validator("IM"); }, {"validator", "\"IM\""}));
}

}  // namespace

}  // namespace select_validator_test
