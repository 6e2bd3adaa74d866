#!/usr/bin/env python3
"""PyTorch reference for dafuse's MNIST -> USPS domain-adaptation demo.

Run from /work/main with Debian's torch:

    /usr/bin/python3 tools/reference_mnist_usps.py [--seeds 5] [--steps 3000] [--threads 2]

Set-up (kept identical to the dafuse demo so the two can be compared):

Data
    /work/main/data/jda_mnist_usps/{mnist_images,mnist_labels,usps_images,usps_labels}.npy,
    loaded with numpy. Images are [N,16,16] float32, flattened to [N,256],
    and each row is L2-normalised. Source = MNIST (2000 rows, labelled);
    target = USPS (1800 rows; labels used only for evaluation).

Network (PyTorch default init, torch.manual_seed(seed) before construction)
    G_f = Linear(256,256) ReLU Linear(256,128) ReLU
    G_y = Linear(128,10)
    G_d = Linear(128,128) ReLU Linear(128,1)

DANN step (steps = 3000 by default)
    B = 64 source rows and B = 64 target rows, drawn as shuffled epochs:
    each domain has its own torch.Generator seeded with the seed, and a new
    permutation is drawn when that domain's epoch runs out.
    loss_y = cross-entropy (mean) of G_y(G_f(x_s)) on the source labels.
    The features of all 128 rows pass through a gradient reversal layer
    (identity forward, -lambda * grad backward) into G_d;
    loss_d = BCEWithLogits (mean), source label 0, target label 1.
    total = loss_y + loss_d, SGD(lr, momentum=0.9) over all parameters.
    Ganin schedules with p = step / steps:
        lambda = 2 / (1 + exp(-10 p)) - 1          (lambda_max = 1)
        lr     = lr0 / (1 + 10 p) ** 0.75,  lr0 = 0.03
    (the param_group lr is set every step).

Source-only baseline
    Same network, steps, batch draws and lr schedule, but only loss_y on the
    64 source rows (G_d unused).

Evaluation
    Target accuracy on all 1800 USPS rows after training:
    argmax of G_y(G_f(x)).

Output
    For each seed k = 1..N:
        seed k: source-only X % (T s)   DANN Y % (T s)
    where T is the training-loop wall time (time.perf_counter; data loading
    and evaluation excluded); then mean +- sample std of both accuracies;
    then one JSON line with impl, accuracies, seconds_per_run, torch version,
    threads and BLAS. The BLAS is read from torch.__config__.show(), and the
    resolved libblas from /proc/self/maps after one matmul.
"""

import argparse
import json
import math
import os
import re
import statistics
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

DATA_DIR = "/work/main/data/jda_mnist_usps"
BATCH = 64
LR0 = 0.03
MOMENTUM = 0.9


def load_domain(prefix):
    x = np.load(os.path.join(DATA_DIR, prefix + "_images.npy")).astype(np.float32)
    y = np.load(os.path.join(DATA_DIR, prefix + "_labels.npy")).astype(np.int64)
    x = x.reshape(x.shape[0], -1)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    x = x / norms
    return torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32)), torch.from_numpy(y)


class GradReverse(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, lam):
        ctx.lam = lam
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad_out):
        return -ctx.lam * grad_out, None


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.g_f = nn.Sequential(nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU())
        self.g_y = nn.Linear(128, 10)
        self.g_d = nn.Sequential(nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 1))


class EpochSampler:
    """Yields batches of indices from shuffled epochs; reshuffles when an epoch ends."""

    def __init__(self, n, batch, seed):
        self.n = n
        self.batch = batch
        self.gen = torch.Generator()
        self.gen.manual_seed(seed)
        self.perm = torch.randperm(n, generator=self.gen)
        self.pos = 0

    def next(self):
        if self.pos + self.batch > self.n:
            self.perm = torch.randperm(self.n, generator=self.gen)
            self.pos = 0
        idx = self.perm[self.pos:self.pos + self.batch]
        self.pos += self.batch
        return idx


def train(seed, steps, xs, ys, xt, dann):
    torch.manual_seed(seed)
    net = Net()
    opt = torch.optim.SGD(net.parameters(), lr=LR0, momentum=MOMENTUM)
    src = EpochSampler(xs.shape[0], BATCH, seed)
    tgt = EpochSampler(xt.shape[0], BATCH, seed)
    dom_labels = torch.cat([torch.zeros(BATCH, 1), torch.ones(BATCH, 1)])

    t0 = time.perf_counter()
    for step in range(steps):
        p = step / steps
        lam = 2.0 / (1.0 + math.exp(-10.0 * p)) - 1.0
        lr = LR0 / (1.0 + 10.0 * p) ** 0.75
        for g in opt.param_groups:
            g["lr"] = lr

        si = src.next()
        ti = tgt.next()  # drawn in both modes so batch streams match
        x_s, y_s = xs[si], ys[si]

        if dann:
            x = torch.cat([x_s, xt[ti]])
            feat = net.g_f(x)
            loss_y = F.cross_entropy(net.g_y(feat[:BATCH]), y_s)
            d_logit = net.g_d(GradReverse.apply(feat, lam))
            loss_d = F.binary_cross_entropy_with_logits(d_logit, dom_labels)
            loss = loss_y + loss_d
        else:
            loss = F.cross_entropy(net.g_y(net.g_f(x_s)), y_s)

        opt.zero_grad()
        loss.backward()
        opt.step()
    elapsed = time.perf_counter() - t0
    return net, elapsed


@torch.no_grad()
def accuracy(net, x, y):
    pred = net.g_y(net.g_f(x)).argmax(dim=1)
    return 100.0 * (pred == y).float().mean().item()


def blas_info():
    cfg = torch.__config__.show()
    m = re.search(r"BLAS_INFO=([^,\s]+)", cfg)
    cfg_blas = m.group(1) if m else None
    if cfg_blas is None:
        for line in cfg.splitlines():
            if "blas" in line.lower() or "mkl" in line.lower():
                cfg_blas = line.strip()
                break
    a = torch.randn(64, 64)
    _ = a @ a
    libs = set()
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                if "blas" in line.lower():
                    parts = line.split()
                    if len(parts) >= 6:
                        libs.add(os.path.realpath(parts[-1]))
    except OSError:
        pass
    return cfg_blas, sorted(libs)


def mean_std(v):
    return statistics.mean(v), (statistics.stdev(v) if len(v) > 1 else 0.0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    cfg_blas, libs = blas_info()
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, "
          f"BLAS (config) {cfg_blas}")
    print("libblas mapped: " + (", ".join(libs) if libs else "(none found)"))

    xs, ys = load_domain("mnist")
    xt, yt = load_domain("usps")

    so_accs, dann_accs, times = [], [], []
    for seed in range(1, args.seeds + 1):
        net, t_so = train(seed, args.steps, xs, ys, xt, dann=False)
        a_so = accuracy(net, xt, yt)
        net, t_d = train(seed, args.steps, xs, ys, xt, dann=True)
        a_d = accuracy(net, xt, yt)
        so_accs.append(a_so)
        dann_accs.append(a_d)
        times += [t_so, t_d]
        print(f"seed {seed}: source-only {a_so:.2f} % ({t_so:.2f} s)   "
              f"DANN {a_d:.2f} % ({t_d:.2f} s)", flush=True)

    m_so, s_so = mean_std(so_accs)
    m_d, s_d = mean_std(dann_accs)
    print(f"source-only: {m_so:.2f} ± {s_so:.2f} %")
    print(f"DANN:        {m_d:.2f} ± {s_d:.2f} %")
    print(json.dumps({
        "impl": "pytorch",
        "source_only_target_acc": round(m_so, 3),
        "source_only_target_acc_std": round(s_so, 3),
        "dann_target_acc": round(m_d, 3),
        "dann_target_acc_std": round(s_d, 3),
        "seconds_per_run": round(statistics.mean(times), 3),
        "seeds": args.seeds,
        "steps": args.steps,
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "blas": cfg_blas,
        "libblas": libs,
    }))


if __name__ == "__main__":
    main()
