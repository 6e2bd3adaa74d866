#!/usr/bin/env python3
"""PyTorch run of examples/04_digits_cnn.cpp: the LeNet-like DANN on the JDA digits, same set-up.

    /usr/bin/python3 tools/reference_digits_cnn.py [--task mnist-usps|usps-mnist] [--seeds 5]
        [--steps 3000] [--threads 1] [--data DIR] [--first-seed 1] [--heads source-only,dann]

Set-up (that of the example; see its header):

Data
    DIR/{mnist,usps}_{images,labels}.npy (default: the repository's data/jda_mnist_usps):
    [N, 16, 16] float32 pixels in [0, 1], used as stored (no normalisation), as [N, 1, 16, 16].
    mnist-usps: source MNIST (2000 rows, labelled), target USPS (1800 rows; labels only scored);
    usps-mnist the other way round.

Network (PyTorch's default initialisation, torch.manual_seed(seed) before construction; dafuse's
weight_init::torch_default draws from the same distributions with its own generator)
    G_f = Conv2d(1, 32, 5, padding 2) ReLU MaxPool2d(2) Conv2d(32, 48, 5, padding 2) ReLU
          MaxPool2d(2) Flatten (768) Linear(768, 100) ReLU Linear(100, 100) ReLU
    G_y = Linear(100, 10)
    G_d = Linear(100, 100) ReLU Linear(100, 1)
    (dafuse applies ReLU before pooling too; max-pooling and ReLU commute, so this is the same
    function.)

Step (3000 by default), as dafuse's train_step with head::dann<schedule::ganin>, optim::sgd
    B = 64 source and 64 target rows, drawn as shuffled epochs: each domain its own
    torch.Generator seeded with the seed, reshuffled when an epoch runs out (dafuse draws shuffled
    epochs too, from its own Philox streams: the same kind of batches, not the same rows).
    loss_y = cross-entropy (mean) on the source rows; the features of all 128 rows pass a
    gradient reversal (identity forward, -lambda * grad backward) into G_d; loss_d =
    BCEWithLogits (mean), source 0, target 1; SGD (momentum 0.9) on loss_y + loss_d.
    Ganin's schedules with p = i / steps (i = steps taken before this one):
        lambda = 2 / (1 + exp(-10 p)) - 1,  lr = 0.01 / (1 + 10 p) ** 0.75.
    Source-only: the same network, draws and lr schedule, loss_y only.

Evaluation
    Target accuracy of the last step's model on every target row (dafuse's fit_result
    target_accuracy without evaluations during training).

Output: one line per seed, mean +- sample std of each head, then one JSON line. --first-seed S
runs seeds S, ..., S + seeds - 1 (a long comparison split into parts gives the same runs);
--heads dann runs DANN alone.
"""

import argparse
import json
import math
import os
import statistics
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
BATCH = 64
LR0 = 0.01
MOMENTUM = 0.9


def load_domain(data, name):
    x = np.load(os.path.join(data, name + '_images.npy'), allow_pickle=False)
    y = np.load(os.path.join(data, name + '_labels.npy'), allow_pickle=False)
    if x.dtype == np.uint8:
        x = x.astype(np.float32) / np.float32(255)
    if x.dtype != np.float32 or x.shape[1:] != (16, 16) or y.shape != (len(x),):
        sys.exit(f'{data}/{name}_images.npy: expected float32 or uint8 [N, 16, 16] with [N] '
                 f'labels, found {x.dtype} {x.shape} and {y.shape}')
    return (torch.from_numpy(np.ascontiguousarray(x.reshape(len(x), 1, 16, 16))),
            torch.from_numpy(y.astype(np.int64)))


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
        self.g_f = nn.Sequential(
            nn.Conv2d(1, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 48, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
            nn.Linear(768, 100), nn.ReLU(), nn.Linear(100, 100), nn.ReLU())
        self.g_y = nn.Linear(100, 10)
        self.g_d = nn.Sequential(nn.Linear(100, 100), nn.ReLU(), nn.Linear(100, 1))


class EpochSampler:
    """Batches of indices from shuffled epochs; reshuffles when an epoch runs out."""

    def __init__(self, n, batch, seed):
        self.n, self.batch = n, batch
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
    src = EpochSampler(len(xs), BATCH, seed)
    tgt = EpochSampler(len(xt), BATCH, seed + 1000)
    domain = torch.cat([torch.zeros(BATCH, 1), torch.ones(BATCH, 1)])
    t0 = time.perf_counter()
    for i in range(steps):
        p = i / steps
        lam = 2.0 / (1.0 + math.exp(-10.0 * p)) - 1.0
        for g in opt.param_groups:
            g['lr'] = LR0 / (1.0 + 10.0 * p) ** 0.75
        si, ti = src.next(), tgt.next()  # both drawn in both modes
        if dann:
            feat = net.g_f(torch.cat([xs[si], xt[ti]]))
            loss = (F.cross_entropy(net.g_y(feat[:BATCH]), ys[si]) +
                    F.binary_cross_entropy_with_logits(net.g_d(GradReverse.apply(feat, lam)),
                                                       domain))
        else:
            loss = F.cross_entropy(net.g_y(net.g_f(xs[si])), ys[si])
        opt.zero_grad()
        loss.backward()
        opt.step()
    return net, time.perf_counter() - t0


@torch.no_grad()
def accuracy(net, x, y):
    return 100.0 * (net.g_y(net.g_f(x)).argmax(dim=1) == y).float().mean().item()


def mean_std(v):
    return statistics.mean(v), (statistics.stdev(v) if len(v) > 1 else 0.0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--task', choices=['mnist-usps', 'usps-mnist'], default='mnist-usps')
    ap.add_argument('--seeds', type=int, default=5)
    ap.add_argument('--first-seed', type=int, default=1)
    ap.add_argument('--steps', type=int, default=3000)
    ap.add_argument('--threads', type=int, default=1)
    ap.add_argument('--data', default=os.path.join(REPO, 'data', 'jda_mnist_usps'))
    ap.add_argument('--heads', default='source-only,dann')
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    source, target = args.task.split('-')
    xs, ys = load_domain(args.data, source)
    xt, yt = load_domain(args.data, target)
    print(f'{args.task} (PyTorch {torch.__version__} CNN, {torch.get_num_threads()} thread(s)): '
          f'{len(xs)} source rows, {len(xt)} target rows, {args.steps} steps', flush=True)
    heads = args.heads.split(',')
    if not heads or any(h not in ('source-only', 'dann') for h in heads):
        sys.exit(f'--heads: expected source-only, dann or both, found {args.heads!r}')
    acc = {h: [] for h in heads}
    seconds = {h: [] for h in heads}
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        line = f'seed {seed}:'
        for h in heads:
            net, t = train(seed, args.steps, xs, ys, xt, dann=h == 'dann')
            acc[h].append(accuracy(net, xt, yt))
            seconds[h].append(round(t, 1))
            line += f'   {"DANN" if h == "dann" else h} {acc[h][-1]:.2f} % ({t:.1f} s)'
        print(line, flush=True)
    summary = {h: mean_std(acc[h]) for h in heads}
    print(f'target accuracy over {args.seeds} seed(s): ' +
          ', '.join(f'{"DANN" if h == "dann" else h} {m:.2f} ± {s:.2f} %'
                    for h, (m, s) in summary.items()))
    print(json.dumps({'impl': 'pytorch', 'task': args.task, 'network': 'lenet',
                      'target_acc': {h: [round(a, 3) for a in acc[h]] for h in heads},
                      'mean_std': {h: [round(m, 3), round(s, 3)] for h, (m, s) in summary.items()},
                      'first_seed': args.first_seed, 'steps': args.steps, 'seconds': seconds,
                      'torch': torch.__version__, 'threads': torch.get_num_threads()}))


if __name__ == '__main__':
    main()
