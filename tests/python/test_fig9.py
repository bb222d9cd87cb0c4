# ctest-labels: python torch slow
"""Figure 9 on real torch (examples/fig9_rl.py), shortened: a policy-gradient
loop refit by dcr, with a receiver failing mid-apply every 5 steps and
repaired by the overwrite retry, against the same loop refit by dense
reloads. Every step's reward and KL must be identical bit for bit, and the
policy must actually learn (so identical curves are not two flat lines)."""

import csv
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "..", "examples", "fig9_rl.py")


class Fig9Test(unittest.TestCase):
    def test_curves_identical(self):
        with tempfile.TemporaryDirectory(prefix="lib-fig9-") as out:
            for family in ("llama", "moe"):
                r = subprocess.run([sys.executable, SCRIPT, "--out", out, "--family", family, "--steps", "12"],
                                   capture_output=True, text=True)
                self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
                self.assertIn("2 injected receiver failures", r.stdout)
                with open(os.path.join(out, "fig9.csv")) as f:
                    rows = list(csv.DictReader(f))
                self.assertEqual(len(rows), 12)
                for row in rows:
                    self.assertEqual(row["reward_dcr"], row["reward_dense"])
                    self.assertEqual(row["kl_dcr"], row["kl_dense"])
                self.assertEqual([int(r["step"]) for r in rows if r["receiver_failed"] == "1"], [5, 10])
                if shutil.which("gnuplot"):  # the side-by-side plot of both curves
                    with open(os.path.join(out, "fig9.svg")) as f:
                        svg = f.read()
                    for title in ("reward", "KL", "dense reload", "receiver killed mid-apply"):
                        self.assertIn(title, svg)
                    os.remove(os.path.join(out, "fig9.svg"))
                self.assertGreater(float(rows[-1]["reward_dcr"]), float(rows[0]["reward_dcr"]))
                self.assertGreater(float(rows[-1]["kl_dcr"]), 0.0)

    def test_bad_arguments(self):
        r = subprocess.run([sys.executable, SCRIPT, "--out", "/tmp/lib-fig9-x", "--steps", "0"],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 2)
        self.assertIn("--steps in [1, 100000]", r.stderr)
        r = subprocess.run([sys.executable, SCRIPT, "--out", "bad\nname"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 2)
        self.assertIn("control characters", r.stderr)


if __name__ == "__main__":
    unittest.main()
