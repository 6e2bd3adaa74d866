#!/usr/bin/env python3
"""Accuracy peers: the Python domain-adaptation libraries users would pick, on dafuse's set-up.

Run it through scripts/peers (which installs skada and pytorch-adapt into build/peers-venv):

    scripts/peers [--seeds 5] [--steps 3000] [--methods skada-dann,pytorch-adapt-dann,...]

Task: JDA digits MNIST -> USPS (shared/data/jda_mnist_usps: 2000 MNIST rows as the labelled
source, 1800 USPS rows as the unlabelled target and the test set), each 16x16 image flattened to
256 values and L2-normalised, as in scripts/demo and tools/reference_mnist_usps.py. dafuse's
set-up (bench/heads_accuracy.cpp, docs/heads.md): G_f 256 -> 256 -> 128 ReLU, G_y 128 -> 10,
G_d 128 -> 128 ReLU -> 1 (PyTorch default init, torch.manual_seed(seed) first), batches of
64 source + 64 target rows, 3000 steps of SGD (momentum 0.9), Ganin's schedules with
p = step / steps: lambda = 2 / (1 + exp(-10 p)) - 1, lr = 0.03 / (1 + 10 p) ** 0.75; the DANN
loss is the label cross-entropy plus lambda times the mean BCE of G_d over the 2B rows.
Target accuracy: argmax of G_y(G_f(x)) on all 1800 USPS rows after training. Time: the whole
run, from the data in memory to the trained model (the library's fit or our loop over its hook),
time.perf_counter. Where a library cannot express a part of the set-up, the method's "differs"
line says what runs instead. The libraries are used as installed packages only.
"""

import argparse
import json
import math
import os
import platform
import statistics
import sys
import time
import warnings

REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
DEFAULT_DATA = os.path.normpath(os.path.join(REPO_ROOT, "..", "shared", "data"))
BATCH = 64
LR0 = 0.03
MOMENTUM = 0.9

METHODS = ["skada-source-only", "skada-dann", "skada-cdan", "skada-dan", "skada-deepcoral",
           "skada-mcc", "pytorch-adapt-dann", "pytorch-adapt-mcc"]


def ganin_lambda(p):
    return 2.0 / (1.0 + math.exp(-10.0 * p)) - 1.0


def ganin_lr(p):
    return LR0 / (1.0 + 10.0 * p) ** 0.75


def load_digits(np, data_dir):
    folder = os.path.join(data_dir, "jda_mnist_usps")

    def domain(prefix):
        x = np.load(os.path.join(folder, prefix + "_images.npy"), allow_pickle=False)
        y = np.load(os.path.join(folder, prefix + "_labels.npy"), allow_pickle=False)
        x = x.reshape(x.shape[0], -1).astype(np.float32)
        norms = np.linalg.norm(x, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        return np.ascontiguousarray(x / norms, dtype=np.float32), y.astype(np.int64)
    for f in ("mnist_images", "mnist_labels", "usps_images", "usps_labels"):
        path = os.path.join(folder, f + ".npy")
        if not os.path.exists(path):
            raise SystemExit(f"peers.py: {path} is missing (the JDA digits, shared/data/README)")
    return domain("mnist") + domain("usps")


def networks(torch, seed, cdan=False):
    """G_f, G_y, G_d of dafuse's digits set-up (G_d reads softmax(g) (x) h, 1280 wide, for
    CDAN), built in that order after torch.manual_seed(seed)."""
    nn = torch.nn
    torch.manual_seed(seed)
    g_f = nn.Sequential(nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU())
    g_y = nn.Linear(128, 10)
    g_d = nn.Sequential(nn.Linear(1280 if cdan else 128, 128), nn.ReLU(), nn.Linear(128, 1))
    return g_f, g_y, g_d


class EpochSampler:
    """Shuffled epochs of index batches, a generator per domain seeded with the seed (as in
    tools/reference_mnist_usps.py)."""

    def __init__(self, torch, n, batch, seed):
        self.torch, self.n, self.batch = torch, n, batch
        self.gen = torch.Generator()
        self.gen.manual_seed(seed)
        self.perm = torch.randperm(n, generator=self.gen)
        self.pos = 0

    def next(self):
        if self.pos + self.batch > self.n:
            self.perm = self.torch.randperm(self.n, generator=self.gen)
            self.pos = 0
        idx = self.perm[self.pos:self.pos + self.batch]
        self.pos += self.batch
        return idx


# ---------------------------------------------------------------------------------------------
# skada (scikit-adaptation): skorch estimators
# ---------------------------------------------------------------------------------------------

def run_skada(torch, np, method, seed, steps, xs, ys, xt):
    import skada.deep as sd
    from skada.deep.modules import GradientReversalLayer
    from skorch.callbacks import Callback
    nn = torch.nn
    g_f, g_y, g_d = networks(torch, seed, cdan=method == "skada-cdan")

    class Base(nn.Module):
        def __init__(self):
            super().__init__()
            self.g_f, self.g_y = g_f, g_y

        def forward(self, x, sample_weight=None):
            return self.g_y(self.g_f(x))

    class Discriminator(nn.Module):
        """G_d behind skada's reversal layer, whose weight the schedule sets every step."""

        def __init__(self):
            super().__init__()
            self.g_d, self.alpha = g_d, 0.0

        def forward(self, x, sample_weight=None):
            return self.g_d(GradientReversalLayer.apply(x, self.alpha)).squeeze(-1)

    disc = Discriminator()
    # skada's fit draws balanced batches of B source + B target rows; an epoch is as many
    # batches as the larger domain fills. Steps are rounded up to whole epochs.
    per_epoch = max(len(xs), len(xt)) // BATCH
    epochs = math.ceil(steps / per_epoch)
    total = epochs * per_epoch
    adversarial = method in ("skada-dann", "skada-cdan")

    class Schedule(Callback):
        """Ganin's lr (and lambda, as the reversal weight) at every training batch."""

        def __init__(self):
            self.step = 0

        def on_batch_begin(self, net, batch=None, training=None, **kwargs):
            if not training:
                return
            p = min(self.step / total, 1.0)
            for g in net.optimizer_.param_groups:
                g["lr"] = ganin_lr(p)
            disc.alpha = ganin_lambda(p) if adversarial else 0.0
            self.step += 1

    schedule = Schedule()
    common = dict(batch_size=BATCH, max_epochs=epochs, optimizer=torch.optim.SGD,
                  optimizer__lr=LR0, optimizer__momentum=MOMENTUM, train_split=None,
                  callbacks=[schedule], verbose=0, device="cpu")
    differs = []
    if method == "skada-dann":
        # skada's DANN loss is BCE(source) + BCE(target), each a mean: reg = 1/2 makes it the
        # mean over the 2B rows. Its default G_d (Linear-BatchNorm-ReLU-Linear-Softmax) is
        # replaced by dafuse's, on logits with BCEWithLogitsLoss.
        net = sd.DANN(Base(), layer_name="g_f", reg=0.5, domain_classifier=disc,
                      domain_criterion=nn.BCEWithLogitsLoss(), **common)
    elif method == "skada-cdan":
        net = sd.CDAN(Base(), layer_name="g_f", reg=0.5, domain_classifier=disc,
                      domain_criterion=nn.BCEWithLogitsLoss(), **common)
        differs.append("skada's CDAN map and its gradient are skada's (no CDAN+E weights)")
    elif method == "skada-source-only":
        net = sd.SourceOnly(Base(), layer_name="g_f", **common)
    else:
        cls = {"skada-dan": sd.DAN, "skada-deepcoral": sd.DeepCoral, "skada-mcc": sd.MCC}[method]
        net = cls(Base(), layer_name="g_f", reg=1, **common)
        differs.append("loss weight fixed at skada's default reg = 1 (no lambda schedule: the "
                       "schedule is DANN's); G_d unused")
    if total != steps:
        differs.append(f"{total} steps ({epochs} epochs of {per_epoch} batches)")
    X = np.concatenate([xs, xt])
    y = np.concatenate([ys, -np.ones(len(xt), dtype=np.int64)])  # target labels masked
    domain = np.concatenate([np.ones(len(xs), dtype=np.int64),
                             -2 * np.ones(len(xt), dtype=np.int64)])
    t0 = time.perf_counter()
    net.fit(X, y, sample_domain=domain)
    seconds = time.perf_counter() - t0
    pred = net.predict(xt, sample_domain=-2 * np.ones(len(xt), dtype=np.int64))
    if schedule.step != total:
        differs.append(f"ran {schedule.step} steps, not the {total} planned")
    return pred, seconds, schedule.step, differs


# ---------------------------------------------------------------------------------------------
# pytorch-adapt: hooks, driven by our loop
# ---------------------------------------------------------------------------------------------

def run_pytorch_adapt(torch, np, method, seed, steps, xs, ys, xt):
    from pytorch_adapt.hooks import (ClassifierHook, DANNHook, FeaturesForDomainLossHook,
                                     GradientReversalHook, MCCHook)
    from pytorch_adapt.weighters import SumWeighter
    nn = torch.nn
    g_f, g_y, g_d = networks(torch, seed)
    d = nn.Sequential(g_d, nn.Flatten(0))
    differs = []
    if method == "pytorch-adapt-dann":
        models = {"G": g_f, "C": g_y, "D": d}
        opt = torch.optim.SGD([p for m in (g_f, g_y, g_d) for p in m.parameters()], lr=LR0,
                              momentum=MOMENTUM)
        # the hook DANNHook makes by default, kept to set its reversal layer's weight (fn)
        reversal_hook = GradientReversalHook(weight=0.0,
                                             apply_to=FeaturesForDomainLossHook().out_keys)
        reversal = reversal_hook.fn
        # the domain losses are means over each domain's B rows: 1/2 each is the mean over 2B
        hook = DANNHook([opt], gradient_reversal=reversal_hook,
                        weighter=SumWeighter(weights={"src_domain_loss": 0.5,
                                                      "target_domain_loss": 0.5}))
    else:
        models = {"G": g_f, "C": g_y}
        opt = torch.optim.SGD([p for m in (g_f, g_y) for p in m.parameters()], lr=LR0,
                              momentum=MOMENTUM)
        reversal = None
        hook = ClassifierHook(opts=[opt], post=[MCCHook()])
        differs.append("MCC loss weight 1 (pytorch-adapt's default, temperature its default); "
                       "no lambda schedule; G_d unused")
    xs_t, ys_t, xt_t = torch.from_numpy(xs), torch.from_numpy(ys), torch.from_numpy(xt)
    src = EpochSampler(torch, len(xs), BATCH, seed)
    tgt = EpochSampler(torch, len(xt), BATCH, seed)
    src_domain = torch.zeros(BATCH)
    tgt_domain = torch.ones(BATCH)
    t0 = time.perf_counter()
    for step in range(steps):
        p = step / steps
        for g in opt.param_groups:
            g["lr"] = ganin_lr(p)
        if reversal is not None:
            reversal.update_weight(ganin_lambda(p))
        si, ti = src.next(), tgt.next()
        hook({**models, "src_imgs": xs_t[si], "src_labels": ys_t[si], "target_imgs": xt_t[ti],
              "src_domain": src_domain, "target_domain": tgt_domain})
    seconds = time.perf_counter() - t0
    with torch.no_grad():
        pred = g_y(g_f(xt_t)).argmax(dim=1).numpy()
    return pred, seconds, steps, differs


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--methods", default=",".join(METHODS),
                    help="comma list from: " + ", ".join(METHODS))
    ap.add_argument("--data", default=DEFAULT_DATA)
    ap.add_argument("--json", metavar="FILE")
    args = ap.parse_args()
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    bad = [m for m in methods if m not in METHODS]
    if bad:
        raise SystemExit(f"peers.py: unknown method {', '.join(bad)} (choose from "
                         f"{', '.join(METHODS)})")
    if args.seeds < 1 or args.steps < 1:
        raise SystemExit("peers.py: --seeds and --steps take counts of at least 1")
    warnings.filterwarnings("ignore")
    import numpy as np
    import torch
    torch.set_num_threads(args.threads)
    xs, ys, xt, yt = load_digits(np, args.data)
    versions = {"python": platform.python_version(), "torch": torch.__version__,
                "numpy": np.__version__}
    for name in ("skada", "skorch", "pytorch_adapt"):
        try:
            versions[name] = __import__(name).__version__
        except Exception as e:  # noqa: BLE001 - a library that does not import is reported
            versions[name] = f"not importable: {type(e).__name__}: {str(e).splitlines()[0]}"
    print("versions: " + ", ".join(f"{k} {v}" for k, v in versions.items()), flush=True)
    results = []

    def write_json():
        if args.json:  # after each method, so that a run cut short keeps what it finished
            with open(args.json, "w") as f:
                json.dump({"versions": versions, "seeds": args.seeds, "steps": args.steps,
                           "threads": args.threads, "results": results}, f, indent=1)
    for method in methods:
        runner = run_skada if method.startswith("skada") else run_pytorch_adapt
        accs, times, differs, error, steps_run = [], [], [], None, None
        for seed in range(1, args.seeds + 1):
            try:
                pred, seconds, steps_run, differs = runner(torch, np, method, seed, args.steps,
                                                           xs, ys, xt)
            except Exception as e:  # noqa: BLE001 - say why, go on with the next method
                error = f"{type(e).__name__}: {str(e).strip().splitlines()[0][:300]}" \
                    if str(e).strip() else type(e).__name__
                print(f"{method}: n/a: {error}", flush=True)
                break
            accs.append(100.0 * float((pred == yt).mean()))
            times.append(seconds)
            print(f"{method} seed {seed}: {accs[-1]:.2f} % ({seconds:.2f} s, {steps_run} steps)",
                  flush=True)
        r = {"method": method, "seeds": len(accs), "accuracies": accs, "seconds": times,
             "steps": steps_run, "differs": differs, "error": error}
        if accs:
            r["mean"] = statistics.mean(accs)
            r["std"] = statistics.stdev(accs) if len(accs) > 1 else 0.0
            r["seconds_per_run"] = statistics.mean(times)
        results.append(r)
        write_json()
    print()
    print(f"MNIST -> USPS target accuracy, {args.seeds} seeds, {args.steps} steps, "
          f"{args.threads} threads")
    for r in results:
        if r.get("mean") is None:
            print(f"  {r['method']:<20} n/a: {r['error']}")
            continue
        print(f"  {r['method']:<20} {r['mean']:6.2f} ± {r['std']:.2f} %   "
              f"{r['seconds_per_run']:.2f} s per run" +
              (f"   (differs: {'; '.join(r['differs'])})" if r["differs"] else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
