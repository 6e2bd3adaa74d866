#!/usr/bin/python3
"""PyTorch reference vectors for mixed-precision DANN steps (bf16, fp16 with loss scaling).

Run by hand from the repository root (not part of CI), after tools/make_step_vectors.py:

    /usr/bin/python3 tools/make_precision_vectors.py

It reads the network, batch and initial parameters of tests/data/torch/ (see its README.md) and
writes ``bf16_*`` and ``fp16_*`` files next to them.

What is emulated, and why
-------------------------
Debian's torch 1.13 has no fp16 matmul on the CPU and no CPU kernels behind
``torch.cuda.amp.GradScaler``. So the 16-bit formats are emulated in float32 with one autograd
function, ``Round``: forward it rounds its input to the 16-bit format (``x.to(dtype).float()``,
round to nearest even, fp16 overflowing to +-Inf), backward it rounds the incoming gradient the
same way. It is placed where dafuse stores a 16-bit value:

* the input batch, every weight and bias (the working copy the products read; Round's backward
  then rounds each parameter gradient, as dafuse stores them),
* every layer's output after its activation (Round's backward rounds the gradient arriving at
  that output, i.e. dafuse's delta before the activation derivative; for ReLU the derivative is 0
  or 1, so the order does not matter).

The products and the losses run in float32 on those rounded values: the product of two 16-bit
values is exact in float32, so this is what a 16-bit product with float32 accumulation computes.

Loss scaling follows GradScaler's protocol, written out because its kernels need CUDA here:
``(S * loss).backward()``; unscale: g <- g / S for every gradient and found_inf = any non-finite
(``_amp_foreach_non_finite_check_and_unscale_``); clip the unscaled gradients
(``clip_grad_norm_``); skip ``optimizer.step()`` when found_inf; update S
(``_amp_update_scale_``): on found_inf S <- S * backoff and the growth tracker <- 0, otherwise
tracker += 1 and when it reaches growth_interval S <- S * growth and tracker <- 0.

Variants (same network, batch and initial parameters as make_step_vectors.py, lambda = 0.7,
SGD lr 0.1, momentum 0.9, weight decay 1e-3, clip_grad_norm_ with max_norm 0.25):

* ``bf16``: 2 steps, no loss scaling.
* ``fp16``: 8 steps on the same batch with a dynamic scale starting at 2^22, growth 2,
  backoff 2^-4, growth interval 2: the first step overflows and is skipped (asserted), a later
  one grows S (asserted).

Files, V in (bf16, fp16), k = 1..steps:

* V_hyper.npy [8]: lr, momentum, weight_decay, max_norm, init_scale, growth, backoff, interval.
* V_step{k}_losses.npy [5]: loss_y, loss_d, unscaled pre-clip gradient norm (Inf on overflow),
  S used by the step, 1 if the step was skipped else 0.
* V_step{k}_params.npy [148]: flattened parameters after step k.
"""

import os

import numpy as np
import torch
import torch.nn as nn

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "torch")
LAMBDA, LR, MOMENTUM, WEIGHT_DECAY, MAX_NORM = 0.7, 0.1, 0.9, 1e-3, 0.25


def load(name):
    return np.load(os.path.join(HERE, name + ".npy"))


def save(name, array):
    np.save(os.path.join(HERE, name + ".npy"), np.asarray(array, dtype=np.float32))


class Round(torch.autograd.Function):
    """Rounds to a 16-bit format going forward and the gradient going back."""

    @staticmethod
    def forward(ctx, x, dtype):
        ctx.dtype = dtype
        return x.to(dtype).float()

    @staticmethod
    def backward(ctx, g):
        return g.to(ctx.dtype).float(), None


class GradReverse(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, lam):
        ctx.lam = lam
        return x.view_as(x)

    @staticmethod
    def backward(ctx, g):
        return -ctx.lam * g, None


def make_layers():
    shapes = load("param_shapes")
    flat = torch.from_numpy(load("initial_params").astype(np.float32))
    names = ["gf0", "gf1", "gy", "gd0", "gd1"]
    layers, offset = {}, 0
    for i, name in enumerate(names):
        out_f, in_f = (int(v) for v in shapes[2 * i])
        lin = nn.Linear(in_f, out_f)
        with torch.no_grad():
            lin.weight.copy_(flat[offset:offset + out_f * in_f].view(out_f, in_f))
            offset += out_f * in_f
            lin.bias.copy_(flat[offset:offset + out_f])
            offset += out_f
        layers[name] = lin
    assert offset == flat.numel()
    return layers


def linear(layer, x, dtype):
    return x @ Round.apply(layer.weight, dtype).t() + Round.apply(layer.bias, dtype)


def losses(layers, dtype):
    xs = torch.from_numpy(load("x_source"))
    xt = torch.from_numpy(load("x_target"))
    ys = torch.from_numpy(load("y_source").astype(np.int64))
    r = lambda t: Round.apply(t, dtype)  # noqa: E731
    x = r(torch.cat([xs, xt]))
    h = r(torch.relu(linear(layers["gf0"], x, dtype)))
    feats = r(torch.relu(linear(layers["gf1"], h, dtype)))
    logits = r(linear(layers["gy"], feats[:4], dtype))
    loss_y = nn.functional.cross_entropy(logits, ys)
    g = GradReverse.apply(feats, LAMBDA)
    d = r(torch.relu(linear(layers["gd0"], g, dtype)))
    dlogit = r(linear(layers["gd1"], d, dtype)).squeeze(1)
    domain = torch.cat([torch.zeros(4), torch.ones(4)])
    loss_d = nn.functional.binary_cross_entropy_with_logits(dlogit, domain)
    return loss_y, loss_d


def flat_params(params):
    return torch.cat([p.detach().reshape(-1) for p in params]).numpy()


def run(variant, dtype, steps, init_scale, growth, backoff, interval):
    layers = make_layers()
    params = [p for name in ["gf0", "gf1", "gy", "gd0", "gd1"]
              for p in (layers[name].weight, layers[name].bias)]
    opt = torch.optim.SGD(params, lr=LR, momentum=MOMENTUM, weight_decay=WEIGHT_DECAY)
    scale, tracker = init_scale, 0
    skips = []
    save(variant + "_hyper",
         [LR, MOMENTUM, WEIGHT_DECAY, MAX_NORM, init_scale, growth, backoff, interval])
    for k in range(1, steps + 1):
        opt.zero_grad()
        loss_y, loss_d = losses(layers, dtype)
        ((loss_y + loss_d) * scale).backward()
        # Unscale and check for Inf/NaN.
        for p in params:
            p.grad.mul_(1.0 / scale)
        found_inf = not all(torch.isfinite(p.grad).all() for p in params)
        norm = float(torch.norm(torch.stack([torch.norm(p.grad) for p in params])))
        used = scale
        if not found_inf:
            torch.nn.utils.clip_grad_norm_(params, MAX_NORM)
            opt.step()
        # _amp_update_scale_
        if found_inf:
            scale *= backoff
            tracker = 0
        else:
            tracker += 1
            if tracker == interval:
                scale *= growth
                tracker = 0
        skips.append(found_inf)
        save(f"{variant}_step{k}_losses",
             [float(loss_y), float(loss_d), norm if not found_inf else np.inf, used,
              1.0 if found_inf else 0.0])
        save(f"{variant}_step{k}_params", flat_params(params))
        print(f"{variant} step {k}: S={used:g} skipped={found_inf} norm={norm:.6g} "
              f"loss_y={float(loss_y):.6f} loss_d={float(loss_d):.6f}")
    return skips


def main():
    torch.set_num_threads(1)
    skips = run("bf16", torch.bfloat16, 2, 1.0, 2.0, 0.5, 2000)
    assert not any(skips)
    skips = run("fp16", torch.float16, 8, 2.0 ** 22, 2.0, 2.0 ** -4, 2)
    assert skips[0], "the first fp16 step should overflow at S = 2^22"
    assert not all(skips), "some fp16 step should succeed"
    # A growth happened: two finite steps in a row after the last skip.
    last_skip = max(i for i, s in enumerate(skips) if s)
    assert len(skips) - last_skip - 1 >= 2, "S should grow after two finite steps"


if __name__ == "__main__":
    main()
