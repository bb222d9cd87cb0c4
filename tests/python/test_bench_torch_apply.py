# ctest-labels: python torch
"""examples/bench_torch_apply.py at a small size: the torch receiver and the
C receiver (dcr_bench_c_apply, built beside libdcr) apply the same payloads
to the same checkpoint, and both must end bit for bit equal (the bench
checks the torch model against a dense load_weights after every repeat, and
the C receiver's parameters against the torch model's by dcr_hash64, and
each dense load from the checkpoint's safetensors and .pt files against the
in-memory one)."""

import json
import os
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.join(HERE, "..", "..", "examples", "bench_torch_apply.py")


class BenchTest(unittest.TestCase):
    def test_torch_and_c_receivers_agree(self):
        c_bench = os.path.join(os.path.dirname(os.environ["DCR_LIBRARY"]), "dcr_bench_c_apply")
        self.assertTrue(os.path.exists(c_bench), c_bench)
        out = subprocess.run([sys.executable, BENCH, "--hidden", "256", "--layers", "2", "--vocab", "2048",
                              "--rate", "0.05", "--repeats", "2", "--rounds", "1", "--c-bench", c_bench],
                             check=True, capture_output=True, text=True).stdout
        d = json.loads(out)
        self.assertGreater(d["records"], 0)
        self.assertEqual(d["paths"]["fallback"], 0)
        self.assertTrue(d["c_receiver"]["parameters_equal"])
        for k in ("dense_load_weights_s", "apply_s", "apply_only_s", "prewarm_s", "dense_safetensors_file_s",
                  "dense_pt_file_s"):
            self.assertGreater(d[k], 0, k)
        self.assertGreater(d["c_receiver"]["dense_file_s"], 0)

    def test_bad_arguments_are_refused(self):
        r = subprocess.run([sys.executable, BENCH, "--hidden", "100"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 2)
        self.assertIn("--hidden a multiple of 256", r.stderr)


if __name__ == "__main__":
    unittest.main()
