// SPDX-License-Identifier: Apache-2.0
// Tests for backend/host/loss.hpp: the batched losses against the per-sample functions of
// nn/loss.hpp (themselves checked against PyTorch in tests/nn) on every remainder of 16, with
// logits from 0 to ±90 (exp of the largest would overflow without the shift), and with the
// gradient written over the logits.
#include <dafuse/backend/host/loss.hpp>
#include "../check.hpp"

#include <dafuse/core/rng.hpp>
#include <dafuse/nn/loss.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace backend_loss_test {

namespace {

namespace host = dafuse::backend::host;
using dafuse::index_t;

//! Logits: mostly in (−8, 8), every seventh ±90, every eleventh exactly 0.
template <class T>
std::vector<T> logits(index_t count, std::uint64_t seed) {
  dafuse::counter_rng rng(seed, dafuse::rng_stream::user);
  std::vector<T> z(static_cast<std::size_t>(count));
  for (index_t i = 0; i < count; ++i) {
    z[std::size_t(i)] = T(rng.uniform(-8.0f, 8.0f));
    if (i % 7 == 3) z[std::size_t(i)] = i % 2 ? T(90) : T(-90);
    if (i % 11 == 5) z[std::size_t(i)] = T(0);
  }
  return z;
}

//! |a − b| within a few units of T's rounding of max(|a|, |b|, floor).
template <class T>
bool close(double a, double b, double floor = 1) {
  const double unit = std::numeric_limits<T>::epsilon();
  return std::abs(a - b) <= 8 * unit * std::max({std::abs(a), std::abs(b), floor});
}

template <class T>
void check_bce(bool in_place) {
  for (const index_t n : {1, 15, 16, 17, 31, 32, 33, 64, 100}) {
    CAPTURE(n);
    const std::vector<T> z = logits<T>(n, 5 + std::uint64_t(n));
    const index_t first_target = n / 2;
    const T scale = T(0.37);
    // Reference: the per-sample function, summed in double.
    std::vector<T> want(z.size());
    double want_sum = 0;
    index_t want_right = 0;
    for (index_t c = 0; c < n; ++c) {
      const bool t = c >= first_target;
      want_sum += double(dafuse::nn::binary_cross_entropy_with_logit(z[std::size_t(c)], T(t), scale,
                                                                     &want[std::size_t(c)]));
      want_right += t ? z[std::size_t(c)] > 0 : z[std::size_t(c)] < 0;
    }
    std::vector<T> out = z;  // in place: dz aliases z
    const T* input = in_place ? out.data() : z.data();
    if (!in_place) out.assign(z.size(), T(1e30));
    index_t right = 3;  // added to, not overwritten
    const double sum =
        host::binary_cross_entropy_with_logits(input, n, first_target, scale, out.data(), right);
    CHECK(close<T>(sum, want_sum, double(n)));
    CHECK(right == want_right + 3);
    for (index_t c = 0; c < n; ++c) {
      CAPTURE(c);
      CHECK(close<T>(out[std::size_t(c)], want[std::size_t(c)], double(scale)));
    }
  }
}

template <class T>
void check_softmax_ce(bool in_place) {
  for (const index_t classes : {1, 2, 10, 31}) {
    for (const index_t n : {1, 15, 16, 17, 32, 33, 64}) {
      CAPTURE(classes);
      CAPTURE(n);
      const std::vector<T> z = logits<T>(classes * n, 9 + std::uint64_t(classes * n));
      std::vector<std::int32_t> y(static_cast<std::size_t>(n));
      for (index_t c = 0; c < n; ++c) y[std::size_t(c)] = std::int32_t((c * 7 + 3) % classes);
      const T scale = T(1) / T(n);
      std::vector<T> want(z.size());
      double want_sum = 0;
      for (index_t c = 0; c < n; ++c)
        want_sum += double(dafuse::nn::softmax_cross_entropy(&z[std::size_t(c * classes)], classes,
                                                             y[std::size_t(c)], scale,
                                                             &want[std::size_t(c * classes)]));
      std::vector<T> out = z;
      const T* input = in_place ? out.data() : z.data();
      if (!in_place) out.assign(z.size(), T(1e30));
      const double sum =
          host::softmax_cross_entropy(input, classes, n, y.data(), scale, out.data());
      CHECK(close<T>(sum, want_sum, double(n)));
      for (std::size_t i = 0; i < z.size(); ++i) {
        CAPTURE(i);
        CHECK(close<T>(out[i], want[i], double(scale)));
      }
    }
  }
}

}  // namespace

TEST_CASE("batched binary cross-entropy matches the per-sample function") {
  check_bce<float>(false);
  check_bce<float>(true);
  check_bce<double>(false);
  check_bce<double>(true);
}

TEST_CASE("batched softmax cross-entropy matches the per-sample function") {
  check_softmax_ce<float>(false);
  check_softmax_ce<float>(true);
  check_softmax_ce<double>(false);
  check_softmax_ce<double>(true);
}

}  // namespace backend_loss_test
