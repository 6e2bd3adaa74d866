#!/usr/bin/env python3
"""Merge the C++ benchmark (build/bench/dann_bench --json) with the PyTorch one
(bench/pytorch/dann_bench.py --json), print the side-by-side tables with ratios, and write every
figure to one JSON file and the speed-ups to an SVG bar chart.

Usage: bench/compare.py DAFUSE.json [TORCH.json] [--json OUT] [--svg OUT]
Only the standard library: it runs wherever python3 does, with or without torch.
"""
import json
import math
import sys

# dafuse execution compared with each PyTorch execution (same maths, same clipping, same formats).
PAIRS = [
    ("eager", "fused fp32", "eager fp32 (PyTorch) vs fused fp32 (dafuse)"),
    ("clip", "fused fp32 + clip", "+ clip_grad_norm_ vs fused fp32 + clip"),
    ("bf16", "fused bf16 + clip", "bf16 autocast + clip vs fused bf16 + clip"),
    ("torchscript", "fused fp32", "TorchScript fp32 vs fused fp32"),
]
CONFIGS = ["moons", "digits-mlp", "office-head", "amazon"]


def load(path):
    with open(path) as f:
        return json.load(f)


def by_key(results, config, execution):
    for r in results:
        if r.get("config") == config and r.get("execution") == execution:
            return r
    return None


def median_ms(r):
    if r is None:
        return None
    if "median_ms" in r:
        return r["median_ms"]
    if "median_us" in r and r["median_us"] is not None:
        return r["median_us"] / 1000.0
    return None


def fmt(v, spec):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        width = "".join(ch for ch in spec if ch.isdigit() or ch == ".").split(".")[0]
        return "n/a".rjust(int(width)) if width else "n/a"
    return format(v, spec)


def svg_bars(rows, path):
    """A horizontal bar chart of speed-ups (log scale), self-contained SVG."""
    rows = [r for r in rows if r["speedup"] is not None and r["speedup"] > 0]
    if not rows:
        return
    width, bar, gap, left, right = 900, 18, 6, 330, 90
    height = 60 + len(rows) * (bar + gap)
    top = max(r["speedup"] for r in rows)
    lo, hi = math.log10(0.5), math.log10(max(2.0, top) * 1.3)

    def x(v):
        return left + (math.log10(v) - lo) / (hi - lo) * (width - left - right)

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="{width / 2}" y="20" text-anchor="middle" font-size="15" font-weight="bold">'
        "dafuse speed-up over PyTorch (same configuration, one run; log scale)</text>",
    ]
    decade = 10 ** math.floor(lo)
    while decade <= 10 ** hi:
        for m in (1, 2, 5):
            v = decade * m
            if 10 ** lo <= v <= 10 ** hi:
                out.append(f'<line x1="{x(v):.1f}" y1="32" x2="{x(v):.1f}" y2="{height - 18}" '
                           f'stroke="{"#999" if v == 1 else "#e5e5e5"}"/>')
                out.append(f'<text x="{x(v):.1f}" y="{height - 4}" text-anchor="middle">{v:g}x</text>')
        decade *= 10
    colours = {"moons": "#1f77b4", "digits-mlp": "#ff7f0e", "office-head": "#2ca02c",
               "amazon": "#d62728"}
    for i, r in enumerate(rows):
        y = 40 + i * (bar + gap)
        label = f'{r["config"]}: {r["label"]}'.replace("&", "&amp;").replace("<", "&lt;")
        out.append(f'<text x="{left - 6}" y="{y + bar - 5}" text-anchor="end">{label}</text>')
        x0, x1 = x(1.0), x(r["speedup"])
        out.append(f'<rect x="{min(x0, x1):.1f}" y="{y}" width="{abs(x1 - x0):.1f}" height="{bar}" '
                   f'fill="{colours.get(r["config"], "#777")}"/>')
        out.append(f'<text x="{max(x0, x1) + 4:.1f}" y="{y + bar - 5}">{r["speedup"]:.1f}x</text>')
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def main(argv):
    args, out_json, out_svg = [], None, None
    i = 0
    while i < len(argv):
        if argv[i] == "--json":
            out_json = argv[i + 1]
            i += 2
        elif argv[i] == "--svg":
            out_svg = argv[i + 1]
            i += 2
        else:
            args.append(argv[i])
            i += 1
    if not args:
        print(__doc__)
        return 2
    ours = load(args[0])
    torch = load(args[1]) if len(args) > 1 else None
    torch_results = torch.get("results", []) if torch else []

    ceiling = ours["gemm_ceiling_gflops"]
    print("\n== dafuse: fused vs its own eager execution ==")
    sources = ours.get("gemm_ceiling_sources", {})
    print(f'fp32 GEMM ceiling (2048^3, GFLOP/s by threads, the faster of Eigen and dafuse): '
          f'{ceiling}; Eigen {sources.get("eigen")}, dafuse {sources.get("dafuse")}')
    # "% near": of the ceiling measured right before and after the configuration (dense ones).
    print(f'{"config":<12} {"execution":<30} {"median ms":>10} {"GFLOP/s":>8} {"% ceil":>7} '
          f'{"% near":>7} {"x eager":>8} {"mem/eager":>10}')
    for config in CONFIGS:
        eager = by_key(ours["results"], config, "eager fp32")
        for r in ours["results"]:
            if r["config"] != config:
                continue
            speed = eager["median_us"] / r["median_us"] if eager else None
            mem = r["memory_bytes"] / eager["memory_bytes"] if eager and eager["memory_bytes"] else None
            near = r.get("nearby_ceiling_fraction")
            near = f'{100 * near:>6.1f}%' if near is not None else f'{"":>7}'
            print(f'{config:<12} {r["execution"]:<30} {r["median_us"] / 1000:>10.4f} '
                  f'{r["gflops"]:>8.1f} {100 * r["ceiling_fraction"]:>6.1f}% {near} '
                  f'{fmt(speed, ">7.2f")}x {fmt(mem, ">9.2f")}x')

    ratios = []
    if torch is None:
        print("\n(no PyTorch results: run scripts/bench --vs-pytorch with python3-torch installed)")
    elif torch.get("skipped"):
        print(f'\n(PyTorch part skipped: {torch["skipped"]})')
    else:
        env = torch.get("environment", {})
        print("\n== side by side with PyTorch (same machine, same run) ==")
        print(f'PyTorch {env.get("torch_version", "?")}, BLAS {env.get("blas_library", "?")}, '
              f'core {env.get("openblas_corename", "?")}, threads {env.get("threads", "?")}, '
              f'2048^3 GEMM {fmt(torch.get("gemm_2048_gflops"), ".1f")} GFLOP/s')
        print(f'{"config":<12} {"comparison":<46} {"PyTorch ms":>11} {"dafuse ms":>10} {"speed-up":>9}')
        for config in CONFIGS:
            for torch_exec, our_exec, label in PAIRS:
                t = median_ms(by_key(torch_results, config, torch_exec))
                o = median_ms(by_key(ours["results"], config, our_exec))
                speed = t / o if t and o else None
                if t is None and o is None:
                    continue
                ratios.append({"config": config, "pytorch_execution": torch_exec,
                               "dafuse_execution": our_exec, "label": label,
                               "pytorch_median_ms": t, "dafuse_median_ms": o, "speedup": speed})
                print(f'{config:<12} {label:<46} {fmt(t, ">11.4f")} {fmt(o, ">10.4f")} '
                      f'{fmt(speed, ">8.1f")}x')
    if out_json:
        with open(out_json, "w") as f:
            json.dump({"dafuse": ours, "pytorch": torch, "ratios": ratios}, f, indent=1)
    if out_svg and ratios:
        svg_bars([r for r in ratios if r["pytorch_execution"] in ("eager", "bf16")], out_svg)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
