// SPDX-License-Identifier: Apache-2.0
//! @file head/source_only.hpp
//! @brief head::source_only: no adaptation; the baseline every head is compared with.
#pragma once
#include <dafuse/config.hpp>
#include <dafuse/head/head_base.hpp>
#include <dafuse/policy/schedule.hpp>

namespace dafuse::head {

//! No adaptation: only source rows are used, G_d is neither run nor updated. The schedule only
//! shapes the learning rate (use the same one as the adapting run you compare with).
template <class Schedule = schedule::constant>
struct source_only : defaults {
  static_assert(schedule_policy<Schedule>,
                "dafuse: head::source_only<S> takes a schedule such as schedule::ganin");
  using schedule_type = Schedule;  //!< learning-rate schedule
};

static_assert(head_policy<source_only<>>);

}  // namespace dafuse::head
