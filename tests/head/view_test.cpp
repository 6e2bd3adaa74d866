// Tests for head/view.hpp: head::product::check accepts the smallest leading dimensions each
// operand's layout allows and names the first field that cannot describe a product; the host
// executor's view refuses a head's product that cannot run before running it.
#include <dafuse/head/view.hpp>
#include <dafuse/step/train_step.hpp>
#include "../check.hpp"
#include "bad_product_head.hpp"

namespace head_view_test {

namespace df = dafuse;
using df::head::product;
using df::test::throws_naming;

TEST_CASE("head::product::check accepts the smallest leading dimensions of each layout") {
  // C[4, 3] = op(A)·op(B), k = 5: A is [4, 5] or stored [5, 4]; B is [5, 3] or stored [3, 5].
  for (const bool ta : {false, true})
    for (const bool tb : {false, true}) {
      CAPTURE(ta);
      CAPTURE(tb);
      const product p{ta, tb, 4, 3, 5, ta ? 5 : 4, tb ? 3 : 5, 4};
      CHECK_NOTHROW(p.check());
      product a = p, b = p, c = p;
      --a.lda;
      --b.ldb;
      --c.ldc;
      CHECK(throws_naming([&] { a.check(); },
                          {"head::product", "lda", ta ? "at least 5" : "at least 4"}));
      CHECK(throws_naming([&] { b.check(); },
                          {"head::product", "ldb", tb ? "at least 3" : "at least 5"}));
      CHECK(throws_naming([&] { c.check(); }, {"head::product", "ldc", "at least 4", "found 3"}));
    }
}

TEST_CASE("head::product::check refuses empty sizes, naming the first") {
  CHECK(throws_naming([] { product{false, false, 0, 3, 5, 4, 5, 4}.check(); },
                      {"m: expected at least 1", "found 0"}));
  CHECK(throws_naming([] { product{false, false, 4, 0, 5, 4, 5, 4}.check(); },
                      {"n: expected at least 1"}));
  CHECK(throws_naming([] { product{false, false, 4, 3, -1, 4, 5, 4}.check(); },
                      {"k: expected at least 1", "found -1"}));
}

TEST_CASE("the host view refuses a head's product that cannot run") {
  // G_f 6 → 5, G_y 5 → 2, G_d 5 → 1: F = 5, so C is [5, 5] and ldc 4 is too small.
  using net = df::nn::dann_net<df::nn::linear<6, 5>, df::nn::linear<5, 2>, df::nn::linear<5, 1>>;
  using step = df::train_step<net, df::loader::resident, df::precision::fp32, df::clip::none,
                              df::test::bad_product_head, df::optim::sgd>;
  step s(df::fit_args{.steps = 2, .batch = 3});
  CHECK(throws_naming([&] { s.run(); }, {"head::product", "ldc", "at least 5", "found 4"}));
}

}  // namespace head_view_test
