#!/usr/bin/env python3
"""PyTorch side of dafuse's GPU benchmark (bench/cuda_step_bench.cu): one DANN training step on
the GPU, in the executions people use, one JSON line per measurement.

    python3 bench/pytorch/cuda_bench.py [--configs demo,office-head,digits-mlp]
        [--executions eager,bf16,fp16,compile,graph] [--compile-configs demo]
        [--rounds 5] [--steps 200] [--json FILE]

One step, batch = B source rows + B target rows (dafuse's step):
    feat = G_f(x[2B]); loss_y = CE(G_y(feat[:B]), y_s); loss_d = BCEWithLogits(G_d(GRL(feat)), d)
    (loss_y + loss_d).backward(); SGD(lr 0.01, momentum 0.9).step()
with the gradient reversal an autograd Function (identity forward, -lambda * grad backward) whose
lambda is a device tensor, so no execution recompiles or re-captures when it changes.

Executions:
    eager    fp32, TF32 off (torch.backends.cuda.matmul.allow_tf32 = False), as dafuse's fp32
    bf16     autocast(bfloat16), fp32 master weights
    fp16     autocast(float16) with GradScaler
    compile  torch.compile(step, mode="reduce-overhead") of the whole step (forward, backward,
             optimizer), fp32; compiled once per configuration (only --compile-configs: a compile
             takes tens of seconds)
    graph    the whole step captured by hand into one CUDA graph (torch.cuda.graph) after warm-up
             steps, and replayed; fp32
Configurations as bench/cuda_step_bench.cu. Each figure: the median over rounds of the mean time
of `steps` steps (torch.cuda.synchronize around each round), after warm-up steps; the batch is
already on the GPU (not timed).
"""

import argparse
import json
import statistics
import sys
import time

CONFIGS = {
    "demo": dict(B=64, gf=[256, 256, 128], classes=10, gd=[128, 128, 1]),
    "office-head": dict(B=32, gf=[2048, 256], classes=31, gd=[256, 1024, 1024, 1]),
    "digits-mlp": dict(B=4096, gf=[784, 256, 256], classes=10, gd=[256, 256, 1]),
}
EXECUTIONS = ["eager", "bf16", "fp16", "compile", "graph"]
LR, MOMENTUM = 0.01, 0.9


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--configs", default="demo,office-head,digits-mlp")
    p.add_argument("--executions", default=",".join(EXECUTIONS))
    p.add_argument("--compile-configs", default="demo")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--json", default=None)
    a = p.parse_args()
    def skipped(why):
        line = json.dumps({"bench": "torch_info", "skipped": why})
        print(line)
        if a.json:
            with open(a.json, "a") as f:
                f.write(line + "\n")
        return 0

    try:
        import torch
    except ImportError as e:
        return skipped(f"no torch: {e}")
    if not torch.cuda.is_available():
        return skipped("no CUDA device")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    out = open(a.json, "a") if a.json else None

    def emit(record):
        line = json.dumps(record)
        print(line, flush=True)
        if out:
            out.write(line + "\n")
            out.flush()

    emit({"bench": "torch_info", "torch": torch.__version__, "cuda": torch.version.cuda,
          "device": torch.cuda.get_device_name(0)})
    nn = torch.nn
    F = torch.nn.functional

    class Reverse(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, lam):
            ctx.save_for_backward(lam)
            return x.view_as(x)

        @staticmethod
        def backward(ctx, g):
            (lam,) = ctx.saved_tensors
            return -lam * g, None

    def mlp(widths, activate_last):
        layers = []
        for i in range(len(widths) - 1):
            layers.append(nn.Linear(widths[i], widths[i + 1]))
            if i + 2 < len(widths) or activate_last:
                layers.append(nn.ReLU())
        return nn.Sequential(*layers)

    class Dann(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.gf = mlp(c["gf"], True)
            self.gy = nn.Linear(c["gf"][-1], c["classes"])
            self.gd = mlp(c["gd"], False)

        def forward(self, x, y, d, lam, b):
            h = self.gf(x)
            loss_y = F.cross_entropy(self.gy(h[:b]), y)
            loss_d = F.binary_cross_entropy_with_logits(self.gd(Reverse.apply(h, lam)).squeeze(1), d)
            return loss_y + loss_d

    def median_step_seconds(step, rounds, steps):
        per = []
        for _ in range(rounds):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(steps):
                step()
            torch.cuda.synchronize()
            per.append((time.perf_counter() - t0) / steps)
        return statistics.median(per)

    for name in a.configs.split(","):
        c = CONFIGS[name]
        b = c["B"]
        steps = a.steps if b < 1024 else max(a.steps // 4, 10)
        dev = torch.device("cuda")
        gen = torch.Generator(device="cpu").manual_seed(1)
        x = torch.rand(2 * b, c["gf"][0], generator=gen).to(dev)
        y = torch.randint(0, c["classes"], (b,), generator=gen).to(dev)
        d = torch.cat([torch.zeros(b), torch.ones(b)]).to(dev)
        lam = torch.tensor(0.5, device=dev)
        for ex in a.executions.split(","):
            if ex == "compile" and name not in a.compile_configs.split(","):
                continue
            torch.manual_seed(1)
            model = Dann(c).to(dev)
            opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)
            record = {"bench": "cuda_step", "config": name, "batch": b,
                      "impl": f"torch-{ex}" + ("-fp32" if ex in ("eager", "compile", "graph") else "")}
            try:
                if ex in ("eager", "bf16", "fp16"):
                    scaler = torch.amp.GradScaler("cuda") if ex == "fp16" else None
                    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(ex)

                    def step():
                        opt.zero_grad(set_to_none=True)
                        if dtype is None:
                            loss = model(x, y, d, lam, b)
                        else:
                            with torch.autocast("cuda", dtype=dtype):
                                loss = model(x, y, d, lam, b)
                        if scaler:
                            scaler.scale(loss).backward()
                            scaler.step(opt)
                            scaler.update()
                        else:
                            loss.backward()
                            opt.step()
                elif ex == "compile":
                    def plain():
                        opt.zero_grad(set_to_none=True)
                        loss = model(x, y, d, lam, b)
                        loss.backward()
                        opt.step()
                    compiled = torch.compile(plain, mode="reduce-overhead")
                    t0 = time.perf_counter()
                    for _ in range(3):
                        compiled()
                    torch.cuda.synchronize()
                    record["compile_seconds"] = round(time.perf_counter() - t0, 2)
                    step = compiled
                else:  # graph
                    side = torch.cuda.Stream()
                    side.wait_stream(torch.cuda.current_stream())
                    with torch.cuda.stream(side):
                        for _ in range(3):
                            opt.zero_grad(set_to_none=False)
                            model(x, y, d, lam, b).backward()
                            opt.step()
                    torch.cuda.current_stream().wait_stream(side)
                    graph = torch.cuda.CUDAGraph()
                    # Gradients set to None: the captured backward allocates them from the graph's
                    # pool and writes them afresh on each replay (torch.cuda.graph's whole-network
                    # capture).
                    opt.zero_grad(set_to_none=True)
                    with torch.cuda.graph(graph):
                        model(x, y, d, lam, b).backward()
                        opt.step()

                    def step():
                        graph.replay()
                for _ in range(10):
                    step()
                s = median_step_seconds(step, a.rounds, steps)
                record["us_per_step"] = round(1e6 * s, 3)
            except Exception as e:  # one failed execution must not hide the others
                record["error"] = f"{type(e).__name__}: {e}"[:300]
            emit(record)
            del model, opt
            torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
