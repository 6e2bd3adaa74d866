#!/usr/bin/env python3
"""Merge the C++ benchmark (build/bench/dann_bench --json) with the PyTorch one
(bench/pytorch/dann_bench.py --json), print the side-by-side tables with ratios, and write every
figure to one JSON file and the speed-ups to an SVG bar chart.

Usage: bench/compare.py RESULT.json [RESULT.json ...] [--json OUT] [--svg OUT]

Each RESULT.json is one run of either side (told apart by its content), holding some of the
configurations. The runs of a configuration on one side are its rounds, in the order given:
scripts/bench runs each configuration on both sides, one after the other, once per round, so
that round r of dafuse and round r of PyTorch ran in the same minute. The host's speed drifts by
a quarter over minutes; a ratio of two medians taken minutes apart measures that drift as much
as the code. So each round gives its own ratios (PyTorch's median over dafuse's, the fused step's
over the eager one's, the step's GFLOP/s over the ceiling measured next to it and over the
core's FMA peak measured as the run started), and the tables
print the median of the rounds' ratios with their range. Times are the medians of the rounds'
medians. Only the standard library: it runs wherever python3 does, with or without torch.
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
    ("compile", "fused fp32", "torch.compile fp32 vs fused fp32"),
    ("compile-max", "fused fp32", "compile max-autotune fp32 vs fused fp32"),
    ("compile-bf16", "fused bf16 + clip", "compile + bf16 autocast + clip vs fused bf16 + clip"),
    ("recipe", "fused bf16 + clip", "seed's recipe (+ workers) vs fused bf16 + clip"),
]
CONFIGS = ["moons", "digits-mlp", "office-head", "amazon", "demo", "lenet"]


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
        "dafuse speed-up over PyTorch (same configuration, median of the rounds; log scale)</text>",
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
               "amazon": "#d62728", "lenet": "#9467bd"}
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


def median(values):
    values = sorted(v for v in values if v is not None)
    if not values:
        return None
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2


def spread(values, spec=".2f"):
    """'min-max' of the rounds' values (empty for one round)."""
    values = [v for v in values if v is not None]
    if len(values) < 2:
        return ""
    return f"{format(min(values), spec)}-{format(max(values), spec)}"


def classify(paths):
    """(dafuse runs, PyTorch runs, note why PyTorch is missing) from the result files."""
    ours, torch, skipped = [], [], None
    for path in paths:
        run = load(path)
        if "gemm_ceiling_gflops" in run:
            ours.append(run)
        elif run.get("skipped"):
            skipped = run["skipped"]
        elif "results" in run:
            torch.append(run)
        else:
            raise SystemExit(f"compare.py: {path}: neither side's results (expected "
                             "'gemm_ceiling_gflops' from dann_bench or 'results' from "
                             "bench/pytorch/dann_bench.py)")
    if not ours:
        raise SystemExit("compare.py: no dafuse results among the files (build/bench/dann_bench "
                         "--json writes them)")
    return ours, torch, skipped


def runs_holding(runs, config):
    """The runs that hold the configuration, in order: its rounds on that side."""
    return [run for run in runs if any(r.get("config") == config for r in run.get("results", []))]


def rounds_of(runs, config, execution):
    """The results of (config, execution) in each round of the configuration (None where a
    round lacks the execution)."""
    return [by_key(run["results"], config, execution) for run in runs_holding(runs, config)]


def executions(runs, config):
    """The executions of a configuration, in the order the runs list them."""
    seen = []
    for run in runs:
        for r in run.get("results", []):
            if r.get("config") == config and r["execution"] not in seen:
                seen.append(r["execution"])
    return seen


def ratio(numerator, denominator):
    return numerator / denominator if numerator and denominator else None


def merge_ours(ours):
    """One row per (config, execution): each round's figures ("round_..."), and their medians."""
    rows = []
    for config in CONFIGS:
        eager = rounds_of(ours, config, "eager fp32")
        eager_memory = next((e["memory_bytes"] for e in eager if e), None)
        for execution in executions(ours, config):
            rounds = rounds_of(ours, config, execution)

            def each(key):
                return [r.get(key) if r else None for r in rounds]

            row = {"config": config, "execution": execution,
                   "rounds": sum(r is not None for r in rounds),
                   "round_median_us": each("median_us"),
                   "round_ceiling_fraction": each("ceiling_fraction"),
                   "round_nearby_ceiling_fraction": each("nearby_ceiling_fraction"),
                   "round_peak_fraction": each("peak_fraction"),
                   "round_speedup_over_eager": [ratio(e and e["median_us"], r and r["median_us"])
                                                for e, r in zip(eager, rounds)]}
            for name in ("median_us", "ceiling_fraction", "nearby_ceiling_fraction",
                         "peak_fraction", "speedup_over_eager"):
                row[name] = median(row["round_" + name])
            row["gflops"] = median(each("gflops"))
            row["memory_bytes"] = next((m for m in each("memory_bytes") if m is not None), None)
            row["memory_over_eager"] = ratio(row["memory_bytes"], eager_memory)
            rows.append(row)
    return rows


def machine(ours):
    """'cpu: MODEL; FMA peak loop: ISA' from the first run that names them (dann_bench
    --json writes both; older runs name neither)."""
    run = next((run for run in ours if "cpu_model" in run or "fma_isa" in run), None)
    if run is None:
        return "cpu: not recorded; FMA peak loop: not measured"
    return f'cpu: {run.get("cpu_model", "unknown")}; FMA peak loop: {run.get("fma_isa", "?")}'


def print_rates_by_config(ours, key):
    """One line per configuration: each run's rates under `key` (1 thread / its threads), or n/a
    for a run that has none (JSON from before the key existed)."""
    for config in CONFIGS:
        runs = runs_holding(ours, config)
        if runs:
            print(f'  {config:<12} ' + ", ".join(
                " / ".join(fmt(v, ".1f") for v in run[key].values()) if key in run else "n/a"
                for run in runs))


def print_ours(ours, rows):
    print("\n== dafuse: fused vs its own eager execution ==")
    print(machine(ours))
    # Each run measures the ceiling first: the faster of Eigen's and dafuse's 2048^3 product.
    print("fp32 GEMM ceiling (2048^3, the faster of Eigen and dafuse; GFLOP/s on 1 thread / on "
          "the run's threads), measured as each run started:")
    print_rates_by_config(ours, "gemm_ceiling_gflops")
    # The physical limit: independent FMAs on registers (bench/fma_peak.hpp), on the same threads.
    print("fp32 FMA peak (registers only; GFLOP/s on 1 thread / on the run's threads), measured "
          "as each run started:")
    print_rates_by_config(ours, "fma_peak_gflops")
    # "% ceil": of the ceiling its run measured first; "% near": of the one measured right before
    # and after the configuration (dense ones); "% peak": of the FMA peak on the run's threads.
    # All three, and "x eager", are medians of the rounds'.
    print(f'{"config":<12} {"execution":<30} {"median ms":>10} {"GFLOP/s":>8} {"% ceil":>7} '
          f'{"% near":>7} {"% peak":>7} {"x eager":>8} {"mem/eager":>10}  rounds: % near, x eager')
    for r in rows:
        near = r["nearby_ceiling_fraction"]
        near = f'{100 * near:>6.1f}%' if near is not None else f'{"":>7}'
        near_range = spread([100 * v for v in r["round_nearby_ceiling_fraction"] if v is not None],
                            ".1f")
        peak = r["peak_fraction"]
        peak = f'{100 * peak:>6.1f}%' if peak is not None else f'{"n/a":>7}'
        print(f'{r["config"]:<12} {r["execution"]:<30} {fmt(r["median_us"] / 1000, ">10.4f")} '
              f'{fmt(r["gflops"], ">8.1f")} {100 * r["ceiling_fraction"]:>6.1f}% {near} {peak} '
              f'{fmt(r["speedup_over_eager"], ">7.2f")}x {fmt(r["memory_over_eager"], ">9.2f")}x'
              f'  {near_range + "%" if near_range else ""} '
              f'{spread(r["round_speedup_over_eager"])}')


def pytorch_ratios(ours, torch):
    """For each pair of executions: PyTorch's median over dafuse's in each round, and the
    median of those."""
    ratios = []
    for config in CONFIGS:
        for torch_exec, our_exec, label in PAIRS:
            t_rounds = rounds_of(torch, config, torch_exec)
            o_rounds = rounds_of(ours, config, our_exec)
            t = [median_ms(r) for r in t_rounds]
            o = [median_ms(r) for r in o_rounds]
            if not any(t) and not any(o):
                continue
            per_round = [ratio(a, b) for a, b in zip(t, o)]
            # memory: dafuse's step buffers over the tensors PyTorch's step holds at its peak
            t_mem = next((r["step_memory_bytes"] for r in t_rounds
                          if r and r.get("step_memory_bytes")), None)
            o_mem = next((r["memory_bytes"] for r in o_rounds if r and r.get("memory_bytes")),
                         None)
            ratios.append({"config": config, "pytorch_execution": torch_exec,
                           "dafuse_execution": our_exec, "label": label,
                           "pytorch_median_ms": median(t), "dafuse_median_ms": median(o),
                           "speedup": median(per_round),
                           "pytorch_step_memory_bytes": t_mem, "dafuse_memory_bytes": o_mem,
                           "memory_ratio": ratio(o_mem, t_mem),
                           "round_pytorch_median_ms": t, "round_dafuse_median_ms": o,
                           "round_speedup": per_round})
    return ratios


def print_pytorch(torch, ratios):
    env = torch[0].get("environment", {})
    print("\n== side by side with PyTorch (same machine; each round runs a configuration on "
          "both sides, one after the other) ==")
    print(f'PyTorch {env.get("torch_version", "?")}, BLAS {env.get("blas_library", "?")}, '
          f'core {env.get("openblas_corename", "?")}, threads {env.get("threads", "?")}, '
          f'2048^3 GEMM {", ".join(fmt(run.get("gemm_2048_gflops"), ".1f") for run in torch)} '
          f'GFLOP/s')
    # mem: dafuse's step buffers over the bytes of the tensors PyTorch's step holds at its peak.
    print(f'{"config":<12} {"comparison":<52} {"PyTorch ms":>11} {"dafuse ms":>10} '
          f'{"speed-up":>9} {"mem":>6}  rounds')
    for r in ratios:
        print(f'{r["config"]:<12} {r["label"]:<52} {fmt(r["pytorch_median_ms"], ">11.4f")} '
              f'{fmt(r["dafuse_median_ms"], ">10.4f")} {fmt(r["speedup"], ">8.1f")}x '
              f'{fmt(r["memory_ratio"], ">5.2f")}x  {spread(r["round_speedup"])}')


def torch_over_eager(torch):
    """The seed's table for PyTorch: each execution's speed-up over PyTorch eager (the median of
    the rounds' own ratios) and its step memory over eager's, with what torch.compile reported:
    compile seconds in each round, graph breaks and recompiles (the most any round saw)."""
    rows = []
    for config in CONFIGS:
        eager = rounds_of(torch, config, "eager")
        eager_memory = next((e["step_memory_bytes"] for e in eager
                             if e and e.get("step_memory_bytes")), None)
        for execution in executions(torch, config):
            rounds = rounds_of(torch, config, execution)
            per_round = [ratio(median_ms(e), median_ms(r)) for e, r in zip(eager, rounds)]
            memory = next((r["step_memory_bytes"] for r in rounds
                           if r and r.get("step_memory_bytes")), None)

            def most(key):
                values = [r[key] for r in rounds if r and r.get(key) is not None]
                return max(values) if values else None
            rows.append({"config": config, "execution": execution,
                         "median_ms": median([median_ms(r) for r in rounds]),
                         "round_speedup_over_eager": per_round,
                         "speedup_over_eager": median(per_round),
                         "step_memory_bytes": memory,
                         "memory_over_eager": ratio(memory, eager_memory),
                         "round_compile_seconds": [r.get("compile_seconds") if r else None
                                                   for r in rounds],
                         "graph_breaks": most("graph_breaks"),
                         "recompiles": most("recompiles"),
                         "note": next((r["note"] for r in rounds
                                       if r and str(r.get("note", "")).startswith("n/a")), None)})
    return rows


def print_torch_over_eager(rows):
    print("\n== PyTorch: each execution over its own eager one (the seed's table) ==")
    print(f'{"config":<12} {"execution":<13} {"median ms":>10} {"x eager":>8} {"mem/eager":>10} '
          f'{"step KiB":>9} {"compile s (rounds)":>20} {"breaks":>7} {"recompiles":>10}')
    for r in rows:
        if r["median_ms"] is None:
            print(f'{r["config"]:<12} {r["execution"]:<13} {r["note"] or "n/a"}'[:150])
            continue
        compile_s = ", ".join(fmt(v, ".1f") for v in r["round_compile_seconds"]
                              if v is not None)
        memory = r["step_memory_bytes"]
        print(f'{r["config"]:<12} {r["execution"]:<13} {fmt(r["median_ms"], ">10.4f")} '
              f'{fmt(r["speedup_over_eager"], ">7.2f")}x {fmt(r["memory_over_eager"], ">9.2f")}x '
              f'{fmt(memory / 1024 if memory else None, ">9.1f")} {compile_s:>20} '
              f'{"" if r["graph_breaks"] is None else r["graph_breaks"]:>7} '
              f'{"" if r["recompiles"] is None else r["recompiles"]:>10}')


def main(argv):
    paths, out_json, out_svg = [], None, None
    i = 0
    while i < len(argv):
        if argv[i] in ("--json", "--svg"):
            if i + 1 >= len(argv):
                raise SystemExit(f"compare.py: {argv[i]} needs a file name")
            if argv[i] == "--json":
                out_json = argv[i + 1]
            else:
                out_svg = argv[i + 1]
            i += 2
        else:
            paths.append(argv[i])
            i += 1
    if not paths:
        print(__doc__)
        return 2
    ours, torch, skipped = classify(paths)
    rows = merge_ours(ours)
    print_ours(ours, rows)
    ratios, torch_rows = [], []
    if torch:
        ratios = pytorch_ratios(ours, torch)
        print_pytorch(torch, ratios)
        torch_rows = torch_over_eager(torch)
        print_torch_over_eager(torch_rows)
    elif skipped:
        print(f"\n(PyTorch part skipped: {skipped})")
    else:
        print("\n(no PyTorch results: run scripts/bench --vs-pytorch with python3-torch installed)")
    if out_json:
        with open(out_json, "w") as f:
            json.dump({"dafuse": {"merged": rows, "runs": ours},
                       "pytorch": {"runs": torch, "over_eager": torch_rows} if torch
                       else {"skipped": skipped},
                       "ratios": ratios}, f, indent=1)
    if out_svg and ratios:
        svg_bars([r for r in ratios if r["pytorch_execution"] in ("eager", "compile", "bf16")],
                 out_svg)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
