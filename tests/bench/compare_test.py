#!/usr/bin/env python3
"""bench/compare.py: rounds are paired by order, ratios are taken within a round, and the tables
print the median of the rounds' ratios. Only the standard library (unittest)."""
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
COMPARE = os.path.join(ROOT, "bench", "compare.py")


def load_module(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def read(*parts):
    with open(os.path.join(ROOT, *parts)) as f:
        return f.read()


def ours(config, fused_us, eager_us, ceiling=400.0, nearby=None, peak=None):
    """A dann_bench --json run holding one configuration (with the FMA peak when `peak` is
    given; runs from before the peak have none)."""
    def row(execution, us):
        gflops = 640.0 / us * 1e3 / 1e3  # 640 MFLOP per step
        r = {"config": config, "execution": execution, "median_us": us, "gflops": gflops,
             "ceiling_fraction": gflops / ceiling, "memory_bytes": 1000 if "eager" in execution
             else 900}
        if nearby:
            r["nearby_ceiling_fraction"] = gflops / nearby
        if peak:
            r["peak_fraction"] = gflops / peak
        return r
    run = {"threads": 2, "gemm_ceiling_gflops": {"1": ceiling / 2, "2": ceiling},
           "gemm_ceiling_sources": {}, "results": [row("eager fp32", eager_us),
                                                   row("fused fp32", fused_us)]}
    if peak:
        run.update({"fma_peak_gflops": {"1": peak / 2, "2": peak},
                    "fma_isa": "AVX-512 (__m512 vfmadd, 16 chains)", "cpu_model": "AMD EPYC"})
    return run


def torch(config, eager_ms, eager_memory=None, **others):
    """A bench/pytorch/dann_bench.py --json run: eager, and other executions given as
    name=dict of their fields (underscores in the name stand for dashes)."""
    results = [{"config": config, "execution": "eager", "median_ms": eager_ms}]
    if eager_memory is not None:
        results[0]["step_memory_bytes"] = eager_memory
    for name, fields in others.items():
        results.append(dict({"config": config, "execution": name.replace("_", "-")}, **fields))
    return {"environment": {"threads": 2}, "gemm_2048_gflops": 330.0, "results": results}


def with_bf16(run, us, memory):
    """A dann_bench run with a 'fused bf16 + clip' row added to its configuration."""
    config = run["results"][0]["config"]
    run["results"].append({"config": config, "execution": "fused bf16 + clip", "median_us": us,
                           "gflops": 1.0, "ceiling_fraction": 0.5, "memory_bytes": memory})
    return run


class CompareTest(unittest.TestCase):
    def run_compare(self, runs, extra=()):
        with tempfile.TemporaryDirectory() as d:
            paths = []
            for i, run in enumerate(runs):
                paths.append(os.path.join(d, f"{i}.json"))
                with open(paths[-1], "w") as f:
                    json.dump(run, f)
            out = os.path.join(d, "out.json")
            p = subprocess.run([sys.executable, COMPARE, *paths, "--json", out, *extra],
                               capture_output=True, text=True)
            if p.returncode != 0:
                return p, None
            with open(out) as f:
                return p, json.load(f)

    def test_ratios_are_taken_within_each_round(self):
        # Round 2 ran in a slow minute on both sides: 1.5x slower each. The ratio of the
        # medians across rounds would mix minutes; each round's own ratio is 2.0, 2.0, 2.5.
        runs = [ours("office-head", 2000, 4000), torch("office-head", 4.0),
                ours("office-head", 3000, 6000), torch("office-head", 6.0),
                ours("office-head", 2000, 4000), torch("office-head", 5.0)]
        p, result = self.run_compare(runs)
        self.assertEqual(p.returncode, 0, p.stderr)
        eager = [r for r in result["ratios"] if r["pytorch_execution"] == "eager"][0]
        self.assertEqual(eager["round_speedup"], [2.0, 2.0, 2.5])
        self.assertEqual(eager["speedup"], 2.0)
        self.assertEqual(eager["dafuse_median_ms"], 2.0)
        self.assertEqual(eager["pytorch_median_ms"], 5.0)
        self.assertIn("2.00-2.50", p.stdout)

    def test_dafuse_rows_take_the_medians_of_their_rounds(self):
        runs = [ours("digits-mlp", 700, 1400, nearby=380.0), ours("digits-mlp", 800, 1400,
                                                                  nearby=400.0),
                ours("digits-mlp", 760, 1900, nearby=390.0)]
        p, result = self.run_compare(runs)
        self.assertEqual(p.returncode, 0, p.stderr)
        fused = [r for r in result["dafuse"]["merged"] if r["execution"] == "fused fp32"][0]
        self.assertEqual(fused["rounds"], 3)
        self.assertEqual(fused["round_median_us"], [700, 800, 760])
        self.assertEqual(fused["median_us"], 760)
        self.assertEqual(fused["round_speedup_over_eager"], [2.0, 1.75, 2.5])
        self.assertEqual(fused["speedup_over_eager"], 2.0)
        self.assertAlmostEqual(fused["memory_over_eager"], 0.9)
        # % near: each round's GFLOP/s over its own nearby ceiling, then the median.
        nearby = sorted(640.0 / us / near for us, near in ((700, 380.0), (800, 400.0),
                                                           (760, 390.0)))
        self.assertAlmostEqual(fused["nearby_ceiling_fraction"], nearby[1])

    def test_the_peak_share_is_the_median_of_the_rounds_and_the_machine_is_named(self):
        runs = [ours("digits-mlp", 800, 1400, peak=200.0), ours("digits-mlp", 800, 1400,
                                                                peak=250.0),
                ours("digits-mlp", 800, 1400, peak=160.0)]
        p, result = self.run_compare(runs)
        self.assertEqual(p.returncode, 0, p.stderr)
        fused = [r for r in result["dafuse"]["merged"] if r["execution"] == "fused fp32"][0]
        self.assertAlmostEqual(fused["peak_fraction"], 0.8 / 200.0)
        self.assertIn("cpu: AMD EPYC; FMA peak loop: AVX-512 (__m512 vfmadd, 16 chains)", p.stdout)
        self.assertIn("100.0 / 200.0, 125.0 / 250.0, 80.0 / 160.0", p.stdout)
        self.assertIn("% peak", p.stdout)

    def test_runs_without_the_peak_print_it_as_missing(self):
        p, result = self.run_compare([ours("moons", 10, 100)])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIsNone(result["dafuse"]["merged"][0]["peak_fraction"])
        self.assertIn("FMA peak loop: not measured", p.stdout)

    def test_configurations_pair_by_their_own_rounds(self):
        # Files holding other configurations in between do not shift a configuration's rounds.
        runs = [ours("moons", 10, 100), torch("moons", 1.0), ours("office-head", 2000, 4000),
                torch("office-head", 4.2), ours("moons", 20, 100), torch("moons", 1.0)]
        p, result = self.run_compare(runs)
        self.assertEqual(p.returncode, 0, p.stderr)
        by_config = {r["config"]: r for r in result["ratios"]
                     if r["pytorch_execution"] == "eager"}
        self.assertEqual(by_config["moons"]["round_speedup"], [100.0, 50.0])
        self.assertEqual(by_config["moons"]["speedup"], 75.0)
        self.assertEqual(by_config["office-head"]["round_speedup"], [2.1])

    def test_a_round_missing_on_one_side_has_no_ratio(self):
        runs = [ours("office-head", 2000, 4000), torch("office-head", 4.0),
                ours("office-head", 2500, 4000)]
        p, result = self.run_compare(runs)
        self.assertEqual(p.returncode, 0, p.stderr)
        eager = [r for r in result["ratios"] if r["pytorch_execution"] == "eager"][0]
        self.assertEqual(eager["round_speedup"], [2.0])
        self.assertEqual(eager["round_dafuse_median_ms"], [2.0, 2.5])

    def test_compiled_executions_pair_with_the_fused_step_and_its_memory(self):
        # torch.compile fp32 against fused fp32; compile + bf16 and the recipe against fused
        # bf16 + clip; memory: dafuse's step buffers over PyTorch's step tensors.
        runs = [with_bf16(ours("digits-mlp", 500, 1000), 250, 1800),
                torch("digits-mlp", 2.0, eager_memory=4000,
                      compile={"median_ms": 1.5, "step_memory_bytes": 3000},
                      compile_bf16={"median_ms": 1.0, "step_memory_bytes": 3600},
                      recipe={"median_ms": 1.25, "step_memory_bytes": 3600}),
                with_bf16(ours("digits-mlp", 600, 1000), 250, 1800),
                torch("digits-mlp", 2.4, eager_memory=4000,
                      compile={"median_ms": 2.4, "step_memory_bytes": 3000},
                      compile_bf16={"median_ms": 1.5, "step_memory_bytes": 3600},
                      recipe={"median_ms": 1.25, "step_memory_bytes": 3600})]
        p, result = self.run_compare(runs)
        self.assertEqual(p.returncode, 0, p.stderr)
        by_exec = {r["pytorch_execution"]: r for r in result["ratios"]}
        self.assertEqual(by_exec["compile"]["dafuse_execution"], "fused fp32")
        self.assertEqual(by_exec["compile"]["round_speedup"], [3.0, 4.0])
        self.assertEqual(by_exec["compile"]["speedup"], 3.5)
        self.assertAlmostEqual(by_exec["compile"]["memory_ratio"], 900 / 3000)
        self.assertEqual(by_exec["compile-bf16"]["dafuse_execution"], "fused bf16 + clip")
        self.assertEqual(by_exec["compile-bf16"]["round_speedup"], [4.0, 6.0])
        self.assertAlmostEqual(by_exec["compile-bf16"]["memory_ratio"], 0.5)
        self.assertEqual(by_exec["recipe"]["round_speedup"], [5.0, 5.0])
        self.assertAlmostEqual(by_exec["eager"]["memory_ratio"], 900 / 4000)  # fused fp32
        # an execution PyTorch did not run has no ratio
        self.assertIsNone(by_exec["compile-max"]["speedup"])
        self.assertIsNone(by_exec["compile-max"]["memory_ratio"])
        self.assertIn("torch.compile fp32 vs fused fp32", p.stdout)

    def test_an_execution_of_round_one_only_pairs_within_round_one(self):
        # scripts/bench --late-rounds: compile-max ran in round 1 only; its ratio is round 1's,
        # the other executions keep both rounds.
        runs = [ours("demo", 500, 1000), torch("demo", 2.0, compile_max={"median_ms": 3.0}),
                ours("demo", 1000, 2000), torch("demo", 3.0)]
        p, result = self.run_compare(runs)
        self.assertEqual(p.returncode, 0, p.stderr)
        by_exec = {r["pytorch_execution"]: r for r in result["ratios"]}
        self.assertEqual(by_exec["compile-max"]["round_speedup"], [6.0, None])
        self.assertEqual(by_exec["compile-max"]["speedup"], 6.0)
        self.assertEqual(by_exec["eager"]["round_speedup"], [4.0, 3.0])

    def test_pytorch_table_over_its_own_eager(self):
        # The seed's table: speed-up over eager is the median of the rounds' own ratios; memory
        # over eager's; compile seconds of every round; the most graph breaks and recompiles.
        runs = [ours("office-head", 2000, 4000),
                torch("office-head", 5.0, eager_memory=8000,
                      compile={"median_ms": 4.0, "step_memory_bytes": 6000,
                               "compile_seconds": 30.0, "graph_breaks": 0, "recompiles": 0},
                      compile_max={"median_ms": None, "note": "n/a: RuntimeError: boom"}),
                ours("office-head", 2000, 4000),
                torch("office-head", 6.0, eager_memory=8000,
                      compile={"median_ms": 4.0, "step_memory_bytes": 6000,
                               "compile_seconds": 2.5, "graph_breaks": 2, "recompiles": 1}),
                ours("office-head", 2000, 4000),
                torch("office-head", 4.0, eager_memory=8000,
                      compile={"median_ms": 4.0, "step_memory_bytes": 6000,
                               "compile_seconds": 2.0, "graph_breaks": 0, "recompiles": 0})]
        p, result = self.run_compare(runs)
        self.assertEqual(p.returncode, 0, p.stderr)
        rows = {r["execution"]: r for r in result["pytorch"]["over_eager"]}
        self.assertEqual(rows["eager"]["speedup_over_eager"], 1.0)
        self.assertEqual(rows["eager"]["memory_over_eager"], 1.0)
        c = rows["compile"]
        self.assertEqual(c["round_speedup_over_eager"], [1.25, 1.5, 1.0])
        self.assertEqual(c["speedup_over_eager"], 1.25)
        self.assertEqual(c["median_ms"], 4.0)
        self.assertEqual(c["memory_over_eager"], 0.75)
        self.assertEqual(c["round_compile_seconds"], [30.0, 2.5, 2.0])
        self.assertEqual(c["graph_breaks"], 2)
        self.assertEqual(c["recompiles"], 1)
        self.assertIn("30.0, 2.5, 2.0", p.stdout)
        self.assertIsNone(rows["compile-max"]["median_ms"])
        self.assertIn("n/a: RuntimeError: boom", p.stdout)

    def test_skipped_pytorch_is_reported(self):
        p, result = self.run_compare([ours("moons", 10, 100), {"skipped": "torch not installed"}])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("PyTorch part skipped: torch not installed", p.stdout)
        self.assertEqual(result["ratios"], [])
        self.assertEqual(result["pytorch"], {"skipped": "torch not installed"})

    def test_a_file_of_neither_side_is_named(self):
        p, _ = self.run_compare([ours("moons", 10, 100), {"something": 1}])
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("1.json", p.stderr)
        self.assertIn("neither side's results", p.stderr)

    def test_no_dafuse_results_is_an_error(self):
        p, _ = self.run_compare([torch("moons", 1.0)])
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("no dafuse results", p.stderr)

    def test_an_option_without_its_file_is_an_error(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "a.json")
            with open(path, "w") as f:
                json.dump(ours("moons", 10, 100), f)
            p = subprocess.run([sys.executable, COMPARE, path, "--svg"], capture_output=True,
                               text=True)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("--svg needs a file name", p.stderr)


class SuiteTest(unittest.TestCase):
    """The lists of configurations agree on every side of scripts/bench, and its options are
    checked before anything is built or run."""

    def test_every_side_knows_every_configuration(self):
        script = re.search(r"^all_configs=\(([^)]*)\)", read("scripts", "bench"), re.M)
        self.assertIsNotNone(script, "scripts/bench has no all_configs=(...) line")
        in_script = script.group(1).split()
        cpp = re.search(r'std::string configs = "([^"]*)"', read("bench", "dann_bench.cpp"))
        self.assertIsNotNone(cpp, "dann_bench.cpp's default --configs not found")
        compare = load_module("compare", COMPARE)
        torch_side = load_module("dann_bench", os.path.join(ROOT, "bench", "pytorch",
                                                            "dann_bench.py"))
        self.assertIn("lenet", in_script)
        self.assertEqual(in_script, cpp.group(1).split(","))
        self.assertEqual(in_script, compare.CONFIGS)
        self.assertEqual(in_script, torch_side.CONFIG_NAMES)

    def run_bench(self, *args):
        return subprocess.run(["bash", os.path.join(ROOT, "scripts", "bench"), *args],
                              capture_output=True, text=True, timeout=60)

    def test_options_are_checked_first(self):
        for args, message in [
                (("--configs", "moons,nope"), "unknown configuration 'nope'"),
                (("--torch-executions", "eager,jit"), "unknown PyTorch execution 'jit'"),
                (("--late-rounds", "compile,fast"), "unknown PyTorch execution 'fast'"),
                (("--seconds", "soon"), "--seconds takes a number of seconds, not 'soon'"),
                (("--torch-warmup", "-1"), "--torch-warmup takes a count of steps, not '-1'"),
                (("--rounds", "0"), "--rounds takes a count of at least 1")]:
            p = self.run_bench(*args)
            self.assertEqual(p.returncode, 2, (args, p.stdout, p.stderr))
            self.assertIn(message, p.stdout, args)


if __name__ == "__main__":
    unittest.main()
