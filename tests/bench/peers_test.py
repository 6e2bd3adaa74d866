#!/usr/bin/env python3
"""bench/peers/peers.py without its libraries: the schedules it gives the peers are dafuse's
(Ganin's), the Amazon reviews' CSR files become the dense rows the libraries read, and bad
options are refused before anything is imported. The standard library, and numpy where it is
installed (Debian's python3 here has none: run this file with build/peers-venv/bin/python for
the CSR tests)."""
import importlib.util
import math
import os
import subprocess
import sys
import tempfile
import unittest

try:
    import numpy as np
except ImportError:  # the CSR tests are skipped
    np = None

PEERS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench", "peers",
                     "peers.py")
spec = importlib.util.spec_from_file_location("peers", PEERS)
peers = importlib.util.module_from_spec(spec)
spec.loader.exec_module(peers)


class PeersTest(unittest.TestCase):
    def test_ganin_schedules(self):
        # lambda = 2 / (1 + e^(-10 p)) - 1 and lr = 0.03 / (1 + 10 p)^0.75, as in
        # tools/reference_mnist_usps.py and dafuse's schedule::ganin.
        self.assertEqual(peers.ganin_lambda(0.0), 0.0)
        self.assertAlmostEqual(peers.ganin_lambda(0.5), 2 / (1 + math.exp(-5)) - 1)
        self.assertAlmostEqual(peers.ganin_lambda(1.0), 0.9999092, places=6)
        self.assertEqual(peers.ganin_lr(0.0), 0.03)
        self.assertAlmostEqual(peers.ganin_lr(1.0), 0.03 / 11 ** 0.75)
        # the Amazon set-up's: lambda_max = 0.1, lr0 = 0.01 (examples/02_amazon_reviews.cpp)
        self.assertAlmostEqual(peers.ganin_lambda(0.5, 0.1), 0.1 * (2 / (1 + math.exp(-5)) - 1))
        self.assertAlmostEqual(peers.ganin_lr(1.0, 0.01), 0.01 / 11 ** 0.75)

    def test_the_amazon_pairs_are_the_papers_twelve(self):
        self.assertEqual(len(peers.AMAZON_PAIRS), 12)
        self.assertIn("dvd-books", peers.AMAZON_PAIRS)
        self.assertNotIn("books-books", peers.AMAZON_PAIRS)
        self.assertTrue(set(peers.DEFAULT_AMAZON_PAIRS) <= set(peers.AMAZON_PAIRS))

    def write_csr(self, folder, prefix, indptr, indices, data, labels):
        for part, values, dtype in (("indptr", indptr, np.int32), ("indices", indices, np.int32),
                                    ("data", data, np.float32), ("labels", labels, np.int32)):
            np.save(os.path.join(folder, f"{prefix}_{part}.npy"), np.array(values, dtype=dtype))

    @unittest.skipIf(np is None, "numpy is not installed")
    def test_amazon_rows_are_densified_from_csr(self):
        with tempfile.TemporaryDirectory() as d:
            # row 0: counts 2 and 1 at columns 1 and 4; row 1 empty; row 2: 7 at column 0
            self.write_csr(d, "dvd_train", [0, 2, 2, 3], [1, 4, 0], [2, 1, 7], [1, 0, 1])
            x, y = peers.load_amazon_split(np, d, "dvd_train", n_features=5)
        self.assertEqual(x.dtype, np.float32)
        self.assertEqual(x.tolist(), [[0, 2, 0, 0, 1], [0, 0, 0, 0, 0], [7, 0, 0, 0, 0]])
        self.assertEqual(y.tolist(), [1, 0, 1])

    @unittest.skipIf(np is None, "numpy is not installed")
    def test_bad_amazon_files_are_named(self):
        with tempfile.TemporaryDirectory() as d:
            self.write_csr(d, "dvd_train", [0, 2, 4], [1, 4, 0], [2, 1, 7], [1, 0])
            with self.assertRaises(SystemExit) as e:
                peers.load_amazon_split(np, d, "dvd_train", n_features=5)
            self.assertIn("dvd_train: CSR arrays of inconsistent sizes", str(e.exception))
            self.write_csr(d, "books_test", [0, 1], [5], [1], [0])
            with self.assertRaises(SystemExit) as e:
                peers.load_amazon_split(np, d, "books_test", n_features=5)
            self.assertIn("books_test_indices.npy: a column outside 0..4", str(e.exception))
            with self.assertRaises(SystemExit) as e:
                peers.load_amazon_split(np, d, "kitchen_test", n_features=5)
            self.assertIn("kitchen_test_indptr.npy is missing", str(e.exception))

    def test_runs_at_once_fill_the_processors_without_oversubscribing(self):
        self.assertEqual(peers.plan_jobs(None, 1, 2), 2)
        self.assertEqual(peers.plan_jobs(None, 2, 2), 1)
        self.assertEqual(peers.plan_jobs(None, 3, 8), 2)
        self.assertEqual(peers.plan_jobs(None, 4, 2), 1)  # one run, even if it asks for more
        self.assertEqual(peers.plan_jobs(3, 2, 2), 3)  # asked for: as asked

    def test_a_methods_runs_are_summarised_in_seed_order(self):
        runs = [{"task": "dvd-books", "seed": 1, "accuracy": 70.0, "seconds": 2.0, "steps": 10,
                 "differs": ["x"]},
                {"task": "dvd-books", "seed": 2, "error": "RuntimeError: boom"},
                {"task": "dvd-books", "seed": 3, "accuracy": 74.0, "seconds": 4.0, "steps": 10,
                 "differs": ["x"]}]
        r = peers.summarise("skada-dann", runs)
        self.assertEqual(r["accuracies"], [70.0, 74.0])
        self.assertEqual(r["seeds"], 2)
        self.assertAlmostEqual(r["mean"], 72.0)
        self.assertAlmostEqual(r["std"], math.sqrt(8.0))
        self.assertAlmostEqual(r["seconds_per_run"], 3.0)
        self.assertEqual(r["error"], "RuntimeError: boom")
        failed = peers.summarise("skada-dann", runs[1:2])
        self.assertEqual(failed["seeds"], 0)
        self.assertNotIn("mean", failed)

    def run_peers(self, *args):
        return subprocess.run([sys.executable, PEERS, *args], capture_output=True, text=True)

    def test_an_unknown_method_is_named(self):
        p = self.run_peers("--methods", "skada-dann,no-such-method")
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("unknown method no-such-method", p.stderr)
        self.assertIn("skada-dann", p.stderr)  # the choices are listed

    def test_an_unknown_pair_is_named(self):
        p = self.run_peers("--task", "amazon", "--pairs", "dvd-books,dvd-dvd")
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("unknown pair dvd-dvd", p.stderr)

    def test_counts_must_be_positive(self):
        p = self.run_peers("--seeds", "0")
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("--seeds and --steps take counts of at least 1", p.stderr)
        p = self.run_peers("--jobs", "0")
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("--threads and --jobs take counts of at least 1", p.stderr)


if __name__ == "__main__":
    unittest.main()
