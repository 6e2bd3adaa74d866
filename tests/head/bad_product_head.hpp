// A head whose one product cannot run: C = h_s·h_sᵀ [F, F] declared with ldc F − 1. Every view
// must refuse it (head::product::check) before it runs or plans it; tests/head/view_test.cpp runs
// it on the host executor, tests/backend/device_step_cases.hpp on the device executor.
#pragma once
#include <dafuse/head/coral.hpp>
#include <dafuse/head/view.hpp>

namespace dafuse::test {

struct bad_product_head : head::coral<schedule::constant> {
  static constexpr head::product gram(const head::shape& s) {
    return {false, true, s.features, s.features, s.batch, s.features, s.features, s.features - 1};
  }
  template <class View, class Scale>
  static auto forward(View& v, Scale /*loss_scale*/) {
    using T = typename View::value_type;
    v.product(gram(v.shape()), 1.0, v.features(), v.features(), T(0), v.scratch());
    return v.result(step_scalar(0.0));
  }
};

}  // namespace dafuse::test
