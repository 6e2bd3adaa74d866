#!/usr/bin/python3
"""Generate PyTorch reference vectors for two training steps of the heads without a
discriminator: Deep CORAL, multi-kernel MMD (quadratic and linear estimators), MCC, and
the example's head of one's own, entropy minimisation (examples/custom_head.hpp).

Run by hand from the repository root (not part of CI), after installing Debian's
python3-torch:

    /usr/bin/python3 tools/make_head_vectors.py [VARIANT...]

With variants named, only theirs are written (the shared inputs too, which are the same
for every variant): a new variant leaves the others' files as they were.

It writes ``tests/data/torch/heads_*.npy`` (described in that folder's README.md).
Deterministic: ``torch.manual_seed(4)``, float32, one thread, Debian's reference BLAS
when installed (tools/reference_blas.py), as the other vector scripts. The losses are
tools/torch_heads.py's, which tools/reference_mnist_usps.py trains with.

Set-up
------
Layers are ``nn.Linear`` with PyTorch's default initialisation, created in this order
after ``torch.manual_seed(4)``; then every bias (same order) is overwritten with
``torch.randn(n) * 0.1`` and gy's weight is multiplied by 4 (sharper softmaxes, so
that MCC's entropy weights differ between rows).

* G_f: gf0 = Linear(6, 8) -> ReLU -> gf1 = Linear(8, 5) -> ReLU: h, 5 features.
* G_y: gy = Linear(5, 3): 3 class logits z.
* G_d: gd0 = Linear(5, 4) -> ReLU -> gd1 = Linear(4, 1): never run (these heads have
  no discriminator); kept so that the parameter layout is dafuse's network's. Its
  gradients are saved as zeros and SGD leaves it unchanged.

Batch (drawn after the bias overwrite): x_source [4, 6] randn; y_source [4]
randint(0, 3) (at least two classes); x_target [4, 6] randn * 1.5 + 0.5.

One step: h = G_f(cat(x_source, x_target)), 8 rows, source first;
loss_y = CrossEntropy(mean)(G_y(h[:4]), y_source); total = loss_y + lambda * loss_h with
the variant's loss_h and lambda; backward(); SGD(lr=0.1, momentum=0.9,
weight_decay=1e-3) over G_f and G_y; two steps on the same batch.

* ``coral`` (Sun & Saenko 2016), lambda = 5: C_s, C_t the unbiased covariances
  (1/(B-1)) of h's source and target rows; loss_h = ||C_s - C_t||_F^2 / (4 * 5^2).
* ``mmd`` (DAN, Long et al. 2015), lambda = 3: d_ij = ||h_i - h_j||^2 over the 8 rows;
  m = the mean of d_ij over the pairs i != j, detached; k(d) = mean over
  a in (1/8, 1/4, 1/2, 1, 2) of exp(-d / (2 a m)); the unbiased estimator
  loss_h = sum_{i!=j} k(s_i, s_j) / (B(B-1)) + sum_{i!=j} k(t_i, t_j) / (B(B-1))
  - 2 sum_{i,j} k(s_i, t_j) / B^2.
* ``mmd_linear``, lambda = 3: the linear-time estimator over the quad-tuples
  (s_2i, s_2i+1, t_2i, t_2i+1), i < B/2: loss_h = (2/B) sum_i [k(s_2i, s_2i+1) +
  k(t_2i, t_2i+1) - k(s_2i, t_2i+1) - k(s_2i+1, t_2i)], m the mean of d over those
  2B pairs, detached.
* ``mcc`` (Jin et al. 2020), lambda = 2, temperature T = 2.5, on the 4 target rows:
  G_y also runs on them; Y = softmax(z_t / T); H_i = -sum_c Y_ic log Y_ic;
  w_i = 1 + exp(-H_i), normalised to sum to B, detached; C = Y^T diag(w) Y [3, 3];
  each column of C divided by its sum; loss_h = (sum(C) - trace(C)) / 3.
* ``entropy`` (Grandvalet & Bengio 2004), lambda = 2, on the 4 target rows: G_y also runs
  on them; loss_h = mean_i H(softmax(z_t,i)), H = -sum_c p_c log p_c.
* ``plain``: lambda = 0 (no head), for the tests' check that each variant's vectors
  differ from it by far more than the tolerance.

Files, for V in the variants and k in (1, 2), layouts as make_step_vectors.py's
(weights [out, in] row-major, flattened in parameter order gf0.w, gf0.b, gf1.w,
gf1.b, gy.w, gy.b, gd0.w, gd0.b, gd1.w, gd1.b: 140 values):
* heads_initial_params.npy, heads_param_shapes.npy (int32 [10, 2]),
  heads_x_source.npy, heads_y_source.npy (int32), heads_x_target.npy,
  heads_hyper.npy [3]: lr, momentum, weight_decay; heads_V_lambda.npy [1];
* heads_V_step{k}_losses.npy [3]: loss_y, loss_h, global L2 norm of the raw gradients
  of G_f and G_y, at the parameters before step k;
* heads_V_step{k}_grads.npy: the raw gradients of step k (before weight decay);
* heads_V_step{k}_params.npy: the parameters after step k.

Self-check (nothing saved): each variant is repeated in float64 from the same initial
values and must agree with float32 to 1e-4 relative; each variant's step-1 gradients
must differ from plain's by more than 1e-3 relative.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reference_blas import use_reference_blas  # noqa: E402

if __name__ == "__main__":
    use_reference_blas()

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch_heads import coral, entropy_minimisation, mcc, mmd, mmd_linear  # noqa: E402

LR = 0.1
MOMENTUM = 0.9
WEIGHT_DECAY = 1e-3
BATCH = 4
SHARPENING = 4.0
SHAPES = ((6, 8), (8, 5), (5, 3), (5, 4), (4, 1))
OUT_DIR = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                        "..", "tests", "data", "torch"))


def make_layers():
    torch.manual_seed(4)
    layers = [nn.Linear(i, o) for i, o in SHAPES]
    with torch.no_grad():
        for layer in layers:
            layer.bias.copy_(torch.randn(layer.bias.shape[0]) * 0.1)
        layers[2].weight.mul_(SHARPENING)
    x_source = torch.randn(BATCH, 6)
    y_source = torch.randint(0, 3, (BATCH,))
    assert len(set(y_source.tolist())) >= 2
    x_target = torch.randn(BATCH, 6) * 1.5 + 0.5
    return layers, x_source, y_source, x_target


def flat(tensors):
    return torch.cat([t.detach().reshape(-1) for t in tensors])


VARIANTS = {"coral": (coral, 5.0), "mmd": (mmd, 3.0), "mmd_linear": (mmd_linear, 3.0),
            "mcc": (mcc, 2.0), "entropy": (entropy_minimisation, 2.0), "plain": (None, 0.0)}


def two_steps(initial, x_source, y_source, x_target, variant, dtype):
    loss_fn, lam = VARIANTS[variant]
    layers = [nn.Linear(i, o).to(dtype) for i, o in SHAPES]
    params = [p for layer in layers for p in (layer.weight, layer.bias)]
    with torch.no_grad():
        for p, v in zip(params, initial):
            p.copy_(v.to(dtype))
    gf0, gf1, gy = layers[:3]
    trained = params[:6]
    opt = torch.optim.SGD(trained, lr=LR, momentum=MOMENTUM, weight_decay=WEIGHT_DECAY)
    x = torch.cat([x_source, x_target]).to(dtype)
    out = []
    for _ in range(2):
        opt.zero_grad()
        h = torch.relu(gf1(torch.relu(gf0(x))))
        loss_y = F.cross_entropy(gy(h[:BATCH]), y_source)
        if loss_fn is None:
            loss_h = torch.zeros((), dtype=dtype)
        elif loss_fn in (mcc, entropy_minimisation):
            loss_h = loss_fn(gy(h[BATCH:]))
        else:
            loss_h = loss_fn(h)
        (loss_y + lam * loss_h).backward()
        grads = flat([p.grad if p.grad is not None else torch.zeros_like(p) for p in params])
        norm = torch.linalg.vector_norm(flat([p.grad for p in trained]))
        opt.step()
        out.append((torch.stack([loss_y.detach(), loss_h.detach(), norm]), grads, flat(params)))
    return out


def main():
    torch.set_num_threads(1)
    layers, x_source, y_source, x_target = make_layers()
    initial = [t.detach().clone() for layer in layers for t in (layer.weight, layer.bias)]
    shapes = np.array([[t.shape[0], t.shape[1] if t.dim() == 2 else 1] for t in initial],
                      dtype=np.int32)
    os.makedirs(OUT_DIR, exist_ok=True)

    def save(name, value):
        np.save(os.path.join(OUT_DIR, "heads_" + name + ".npy"), value)

    save("initial_params", flat(initial).numpy().astype(np.float32))
    save("param_shapes", shapes)
    save("x_source", x_source.numpy().astype(np.float32))
    save("y_source", y_source.numpy().astype(np.int32))
    save("x_target", x_target.numpy().astype(np.float32))
    save("hyper", np.array([LR, MOMENTUM, WEIGHT_DECAY], dtype=np.float32))
    plain = two_steps(initial, x_source, y_source, x_target, "plain", torch.float64)
    chosen = sys.argv[1:] or list(VARIANTS)
    unknown = [v for v in chosen if v not in VARIANTS]
    if unknown:
        sys.exit(f"make_head_vectors.py: unknown variant(s) {unknown}; known: {list(VARIANTS)}")
    for variant, (_, lam) in VARIANTS.items():
        if variant not in chosen:
            continue
        single = two_steps(initial, x_source, y_source, x_target, variant, torch.float32)
        double = two_steps(initial, x_source, y_source, x_target, variant, torch.float64)
        for k, ((losses, grads, params), (l64, g64, p64)) in enumerate(zip(single, double), 1):
            for a, b in ((losses, l64), (grads, g64), (params, p64)):
                scale = max(1.0, float(b.abs().max()))
                assert float((a.double() - b).abs().max()) <= 1e-4 * scale, variant
            save(f"{variant}_step{k}_losses", losses.numpy().astype(np.float32))
            save(f"{variant}_step{k}_grads", grads.numpy().astype(np.float32))
            save(f"{variant}_step{k}_params", params.numpy().astype(np.float32))
            print(f"{variant} step {k}: loss_y {float(losses[0]):.6f} loss_h "
                  f"{float(losses[1]):.6f} norm {float(losses[2]):.6f}")
        save(f"{variant}_lambda", np.array([lam], dtype=np.float32))
        g64, p64 = double[0][1], plain[0][1]
        difference = float((g64 - p64).abs().max()) / float(p64.abs().max())
        print(f"{variant}: step-1 gradients differ from plain's by {difference:.2e} relative")
        assert variant == "plain" or difference > 1e-3, variant


if __name__ == "__main__":
    main()
