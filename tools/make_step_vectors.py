#!/usr/bin/python3
"""Generate PyTorch reference vectors for two DANN SGD training steps.

Run by hand from the repository root (not part of CI):

    /usr/bin/python3 tools/make_step_vectors.py

It writes ``.npy`` files (and a README.md) to ``tests/data/torch/``.  The
output is deterministic: ``torch.manual_seed(0)``, float32 throughout,
``torch.set_num_threads(1)``.

Set-up (DANN, Ganin & Lempitsky 2015)
-------------------------------------
All layers are ``nn.Linear`` with PyTorch's default initialisation, created
in the order below right after ``torch.manual_seed(0)``.  Afterwards every
bias (same order) is overwritten with ``torch.randn(n) * 0.1`` so that the
biases are non-trivial.

* G_f (feature extractor): gf0 = Linear(6, 8) -> ReLU -> gf1 = Linear(8, 5)
  -> ReLU.  Its (activated) output is the 5-dim feature vector.
* G_y (label classifier):  gy = Linear(5, 3)  -> 3 class logits.
* G_d (domain discriminator): gd0 = Linear(5, 4) -> ReLU -> gd1 = Linear(4, 1)
  -> one domain logit.

Batch (drawn after the bias overwrite, in this order): ``x_source`` [4, 6]
``randn``; ``y_source`` [4] ``randint(0, 3)`` (asserted to hold at least two
distinct classes); ``x_target`` [4, 6] ``randn + 0.5``.

Forward / loss for one step:

* feats = G_f(cat(x_source, x_target)) -- 8 rows, the 4 source rows first.
* loss_y = CrossEntropy(mean)(G_y(feats[:4]), y_source).
* loss_d = BCEWithLogits(mean over the 8 rows)(G_d(GRL(feats)), d) with
  domain label d = 0 for the source rows and 1 for the target rows.  GRL is
  the gradient reversal layer: identity in the forward pass, the backward
  pass multiplies the incoming gradient by -lambda, lambda = 0.7.
* total loss = loss_y + loss_d; ``backward()`` on it.

Optimizer: ``torch.optim.SGD`` over the parameters in the order G_f, G_y, G_d
(each layer: weight, then bias), lr = 0.1, momentum = 0.9,
weight_decay = 1e-3, dampening = 0.  Its update per parameter p with raw
gradient g is

    d   = g + weight_decay * p
    buf = d                          (first step)
    buf = momentum * buf + d         (later steps)
    p  -= lr * (d + momentum * buf)  if nesterov else lr * buf

Two optimizer steps are taken on the same batch (so the momentum buffer is
used), each starting from the same initial parameters, for three variants:

* ``noclip``:   nesterov = False, no clipping;
* ``clip``:     nesterov = False, ``clip_grad_norm_(all params, max_norm)``
  between ``backward()`` and ``step()`` with max_norm = 0.25 (stored in
  hyper.npy).  0.5 was the first choice, but the raw gradient norms are only
  ~0.5001 (step 1) and ~0.478 (step 2), so 0.25 is used; the script asserts
  the pre-clip norm exceeds max_norm on both steps, so clipping really
  happens.  The clip scales every gradient by
  max_norm / (total_norm + 1e-6), PyTorch's formula;
* ``nesterov``: like noclip with nesterov = True.

Files and conventions
---------------------
float32 unless stated; PyTorch layouts (weights are [out, in]); "flattened"
means every tensor flattened in row-major (C) order and concatenated in the
parameter order

    gf0.weight, gf0.bias, gf1.weight, gf1.bias, gy.weight, gy.bias,
    gd0.weight, gd0.bias, gd1.weight, gd1.bias        (148 values in all)

* initial_params.npy  flattened initial parameters.
* param_shapes.npy    int32 [10, 2]: (out, in) for weights, (n, 1) for biases.
* x_source.npy [4, 6], y_source.npy int32 [4], x_target.npy [4, 6].
* hyper.npy [6]: lambda, lr, momentum, weight_decay, max_norm, steps (= 2).
* For V in (noclip, clip, nesterov) and k in (1, 2):
  - V_step{k}_losses.npy [3]: loss_y, loss_d, pre-clip global gradient norm
    (L2 over all raw gradients) -- all evaluated at the parameters *before*
    step k, i.e. the forward pass of step k;
  - V_step{k}_grads.npy: flattened raw gradients of step k (before clipping,
    before weight decay is added);
  - V_step{k}_params.npy: flattened parameters after step k's update.

Self-checks (nothing saved): the noclip variant is repeated in float64 from
the same initial values and must agree with float32 to 1e-4 relative; and
each saved step is replayed with the update formula above in numpy float64
from the saved gradients.
"""

import copy
import os
import sys

import numpy as np
import torch
import torch.nn as nn

LAMBDA = 0.7
LR = 0.1
MOMENTUM = 0.9
WEIGHT_DECAY = 1e-3
# The brief's 0.5 is not enough: the raw norms are ~0.5001 (step 1) and
# ~0.478 (step 2), so 0.25 is used to make clipping act on both steps.
MAX_NORM = 0.25
STEPS = 2
VARIANTS = ("noclip", "clip", "nesterov")

OUT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                       "..", "tests", "data", "torch")
OUT_DIR = os.path.normpath(OUT_DIR)


class GradReverse(torch.autograd.Function):
    """Identity forward; backward multiplies the gradient by -lambda."""

    @staticmethod
    def forward(ctx, x, lam):
        ctx.lam = lam
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad_out):
        return grad_out * (-ctx.lam), None


class Dann(nn.Module):
    def __init__(self):
        super().__init__()
        self.gf0 = nn.Linear(6, 8)
        self.gf1 = nn.Linear(8, 5)
        self.gy = nn.Linear(5, 3)
        self.gd0 = nn.Linear(5, 4)
        self.gd1 = nn.Linear(4, 1)

    def ordered_params(self):
        out = []
        for layer in (self.gf0, self.gf1, self.gy, self.gd0, self.gd1):
            out.append(layer.weight)
            out.append(layer.bias)
        return out

    def features(self, x):
        return torch.relu(self.gf1(torch.relu(self.gf0(x))))

    def losses(self, xs, ys, xt, lam):
        feats = self.features(torch.cat([xs, xt], dim=0))
        n_src = xs.shape[0]
        logits_y = self.gy(feats[:n_src])
        loss_y = nn.functional.cross_entropy(logits_y, ys)
        rev = GradReverse.apply(feats, lam)
        logit_d = self.gd1(torch.relu(self.gd0(rev))).squeeze(1)
        dom = torch.cat([torch.zeros(n_src, dtype=feats.dtype),
                         torch.ones(xt.shape[0], dtype=feats.dtype)])
        loss_d = nn.functional.binary_cross_entropy_with_logits(logit_d, dom)
        return loss_y, loss_d


def flat(tensors):
    return torch.cat([t.detach().reshape(-1) for t in tensors])


def run_variant(model0, xs, ys, xt, variant, max_norm, dtype):
    """Two SGD steps from a copy of model0; returns per-step records."""
    model = copy.deepcopy(model0).to(dtype)
    xs, xt = xs.to(dtype), xt.to(dtype)
    params = model.ordered_params()
    opt = torch.optim.SGD(params, lr=LR, momentum=MOMENTUM,
                          weight_decay=WEIGHT_DECAY, dampening=0,
                          nesterov=(variant == "nesterov"))
    records = []
    for _ in range(STEPS):
        opt.zero_grad()
        loss_y, loss_d = model.losses(xs, ys, xt, LAMBDA)
        (loss_y + loss_d).backward()
        grads = flat([p.grad for p in params])
        norm = torch.linalg.vector_norm(grads)
        if variant == "clip":
            ret = torch.nn.utils.clip_grad_norm_(params, max_norm=max_norm)
            assert torch.allclose(ret, norm, rtol=1e-5), (ret, norm)
            assert norm.item() > max_norm, \
                f"pre-clip norm {norm.item()} <= max_norm {max_norm}"
        opt.step()
        records.append({
            "losses": torch.stack([loss_y.detach(), loss_d.detach(), norm]),
            "grads": grads.clone(),
            "params": flat(params).clone(),
        })
    return records


def rel_err(a, b):
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    return np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30)


def replay_check(init, recs, variant, max_norm):
    """Re-apply the documented SGD formula in float64 to the saved grads."""
    p = init.astype(np.float64)
    buf = None
    for rec in recs:
        g = rec["grads"].numpy().astype(np.float64)
        if variant == "clip":
            g = g * min(1.0, max_norm / (np.linalg.norm(g) + 1e-6))
        d = g + WEIGHT_DECAY * p
        buf = d.copy() if buf is None else MOMENTUM * buf + d
        step = d + MOMENTUM * buf if variant == "nesterov" else buf
        p = p - LR * step
        err = rel_err(rec["params"].numpy(), p)
        assert err < 1e-5, f"{variant}: replay mismatch {err}"


def main():
    torch.manual_seed(0)
    torch.set_num_threads(1)
    torch.set_default_dtype(torch.float32)

    model = Dann()
    with torch.no_grad():
        for layer in (model.gf0, model.gf1, model.gy, model.gd0, model.gd1):
            layer.bias.copy_(torch.randn(layer.bias.shape) * 0.1)

    x_source = torch.randn(4, 6)
    y_source = torch.randint(0, 3, (4,))
    x_target = torch.randn(4, 6) + 0.5
    assert len(set(y_source.tolist())) >= 2, y_source

    params0 = model.ordered_params()
    init = flat(params0)
    shapes = np.array([list(p.shape) if p.dim() == 2 else [p.shape[0], 1]
                       for p in params0], dtype=np.int32)
    assert init.numel() == int(np.prod(shapes, axis=1).sum()) == 148

    max_norm = MAX_NORM
    results = {v: run_variant(model, x_source, y_source, x_target, v,
                              max_norm, torch.float32)
               for v in VARIANTS}

    # Self-check 1: float64 run of noclip agrees with float32.
    rec64 = run_variant(model, x_source, y_source, x_target, "noclip",
                        max_norm, torch.float64)
    for r32, r64 in zip(results["noclip"], rec64):
        for key in ("losses", "grads", "params"):
            err = rel_err(r32[key].numpy(), r64[key].numpy())
            assert err < 1e-4, f"float64 check failed for {key}: {err}"
            assert np.allclose(r32[key].numpy(), r64[key].numpy(), rtol=1e-4,
                               atol=1e-4 * np.abs(r64[key].numpy()).max())

    # Self-check 2: saved tensors follow the documented update formula.
    for v in VARIANTS:
        replay_check(init.numpy(), results[v], v, max_norm)

    os.makedirs(OUT_DIR, exist_ok=True)
    written = []

    def save(name, arr, dtype=np.float32):
        arr = np.ascontiguousarray(np.asarray(arr, dtype=dtype))
        path = os.path.join(OUT_DIR, name)
        np.save(path, arr)
        written.append((name, arr.dtype, arr.shape))

    save("initial_params.npy", init.numpy())
    save("param_shapes.npy", shapes, np.int32)
    save("x_source.npy", x_source.numpy())
    save("y_source.npy", y_source.numpy(), np.int32)
    save("x_target.npy", x_target.numpy())
    save("hyper.npy", [LAMBDA, LR, MOMENTUM, WEIGHT_DECAY, max_norm, STEPS])
    for v in VARIANTS:
        for k, rec in enumerate(results[v], start=1):
            save(f"{v}_step{k}_losses.npy", rec["losses"].numpy())
            save(f"{v}_step{k}_grads.npy", rec["grads"].numpy())
            save(f"{v}_step{k}_params.npy", rec["params"].numpy())

    print(f"torch {torch.__version__}, numpy {np.__version__}")
    print(f"y_source = {y_source.tolist()}")
    for v in VARIANTS:
        for k, rec in enumerate(results[v], start=1):
            ly, ld, gn = rec["losses"].tolist()
            print(f"{v:9s} step {k}: loss_y={ly:.8f} loss_d={ld:.8f} "
                  f"grad_norm={gn:.8f}")
    print(f"wrote {len(written)} files to {OUT_DIR}:")
    for name, dt, shape in written:
        print(f"  {name:28s} {str(dt):8s} {list(shape)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
