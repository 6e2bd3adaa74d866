// SPDX-License-Identifier: Apache-2.0
//! @file policy/precision.hpp
//! @brief The precision slot: number formats of a step, and the loss scaler fp16 needs.
//!
//! Every precision keeps the parameters, their gradients and the optimizer state in its master
//! type (fp32, or fp64 for the gradient checks). A mixed precision (bf16, fp16) rounds what a
//! 16-bit step would store to its compute format, once per stored tensor: the input batch, the
//! working copy of the weights, each layer's output, each backward δ and each parameter
//! gradient. Products read those rounded values and accumulate in fp32, as bf16/fp16 hardware
//! products do (core/half.hpp says why that is exact).
//!
//! fp16's 5-bit exponent cannot hold small gradients (below 2^-24 they become 0), so fp16 needs a
//! loss scaler: the loss is multiplied by S before the backward, every gradient is divided by S
//! before clipping and the update, and a step whose scaled gradients overflowed is skipped.
#pragma once
#include <dafuse/config.hpp>

#include <dafuse/core/half.hpp>
#include <dafuse/core/meta.hpp>
#include <dafuse/policy/arguments.hpp>

#include <algorithm>
#include <concepts>
#include <type_traits>

namespace dafuse {

//! What a loss scaler carries from step to step (saved with the optimizer state).
struct loss_scale_state {
  double scale = 1;        //!< S: the loss is multiplied by it before the backward
  index_t good_steps = 0;  //!< finite steps since S last changed (loss_scale::dynamic)
};

}  // namespace dafuse

namespace dafuse::loss_scale {

//! No loss scaling: S = 1 always (fp32, bf16, fp64).
struct none {
  using loss_scale_tag = void;           //!< a loss scaler
  static constexpr bool scales = false;  //!< S is 1
  static double initial(const fit_args&) { return 1.0; }
  DAFUSE_HOST_DEVICE static void update(loss_scale_state&, bool /*overflow*/, const fit_args&) {}
  static status can_implement(const fit_args&) { return status::ok(); }
};

//! PyTorch's GradScaler: S starts at loss_scale_init; a step whose unscaled gradients are not
//! finite is skipped and S ← S · loss_scale_backoff; after loss_scale_interval finite steps in a
//! row S ← S · loss_scale_growth. Defaults as GradScaler's: 65536, 2, 0.5, 2000. Unlike
//! GradScaler's, S stops at loss_scale_min (1, as Megatron-LM's min_loss_scale): gradients that
//! overflow fp16 unscaled are not a scaling problem, and halving on would reach S = 0 after
//! about 1100 overflows, where every gradient is 0/0.
struct dynamic {
  using loss_scale_tag = void;          //!< a loss scaler
  static constexpr bool scales = true;  //!< S is a run-time value
  static double initial(const fit_args& a) { return double(a.loss_scale_init); }
  DAFUSE_HOST_DEVICE static void update(loss_scale_state& s, bool overflow, const fit_args& a) {
    if (overflow) {
      const double backed_off = s.scale * double(a.loss_scale_backoff);
      s.scale = backed_off > double(a.loss_scale_min) ? backed_off : double(a.loss_scale_min);
      s.good_steps = 0;
    } else if (++s.good_steps == a.loss_scale_interval) {
      s.scale *= double(a.loss_scale_growth);
      s.good_steps = 0;
    }
  }
  static status can_implement(const fit_args& a) {
    if (status s =
            detail::check_positive(a.loss_scale_init, "loss_scale_init", "loss_scale::dynamic");
        !s)
      return s;
    if (status s = detail::check_field(
            a.loss_scale_growth > 1 && std::isfinite(a.loss_scale_growth), a.loss_scale_growth,
            "loss_scale_growth", "a finite factor > 1", "loss_scale::dynamic");
        !s)
      return s;
    if (status s = detail::check_field(a.loss_scale_backoff > 0 && a.loss_scale_backoff < 1,
                                       a.loss_scale_backoff, "loss_scale_backoff",
                                       "a factor in (0, 1)", "loss_scale::dynamic");
        !s)
      return s;
    if (status s =
            detail::check_field(a.loss_scale_interval >= 1, float(a.loss_scale_interval),
                                "loss_scale_interval", "at least 1 step", "loss_scale::dynamic");
        !s)
      return s;
    return detail::check_field(a.loss_scale_min > 0 && a.loss_scale_min <= a.loss_scale_init,
                               a.loss_scale_min, "loss_scale_min",
                               "a number in (0, loss_scale_init]", "loss_scale::dynamic");
  }
};

//! A constant S (an integer or floating-point constant: fixed<1024>, fixed<0.5f>; a floating-point
//! S needs GCC >= 11 or clang >= 18). A step that overflows is still skipped; S does not change
//! (choose it so that overflows are rare, or use loss_scale::dynamic).
template <auto S>
struct fixed {
  static_assert(std::is_arithmetic_v<decltype(S)> && double(S) > 0 && double(S) < 3.0e38,
                "dafuse: loss_scale::fixed<S> needs a finite number S > 0, e.g. fixed<1024>");
  using loss_scale_tag = void;                //!< a loss scaler
  static constexpr bool scales = true;        //!< S is a constant
  static constexpr double value = double(S);  //!< the scale
  static double initial(const fit_args&) { return value; }
  DAFUSE_HOST_DEVICE static void update(loss_scale_state&, bool /*overflow*/, const fit_args&) {}
  static status can_implement(const fit_args&) { return status::ok(); }
};

}  // namespace dafuse::loss_scale

namespace dafuse {

//! A loss scaler: its first S, how S changes after a step, and its argument check.
template <class L>
concept loss_scale_policy = requires(loss_scale_state& s, const fit_args& a) {
  typename L::loss_scale_tag;
  { L::scales } -> std::convertible_to<bool>;
  { L::initial(a) } -> std::same_as<double>;
  L::update(s, true, a);
  { L::can_implement(a) } -> std::same_as<status>;
};

static_assert(loss_scale_policy<loss_scale::none>);
static_assert(loss_scale_policy<loss_scale::dynamic>);
static_assert(loss_scale_policy<loss_scale::fixed<1024>>);

}  // namespace dafuse

namespace dafuse::precision {

//! Single precision everywhere, no loss scaling: the baseline of every comparison.
struct fp32 {
  using precision_tag = void;                //!< fills the precision slot
  using master_type = float;                 //!< parameters, gradients, optimizer state
  using accumulate_type = float;             //!< sums inside products
  using loss_scale_type = loss_scale::none;  //!< no scaling
  static constexpr number_format compute_format = number_format::fp32;  //!< stored values
};

//! Double precision everywhere: the reference the gradient checks run in (finite differences
//! need it), and a way to rule out rounding when a run misbehaves. Slow; not for training.
struct fp64 {
  using precision_tag = void;                //!< fills the precision slot
  using master_type = double;                //!< parameters, gradients, optimizer state
  using accumulate_type = double;            //!< sums inside products
  using loss_scale_type = loss_scale::none;  //!< no scaling
  static constexpr number_format compute_format = number_format::fp64;  //!< stored values
};

//! bf16 mixed precision: fp32 master weights and optimizer state; batch, weights, activations and
//! gradients stored as bf16 values; products accumulate in fp32. bf16 has fp32's exponent range,
//! so gradients neither overflow nor underflow and no loss scaling is needed.
struct bf16 {
  using precision_tag = void;                //!< fills the precision slot
  using master_type = float;                 //!< parameters, gradients, optimizer state
  using accumulate_type = float;             //!< sums inside products
  using loss_scale_type = loss_scale::none;  //!< no scaling
  static constexpr number_format compute_format = number_format::bf16;  //!< stored values
};

//! fp16 mixed precision with a loss scaler: fp32 master weights and optimizer state; batch,
//! weights, activations and (scaled) gradients stored as fp16 values; products accumulate in
//! fp32. `Scaler` is loss_scale::dynamic (PyTorch's GradScaler) or loss_scale::fixed<S>.
template <class Scaler = loss_scale::none>
struct fp16 {
  static_assert(!std::is_same_v<Scaler, loss_scale::none>,
                "dafuse: precision::fp16 needs a loss scaler, or small gradients flush to zero: "
                "write precision::fp16<loss_scale::dynamic> (PyTorch's GradScaler) or "
                "precision::fp16<loss_scale::fixed<1024>>, or use precision::bf16, which needs "
                "none");
  static_assert(loss_scale_policy<Scaler>,
                "dafuse: precision::fp16<Scaler> takes a loss scaler such as loss_scale::dynamic "
                "or loss_scale::fixed<1024>");
  using precision_tag = void;      //!< fills the precision slot
  using master_type = float;       //!< parameters, gradients, optimizer state
  using accumulate_type = float;   //!< sums inside products
  using loss_scale_type = Scaler;  //!< how S is chosen
  static constexpr number_format compute_format = number_format::fp16;  //!< stored values
};

}  // namespace dafuse::precision

namespace dafuse {

//! A precision policy: its master and accumulation types, the format stored values are rounded
//! to, and its loss scaler.
template <class P>
concept precision_policy = requires {
  typename P::precision_tag;
  typename P::master_type;
  typename P::accumulate_type;
  typename P::loss_scale_type;
  { P::compute_format } -> std::convertible_to<number_format>;
}
&&std::is_floating_point_v<typename P::master_type>&&
    loss_scale_policy<typename P::loss_scale_type>;

static_assert(precision_policy<precision::fp32>);
static_assert(precision_policy<precision::fp64>);
static_assert(precision_policy<precision::bf16>);
static_assert(precision_policy<precision::fp16<loss_scale::dynamic>>);
static_assert(precision_policy<precision::fp16<loss_scale::fixed<1024>>>);

}  // namespace dafuse
