// SPDX-License-Identifier: Apache-2.0
// dafuse-train's numbers and strings as its outputs write them (progress, tables, JSON):
// percentages, durations, the fewest digits that read back a float, JSON string literals.
// Defined once in run_text.cpp (the prebuilt part, meson.build), not in each unit that runs a
// step.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace dafuse_train {

//! JSON string literal of `s`.
std::string json_string(std::string_view s);

//! A JSON number, or null for NaN and infinities (JSON has neither).
std::string number(double v);

//! A float (a fit_args field) in the fewest digits that read back as the same float: 0.03, not
//! the double 0.029999999329447746.
std::string number(float v);

//! A duration for the progress output: 42 s, 3 min 05 s, 1 h 02 min.
std::string duration(double seconds);

//! A fraction as a percentage, "n/a" when not measured (NaN).
std::string percent(double v);

//! "62.10 ± 1.20 %", or "n/a" without labels.
std::string percent_std(double mean, double std);

//! "0.1, 1": a list of values as typed (the fewest digits that read back the same float).
std::string value_list(const std::vector<float>& v);

}  // namespace dafuse_train
