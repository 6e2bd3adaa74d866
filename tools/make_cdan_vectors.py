#!/usr/bin/python3
"""Generate PyTorch reference vectors for two CDAN and two CDAN+E training steps, and for
two MDD steps (the other head with a trained G_d).

Run by hand from the repository root (not part of CI), after installing Debian's
python3-torch:

    /usr/bin/python3 tools/make_cdan_vectors.py

It writes ``tests/data/torch/cdan_*.npy`` (described in that folder's README.md).
Deterministic: ``torch.manual_seed(2)``, float32, one thread. The committed files
were made with Debian's reference BLAS (tools/reference_blas.py: the script
re-executes itself with it first on the library path when it is installed); any
other BLAS agrees to ~1e-7 relative. The map, the weights and the reversal are
tools/torch_heads.py's.

Set-up (CDAN, Long et al. 2018; the conditioning as in the authors' code and tllib)
------------------------------------------------------------------------------------
Layers are ``nn.Linear`` with PyTorch's default initialisation, created in this
order after ``torch.manual_seed(2)``; then every bias (same order) is overwritten
with ``torch.randn(n) * 0.1``, and gy's weight is multiplied by 8 so that the
rows' softmax entropies, and so CDAN+E's weights, differ (they span about 1.0-1.9
before normalising; the script prints them).

* G_f: gf0 = Linear(6, 8) -> ReLU -> gf1 = Linear(8, 5) -> ReLU: h, 5 features.
* G_y: gy = Linear(5, 3): 3 class logits z.
* G_d: gd0 = Linear(15, 4) -> ReLU -> gd1 = Linear(4, 1): one domain logit, read
  from the multilinear map T = g (x) h (15 values a row, T[c*5 + j] = g_c * h_j).

Batch (drawn after the bias overwrite): x_source [4, 6] randn; y_source [4]
randint(0, 3) (at least two classes); x_target [4, 6] randn + 0.5.

One step:
* h = G_f(cat(x_source, x_target)), 8 rows, source first; z = G_y(h) on all 8.
* loss_y = CrossEntropy(mean)(z[:4], y_source).
* g = softmax(z).detach(); T = bmm(g[:, :, None], h[:, None, :]).view(8, 15).
* d = G_d(GRL(T)), GRL the identity forward and -lambda times the gradient
  backward, lambda = 0.7.
* loss_d = BCEWithLogits(d, t, weight=w, reduction=mean), t = 0 for source rows
  and 1 for target rows; w = 1 for CDAN; for CDAN+E w_i = 1 + exp(-H(g_i))
  normalised to sum to 8, H(g) = logsumexp(z) - sum_c g_c z_c (the exact entropy;
  tllib adds 1e-5 inside its log), w a constant for the gradient.
* total = loss_y + loss_d; backward().
* SGD(lr=0.1, momentum=0.9, weight_decay=1e-3) over G_f, G_y, G_d in that order,
  no clipping; two steps on the same batch.

Files, for V in (cdan, cdan_e) and k in (1, 2), layouts as make_step_vectors.py's
(weights [out, in] row-major, flattened in parameter order gf0.w, gf0.b, gf1.w,
gf1.b, gy.w, gy.b, gd0.w, gd0.b, gd1.w, gd1.b: 192 values):
* cdan_initial_params.npy, cdan_param_shapes.npy (int32 [10, 2]),
  cdan_x_source.npy, cdan_y_source.npy (int32), cdan_x_target.npy,
  cdan_hyper.npy [4]: lambda, lr, momentum, weight_decay;
* V_step{k}_losses.npy [3]: loss_y, loss_d, global L2 norm of the raw gradients,
  at the parameters before step k;
* V_step{k}_grads.npy: the raw gradients of step k (before weight decay);
* V_step{k}_params.npy: the parameters after step k.

Self-check (nothing saved): each variant is repeated in float64 from the same
initial values and must agree with float32 to 1e-4 relative.

MDD (Zhang et al. 2019; the loss as tllib's ClassificationMarginDisparityDiscrepancy)
------------------------------------------------------------------------------------
Its own set-up, so the CDAN files above do not change: after
``torch.manual_seed(21)``, gf0 = Linear(6, 8), gf1 = Linear(8, 5), gy = Linear(5, 3),
gd0 = Linear(5, 4), gd1 = Linear(4, 3) (G_d is the adversarial classifier f', one
logit a class, reading h); biases overwritten with randn * 0.1 and gy's weight
multiplied by 8 as above; then x_source [4, 6] randn, y_source [4] randint(0, 3),
x_target [4, 6] randn + 0.5.

One step: h = G_f(x) on the 8 rows; z = G_y(h); loss_y = CrossEntropy(z[:4], y);
yhat = argmax z (no gradient); f = G_d(GRL(h)), lambda = 0.7;
loss_d = gamma * CrossEntropy(mean)(f[:4], yhat[:4])
       + mean over the target rows of -log(1 - softmax(f)[yhat]),
with gamma = 4 and -log(1 - p_yhat) = logsumexp(f) - logsumexp(f without yhat) (exact;
tllib adds 1e-6 inside its log); total = loss_y + loss_d; SGD as above over all
parameters, two steps on the same batch. The script checks that the pseudo-labels
hold two classes or more in each domain and that no row's top two logits are within 1e-3.

Files: mdd_initial_params.npy (158 values), mdd_param_shapes.npy, mdd_x_source.npy,
mdd_y_source.npy, mdd_x_target.npy, mdd_hyper.npy [5]: lambda, lr, momentum,
weight_decay, gamma; mdd_step{k}_losses.npy, mdd_step{k}_grads.npy,
mdd_step{k}_params.npy as above.
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
from torch_heads import GradReverse, entropy_weights, multilinear_map  # noqa: E402

LAMBDA = 0.7
LR = 0.1
MOMENTUM = 0.9
WEIGHT_DECAY = 1e-3
BATCH = 4
WEIGHT_SHARPENING = 8.0
OUT_DIR = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                        "..", "tests", "data", "torch"))


def make_layers():
    torch.manual_seed(2)
    layers = [nn.Linear(6, 8), nn.Linear(8, 5), nn.Linear(5, 3), nn.Linear(15, 4),
              nn.Linear(4, 1)]
    with torch.no_grad():
        for layer in layers:
            layer.bias.copy_(torch.randn(layer.bias.shape[0]) * 0.1)
        # Sharper logits, so that the rows' softmax entropies (CDAN+E's weights) differ.
        layers[2].weight.mul_(WEIGHT_SHARPENING)
    x_source = torch.randn(BATCH, 6)
    y_source = torch.randint(0, 3, (BATCH,))
    assert len(set(y_source.tolist())) >= 2
    x_target = torch.randn(BATCH, 6) + 0.5
    return layers, x_source, y_source, x_target


def flat(tensors):
    return torch.cat([t.detach().reshape(-1) for t in tensors])


def two_steps(initial, x_source, y_source, x_target, entropy, dtype):
    gf0, gf1, gy, gd0, gd1 = [nn.Linear(i, o).to(dtype) for i, o in
                              ((6, 8), (8, 5), (5, 3), (15, 4), (4, 1))]
    params = [p for layer in (gf0, gf1, gy, gd0, gd1) for p in (layer.weight, layer.bias)]
    with torch.no_grad():
        for p, v in zip(params, initial):
            p.copy_(v.to(dtype))
    opt = torch.optim.SGD(params, lr=LR, momentum=MOMENTUM, weight_decay=WEIGHT_DECAY)
    x = torch.cat([x_source, x_target]).to(dtype)
    t = torch.cat([torch.zeros(BATCH, 1), torch.ones(BATCH, 1)]).to(dtype)
    lam = torch.tensor(LAMBDA, dtype=dtype)
    out = []
    for _ in range(2):
        opt.zero_grad()
        h = torch.relu(gf1(torch.relu(gf0(x))))
        z = gy(h)
        loss_y = F.cross_entropy(z[:BATCH], y_source)
        joint = multilinear_map(z, h)
        d = gd1(torch.relu(gd0(GradReverse.apply(joint, lam))))
        if entropy:
            w = entropy_weights(z)
            if dtype == torch.float32:
                print("CDAN+E row weights:", " ".join(f"{float(v):.3f}" for v in w))
            loss_d = F.binary_cross_entropy_with_logits(d, t, weight=w)
        else:
            loss_d = F.binary_cross_entropy_with_logits(d, t)
        (loss_y + loss_d).backward()
        grads = flat([p.grad for p in params])
        norm = torch.linalg.vector_norm(grads)
        opt.step()
        out.append((torch.stack([loss_y.detach(), loss_d.detach(), norm]), grads,
                    flat(params)))
    return out


MDD_SHAPES = ((6, 8), (8, 5), (5, 3), (5, 4), (4, 3))
MDD_MARGIN = 4.0
MDD_SEED = 21  # its pseudo-labels hold all three classes, two or more in each domain


def make_mdd_layers():
    torch.manual_seed(MDD_SEED)
    layers = [nn.Linear(i, o) for i, o in MDD_SHAPES]
    with torch.no_grad():
        for layer in layers:
            layer.bias.copy_(torch.randn(layer.bias.shape[0]) * 0.1)
        layers[2].weight.mul_(WEIGHT_SHARPENING)
    x_source = torch.randn(BATCH, 6)
    y_source = torch.randint(0, 3, (BATCH,))
    assert len(set(y_source.tolist())) >= 2
    x_target = torch.randn(BATCH, 6) + 0.5
    return layers, x_source, y_source, x_target


def mdd_loss(f, yhat):
    source = F.cross_entropy(f[:BATCH], yhat[:BATCH])
    ft, yt = f[BATCH:], yhat[BATCH:]
    others = torch.ones_like(ft, dtype=torch.bool)
    others[torch.arange(BATCH), yt] = False
    rest = torch.logsumexp(ft.masked_fill(~others, float("-inf")), dim=1)
    target = (torch.logsumexp(ft, dim=1) - rest).mean()
    return MDD_MARGIN * source + target


def mdd_two_steps(initial, x_source, y_source, x_target, dtype):
    layers = [nn.Linear(i, o).to(dtype) for i, o in MDD_SHAPES]
    gf0, gf1, gy, gd0, gd1 = layers
    params = [p for layer in layers for p in (layer.weight, layer.bias)]
    with torch.no_grad():
        for p, v in zip(params, initial):
            p.copy_(v.to(dtype))
    opt = torch.optim.SGD(params, lr=LR, momentum=MOMENTUM, weight_decay=WEIGHT_DECAY)
    x = torch.cat([x_source, x_target]).to(dtype)
    out = []
    for _ in range(2):
        opt.zero_grad()
        h = torch.relu(gf1(torch.relu(gf0(x))))
        z = gy(h)
        loss_y = F.cross_entropy(z[:BATCH], y_source)
        top = torch.topk(z.detach(), 2, dim=1).values
        assert float((top[:, 0] - top[:, 1]).min()) > 1e-3, "a pseudo-label is nearly tied"
        yhat = z.detach().argmax(dim=1)
        assert min(len(set(yhat[:BATCH].tolist())), len(set(yhat[BATCH:].tolist()))) >= 2
        f = gd1(torch.relu(gd0(GradReverse.apply(h, LAMBDA))))
        loss_d = mdd_loss(f, yhat)
        (loss_y + loss_d).backward()
        grads = flat([p.grad for p in params])
        norm = torch.linalg.vector_norm(grads)
        opt.step()
        out.append((torch.stack([loss_y.detach(), loss_d.detach(), norm]), grads,
                    flat(params)))
    return out


def save_mdd(save):
    layers, x_source, y_source, x_target = make_mdd_layers()
    initial = [t.detach().clone() for layer in layers for t in (layer.weight, layer.bias)]
    shapes = np.array([[t.shape[0], t.shape[1] if t.dim() == 2 else 1] for t in initial],
                      dtype=np.int32)
    save("mdd_initial_params", flat(initial).numpy().astype(np.float32))
    save("mdd_param_shapes", shapes)
    save("mdd_x_source", x_source.numpy().astype(np.float32))
    save("mdd_y_source", y_source.numpy().astype(np.int32))
    save("mdd_x_target", x_target.numpy().astype(np.float32))
    save("mdd_hyper", np.array([LAMBDA, LR, MOMENTUM, WEIGHT_DECAY, MDD_MARGIN],
                               dtype=np.float32))
    single = mdd_two_steps(initial, x_source, y_source, x_target, torch.float32)
    double = mdd_two_steps(initial, x_source, y_source, x_target, torch.float64)
    for k, ((losses, grads, params), (l64, g64, p64)) in enumerate(zip(single, double), 1):
        for a, b in ((losses, l64), (grads, g64), (params, p64)):
            scale = max(1.0, float(b.abs().max()))
            assert float((a.double() - b).abs().max()) <= 1e-4 * scale, "mdd"
        save(f"mdd_step{k}_losses", losses.numpy().astype(np.float32))
        save(f"mdd_step{k}_grads", grads.numpy().astype(np.float32))
        save(f"mdd_step{k}_params", params.numpy().astype(np.float32))
        print(f"mdd step {k}: loss_y {float(losses[0]):.6f} loss_d "
              f"{float(losses[1]):.6f} norm {float(losses[2]):.6f}")


def main():
    torch.set_num_threads(1)
    layers, x_source, y_source, x_target = make_layers()
    initial = [t.detach().clone() for layer in layers for t in (layer.weight, layer.bias)]
    shapes = np.array([[t.shape[0], t.shape[1] if t.dim() == 2 else 1] for t in initial],
                      dtype=np.int32)
    os.makedirs(OUT_DIR, exist_ok=True)

    def save(name, value):
        np.save(os.path.join(OUT_DIR, name + ".npy"), value)

    save("cdan_initial_params", flat(initial).numpy().astype(np.float32))
    save("cdan_param_shapes", shapes)
    save("cdan_x_source", x_source.numpy().astype(np.float32))
    save("cdan_y_source", y_source.numpy().astype(np.int32))
    save("cdan_x_target", x_target.numpy().astype(np.float32))
    save("cdan_hyper", np.array([LAMBDA, LR, MOMENTUM, WEIGHT_DECAY], dtype=np.float32))
    for variant, entropy in (("cdan", False), ("cdan_e", True)):
        single = two_steps(initial, x_source, y_source, x_target, entropy, torch.float32)
        double = two_steps(initial, x_source, y_source, x_target, entropy, torch.float64)
        for k, ((losses, grads, params), (l64, g64, p64)) in enumerate(zip(single, double), 1):
            for a, b in ((losses, l64), (grads, g64), (params, p64)):
                scale = max(1.0, float(b.abs().max()))
                assert float((a.double() - b).abs().max()) <= 1e-4 * scale, variant
            save(f"{variant}_step{k}_losses", losses.numpy().astype(np.float32))
            save(f"{variant}_step{k}_grads", grads.numpy().astype(np.float32))
            save(f"{variant}_step{k}_params", params.numpy().astype(np.float32))
            print(f"{variant} step {k}: loss_y {float(losses[0]):.6f} loss_d "
                  f"{float(losses[1]):.6f} norm {float(losses[2]):.6f}")
    save_mdd(save)


if __name__ == "__main__":
    main()
