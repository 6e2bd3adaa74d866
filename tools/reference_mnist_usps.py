#!/usr/bin/env python3
"""PyTorch reference for dafuse's MNIST -> USPS domain-adaptation demo, in each execution a
PyTorch user would pick: eager, torch.compile (default mode, max-autotune-no-cudagraphs) and the
seed's full recipe.

    build/torch-venv/bin/python tools/reference_mnist_usps.py [--seeds 5] [--first-seed 1] [--steps 3000]
        [--threads 2] [--executions eager,compile,compile-max,recipe] [--dann-only]
        [--heads source_only,dann,...] [--lambda-max 1] [--data DIR] [--json FILE]

(torch 2 for the compiled executions; with Debian's torch 1.13 they are reported n/a.)

Set-up (kept identical to the dafuse demo so the two can be compared):

Data
    <repo>/data/jda_mnist_usps/{mnist_images,mnist_labels,usps_images,usps_labels}.npy
    (--data), loaded with numpy. Images are [N,16,16] float32, flattened to [N,256], and each
    row is L2-normalised. Source = MNIST (2000 rows, labelled); target = USPS (1800 rows;
    labels used only for evaluation).

Network (PyTorch default init, torch.manual_seed(seed) before construction)
    G_f = Linear(256,256) ReLU Linear(256,128) ReLU
    G_y = Linear(128,10)
    G_d = Linear(128,128) ReLU Linear(128,1)

DANN step (steps = 3000 by default)
    B = 64 source rows and B = 64 target rows, drawn as shuffled epochs: each domain has its own
    torch.Generator seeded with the seed, and a new permutation is drawn when that domain's epoch
    runs out. loss_y = cross-entropy (mean) of G_y(G_f(x_s)) on the source labels. The features
    of all 128 rows pass through a gradient reversal layer (identity forward, -lambda * grad
    backward; lambda a 0-dim tensor, so a compiled step never recompiles) into G_d;
    loss_d = BCEWithLogits (mean), source label 0, target label 1. total = loss_y + loss_d,
    SGD(lr, momentum=0.9) over all parameters. Ganin schedules with p = step / steps:
        lambda = 2 / (1 + exp(-10 p)) - 1          (lambda_max = 1)
        lr     = lr0 / (1 + 10 p) ** 0.75,  lr0 = 0.03
    (the param_group lr is set every step).

Executions
    eager        the step above, fp32.
    compile      torch.compile of the forward + losses module (default mode); the optimizer
                 step stays eager.
    compile-max  the same with mode="max-autotune-no-cudagraphs".
    recipe       the seed's full recipe: torch.compile + bf16 autocast (losses on fp32 logits,
                 fp32 master weights) + clip_grad_norm_(1.0), the batches gathered by a
                 DataLoader with 2 workers (persistent, prefetch 2) from the same index stream.
    Each process starts with a fresh inductor cache (TORCHINDUCTOR_CACHE_DIR, unless set), so
    seed 1's compile is cold and later seeds' hit the FX-graph cache.

Source-only baseline (skipped with --dann-only)
    Same network, steps, batch draws and lr schedule, but only loss_y on the 64 source rows
    (G_d unused), in the same execution.

Other heads (--heads, a comma list; default source_only,dann)
    The losses of tools/torch_heads.py (dafuse's head/*.hpp; bench/heads_accuracy.cpp runs the
    same set-up in dafuse): total = loss_y + lambda * L_h with lambda = lambda_max (--lambda-max,
    1) times Ganin's schedule, for cdan, cdan_e (G_d = Linear(1280,128) ReLU Linear(128,1) on
    softmax(g).detach() (x) h behind the reversal; cdan_e weights the BCE rows by
    1 + exp(-H(g)) normalised to sum to 2B), coral, mmd, mmd_linear (on h, no G_d), mcc (on the
    target rows' logits, T = 2.5) and cdan_e+mcc (both terms at lambda). dann and source_only
    are the step above.

Evaluation
    Target accuracy on all 1800 USPS rows after training: argmax of G_y(G_f(x)) (eager, fp32).

Times (time.perf_counter)
    train: the training loop alone (the first step's compile included);
    compile: the first step alone (compiled executions);
    whole: the run from loading the data to the final accuracy (loading, normalising, building
    the model and its compiled step, training, evaluating);
    and, once at the end, the seconds since this process started (importing torch included).

Output: a line per seed and execution, a summary per execution, then one JSON line (and --json
FILE) with every run.
"""

import argparse
import importlib
import json
import math
import os
import re
import statistics
import sys
import tempfile
import time

REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
DEFAULT_DATA = os.path.join(REPO_ROOT, "data", "jda_mnist_usps")
BATCH = 64
LR0 = 0.03
MOMENTUM = 0.9
CLIP_NORM = 1.0
RECIPE_WORKERS = 2
EXECUTIONS = ["eager", "compile", "compile-max", "recipe"]
COMPILE_MODES = {"compile": None, "compile-max": "max-autotune-no-cudagraphs", "recipe": None}


NAMES = {"source_only": "source-only", "dann": "DANN", "cdan": "CDAN", "cdan_e": "CDAN+E",
         "coral": "CORAL", "mmd": "MMD", "mmd_linear": "MMD (linear)", "mcc": "MCC",
         "cdan_e+mcc": "CDAN+E + MCC"}


def process_seconds():
    """Seconds since this process started (/proc/self/stat's start time against
    /proc/uptime), or None where /proc does not say."""
    try:
        with open("/proc/self/stat") as f:
            start_ticks = int(f.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        return uptime - start_ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def ganin_lambda(p):
    return 2.0 / (1.0 + math.exp(-10.0 * p)) - 1.0


def ganin_lr(p):
    return LR0 / (1.0 + 10.0 * p) ** 0.75


def load_domain(torch, np, data_dir, prefix):
    paths = [os.path.join(data_dir, prefix + s) for s in ("_images.npy", "_labels.npy")]
    for path in paths:
        if not os.path.exists(path):
            raise SystemExit(f"reference_mnist_usps.py: {path} is missing (--data: the folder "
                             "of the JDA digits, data/README.md)")
    x = np.load(paths[0], allow_pickle=False).astype(np.float32)
    y = np.load(paths[1], allow_pickle=False).astype(np.int64)
    x = x.reshape(x.shape[0], -1)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    x = x / norms
    return torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32)), torch.from_numpy(y)


HEADS = ["source_only", "dann", "cdan", "cdan_e", "coral", "mmd", "mmd_linear", "mcc",
         "cdan_e+mcc"]


def build(torch):
    """The modules, made once torch is imported."""
    nn = torch.nn
    F = torch.nn.functional
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    heads = importlib.import_module("torch_heads")

    class Net(nn.Module):
        def __init__(self, discriminator_input=128):
            super().__init__()
            self.g_f = nn.Sequential(nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 128),
                                     nn.ReLU())
            self.g_y = nn.Linear(128, 10)
            self.g_d = nn.Sequential(nn.Linear(discriminator_input, 128), nn.ReLU(),
                                     nn.Linear(128, 1))

    class Loss(nn.Module):
        """forward(x, y_s, domain, lam) -> the step's loss: the label loss on the B source rows
        plus the head's (lambda already in lam), or the label loss alone for source_only."""

        def __init__(self, net, head):
            super().__init__()
            self.net, self.head = net, head

        def forward(self, x, y_s, domain, lam):
            feat = self.net.g_f(x)
            if self.head == "source_only":
                return F.cross_entropy(self.net.g_y(feat).float(), y_s)
            if self.head == "dann":
                loss_y = F.cross_entropy(self.net.g_y(feat[:BATCH]).float(), y_s)
                d_logit = self.net.g_d(heads.GradReverse.apply(feat, lam))
                return loss_y + F.binary_cross_entropy_with_logits(d_logit.float(), domain)
            z = self.net.g_y(feat)
            loss = F.cross_entropy(z[:BATCH].float(), y_s)
            if self.head in ("cdan", "cdan_e", "cdan_e+mcc"):
                joint = heads.multilinear_map(z, feat)
                d_logit = self.net.g_d(heads.GradReverse.apply(joint, lam))
                weight = heads.entropy_weights(z) if self.head != "cdan" else None
                loss = loss + F.binary_cross_entropy_with_logits(d_logit.float(), domain,
                                                                 weight=weight)
            if self.head in ("mcc", "cdan_e+mcc"):
                loss = loss + lam * heads.mcc(z[BATCH:].float())
            if self.head in ("coral", "mmd", "mmd_linear"):
                loss = loss + lam * getattr(heads, self.head)(feat.float())
            return loss

    return Net, Loss


class EpochSampler:
    """Yields batches of indices from shuffled epochs; reshuffles when an epoch ends."""

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


def batch_stream(torch, seed, steps, n_source, n_target):
    """The (source, target) index batches of every step, in order."""
    src = EpochSampler(torch, n_source, BATCH, seed)
    tgt = EpochSampler(torch, n_target, BATCH, seed)
    return [(src.next(), tgt.next()) for _ in range(steps)]


def make_gather(torch):
    class Gather(torch.utils.data.Dataset):
        """Batch k of the stream, gathered (in a DataLoader worker for the recipe)."""

        def __init__(self, stream, xs, ys, xt, dann):
            self.stream, self.xs, self.ys, self.xt, self.dann = stream, xs, ys, xt, dann

        def __len__(self):
            return len(self.stream)

        def __getitem__(self, k):
            si, ti = self.stream[k]
            x = torch.cat([self.xs[si], self.xt[ti]]) if self.dann else self.xs[si]
            return x, self.ys[si]
    return Gather


def run(torch, np, Net, Loss, execution, seed, steps, head, lambda_max, data_dir):
    """One whole run: load, build, train, evaluate. Returns its accuracy and times."""
    dann = head != "source_only"  # the batch holds target rows
    t_start = time.perf_counter()
    xs, ys = load_domain(torch, np, data_dir, "mnist")
    xt, yt = load_domain(torch, np, data_dir, "usps")
    torch.manual_seed(seed)
    net = Net(1280 if head in ("cdan", "cdan_e", "cdan_e+mcc") else 128)
    opt = torch.optim.SGD(net.parameters(), lr=LR0, momentum=MOMENTUM)
    params = list(net.parameters())
    loss_fn = Loss(net, head)
    if execution in COMPILE_MODES:
        if not hasattr(torch, "compile"):
            raise RuntimeError(f"torch.compile needs PyTorch 2 (this is {torch.__version__})")
        torch._dynamo.reset()
        mode = COMPILE_MODES[execution]
        loss_fn = torch.compile(loss_fn, mode=mode) if mode else torch.compile(loss_fn)
    recipe = execution == "recipe"
    domain = torch.cat([torch.zeros(BATCH, 1), torch.ones(BATCH, 1)])
    lam = torch.tensor(0.0)
    stream = batch_stream(torch, seed, steps, xs.shape[0], xt.shape[0])
    gather = make_gather(torch)(stream, xs, ys, xt, dann)
    if recipe:
        batches = iter(torch.utils.data.DataLoader(gather, batch_size=None,
                                                   num_workers=RECIPE_WORKERS,
                                                   prefetch_factor=2, persistent_workers=True))
    else:
        batches = (gather[k] for k in range(steps))
    compile_seconds = None
    t_train = time.perf_counter()
    for step in range(steps):
        t_step = time.perf_counter()
        p = step / steps
        lam.fill_(lambda_max * ganin_lambda(p))
        for g in opt.param_groups:
            g["lr"] = ganin_lr(p)
        x, y_s = next(batches)
        opt.zero_grad()
        if recipe:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = loss_fn(x, y_s, domain, lam)
        else:
            loss = loss_fn(x, y_s, domain, lam)
        loss.backward()
        if recipe:
            torch.nn.utils.clip_grad_norm_(params, CLIP_NORM)
        opt.step()
        if step == 0 and execution in COMPILE_MODES:
            compile_seconds = time.perf_counter() - t_step
    train_seconds = time.perf_counter() - t_train
    if recipe:
        batches._shutdown_workers()
    with torch.no_grad():
        pred = net.g_y(net.g_f(xt)).argmax(dim=1)
        accuracy = 100.0 * (pred == yt).float().mean().item()
    whole = time.perf_counter() - t_start
    return {"execution": execution, "seed": seed, "head": head, "dann": head == "dann",
            "lambda_max": lambda_max, "accuracy": accuracy,
            "train_seconds": train_seconds, "compile_seconds": compile_seconds,
            "whole_seconds": whole, "final_loss": float(loss.detach().float())}


def blas_info(torch):
    cfg = torch.__config__.show()
    m = re.search(r"BLAS_INFO=([^,\s]+)", cfg)
    cfg_blas = m.group(1) if m else None
    mkl = [ln.strip().lstrip("- ") for ln in cfg.splitlines() if "Math Kernel Library" in ln]
    if mkl and cfg_blas != "generic":
        cfg_blas = (cfg_blas or "") + " (" + mkl[0] + ")"
    return cfg_blas


def mean_std(v):
    return statistics.mean(v), (statistics.stdev(v) if len(v) > 1 else 0.0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--first-seed", type=int, default=1, help="seeds first-seed, ..., + seeds - 1")
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--executions", default="eager",
                    help="comma list from: " + ", ".join(EXECUTIONS) + " (default eager)")
    ap.add_argument("--dann-only", action="store_true", help="skip the source-only runs")
    ap.add_argument("--heads", default="source_only,dann",
                    help="comma list from: " + ", ".join(HEADS) + " (default source_only,dann)")
    ap.add_argument("--lambda-max", type=float, default=1.0,
                    help="the heads' lambda_max (Ganin's schedule times it; default 1)")
    ap.add_argument("--data", default=DEFAULT_DATA, help="folder of the JDA digits' .npy files")
    ap.add_argument("--json", metavar="FILE", help="also write every run to FILE")
    args = ap.parse_args()
    executions = [e.strip() for e in args.executions.split(",") if e.strip()]
    bad = [e for e in executions if e not in EXECUTIONS]
    if bad:
        raise SystemExit(f"reference_mnist_usps.py: unknown execution {', '.join(bad)} (choose "
                         f"from {', '.join(EXECUTIONS)})")
    heads = [h.strip() for h in args.heads.split(",") if h.strip()]
    if args.dann_only:
        heads = [h for h in heads if h != "source_only"]
    bad = [h for h in heads if h not in HEADS]
    if bad or not heads:
        raise SystemExit(f"reference_mnist_usps.py: --heads: expected a list from "
                         f"{', '.join(HEADS)}, found {args.heads!r}")
    if args.seeds < 1 or args.steps < 1 or args.threads < 1:
        raise SystemExit("reference_mnist_usps.py: --seeds, --steps and --threads take counts "
                         "of at least 1")
    # A fresh inductor cache unless one is given: the first compile is the cold one a user pays.
    cache = None
    if "TORCHINDUCTOR_CACHE_DIR" not in os.environ:
        cache = tempfile.TemporaryDirectory(prefix="inductor-")
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = cache.name
    os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")

    import numpy as np
    import torch
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, "
          f"BLAS {blas_info(torch)}", flush=True)
    Net, Loss = build(torch)

    runs = []
    for execution in executions:
        for seed in range(args.first_seed, args.first_seed + args.seeds):
            line = f"{execution} seed {seed}:"
            for head in heads:
                try:
                    r = run(torch, np, Net, Loss, execution, seed, args.steps, head,
                            args.lambda_max, args.data)
                except Exception as e:  # noqa: BLE001 - report n/a, go on
                    msg = str(e).strip().splitlines()[0] if str(e).strip() else ""
                    r = {"execution": execution, "seed": seed, "head": head,
                         "dann": head == "dann", "error": f"{type(e).__name__}: {msg}"[:300]}
                    line += f"   {NAMES[head]} n/a: {r['error']}"
                    runs.append(r)
                    continue
                runs.append(r)
                line += (f"   {NAMES[head]} {r['accuracy']:.2f} % "
                         f"(train {r['train_seconds']:.2f} s, whole {r['whole_seconds']:.2f} s"
                         + (f", compile {r['compile_seconds']:.2f} s"
                            if r["compile_seconds"] is not None else "") + ")")
            print(line, flush=True)

    summary = []
    print(f"\nMNIST -> USPS, {args.steps} steps, {args.threads} threads, {args.seeds} seed(s):")
    for execution in executions:
        for head in heads:
            ok = [r for r in runs if r["execution"] == execution and r["head"] == head
                  and "accuracy" in r]
            if not ok:
                continue
            m, s = mean_std([r["accuracy"] for r in ok])
            row = {"execution": execution, "head": head, "dann": head == "dann",
                   "lambda_max": args.lambda_max, "seeds": len(ok), "accuracy": m,
                   "accuracy_std": s,
                   "whole_seconds_seed1": ok[0]["whole_seconds"],
                   "whole_seconds_mean": statistics.mean(r["whole_seconds"] for r in ok),
                   "train_seconds_mean": statistics.mean(r["train_seconds"] for r in ok)}
            compiles = [r["compile_seconds"] for r in ok if r["compile_seconds"] is not None]
            if compiles:
                row["compile_seconds"] = compiles
            summary.append(row)
            print(f"  {execution:<12} {NAMES[head]:<12} {m:6.2f} ± "
                  f"{s:.2f} %   whole run {row['whole_seconds_mean']:.2f} s (seed 1: "
                  f"{row['whole_seconds_seed1']:.2f} s), training {row['train_seconds_mean']:.2f}"
                  f" s" + (f", compile {', '.join('%.1f' % c for c in compiles)} s"
                           if compiles else ""))
    since_start = process_seconds()
    if since_start is not None:
        print(f"process: {since_start:.2f} s since it started (importing torch included)")
    out = {"impl": "pytorch", "torch": torch.__version__, "threads": torch.get_num_threads(),
           "blas": blas_info(torch), "steps": args.steps, "seeds": args.seeds,
           "process_seconds": since_start, "summary": summary, "runs": runs}
    print(json.dumps({k: out[k] for k in out if k != "runs"}))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    if cache is not None:
        cache.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
