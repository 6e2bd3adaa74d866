#!/usr/bin/env python3
"""PyTorch side of dafuse's DANN benchmark: the time of one DANN training step.

Run it through bench/pytorch/run.sh (which unsets OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE and sets
OMP_NUM_THREADS=2), with Debian's /usr/bin/python3 and python3-torch 1.13 on the CPU:

    bash bench/pytorch/run.sh [--configs moons,digits-mlp,office-head,amazon,lenet]
                              [--executions eager,clip,bf16,torchscript]
                              [--steps 500] [--warmup 50] [--max-seconds 20] [--threads 2]
                              [--data DIR] [--json FILE]

One step, batch = B source rows + B target rows:
    opt.zero_grad(); feat = G_f(x[2B]); loss_y = CE(G_y(feat[:B]), y_s) (mean);
    loss_d = BCEWithLogits(G_d(GRL_lambda(feat)), domain) (mean; source 0, target 1);
    (loss_y + loss_d).backward(); [clip_grad_norm_(params, 1.0)]; SGD(momentum 0.9).step()
The gradient reversal layer, losses and init follow tools/reference_mnist_usps.py (autograd
Function GRL: identity forward, -lambda * grad backward; PyTorch default init).

Configurations (G_f, G_y, G_d, B):
    moons        2 -> 15 sigmoid         15 -> 2    15 -> 15 ReLU -> 1              B = 32
    digits-mlp   784 -> 256 -> 256 ReLU  256 -> 10  256 -> 256 ReLU -> 1            B = 64
    office-head  2048 -> 256 ReLU        256 -> 31  256 -> 1024 ReLU -> 1024 ReLU -> 1  B = 32
    amazon       sparse 5000 -> 100 ReLU 100 -> 2   100 -> 1                         B = 64
                 (real data: dvd_train = source, books_train = target; torch sparse batches)
    lenet        16x16 conv5x5(32,pad 2) pool2 conv5x5(48,pad 2) pool2 768 -> 100 -> 100 ReLU
                                         100 -> 10  100 -> 100 ReLU -> 1            B = 64
Executions: eager (fp32), clip (fp32 + clip_grad_norm_ 1.0), bf16 (autocast bfloat16 + clip),
torchscript (torch.jit.script of the forward+loss module, fp32, no clip: compare with eager).

Timed per step with time.perf_counter around the whole step (zero_grad .. opt.step); batch
preparation (random dense tensors, sparse batches built from the CSR files) is not timed.
"""

import argparse
import gc
import json
import math
import os
import platform
import re
import resource
import statistics
import subprocess
import sys
import time

CONFIG_NAMES = ["moons", "digits-mlp", "office-head", "amazon", "demo", "lenet"]
EXEC_NAMES = ["eager", "clip", "bf16", "torchscript", "compile", "compile-max", "compile-bf16",
              "recipe"]
# torch.compile's modes per execution (None: the default mode).
COMPILE_MODES = {"compile": None, "compile-max": "max-autotune-no-cudagraphs",
                 "compile-bf16": None, "recipe": None}
RECIPE_WORKERS = 2  # DataLoader workers of the seed's full recipe
BAD_ENV = ["OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"]
LIBBLAS_ALTERNATIVE = "/usr/lib/x86_64-linux-gnu/libblas.so.3"
LR = 0.01
MOMENTUM = 0.9
LAMBDA = 1.0      # gradient reversal weight (fixed: it does not change the cost of a step)
CLIP_NORM = 1.0
N_DENSE_BATCHES = 8   # fixed random batches cycled through (so one batch is not always cache-hot)
SEED = 1

REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
DEFAULT_DATA = os.path.normpath(os.path.join(REPO_ROOT, "..", "shared", "data"))

# Dense configurations: (in, out, activation) per layer; G_y is one linear layer.
DENSE_CONFIGS = {
    "moons": dict(B=32, gf=[(2, 15, "sigmoid")], gy=(15, 2),
                  gd=[(15, 15, "relu"), (15, 1, None)], input="randn"),
    "digits-mlp": dict(B=64, gf=[(784, 256, "relu"), (256, 256, "relu")], gy=(256, 10),
                       gd=[(256, 256, "relu"), (256, 1, None)], input="rand"),
    "office-head": dict(B=32, gf=[(2048, 256, "relu")], gy=(256, 31),
                        gd=[(256, 1024, "relu"), (1024, 1024, "relu"), (1024, 1, None)],
                        input="rand"),
    # scripts/demo's MNIST -> USPS network (tools/reference_mnist_usps.py), on random rows here
    "demo": dict(B=64, gf=[(256, 256, "relu"), (256, 128, "relu")], gy=(128, 10),
                 gd=[(128, 128, "relu"), (128, 1, None)], input="rand"),
    # The DANN paper's LeNet-like G_f on 16 x 16 digits (dafuse: bench/configs.hpp's lenet):
    # conv 5x5 (32, padding 2) -> max-pool 2 -> ReLU -> conv 5x5 (48, padding 2) -> max-pool 2
    # -> ReLU -> flatten (768) -> fc 100 -> ReLU -> fc 100 -> ReLU; rows of 256 pixels.
    "lenet": dict(B=64, gf="lenet", n_in=256, gy=(100, 10),
                  gd=[(100, 100, "relu"), (100, 1, None)], input="rand"),
}
# conv layers of "lenet": (C_in, C_out, K, output pixels) for the FLOP count.
LENET_CONVS = [(1, 32, 5, 16 * 16), (32, 48, 5, 8 * 8)]
LENET_DENSE = [(768, 100, "relu"), (100, 100, "relu")]
AMAZON = dict(B=64, n_features=5000, hidden=100, classes=2, source="dvd", target="books")


# ---------------------------------------------------------------------------------------------
# Environment
# ---------------------------------------------------------------------------------------------

def bad_env_banner():
    """The OpenBLAS variables that force the AVX2 kernels here; a loud warning if set."""
    found = {k: os.environ[k] for k in BAD_ENV if k in os.environ}
    if found:
        line = "!" * 78
        msg = [line,
               "!! WARNING: " + ", ".join(f"{k}={v}" for k, v in found.items()) + " is set.",
               "!! OpenBLAS reads these when it is loaded: they force other (AVX2) kernels and",
               "!! a smaller L2 blocking, which roughly halves the fp32 GEMM rate on this machine.",
               "!! The numbers below are NOT representative. Run through bench/pytorch/run.sh,",
               "!! or: env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE /usr/bin/python3 dann_bench.py",
               line]
        print("\n".join(msg), file=sys.stderr, flush=True)
    return found


def read_first(path):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def cpu_info():
    model, flags = None, set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if model is None and line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                if not flags and line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
    except OSError:
        pass
    wanted = ["avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512_vnni", "avx512_bf16",
              "amx_bf16", "amx_tile"]
    try:
        affinity = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        affinity = None
    return {"model": model, "flags": [f for f in wanted if f in flags],
            "os_cpu_count": os.cpu_count(), "affinity_cpus": affinity}


def dpkg_versions():
    pkgs = ["python3-torch", "libopenblas0-openmp", "libopenblas0-pthread", "libopenblas0-serial",
            "libopenblas0", "libblas3", "libblis4-openmp", "libblis4-pthread", "libmkl-rt"]
    out = {}
    for p in pkgs:
        try:
            r = subprocess.run(["dpkg-query", "-W", "-f", "${Status}|${Version}", p],
                               capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.SubprocessError):
            return {"error": "dpkg-query not available"}
        if r.returncode == 0 and r.stdout.startswith("install ok installed"):
            out[p] = r.stdout.split("|", 1)[1]
    return out


def mapped_libs(pattern):
    libs = []
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 6 and re.search(pattern, os.path.basename(parts[-1]), re.I):
                    p = os.path.realpath(parts[-1])
                    if p not in libs:
                        libs.append(p)
    except OSError:
        pass
    return libs


def openblas_info(paths):
    """Ask the loaded BLAS (dlopen of an already-mapped library returns the same handle)."""
    import ctypes
    for path in paths:
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        info = {"library": path}
        try:
            f = lib.openblas_get_corename
        except AttributeError:
            info["openblas"] = False
            return info
        f.restype = ctypes.c_char_p
        info["openblas"] = True
        info["corename"] = f().decode()
        try:
            g = lib.openblas_get_config
            g.restype = ctypes.c_char_p
            info["config"] = g().decode().strip()
        except AttributeError:
            pass
        try:
            info["num_threads"] = int(lib.openblas_get_num_threads())
        except AttributeError:
            pass
        try:
            info["parallel"] = {0: "sequential", 1: "pthreads", 2: "openmp"}.get(
                int(lib.openblas_get_parallel()), "unknown")
        except AttributeError:
            pass
        return info
    return {"openblas": None, "error": "no BLAS library found mapped"}


def busy_cpus_now(seconds=0.5):
    """CPUs' worth of non-idle time during a short sleep, less this process's own CPU time
    (spinning OpenMP workers): roughly, what other processes are using."""
    def sample():
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        return sum(v[:8]), v[3] + v[4]   # total, idle + iowait
    try:
        t0, i0 = sample()
        w0, c0 = time.perf_counter(), time.process_time()
        time.sleep(seconds)
        t1, i1 = sample()
        w1, c1 = time.perf_counter(), time.process_time()
    except (OSError, ValueError, IndexError):
        return None
    if t1 <= t0 or w1 <= w0:
        return None
    n_all = os.cpu_count() or 1   # /proc/stat's first line sums all CPUs
    busy = (1.0 - (i1 - i0) / (t1 - t0)) * n_all
    return max(0.0, busy - (c1 - c0) / (w1 - w0))


def gemm_gflops(torch, n=2048, dtype=None, max_seconds=3.0):
    """GFLOP/s of an n³ product (the median of up to 20 calls within max_seconds) and the calls
    timed. A product of a type the CPU has no instructions for (bf16 without AVX512-BF16) can
    take a minute at 2048³: when one call at n/4 says a call at n would pass max_seconds, the
    n/4 product is timed instead (its rate is the same slow path's) and n/4 is returned."""
    dtype = dtype or torch.float32
    g = torch.Generator().manual_seed(0)

    def operands(size):
        a = torch.randn(size, size, generator=g).to(dtype)
        b = torch.randn(size, size, generator=g).to(dtype)
        return a, b, torch.empty(size, size, dtype=dtype)

    small = max(n // 4, 1)
    a, b, c = operands(small)
    torch.mm(a, b, out=c)
    t0 = time.perf_counter()
    torch.mm(a, b, out=c)
    if (time.perf_counter() - t0) * (n / small) ** 3 <= max_seconds:
        a, b, c = operands(n)
        torch.mm(a, b, out=c)
        torch.mm(a, b, out=c)
    else:
        n = small
    times = []
    start = time.perf_counter()
    while len(times) < 20 and (len(times) < 3 or time.perf_counter() - start < max_seconds):
        t0 = time.perf_counter()
        torch.mm(a, b, out=c)
        times.append(time.perf_counter() - t0)
    return 2.0 * n ** 3 / statistics.median(times) / 1e9, len(times), n


def environment(torch, threads, bad_env):
    cfg = torch.__config__.show()
    blas_lines = [ln.strip() for ln in cfg.splitlines()
                  if re.search(r"blas|lapack|mkl|capability", ln, re.I)]
    m = re.search(r"BLAS_INFO=([^,\s]+)", cfg)
    # make sure the BLAS is loaded, then read what was mapped
    a = torch.randn(64, 64)
    _ = a @ a
    # (numpy's own OpenBLAS may be mapped too: with a torch that is not built for a generic BLAS,
    # what is mapped says nothing about torch's products)
    blas_mapped = mapped_libs(r"blas")
    alt = os.path.realpath(LIBBLAS_ALTERNATIVE) if os.path.exists(LIBBLAS_ALTERNATIVE) else None
    import ctypes.util
    # A torch built against a generic BLAS (Debian's) calls libblas.so.3; PyPI's links MKL in.
    generic = not m or m.group(1) == "generic"
    ob = (openblas_info(blas_mapped + ([alt] if alt else [])) if generic else
          {"openblas": False, "library": None, "note": "torch's BLAS_INFO is not generic"})
    mkl = [ln.strip().lstrip("- ") for ln in cfg.splitlines() if "Math Kernel Library" in ln]
    env = {
        "torch_version": torch.__version__,
        "torch_blas_info": m.group(1) if m else None,
        "torch_config_blas_lines": blas_lines,
        "libblas_so_3_resolves_to": alt,
        "find_library_blas": ctypes.util.find_library("blas"),
        "blas_libraries_mapped": blas_mapped,
        "openblas": ob,
        "torch_threads": torch.get_num_threads(),
        "torch_interop_threads": torch.get_num_interop_threads(),
        "threads_requested": threads,
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS"),
        "OPENBLAS_CORETYPE": os.environ.get("OPENBLAS_CORETYPE"),
        "OPENBLAS_L2_SIZE": os.environ.get("OPENBLAS_L2_SIZE"),
        "openblas_env_warning": bool(bad_env),
        "other_env": {k: v for k, v in os.environ.items()
                      if re.match(r"(OPENBLAS_|GOTO|MKL_|KMP_|OMP_|GOMP_|DNNL_|ONEDNN_|ATEN_|"
                                  r"MALLOC_|LD_PRELOAD)", k) and k not in BAD_ENV
                      and k != "OMP_NUM_THREADS"},
        "mkldnn_available": torch.backends.mkldnn.is_available(),
        "python": platform.python_version(),
        "python_executable": sys.executable,
        "platform": platform.platform(),
        "cpu": cpu_info(),
        "transparent_hugepage": read_first("/sys/kernel/mm/transparent_hugepage/enabled"),
        "loadavg_start": read_first("/proc/loadavg"),
        "packages": dpkg_versions(),
        "mkl": mkl[0] if mkl else None,
        "torch_compile_available": hasattr(torch, "compile"),
    }
    # flat aliases (bench/compare.py reads these names)
    env["blas_library"] = (("MKL, linked into torch: " + mkl[0]) if mkl and not generic else
                           ob.get("library") or (blas_mapped[0] if blas_mapped else alt))
    env["openblas_corename"] = ob.get("corename")
    env["threads"] = torch.get_num_threads()
    try:
        env["torch_jit_texpr_fuser_enabled"] = bool(torch._C._jit_texpr_fuser_enabled())
        env["torch_jit_can_fuse_on_cpu"] = bool(torch._C._jit_can_fuse_on_cpu())
    except (AttributeError, RuntimeError):
        pass
    return env


# ---------------------------------------------------------------------------------------------
# Models
# ---------------------------------------------------------------------------------------------

def build_torch_parts(torch):
    nn = torch.nn
    F = torch.nn.functional

    class GradReverse(torch.autograd.Function):
        """As in tools/reference_mnist_usps.py: identity forward, -lambda * grad backward."""

        @staticmethod
        def forward(ctx, x, lam):
            # lam is a 0-dim tensor: its value changes every step without a recompile.
            ctx.save_for_backward(lam)
            return x.view_as(x)

        @staticmethod
        def backward(ctx, grad_out):
            (lam,) = ctx.saved_tensors
            return -lam * grad_out, None

    class DANNLoss(nn.Module):
        """forward(x, y_s, domain, lam) -> loss_y + loss_d. This base class is the TorchScript
        version: its reversal layer is x.detach() - lam * (x - x.detach()) (forward exactly x,
        gradient -lam), because TorchScript cannot compile a Python autograd.Function."""

        def __init__(self, g_f, g_y, g_d, batch: int):
            super().__init__()
            self.g_f = g_f
            self.g_y = g_y
            self.g_d = g_d
            self.batch = batch

        def reverse(self, x, lam: float):
            d = x.detach()
            return d - lam * (x - d)

        def forward(self, x, y_s, domain, lam: float):
            feat = self.g_f(x)
            logits = self.g_y(feat[: self.batch])
            d_logit = self.g_d(self.reverse(feat, lam))
            loss_y = F.cross_entropy(logits.float(), y_s)
            loss_d = F.binary_cross_entropy_with_logits(d_logit.float(), domain)
            return loss_y + loss_d

    class EagerDANNLoss(DANNLoss):
        def reverse(self, x, lam: float):
            return GradReverse.apply(x, lam)

    class SparseLinear(nn.Module):
        """First layer on a sparse batch: relu(torch.sparse.mm(x, W^T) + b). The parameters
        are an nn.Linear's (same default init); layout 'out_in' multiplies by weight.t() (the
        nn.Linear layout), 'in_out' keeps W as [in, out] so no transpose is taken."""

        def __init__(self, n_in: int, n_out: int, layout: str):
            super().__init__()
            lin = nn.Linear(n_in, n_out)
            self.in_out = layout == "in_out"
            if self.in_out:
                self.weight = nn.Parameter(lin.weight.detach().t().contiguous())
            else:
                self.weight = nn.Parameter(lin.weight.detach().clone())
            self.bias = nn.Parameter(lin.bias.detach().clone())

        def product(self, x):
            if self.in_out:
                return torch.sparse.mm(x, self.weight)
            return torch.sparse.mm(x, self.weight.t())

        def forward(self, x):
            return torch.relu(self.product(x) + self.bias)

    class EagerSparseLinear(SparseLinear):
        """Eager version: under autocast the sparse product stays fp32 (torch 1.13 has no
        bf16 addmm_sparse_dense; autocast would cast the weight to bf16 and fail)."""

        def forward(self, x):
            if torch.is_autocast_cpu_enabled():
                with torch.autocast("cpu", enabled=False):
                    h = self.product(x)
                return torch.relu(h + self.bias)
            return torch.relu(self.product(x) + self.bias)

    def act(name):
        return {"relu": nn.ReLU(), "sigmoid": nn.Sigmoid()}[name]

    def mlp(layers):
        mods = []
        for n_in, n_out, a in layers:
            mods.append(nn.Linear(n_in, n_out))
            if a:
                mods.append(act(a))
        return nn.Sequential(*mods)

    def make_model(cfg_name, eager, sparse_layout="out_in"):
        torch.manual_seed(SEED)
        cls = EagerDANNLoss if eager else DANNLoss
        if cfg_name == "amazon":
            c = AMAZON
            first = (EagerSparseLinear if eager else SparseLinear)(c["n_features"], c["hidden"],
                                                                  sparse_layout)
            return cls(first, nn.Linear(c["hidden"], c["classes"]), nn.Linear(c["hidden"], 1),
                       c["B"])
        c = DENSE_CONFIGS[cfg_name]
        if c["gf"] == "lenet":
            g_f = nn.Sequential(nn.Unflatten(1, (1, 16, 16)),
                                nn.Conv2d(1, 32, 5, padding=2), nn.MaxPool2d(2), nn.ReLU(),
                                nn.Conv2d(32, 48, 5, padding=2), nn.MaxPool2d(2), nn.ReLU(),
                                nn.Flatten(), mlp(LENET_DENSE))
        else:
            g_f = mlp(c["gf"])
        return cls(g_f, nn.Linear(*c["gy"]), mlp(c["gd"]), c["B"])

    return make_model


def dense_flops(c):
    """FLOPs of one step: 2*in*out per row for each product (forward, weight gradient, input
    gradient; no input gradient for G_f's first layer). G_f and G_d see 2B rows, G_y B rows."""
    B = c["B"]
    total = 0
    if c["gf"] == "lenet":
        # a conv: 2*C_out*K*K*C_in per output pixel and row, for each product (the first has no
        # input gradient); then the dense layers.
        for i, (c_in, c_out, k, pixels) in enumerate(LENET_CONVS):
            total += 2 * (2 * B) * c_out * k * k * c_in * pixels * (2 if i == 0 else 3)
        for n_in, n_out, _ in LENET_DENSE:
            total += 2 * (2 * B) * n_in * n_out * 3
    else:
        for i, (n_in, n_out, _) in enumerate(c["gf"]):
            total += 2 * (2 * B) * n_in * n_out * (2 if i == 0 else 3)
    total += 2 * B * c["gy"][0] * c["gy"][1] * 3
    for n_in, n_out, _ in c["gd"]:
        total += 2 * (2 * B) * n_in * n_out * 3
    return total


def amazon_flops(mean_nnz):
    """Sparse first layer by its non-zeros (forward and weight gradient: 2*nnz*hidden each),
    the dense heads as in dense_flops."""
    c = AMAZON
    B, h = c["B"], c["hidden"]
    return (2 * 2 * mean_nnz * h + 2 * B * h * c["classes"] * 3 + 2 * (2 * B) * h * 1 * 3)


# ---------------------------------------------------------------------------------------------
# Batches (not timed)
# ---------------------------------------------------------------------------------------------

def dense_batches(torch, cfg_name):
    c = DENSE_CONFIGS[cfg_name]
    B, n_in, n_cls = c["B"], c.get("n_in") or c["gf"][0][0], c["gy"][1]
    g = torch.Generator().manual_seed(1234)
    domain = torch.cat([torch.zeros(B, 1), torch.ones(B, 1)])
    out = []
    for _ in range(N_DENSE_BATCHES):
        if c["input"] == "randn":
            x = torch.randn(2 * B, n_in, generator=g)
        else:
            x = torch.rand(2 * B, n_in, generator=g)
        y = torch.randint(0, n_cls, (B,), generator=g)
        out.append((x, y, domain))
    return out, ("fixed random inputs: %d batches of %d+%d rows cycled; random labels"
                 % (N_DENSE_BATCHES, B, B))


def load_csr(np, folder, prefix):
    arrs = {}
    for part in ("indptr", "indices", "data", "labels"):
        arrs[part] = np.load(os.path.join(folder, f"{prefix}_{part}.npy"), allow_pickle=False)
    return arrs


def gather_rows(np, csr, rows):
    indptr, indices, data = csr["indptr"], csr["indices"], csr["data"]
    starts, ends = indptr[rows], indptr[rows + 1]
    counts = ends - starts
    cols = np.concatenate([indices[s:e] for s, e in zip(starts, ends)])
    vals = np.concatenate([data[s:e] for s, e in zip(starts, ends)])
    return counts, cols, vals


def amazon_batches(torch, np, data_dir, fmt):
    """One epoch of shuffled batches (2000 // 64 = 31) of source+target rows, each one torch
    sparse tensor [2B, 5000] (CSR or coalesced COO), built before timing."""
    c = AMAZON
    folder = os.path.join(data_dir, "amazon_reviews")
    src = load_csr(np, folder, c["source"] + "_train")
    tgt = load_csr(np, folder, c["target"] + "_train")
    B, nf = c["B"], c["n_features"]
    rng = np.random.default_rng(SEED)
    ps = rng.permutation(len(src["labels"]))
    pt = rng.permutation(len(tgt["labels"]))
    n_batches = min(len(ps), len(pt)) // B
    domain = torch.cat([torch.zeros(B, 1), torch.ones(B, 1)])
    out, nnzs = [], []
    for k in range(n_batches):
        rs, rt = ps[k * B:(k + 1) * B], pt[k * B:(k + 1) * B]
        cs, cols_s, vals_s = gather_rows(np, src, rs)
        ct, cols_t, vals_t = gather_rows(np, tgt, rt)
        counts = np.concatenate([cs, ct]).astype(np.int64)
        cols = np.concatenate([cols_s, cols_t]).astype(np.int64)
        vals = np.concatenate([vals_s, vals_t]).astype(np.float32)
        nnzs.append(len(vals))
        if fmt == "csr":
            crow = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
            x = torch.sparse_csr_tensor(torch.from_numpy(crow), torch.from_numpy(cols),
                                        torch.from_numpy(vals), size=(2 * B, nf))
        else:
            rows = np.repeat(np.arange(2 * B, dtype=np.int64), counts)
            idx = torch.from_numpy(np.stack([rows, cols]))
            x = torch.sparse_coo_tensor(idx, torch.from_numpy(vals), size=(2 * B, nf)).coalesce()
        y = torch.from_numpy(src["labels"][rs].astype(np.int64))
        out.append((x, y, domain))
    mean_nnz = sum(nnzs) / len(nnzs)
    desc = ("real data %s_train -> %s_train, %d batches of %d+%d rows, torch.sparse_%s "
            "[%d, %d], mean nnz %.0f (%.2f %% dense)"
            % (c["source"], c["target"], n_batches, B, B, "csr_tensor" if fmt == "csr" else
               "coo_tensor (coalesced)", 2 * B, nf, mean_nnz, 100.0 * mean_nnz / (2 * B * nf)))
    return out, desc, mean_nnz


# ---------------------------------------------------------------------------------------------
# Timing
# ---------------------------------------------------------------------------------------------

def maxrss_bytes():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB


def usage():
    """(minor faults, involuntary context switches, system CPU s) of the whole process."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_minflt, r.ru_nivcsw, r.ru_stime


def percentile(sorted_v, q):
    if len(sorted_v) == 1:
        return sorted_v[0]
    pos = q * (len(sorted_v) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(sorted_v) - 1)
    return sorted_v[lo] + (sorted_v[hi] - sorted_v[lo]) * (pos - lo)


def ganin_lambda(p):
    """Ganin's schedule, 2 / (1 + exp(-10 p)) - 1: the value the lambda tensor takes."""
    return 2.0 / (1.0 + math.exp(-10.0 * p)) - 1.0


class CycleBatches:
    """The recipe's data: an endless stream of the prepared batches, through DataLoader workers
    (batch_size=None: each item is a whole batch). Made a torch IterableDataset in make()."""

    @staticmethod
    def make(torch, batches):
        class Stream(torch.utils.data.IterableDataset):
            def __iter__(self):
                info = torch.utils.data.get_worker_info()
                k = info.id if info else 0
                while True:
                    yield batches[k % len(batches)]
                    k += 1
        return Stream()


def compile_counters(torch):
    """(graphs compiled so far, graph breaks, their reasons) from torch._dynamo's counters."""
    from torch._dynamo.utils import counters
    breaks = counters["graph_break"]
    reasons = sorted({str(k).strip().splitlines()[0][:160] for k in breaks})
    return counters["stats"]["unique_graphs"], sum(breaks.values()), reasons


def step_tensor_memory(torch, step, k, live_tensors):
    """Peak bytes of tensors alive during one step: those alive when it starts and kept through
    it (parameters, optimizer state, batch, and gradients unless zero_grad frees them first;
    `live_tensors()`) plus the highest point of the running sum of the allocations and frees the
    profiler records during it (torch.profiler, profile_memory; it sees no free of a block
    allocated before it started, hence gradients freed by zero_grad, the step's first operation,
    are left out of the first term). Allocator-independent, like dafuse's count of its step's
    buffers."""
    start = sum(t.numel() * t.element_size() for t in live_tensors())
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        step(k)
    # Each operator's own (self) allocations less frees, and "[memory]" events for those made
    # outside any operator, in the order they started: the running sum at operator granularity
    # (a temporary allocated and freed inside one operator does not show).
    events = [e for e in prof.events() if e.self_cpu_memory_usage]
    events.sort(key=lambda e: e.time_range.start)
    running = peak = 0
    for e in events:
        running += e.self_cpu_memory_usage
        peak = max(peak, running)
    return start + peak, start, len(events)


def run_execution(torch, model, batches, execution, args):
    """Time `execution` of one step on `model`. Returns the timing dict."""
    params = [p for p in model.parameters()]
    opt = torch.optim.SGD(params, lr=LR, momentum=MOMENTUM)
    clip = execution in ("clip", "bf16", "compile-bf16", "recipe")
    use_bf16 = execution in ("bf16", "compile-bf16", "recipe")
    compiled = execution in COMPILE_MODES
    set_to_none = args.zero_grad == "none"
    clip_ = torch.nn.utils.clip_grad_norm_
    n = len(batches)
    perf = time.perf_counter
    extra = {}
    # lambda: a Python float for TorchScript (its scripted signature), else a 0-dim tensor set
    # from Ganin's schedule at every step (as training would; a compiled step must not recompile).
    lam = torch.tensor(LAMBDA) if execution != "torchscript" else None
    period = 1000
    forward = model
    if compiled:
        torch._dynamo.reset()
        from torch._dynamo.utils import counters
        counters.clear()
        mode = COMPILE_MODES[execution]
        forward = torch.compile(model, mode=mode) if mode else torch.compile(model)
    feed = None
    if execution == "recipe":
        loader = torch.utils.data.DataLoader(CycleBatches.make(torch, batches), batch_size=None,
                                             num_workers=RECIPE_WORKERS, prefetch_factor=2,
                                             persistent_workers=True)
        feed = iter(loader)

    current = []  # the batch of the last step (its bytes count in the step's memory)

    def step(k, batch=None):
        if batch is not None:
            x, y, d = batch
        elif feed is not None:
            x, y, d = next(feed)
        else:
            x, y, d = batches[k % n]
        current[:] = [x, y, d]
        if lam is not None:
            lam.fill_(ganin_lambda((k % period) / period))
        opt.zero_grad(set_to_none=set_to_none)
        a = lam if lam is not None else LAMBDA
        if use_bf16:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = forward(x, y, d, a)
        else:
            loss = forward(x, y, d, a)
        loss.backward()
        if clip:
            clip_(params, CLIP_NORM)
        opt.step()
        return loss

    gc.collect()
    rss0 = maxrss_bytes()
    if compiled:
        # The first step compiles (forward and backward graphs); what it cost, and what dynamo
        # saw, are recorded. Later compiles are recompiles. Its loss (taken before the update)
        # is checked against the eager module's on the same batch and lambda.
        lam.fill_(ganin_lambda(0.0))
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=use_bf16):
            x0, y0, d0 = batches[0]
            reference = float(model(x0, y0, d0, lam).float())
        t0 = perf()
        first = step(0, batches[0])  # the recipe too: its later batches come from the workers
        extra["compile_seconds"] = perf() - t0
        extra["first_loss_minus_eager"] = abs(float(first.detach().float()) - reference)
        graphs_first, breaks_first, _ = compile_counters(torch)
        extra["graphs_first_step"] = graphs_first
        try:
            from torch._dynamo.utils import counters
            extra["fxgraph_cache_hits"] = counters["inductor"]["fxgraph_cache_hit"]
        except Exception:  # noqa: BLE001 - only a detail
            pass
    warm_start = perf()
    warm_done = 0
    for k in range(args.warmup):
        step(k)
        warm_done += 1
        if warm_done >= 3 and perf() - warm_start > args.max_seconds / 2:
            break
    times = []
    total = 0.0
    loss = None
    u0 = usage()
    cpu0 = time.process_time()
    for k in range(args.steps):
        t0 = perf()
        loss = step(args.warmup + k)
        dt = perf() - t0
        times.append(dt)
        total += dt
        if total > args.max_seconds and len(times) >= 20:
            break
    cpu1 = time.process_time()
    u1 = usage()
    rss1 = maxrss_bytes()
    if compiled:
        graphs, breaks, reasons = compile_counters(torch)
        extra["graph_breaks"] = breaks
        extra["graph_break_reasons"] = reasons
        extra["graphs"] = graphs
        extra["recompiles"] = graphs - extra["graphs_first_step"]
    k_mem = args.warmup + len(times)

    def live():
        out = list(params)
        if not set_to_none:
            out += [p.grad for p in params if p.grad is not None]
        out += [v for st in opt.state.values() for v in st.values() if torch.is_tensor(v)]
        x, y, d = batches[k_mem % n] if feed is None else current
        out += [x if not x.is_sparse else x.values(), y, d]
        return out
    try:
        mem, mem_start, mem_events = step_tensor_memory(torch, step, k_mem, live)
        extra.update(step_memory_bytes=mem, step_memory_live_at_start_bytes=mem_start,
                     step_memory_events=mem_events)
    except Exception as e:  # noqa: BLE001 - the timing stands without it
        extra["step_memory_error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
    if feed is not None:
        feed._shutdown_workers()
    s = sorted(times)
    final_loss = float(loss.detach().float()) if loss is not None else None
    return dict(extra, **{
        "median_ms": statistics.median(s) * 1e3,
        "p25_ms": percentile(s, 0.25) * 1e3,
        "p75_ms": percentile(s, 0.75) * 1e3,
        "min_ms": s[0] * 1e3,
        "mean_ms": total / len(s) * 1e3,
        "steps_per_second": len(s) / total,
        "steps": len(s),
        "warmup": warm_done,
        "timed_seconds": total,
        "peak_rss_bytes": rss1,
        "rss_increase_bytes": rss1 - rss0,
        "minor_faults_per_step": (u1[0] - u0[0]) / len(s),
        "involuntary_switches_per_step": (u1[1] - u0[1]) / len(s),
        "sys_ms_per_step": (u1[2] - u0[2]) / len(s) * 1e3,
        "cpu_per_wall": (cpu1 - cpu0) / total if total > 0 else None,
        "final_loss": final_loss,
        "truncated_by_max_seconds": len(s) < args.steps,
    })


def grads_of(model):
    return [p.grad.detach().clone() if p.grad is not None else None for p in model.parameters()]


def compare_with_eager(torch, scripted, eager_model, batch):
    """One forward+backward of both from the same weights: max |loss diff|, max |grad diff|."""
    x, y, d = batch
    for m in (scripted, eager_model):
        for p in m.parameters():
            p.grad = None
    l1 = scripted(x, y, d, LAMBDA)
    l1.backward()
    l2 = eager_model(x, y, d, torch.tensor(LAMBDA))
    l2.backward()
    g1, g2 = grads_of(scripted), grads_of(eager_model)
    worst = 0.0
    for a, b in zip(g1, g2):
        if a is None or b is None:
            if (a is None) != (b is None):
                return float("inf"), float("inf")
            continue
        worst = max(worst, float((a - b).abs().max()))
    for m in (scripted, eager_model):
        for p in m.parameters():
            p.grad = None
    return abs(float(l1) - float(l2)), worst


# ---------------------------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------------------------

def parse_list(text, allowed, what):
    items = [s.strip() for s in text.split(",") if s.strip()]
    bad = [s for s in items if s not in allowed]
    if bad:
        raise SystemExit(f"unknown {what}: {', '.join(bad)} (choose from {', '.join(allowed)})")
    return items


def fmt_mib(b):
    return "%.0f" % (b / 2 ** 20) if b is not None else "-"


def print_table(results):
    hdr = ("configuration", "execution", "median ms", "IQR ms", "steps/s", "GFLOP/s",
           "step KiB", "peak RSS MiB", "+RSS MiB", "faults/step", "CPU/wall", "steps")
    rows = []
    for r in results:
        if r.get("median_ms") is None:
            rows.append((r["config"], r["execution"]) + ("-",) * (len(hdr) - 2))
            continue
        rows.append((r["config"], r["execution"], "%.3f" % r["median_ms"],
                     "%.3f-%.3f" % (r["p25_ms"], r["p75_ms"]), "%.0f" % r["steps_per_second"],
                     "%.1f" % r["gflops"] if r.get("gflops") is not None else "-",
                     "%.1f" % (r["step_memory_bytes"] / 2 ** 10)
                     if r.get("step_memory_bytes") is not None else "-",
                     fmt_mib(r["peak_rss_bytes"]), "%.1f" % (r["rss_increase_bytes"] / 2 ** 20),
                     "%.0f" % r["minor_faults_per_step"], "%.2f" % r["cpu_per_wall"],
                     str(r["steps"])))
    w = [max(len(str(x[i])) for x in rows + [hdr]) for i in range(len(hdr))]
    line = "  ".join(h.ljust(w[i]) if i < 2 else h.rjust(w[i]) for i, h in enumerate(hdr))
    print(line)
    print("-" * len(line))
    for row in rows:
        print("  ".join(str(c).ljust(w[i]) if i < 2 else str(c).rjust(w[i])
                        for i, c in enumerate(row)))
    print()
    print("notes:")
    for r in results:
        if r.get("note"):
            print(f"  {r['config']} / {r['execution']}: {r['note']}")


def write_json(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f, indent=2)
        f.write("\n")


def main():
    ap = argparse.ArgumentParser(
        description="PyTorch side of dafuse's DANN step benchmark (run via bench/pytorch/run.sh)")
    ap.add_argument("--configs", default=",".join(CONFIG_NAMES),
                    help="comma-separated, from: " + ", ".join(CONFIG_NAMES))
    ap.add_argument("--executions", default=",".join(EXEC_NAMES),
                    help="comma-separated, from: " + ", ".join(EXEC_NAMES))
    ap.add_argument("--steps", type=int, default=500, help="timed steps per execution (500)")
    ap.add_argument("--warmup", type=int, default=50, help="untimed steps first (50)")
    ap.add_argument("--max-seconds", type=float, default=10.0,
                    help="stop an execution's timed loop after this many seconds of steps (at "
                         "least 20 steps), and its warm-up after half that (at least 3 steps); "
                         "default 10")
    ap.add_argument("--threads", type=int, default=2, help="torch.set_num_threads (2)")
    ap.add_argument("--data", default=DEFAULT_DATA,
                    help="folder holding amazon_reviews/ (default %(default)s)")
    ap.add_argument("--sparse-format", choices=["csr", "coo"], default="coo",
                    help="amazon batches as torch.sparse_csr_tensor or coalesced COO (coo)")
    ap.add_argument("--sparse-weight", choices=["out_in", "in_out"], default="in_out",
                    help="amazon first layer: sparse.mm(x, W) with W stored [in, out] (in_out, "
                         "default: the faster here) or sparse.mm(x, W.t()) with nn.Linear's "
                         "[out, in] W (out_in)")
    ap.add_argument("--zero-grad", choices=["none", "zeros"], default="none",
                    help="opt.zero_grad(set_to_none=True) (none, default) or =False (zeros)")
    ap.add_argument("--malloc-top-pad", type=int, default=256, metavar="MIB",
                    help="call glibc mallopt(M_TOP_PAD, MIB MiB) first, as MALLOC_TOP_PAD_ "
                         "would, so that freed heap memory is kept instead of being handed "
                         "back and faulted in again at every step (default 256; 0 = glibc's "
                         "defaults; see README)")
    ap.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    args = ap.parse_args()
    configs = parse_list(args.configs, CONFIG_NAMES, "configuration")
    executions = parse_list(args.executions, EXEC_NAMES, "execution")
    if args.steps < 1 or args.warmup < 0 or args.threads < 1:
        raise SystemExit("--steps >= 1, --warmup >= 0, --threads >= 1")

    bad_env = bad_env_banner()
    os.environ.setdefault("KINETO_LOG_LEVEL", "5")  # the profiler's start/stop lines

    try:
        import torch
    except ImportError as e:
        print(f"note: torch is not importable ({e}); the PyTorch benchmark is skipped. "
              "Install Debian's python3-torch (apt-get install python3-torch) and run it "
              "with /usr/bin/python3.")
        if args.json:
            write_json(args.json, {"skipped": "torch not installed"})
        return 0
    try:
        import numpy as np
    except ImportError:
        np = None

    malloc_note = None
    if args.malloc_top_pad > 0:
        import ctypes
        libc = ctypes.CDLL("libc.so.6")
        M_TOP_PAD = -2
        ok = libc.mallopt(M_TOP_PAD, ctypes.c_int(args.malloc_top_pad * 2 ** 20))
        malloc_note = f"mallopt(M_TOP_PAD, {args.malloc_top_pad} MiB) -> {ok}"

    torch.set_num_threads(args.threads)
    env = environment(torch, args.threads, bad_env)
    env["malloc"] = malloc_note or "glibc defaults"
    env["zero_grad_set_to_none"] = args.zero_grad == "none"
    if env["OMP_NUM_THREADS"] not in (None, str(args.threads)):
        print(f"warning: OMP_NUM_THREADS={env['OMP_NUM_THREADS']} but --threads {args.threads}",
              file=sys.stderr)

    gflops, reps, _ = gemm_gflops(torch)
    try:
        bf16_gflops, _, bf16_n = gemm_gflops(torch, dtype=torch.bfloat16, max_seconds=2.0)
    except RuntimeError:
        bf16_gflops, bf16_n = None, None
    # Without native bf16 instructions the probe times a 512³ product instead (gemm_gflops).
    env["gemm_2048_bf16_gflops"] = round(bf16_gflops, 1) if bf16_gflops else None
    env["gemm_bf16_n"] = bf16_n

    ob = env["openblas"]
    print(f"torch {env['torch_version']} ({env['packages'].get('python3-torch', '?')}), "
          f"threads {env['torch_threads']}, OMP_NUM_THREADS={env['OMP_NUM_THREADS']}, "
          f"BLAS_INFO={env['torch_blas_info']}")
    for ln in env["torch_config_blas_lines"]:
        print("  config: " + (ln if len(ln) < 110 else ln[:107] + "..."))
    print(f"libblas.so.3 -> {env['libblas_so_3_resolves_to']}; mapped: "
          f"{', '.join(env['blas_libraries_mapped']) or '(none)'}")
    if ob.get("openblas"):
        print(f"OpenBLAS core {ob.get('corename')}, {ob.get('parallel')}, "
              f"{ob.get('num_threads')} threads; {ob.get('config')}")
    else:
        print(f"BLAS is not OpenBLAS: {ob}")
    print(f"CPU {env['cpu']['model']}, {env['cpu']['affinity_cpus']} cpus, flags "
          f"{' '.join(env['cpu']['flags'])}; load {env['loadavg_start']}")
    print(f"OPENBLAS_CORETYPE={env['OPENBLAS_CORETYPE']} OPENBLAS_L2_SIZE="
          f"{env['OPENBLAS_L2_SIZE']}; malloc: {env['malloc']}")
    print(f"GEMM 2048^3 fp32: {gflops:.1f} GFLOP/s (median of {reps})"
          + (f"; bf16: {bf16_gflops:.1f} GFLOP/s" if bf16_gflops else ""))
    n_cpu = env["cpu"]["affinity_cpus"] or os.cpu_count() or 1
    others = busy_cpus_now()
    env["cpus_busy_with_other_work_at_start"] = round(others, 2) if others is not None else None
    if others is not None and others + args.threads > n_cpu + 0.3:
        print(f"warning: other processes kept {others:.1f} of {n_cpu} CPUs busy just now. OpenMP "
              f"threads spin at barriers, so a {args.threads}-thread step can run many times "
              f"slower while a core is taken (see README): watch the CPU/wall column and the "
              f"'CPU contention?' notes.", file=sys.stderr)
    if gflops < 50:
        print("warning: the fp32 GEMM rate is far below the ~340 GFLOP/s this machine reaches "
              "with OpenBLAS: reference BLAS, forced kernels or a busy machine?", file=sys.stderr)
    print(flush=True)

    make_model = build_torch_parts(torch)
    results = []

    for cfg in configs:
        # --- batches (not timed) ---
        skip_reason = None
        if cfg == "amazon":
            if np is None:
                skip_reason = "numpy not importable"
            else:
                folder = os.path.join(args.data, "amazon_reviews")
                need = [os.path.join(folder, f"{d}_train_{p}.npy")
                        for d in (AMAZON["source"], AMAZON["target"])
                        for p in ("indptr", "indices", "data", "labels")]
                missing = [p for p in need if not os.path.exists(p)]
                if missing:
                    skip_reason = "Amazon data missing: " + ", ".join(missing[:2]) + \
                                  (" ..." if len(missing) > 2 else "")
            if skip_reason is None:
                try:
                    batches, data_note, mean_nnz = amazon_batches(torch, np, args.data,
                                                                  args.sparse_format)
                    flops = amazon_flops(mean_nnz)
                    data_note += ("; relu(torch.sparse.mm(x, W.t()) + b), nn.Linear's W "
                                  "[100, 5000]" if args.sparse_weight == "out_in" else
                                  "; relu(torch.sparse.mm(x, W) + b), W stored [5000, 100]")
                    data_note += "; FLOPs: sparse layer 2*nnz*100 per product (fwd, wgrad)"
                except Exception as e:  # noqa: BLE001 - report, do not crash
                    skip_reason = f"loading Amazon data failed: {type(e).__name__}: {e}"
        else:
            batches, data_note = dense_batches(torch, cfg)
            flops = dense_flops(DENSE_CONFIGS[cfg])
        if skip_reason:
            print(f"{cfg}: skipped ({skip_reason})", flush=True)
            for ex in executions:
                results.append({"config": cfg, "execution": ex, "median_ms": None,
                                "p25_ms": None, "p75_ms": None, "steps_per_second": None,
                                "steps": 0, "peak_rss_bytes": maxrss_bytes(),
                                "note": "skipped: " + skip_reason})
            continue
        print(f"{cfg}: {data_note}; {flops / 1e6:.2f} MFLOP/step", flush=True)

        for ex in executions:
            note = []
            res = None
            try:
                if ex == "torchscript":
                    eager_model = make_model(cfg, eager=True, sparse_layout=args.sparse_weight)
                    base = make_model(cfg, eager=False, sparse_layout=args.sparse_weight)
                    base.load_state_dict(eager_model.state_dict())
                    t0 = time.perf_counter()
                    try:
                        model = torch.jit.script(base)
                        how = "torch.jit.script"
                    except Exception as e:  # noqa: BLE001
                        raise RuntimeError(f"torch.jit.script failed: "
                                           f"{type(e).__name__}: {str(e).splitlines()[0]}")
                    dl, dg = compare_with_eager(torch, model, eager_model, batches[0])
                    note.append(f"{how} of the forward+loss module ({time.perf_counter() - t0:.2f}"
                                f" s incl. check), fp32, no clip; GRL as "
                                f"x.detach() - lam*(x - x.detach()); vs eager: |dloss| {dl:.1e},"
                                f" max |dgrad| {dg:.1e}")
                    if not (dg <= 1e-4):
                        note.append("WARNING: gradients differ from eager")
                    del eager_model
                else:
                    model = make_model(cfg, eager=True, sparse_layout=args.sparse_weight)
                    if ex == "bf16":
                        note.append("autocast bf16 + clip")
                        if cfg == "amazon":
                            note.append("sparse first layer kept fp32 (autocast disabled around "
                                        "sparse.mm: torch 1.13 has no bf16 addmm_sparse_dense); "
                                        "heads bf16")
                    elif ex == "clip":
                        note.append("fp32 + clip_grad_norm_(1.0)")
                    elif ex in COMPILE_MODES:
                        if not hasattr(torch, "compile"):
                            raise RuntimeError(f"torch.compile needs PyTorch 2 (this is "
                                               f"{torch.__version__})")
                        mode = COMPILE_MODES[ex]
                        note.append(f"torch.compile(model{', mode=' + repr(mode) if mode else ''})"
                                    f" of the forward+loss module, lambda a tensor")
                        note.append("bf16 autocast + clip" if ex != "compile" and
                                    ex != "compile-max" else "fp32, no clip")
                        if ex == "recipe":
                            note.append(f"batches from a DataLoader with {RECIPE_WORKERS} "
                                        f"workers (next() timed with the step)")
                    else:
                        note.append("fp32")
                res = run_execution(torch, model, batches, ex, args)
            except Exception as e:  # noqa: BLE001 - report n/a, keep going
                msg = str(e).strip().splitlines()[0] if str(e).strip() else ""
                reason = f"{type(e).__name__}: {msg}"[:300]
                print(f"  {ex}: n/a: {reason}", flush=True)
                results.append({"config": cfg, "execution": ex, "median_ms": None,
                                "p25_ms": None, "p75_ms": None, "steps_per_second": None,
                                "steps": 0, "peak_rss_bytes": maxrss_bytes(),
                                "note": "n/a: " + reason})
                continue
            finally:
                gc.collect()
            if res["involuntary_switches_per_step"] >= 1:
                note.append("CPU contention? %.1f involuntary context switches per step, "
                            "CPU/wall %.2f (other processes on the cores)"
                            % (res["involuntary_switches_per_step"], res["cpu_per_wall"]))
            if res["truncated_by_max_seconds"]:
                note.append(f"stopped after {res['steps']} steps (--max-seconds)")
            if res["warmup"] < args.warmup:
                note.append(f"warm-up cut to {res['warmup']} steps (--max-seconds)")
            if res["final_loss"] is not None and res["final_loss"] != res["final_loss"]:
                note.append("final loss is NaN")
            if "compile_seconds" in res:
                note.append("compile %.1f s (first step)%s, %d graph(s), %d graph break(s)%s, "
                            "%d recompile(s); first loss - eager's %.1e"
                            % (res["compile_seconds"],
                               ", %d FX-graph cache hit(s)" % res["fxgraph_cache_hits"]
                               if res.get("fxgraph_cache_hits") else "",
                               res["graphs"], res["graph_breaks"],
                               (": " + " | ".join(res["graph_break_reasons"]))
                               if res["graph_breaks"] else "", res["recompiles"],
                               res["first_loss_minus_eager"]))
            if res.get("step_memory_error"):
                note.append("step memory not measured: " + res["step_memory_error"])
            r = {"config": cfg, "execution": ex}
            r.update(res)
            r["flops_per_step"] = flops
            r["gflops"] = flops / (res["median_ms"] * 1e-3) / 1e9
            r["data"] = data_note
            r["note"] = "; ".join(note)
            results.append(r)
            print(f"  {ex:<12} median {r['median_ms']:8.3f} ms  IQR {r['p25_ms']:.3f}-"
                  f"{r['p75_ms']:.3f}  {r['steps_per_second']:7.0f} steps/s  "
                  f"{r['gflops']:6.1f} GFLOP/s  {r['minor_faults_per_step']:5.0f} faults/step  "
                  f"({r['steps']} steps)", flush=True)
            del model

    env["loadavg_end"] = read_first("/proc/loadavg")
    print()
    print(f"PyTorch DANN step, {args.threads} threads (warm-up {args.warmup}, up to {args.steps} "
          f"steps, median and IQR of per-step wall time; steps/s = steps / total timed time; "
          f"GFLOP/s from the median; step KiB = peak bytes of the tensors alive during one "
          f"step (parameters, gradients, optimizer state, batch, and the profiler's count of "
          f"what the step allocates); RSS is process-wide ru_maxrss, monotone: +RSS is its growth "
          f"during that execution; faults/step = minor page faults per timed step; CPU/wall = "
          f"process CPU time / wall time over the timed steps)")
    print()
    print_table(results)
    print()
    print(f"GEMM 2048 fp32: {gflops:.1f} GFLOP/s; load average {env['loadavg_start']} -> "
          f"{env['loadavg_end']}")
    if bad_env:
        bad_env_banner()

    if args.json:
        write_json(args.json, {"environment": env, "gemm_2048_gflops": round(gflops, 2),
                               "results": results})
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
