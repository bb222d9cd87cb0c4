# ctest-labels: python torch
"""examples/torch_receiver.py, README's PyTorch example: it exits 0 only when
the receiver's model equals a dense load_weights of the new version."""

import os
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))


class ExamplesTest(unittest.TestCase):
    def test_torch_receiver(self):
        r = subprocess.run([sys.executable, os.path.join(HERE, "..", "..", "examples", "torch_receiver.py")],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("bit for bit equal to a dense load_weights: True", r.stdout)


if __name__ == "__main__":
    unittest.main()
