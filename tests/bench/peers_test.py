#!/usr/bin/env python3
"""bench/peers/peers.py without its libraries: the schedules it gives the peers are dafuse's
(Ganin's), and bad options are refused before anything is imported. Only the standard library."""
import importlib.util
import math
import os
import subprocess
import sys
import unittest

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

    def run_peers(self, *args):
        return subprocess.run([sys.executable, PEERS, *args], capture_output=True, text=True)

    def test_an_unknown_method_is_named(self):
        p = self.run_peers("--methods", "skada-dann,no-such-method")
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("unknown method no-such-method", p.stderr)
        self.assertIn("skada-dann", p.stderr)  # the choices are listed

    def test_counts_must_be_positive(self):
        p = self.run_peers("--seeds", "0")
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("--seeds and --steps take counts of at least 1", p.stderr)


if __name__ == "__main__":
    unittest.main()
