#!/usr/bin/env python3
"""Accuracy peers: the Python domain-adaptation libraries users would pick, on dafuse's set-up.

Run it through scripts/peers (which installs skada and pytorch-adapt into build/peers-venv):

    scripts/peers [--task mnist-usps|amazon] [--seeds 5] [--steps N]
                  [--methods skada-dann,pytorch-adapt-dann,...] [--pairs dvd-books,...]
                  [--threads 1] [--jobs J]

Each run (a pair, a method, a seed) is a process of its own on --threads threads, --jobs of them
at once (default: as many as the processors hold), so a run's time is taken beside the others.

mnist-usps (default): JDA digits MNIST -> USPS (shared/data/jda_mnist_usps: 2000 MNIST rows as
the labelled source, 1800 USPS rows as the unlabelled target and the test set), each 16x16 image
flattened to 256 values and L2-normalised, as in scripts/demo and tools/reference_mnist_usps.py.
dafuse's set-up (bench/heads_accuracy.cpp, docs/heads.md): G_f 256 -> 256 -> 128 ReLU, G_y
128 -> 10, G_d 128 -> 128 ReLU -> 1 (1280 -> 128 -> 1 on CDAN's map), batches of 64 source + 64
target rows, 3000 steps of SGD (momentum 0.9), Ganin's schedules with p = step / steps:
lambda = lambda_max (2 / (1 + exp(-10 p)) - 1), lambda_max = 1, lr = 0.03 / (1 + 10 p) ** 0.75.

amazon: the Amazon reviews of the DANN paper (shared/data/amazon_reviews, its README's protocol:
train on <source>_train, 2000 labelled reviews, with <target>_train, 2000 reviews whose labels
are not read; accuracy on <target>_test), one run per pair of --pairs. dafuse's set-up
(examples/02_amazon_reviews.cpp, docs/sparse.md): raw counts, G_f 5000 -> 100 ReLU, G_y 100 -> 2,
G_d 100 -> 1 (a logistic regression on the features; 200 -> 1 on CDAN's map), B = 64 + 64, 2000
steps of SGD (momentum 0.9), lr0 = 0.01, lambda_max = 0.1. The libraries' first layer is a
dense nn.Linear on the count vectors (dafuse's multiplies only a row's non-zeros: the same
products, the zeros cost time only).

Both: the DANN loss is the label cross-entropy plus lambda times the mean BCE of G_d over the 2B
rows; PyTorch default init, G_f, G_y, G_d built in that order after torch.manual_seed(seed).
Time: the whole run, from the data in memory to the trained model (the library's fit or our loop
over its hook), time.perf_counter. Where a library cannot express a part of the set-up, the
method's "differs" line says what runs instead. The libraries are used as installed packages
only.
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
           "skada-mcc", "pytorch-adapt-dann", "pytorch-adapt-cdan", "pytorch-adapt-mcc"]
TASKS = ["mnist-usps", "amazon"]
AMAZON_DOMAINS = ["books", "dvd", "electronics", "kitchen"]
AMAZON_PAIRS = [f"{s}-{t}" for s in AMAZON_DOMAINS for t in AMAZON_DOMAINS if s != t]
# The pairs scripts/peers --task amazon runs unless --pairs says otherwise: the example's
# default (dvd -> books) and two more of the paper's twelve, one each way between its two
# clusters of domains (books/dvd and electronics/kitchen).
DEFAULT_AMAZON_PAIRS = ["dvd-books", "books-kitchen", "electronics-dvd"]
DEFAULT_STEPS = {"mnist-usps": 3000, "amazon": 2000}


def ganin_lambda(p, lambda_max=1.0):
    return lambda_max * (2.0 / (1.0 + math.exp(-10.0 * p)) - 1.0)


def ganin_lr(p, lr0=LR0):
    return lr0 / (1.0 + 10.0 * p) ** 0.75


class Setup:
    """A task's data (numpy) and dafuse's set-up for it: widths, lr0 and lambda_max."""

    def __init__(self, name, xs, ys, xt, x_test, y_test, widths, classes, gd_hidden, lr0,
                 lambda_max):
        self.name, self.xs, self.ys, self.xt = name, xs, ys, xt
        self.x_test, self.y_test = x_test, y_test
        self.widths, self.classes, self.gd_hidden = widths, classes, gd_hidden
        self.lr0, self.lambda_max = lr0, lambda_max

    def lam(self, p):
        return ganin_lambda(p, self.lambda_max)

    def lr(self, p):
        return ganin_lr(p, self.lr0)


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


def digits_setup(np, data_dir):
    xs, ys, xt, yt = load_digits(np, data_dir)
    return Setup("mnist-usps", xs, ys, xt, xt, yt, widths=[256, 256, 128], classes=10,
                 gd_hidden=[128], lr0=0.03, lambda_max=1.0)


def load_amazon_split(np, folder, prefix, n_features=5000):
    """<prefix>_{indptr,indices,data,labels}.npy (CSR) as dense float32 rows and int64 labels,
    with the README's promises checked."""
    arrays = {}
    for part in ("indptr", "indices", "data", "labels"):
        path = os.path.join(folder, f"{prefix}_{part}.npy")
        if not os.path.exists(path):
            raise SystemExit(f"peers.py: {path} is missing (the Amazon reviews, "
                             "shared/data/README.md)")
        arrays[part] = np.load(path, allow_pickle=False)
    indptr, indices, data = arrays["indptr"], arrays["indices"], arrays["data"]
    n = len(arrays["labels"])
    if len(indptr) != n + 1 or indptr[0] != 0 or indptr[-1] != len(indices) or \
            len(data) != len(indices):
        raise SystemExit(f"peers.py: {prefix}: CSR arrays of inconsistent sizes (indptr "
                         f"{len(indptr)}, indices {len(indices)}, data {len(data)}, labels {n})")
    if len(indices) and (indices.min() < 0 or indices.max() >= n_features):
        raise SystemExit(f"peers.py: {prefix}_indices.npy: a column outside 0..{n_features - 1}")
    x = np.zeros((n, n_features), dtype=np.float32)
    rows = np.repeat(np.arange(n), np.diff(indptr))
    x[rows, indices] = data
    return x, arrays["labels"].astype(np.int64)


def amazon_setup(np, data_dir, pair):
    source, target = pair.split("-")
    folder = os.path.join(data_dir, "amazon_reviews")
    xs, ys = load_amazon_split(np, folder, source + "_train")
    xt, _ = load_amazon_split(np, folder, target + "_train")  # its labels are not read
    x_test, y_test = load_amazon_split(np, folder, target + "_test")
    return Setup(pair, xs, ys, xt, x_test, y_test, widths=[5000, 100], classes=2, gd_hidden=[],
                 lr0=0.01, lambda_max=0.1)


def networks(torch, seed, setup, cdan=False):
    """G_f, G_y, G_d of dafuse's set-up for the task (G_d reads softmax(g) (x) h, classes times
    wider, for CDAN), built in that order after torch.manual_seed(seed)."""
    nn = torch.nn
    torch.manual_seed(seed)
    layers = []
    for n_in, n_out in zip(setup.widths, setup.widths[1:]):
        layers += [nn.Linear(n_in, n_out), nn.ReLU()]
    g_f = nn.Sequential(*layers)
    features = setup.widths[-1]
    g_y = nn.Linear(features, setup.classes)
    d_layers, width = [], features * setup.classes if cdan else features
    for hidden in setup.gd_hidden:
        d_layers += [nn.Linear(width, hidden), nn.ReLU()]
        width = hidden
    g_d = nn.Sequential(*d_layers, nn.Linear(width, 1))
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

def run_skada(torch, np, method, seed, steps, setup):
    import skada.deep as sd
    from skada.deep.modules import GradientReversalLayer
    from skorch.callbacks import Callback
    nn = torch.nn
    xs, ys, xt = setup.xs, setup.ys, setup.xt
    g_f, g_y, g_d = networks(torch, seed, setup, cdan=method == "skada-cdan")

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
                g["lr"] = setup.lr(p)
            disc.alpha = setup.lam(p) if adversarial else 0.0
            self.step += 1

    schedule = Schedule()
    common = dict(batch_size=BATCH, max_epochs=epochs, optimizer=torch.optim.SGD,
                  optimizer__lr=setup.lr0, optimizer__momentum=MOMENTUM, train_split=None,
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
    x_test = setup.x_test
    pred = net.predict(x_test, sample_domain=-2 * np.ones(len(x_test), dtype=np.int64))
    if schedule.step != total:
        differs.append(f"ran {schedule.step} steps, not the {total} planned")
    return pred, seconds, schedule.step, differs


# ---------------------------------------------------------------------------------------------
# pytorch-adapt: hooks, driven by our loop
# ---------------------------------------------------------------------------------------------

def run_pytorch_adapt(torch, np, method, seed, steps, setup):
    from pytorch_adapt.hooks import (CDANHook, ClassifierHook, DANNHook,
                                     FeaturesForDomainLossHook, GradientReversalHook, MCCHook)
    from pytorch_adapt.weighters import SumWeighter
    nn = torch.nn
    cdan = method == "pytorch-adapt-cdan"
    g_f, g_y, g_d = networks(torch, seed, setup, cdan=cdan)
    d = nn.Sequential(g_d, nn.Flatten(0))
    differs = []
    reversal, g_weighter = None, None
    if method == "pytorch-adapt-dann":
        models = {"G": g_f, "C": g_y, "D": d}
        opts = [torch.optim.SGD([p for m in (g_f, g_y, g_d) for p in m.parameters()],
                                lr=setup.lr0, momentum=MOMENTUM)]
        # the hook DANNHook makes by default, kept to set its reversal layer's weight (fn)
        reversal_hook = GradientReversalHook(weight=0.0,
                                             apply_to=FeaturesForDomainLossHook().out_keys)
        reversal = reversal_hook.fn
        # the domain losses are means over each domain's B rows: 1/2 each is the mean over 2B
        hook = DANNHook(opts, gradient_reversal=reversal_hook,
                        weighter=SumWeighter(weights={"src_domain_loss": 0.5,
                                                      "target_domain_loss": 0.5}))
    elif cdan:
        class MultilinearMap(nn.Module):
            """CDAN's map of a row: softmax(g) (x) h, classes * features values."""

            def forward(self, features, probabilities):
                return torch.bmm(probabilities.unsqueeze(2),
                                 features.unsqueeze(1)).flatten(1)

        models = {"G": g_f, "C": g_y, "D": d, "feature_combiner": MultilinearMap()}
        g_opt = torch.optim.SGD([p for m in (g_f, g_y) for p in m.parameters()], lr=setup.lr0,
                                momentum=MOMENTUM)
        d_opt = torch.optim.SGD(g_d.parameters(), lr=setup.lr0, momentum=MOMENTUM)
        opts = [g_opt, d_opt]
        # lambda / 2 per domain: lambda times the mean over the 2B rows, set every step
        g_weighter = SumWeighter(weights={"src_c_loss": 1.0, "g_src_domain_loss": 0.0,
                                          "g_target_domain_loss": 0.0})
        hook = CDANHook(d_opts=[d_opt], g_opts=[g_opt], g_weighter=g_weighter,
                        d_weighter=SumWeighter(weights={"d_src_domain_loss": 0.5,
                                                        "d_target_domain_loss": 0.5}))
        differs.append("pytorch-adapt's CDAN is a GAN: each step first trains G_d (its own SGD, "
                       "same schedule) on the detached map, then G_f and G_y on the label loss "
                       "plus lambda times G_d's loss with the domain labels swapped; dafuse's "
                       "one step reverses the gradient (-lambda) with G_d's update in the same "
                       "pass. No CDAN+E weights")
    else:
        models = {"G": g_f, "C": g_y}
        opts = [torch.optim.SGD([p for m in (g_f, g_y) for p in m.parameters()], lr=setup.lr0,
                                momentum=MOMENTUM)]
        hook = ClassifierHook(opts=opts, post=[MCCHook()])
        differs.append("MCC loss weight 1 (pytorch-adapt's default, temperature its default); "
                       "no lambda schedule; G_d unused")
    xs_t, ys_t = torch.from_numpy(setup.xs), torch.from_numpy(setup.ys)
    xt_t = torch.from_numpy(setup.xt)
    src = EpochSampler(torch, len(setup.xs), BATCH, seed)
    tgt = EpochSampler(torch, len(setup.xt), BATCH, seed)
    src_domain = torch.zeros(BATCH)
    tgt_domain = torch.ones(BATCH)
    t0 = time.perf_counter()
    for step in range(steps):
        p = step / steps
        for opt in opts:
            for g in opt.param_groups:
                g["lr"] = setup.lr(p)
        if reversal is not None:
            reversal.update_weight(setup.lam(p))
        if g_weighter is not None:
            g_weighter.weights["g_src_domain_loss"] = setup.lam(p) / 2
            g_weighter.weights["g_target_domain_loss"] = setup.lam(p) / 2
        si, ti = src.next(), tgt.next()
        hook({**models, "src_imgs": xs_t[si], "src_labels": ys_t[si], "target_imgs": xt_t[ti],
              "src_domain": src_domain, "target_domain": tgt_domain})
    seconds = time.perf_counter() - t0
    with torch.no_grad():
        pred = g_y(g_f(torch.from_numpy(setup.x_test))).argmax(dim=1).numpy()
    return pred, seconds, steps, differs


# ---------------------------------------------------------------------------------------------
# Runs, one (pair, method, seed) at a time, in this process or in worker processes
# ---------------------------------------------------------------------------------------------

def plan_jobs(requested, threads, processors):
    """How many runs go at once: `requested`, or as many as `processors` hold at `threads`
    each (at least one), so that the runs never ask for more threads than there are cores."""
    if requested is not None:
        return requested
    return max(1, processors // threads)


_worker = {}  # this process's thread count, data folder and the setups it has loaded


def init_worker(threads, data_dir, parent=None):
    """Sets up this process for runs; a worker (`parent` given) also ends itself when that
    process is gone, so that stopping peers.py stops its runs."""
    warnings.filterwarnings("ignore")
    import torch
    torch.set_num_threads(threads)
    _worker.update(data=data_dir, setups={})
    if parent is not None:
        import threading

        def exit_with_parent():
            while os.getppid() == parent:
                time.sleep(0.5)
            os._exit(1)
        threading.Thread(target=exit_with_parent, daemon=True).start()


def describe(error):
    text = str(error).strip()
    return f"{type(error).__name__}: {text.splitlines()[0][:300]}" if text else \
        type(error).__name__


def run_one(pair, method, seed, steps):
    """One run; its accuracy, seconds, steps and what differed, or the error that stopped it."""
    import numpy as np
    import torch
    setups = _worker["setups"]
    if pair not in setups:  # a task's data, loaded once per process
        setups[pair] = digits_setup(np, _worker["data"]) if pair is None else \
            amazon_setup(np, _worker["data"], pair)
    setup = setups[pair]
    runner = run_skada if method.startswith("skada") else run_pytorch_adapt
    try:
        pred, seconds, steps_run, differs = runner(torch, np, method, seed, steps, setup)
    except Exception as e:  # noqa: BLE001 - reported, and the other runs go on
        return {"task": setup.name, "seed": seed, "error": describe(e)}
    return {"task": setup.name, "seed": seed, "steps": steps_run, "differs": differs,
            "seconds": seconds, "accuracy": 100.0 * float((pred == setup.y_test).mean())}


def summarise(method, outcomes):
    """A method's runs on one task (seeds in order) as one result: the seeds that finished, their
    mean and spread, and the first error."""
    done = [o for o in outcomes if "error" not in o]
    errors = [o["error"] for o in outcomes if "error" in o]
    accs, times = [o["accuracy"] for o in done], [o["seconds"] for o in done]
    r = {"task": outcomes[0]["task"], "method": method, "seeds": len(accs), "accuracies": accs,
         "seconds": times, "steps": done[-1]["steps"] if done else None,
         "differs": done[-1]["differs"] if done else [], "error": errors[0] if errors else None}
    if accs:
        r["mean"] = statistics.mean(accs)
        r["std"] = statistics.stdev(accs) if len(accs) > 1 else 0.0
        r["seconds_per_run"] = statistics.mean(times)
    return r


def collect(plan, outcomes, write_json, results):
    """Prints each run as its method's group completes, in the plan's order, and keeps the
    summaries (the JSON rewritten after each)."""
    for (_, method), group in zip(plan, outcomes):
        for o in group:
            if "error" in o:
                print(f"{o['task']} {method} seed {o['seed']}: n/a: {o['error']}", flush=True)
            else:
                print(f"{o['task']} {method} seed {o['seed']}: {o['accuracy']:.2f} % "
                      f"({o['seconds']:.2f} s, {o['steps']} steps)", flush=True)
        results.append(summarise(method, group))
        write_json()
    return results


def parse_list(text, allowed, what):
    items = [m.strip() for m in text.split(",") if m.strip()]
    bad = [m for m in items if m not in allowed]
    if bad:
        raise SystemExit(f"peers.py: unknown {what} {', '.join(bad)} (choose from "
                         f"{', '.join(allowed)})")
    if not items:
        raise SystemExit(f"peers.py: no {what} given")
    return items


# The methods run on the Amazon reviews unless --methods says otherwise: those dafuse has a
# figure for (source-only, DANN) in each library, and pytorch-adapt's CDAN.
AMAZON_METHODS = ["skada-source-only", "skada-dann", "pytorch-adapt-dann", "pytorch-adapt-cdan"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--task", default="mnist-usps", choices=TASKS)
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--steps", type=int, help="default: 3000 for mnist-usps, 2000 for amazon")
    ap.add_argument("--threads", type=int, default=1,
                    help="threads of each run (default 1: these networks gain little from a "
                    "second thread, and two runs at once use two cores better)")
    ap.add_argument("--jobs", type=int, help="runs at once, each a process of its own (default: "
                    "the processors this process may use over --threads, at least 1)")
    ap.add_argument("--methods", help="comma list from: " + ", ".join(METHODS) + " (default: "
                    "all for mnist-usps; " + ", ".join(AMAZON_METHODS) + " for amazon)")
    ap.add_argument("--pairs", default=",".join(DEFAULT_AMAZON_PAIRS),
                    help="amazon: source-target pairs from: " + ", ".join(AMAZON_PAIRS) +
                    " (default %(default)s)")
    ap.add_argument("--data", default=DEFAULT_DATA)
    ap.add_argument("--json", metavar="FILE")
    args = ap.parse_args()
    methods = parse_list(args.methods or ",".join(METHODS if args.task == "mnist-usps"
                                                  else AMAZON_METHODS), METHODS, "method")
    pairs = parse_list(args.pairs, AMAZON_PAIRS, "pair") if args.task == "amazon" else [None]
    steps = args.steps if args.steps is not None else DEFAULT_STEPS[args.task]
    if args.seeds < 1 or steps < 1:
        raise SystemExit("peers.py: --seeds and --steps take counts of at least 1")
    if args.threads < 1 or (args.jobs is not None and args.jobs < 1):
        raise SystemExit("peers.py: --threads and --jobs take counts of at least 1")
    warnings.filterwarnings("ignore")
    import numpy as np
    import torch  # for its version: the runs set their threads in init_worker
    versions = {"python": platform.python_version(), "torch": torch.__version__,
                "numpy": np.__version__}
    for name in ("skada", "skorch", "pytorch_adapt"):
        try:
            versions[name] = __import__(name).__version__
        except Exception as e:  # noqa: BLE001 - a library that does not import is reported
            versions[name] = f"not importable: {type(e).__name__}: {str(e).splitlines()[0]}"
    print("versions: " + ", ".join(f"{k} {v}" for k, v in versions.items()), flush=True)
    jobs = plan_jobs(args.jobs, args.threads, len(os.sched_getaffinity(0)))
    print(f"{jobs} run(s) at once, {args.threads} thread(s) each", flush=True)
    results = []

    def write_json():
        if args.json:  # after each method, so that a run cut short keeps what it finished
            with open(args.json, "w") as f:
                json.dump({"versions": versions, "task": args.task, "seeds": args.seeds,
                           "steps": steps, "threads": args.threads, "jobs": jobs,
                           "results": results}, f, indent=1)
    plan = [(pair, method) for pair in pairs for method in methods]
    seeds = range(1, args.seeds + 1)
    if jobs == 1:
        init_worker(args.threads, args.data)
        outcomes = ([run_one(pair, method, seed, steps) for seed in seeds]
                    for pair, method in plan)
        results = collect(plan, outcomes, write_json, results)
    else:
        import concurrent.futures
        import multiprocessing
        # fresh interpreters (spawn): a forked child would inherit torch's OpenMP state
        with concurrent.futures.ProcessPoolExecutor(
                jobs, mp_context=multiprocessing.get_context("spawn"), initializer=init_worker,
                initargs=(args.threads, args.data, os.getpid())) as pool:
            futures = [[pool.submit(run_one, pair, method, seed, steps) for seed in seeds]
                       for pair, method in plan]
            outcomes = ([f.result() for f in group] for group in futures)
            results = collect(plan, outcomes, write_json, results)
    print()
    print(f"{args.task}: target accuracy, {args.seeds} seeds, {steps} steps, "
          f"{args.threads} thread(s) a run, {jobs} run(s) at once")
    for r in results:
        if r.get("mean") is None:
            print(f"  {r['task']:<18} {r['method']:<20} n/a: {r['error']}")
            continue
        print(f"  {r['task']:<18} {r['method']:<20} {r['mean']:6.2f} ± {r['std']:.2f} %   "
              f"{r['seconds_per_run']:.2f} s per run" +
              (f"   (differs: {'; '.join(r['differs'])})" if r["differs"] else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
