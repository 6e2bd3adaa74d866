#!/usr/bin/env python3
"""The one short table of scripts/gpu-check: dafuse's CUDA step (bench/cuda_step_bench.cu) beside
PyTorch's executions on the same GPU (bench/pytorch/cuda_bench.py), digits-mlp's rate against the
GPU's dense bf16 rate measured in the same run, the demo's adaptation, and the GPU tests' status.

    bench/cuda_table.py --dafuse FILE --torch FILE [--demo FILE] [--tests FILE] [--build FILE]

Each FILE holds the JSON lines the programs print (other lines are ignored). A figure that was not
measured is printed as "not measured", never guessed.
"""

import argparse
import json
import re
import sys

CONFIGS = ["demo", "office-head", "digits-mlp"]
TORCH = [("torch-eager-fp32", "eager fp32"), ("torch-bf16", "AMP bf16"),
         ("torch-fp16", "AMP fp16+GradScaler"), ("torch-compile-fp32", "compile r-o"),
         ("torch-graph-fp32", "CUDA graph")]
TARGETS = {"demo": [("torch-eager-fp32", 10.0), ("torch-compile-fp32", 3.0)],
           "office-head": [("torch-eager-fp32", 5.0)]}


def json_lines(path):
    records = []
    if not path:
        return records
    try:
        with open(path, errors="replace") as f:
            for line in f:
                line = line.strip()
                if line.startswith("{"):
                    try:
                        records.append(json.loads(line))
                    except json.JSONDecodeError:
                        pass
    except OSError:
        pass
    return records


def fmt(us):
    return "not measured" if us is None else f"{us:.1f} µs"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--dafuse")
    p.add_argument("--torch")
    p.add_argument("--demo")
    p.add_argument("--tests")
    p.add_argument("--build")
    a = p.parse_args()
    steps = {}
    errors = {}
    ceiling = None
    info = None
    for r in json_lines(a.dafuse) + json_lines(a.torch):
        if r.get("bench") == "bf16_ceiling":
            ceiling = r.get("tflops") or None
        elif r.get("bench") == "torch_info":
            info = r
        elif r.get("bench") == "cuda_step" and "config" in r:
            if "us_per_step" in r:
                steps[(r["config"], r["impl"])] = r
            elif "error" in r:
                errors[(r["config"], r["impl"])] = r["error"]
    lines = []
    if info and "skipped" in info:
        lines.append(f"PyTorch side skipped: {info['skipped']}")
    elif info:
        lines.append(f"GPU: {info.get('device')}; torch {info.get('torch')} (CUDA {info.get('cuda')})")
    header = ["config", "dafuse CUDA fp32", "dafuse + gather"] + [t[1] for t in TORCH] + \
        ["dafuse vs eager", "dafuse vs compile"]
    lines.append("| " + " | ".join(header) + " |")
    lines.append("|" + "---|" * len(header))
    for c in CONFIGS:
        d = steps.get((c, "dafuse-cuda-fp32"))
        dus = d["us_per_step"] if d else None
        row = [c, fmt(dus), fmt(d.get("us_per_fit_step") if d else None)]
        for impl, _ in TORCH:
            t = steps.get((c, impl))
            row.append(fmt(t["us_per_step"]) if t else
                       ("error" if (c, impl) in errors else "not measured"))
        for impl in ("torch-eager-fp32", "torch-compile-fp32"):
            t = steps.get((c, impl))
            row.append(f"{t['us_per_step'] / dus:.2f}×" if (t and dus) else "–")
        lines.append("| " + " | ".join(row) + " |")
    d = steps.get(("digits-mlp", "dafuse-cuda-fp32"))
    if d and ceiling:
        lines.append(f"digits-mlp B 4096+4096: {d['tflops']:.1f} TFLOP/s fp32 = "
                     f"{100 * d['tflops'] / ceiling:.1f} % of the dense bf16 rate measured here "
                     f"({ceiling:.0f} TFLOP/s; target >= 60 %)")
    else:
        lines.append("digits-mlp rate against the bf16 ceiling: not measured")
    for c, targets in TARGETS.items():
        d = steps.get((c, "dafuse-cuda-fp32"))
        for impl, want in targets:
            t = steps.get((c, impl))
            if d and t:
                got = t["us_per_step"] / d["us_per_step"]
                lines.append(f"target {c} vs {impl}: >= {want:g}×, measured {got:.2f}× "
                             f"({'met' if got >= want else 'NOT met'})")
    for (c, impl), e in sorted(errors.items()):
        lines.append(f"{c} {impl}: {e}")
    demo = [r for r in json_lines(a.demo) if r.get("task") == "mnist->usps"]
    if demo:
        r = demo[-1]
        lines.append(
            f"MNIST->USPS {r['steps']} steps, {r['seeds']} seed(s): GPU DANN "
            f"{100 * r['dann_target_acc']:.2f} % (source-only {100 * r['source_only_target_acc']:.2f} %), "
            f"{1e3 * r['dann_seconds']:.1f} ms a run, upload to accuracy (target < 100 ms); host DANN "
            f"{100 * r['host_dann_target_acc']:.2f} % in {1e3 * r['host_dann_seconds']:.0f} ms")
    else:
        lines.append("MNIST->USPS demo on the GPU: not measured")
    if a.tests:
        try:
            text = open(a.tests, errors="replace").read()
        except OSError:
            text = ""
        m = re.findall(r"\[doctest\] test cases:.*", text)
        status = "; then, without graphs: ".join(x.strip() for x in m) if m else (
            "skipped (no GPU)" if "skipped" in text else "no result")
        lines.append(f"GPU tests: {status}")
    if a.build:
        try:
            text = open(a.build, errors="replace").read()
        except OSError:
            text = ""
        failed = re.findall(r"^BUILD FAILED: .*", text, re.M)
        lines.append("build: " + ("; ".join(failed) if failed else "all CUDA programs built"))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
