# ctest-labels: python torch
"""Python owners detect changes with libdcr's detector (dcr.diff over
dcr_construct_diff), checked against a numpy bit-compare oracle on torch
tensors of every canonical float dtype, with -0.0 against +0.0, NaN payloads
and equal NaNs planted, across the calls a tensor larger than one call's
room takes; and the encoded payloads, applied, give the new bits."""

import json
import os
import subprocess
import sys
import unittest

import numpy as np
import torch

import dcr
from dcr import owner

_SIGNED = {torch.bfloat16: torch.int16, torch.float16: torch.int16, torch.float32: torch.int32}


def bits(t):
    """The oracle's view: a tensor's stored bits as unsigned numpy words."""
    w = t.contiguous().reshape(-1).view(_SIGNED[t.dtype]).numpy()
    return w.view(np.uint16 if w.itemsize == 2 else np.uint32)


def planted(dtype, n, seed):
    """Two versions: about 2% of elements changed, plus -0.0 -> +0.0, one
    NaN payload -> another, and a NaN left equal (no change), in the
    tensor's own dtype."""
    g = torch.Generator().manual_seed(seed)
    old = torch.randn(n, generator=g).to(dtype)
    new = torch.where(torch.rand(n, generator=g) < 0.02, (old.float() * 1.5 + 0.25).to(dtype), old)
    wo, wn = bits(old), bits(new)  # views: writes land in the tensors
    if wo.itemsize == 2:
        nan_a, nan_b = (0x7FC1, 0x7FC2) if dtype == torch.bfloat16 else (0x7E01, 0x7E02)
        wo[:4], wn[:4] = [0x8000, nan_a, nan_a, 7], [0x0000, nan_b, nan_a, 7]
    else:
        wo[:4], wn[:4] = [0x80000000, 0x7FC00001, 0x7FC00001, 7], [0, 0x7FC00002, 0x7FC00001, 7]
    return old, new


class DiffTest(unittest.TestCase):
    def check(self, dtype, n):
        old, new = planted(dtype, n, n)
        a, b = bits(old), bits(new)
        want = np.flatnonzero(a != b)
        self.assertIn(0, want)  # -0.0 -> +0.0
        self.assertIn(1, want)  # NaN payload
        self.assertNotIn(2, want)  # equal NaNs
        name = {torch.bfloat16: "bf16", torch.float16: "fp16", torch.float32: "fp32"}[dtype]
        for enc, expect in ((dcr.XOR, a[want] ^ b[want]), (dcr.OVERWRITE, b[want])):
            idx, vals = dcr.diff(a, b, name, enc)
            np.testing.assert_array_equal(idx, want)
            np.testing.assert_array_equal(vals.view(a.dtype), expect)

    def test_every_dtype_matches_numpy_oracle(self):
        for dtype in (torch.bfloat16, torch.float16, torch.float32):
            self.check(dtype, 5000)

    def test_tensor_larger_than_one_calls_room(self):
        saved = dcr._DIFF_ROOM
        try:
            dcr._DIFF_ROOM = 1000  # many calls, shortened sub-runs, results joined
            self.check(torch.bfloat16, 70001)
            self.check(torch.float32, 3 * (1 << 20) + 17)
        finally:
            dcr._DIFF_ROOM = saved
        self.check(torch.float16, 3 * (1 << 20) + 17)  # whole sub-runs, one call

    def test_unequal_sizes_are_refused(self):
        with self.assertRaises(ValueError):
            dcr.diff(np.zeros(4, np.uint16), np.zeros(5, np.uint16), "bf16", dcr.XOR)

    def test_owner_payloads_apply_to_the_new_bits(self):
        tensors = [planted(d, 4096 + i, i) for i, d in enumerate((torch.bfloat16, torch.float16, torch.float32))]
        old = {"t%d" % i: o for i, (o, _) in enumerate(tensors)}
        new = {"t%d" % i: n for i, (_, n) in enumerate(tensors)}
        new["same"] = old["same"] = torch.ones(10, dtype=torch.bfloat16)
        for xor_ok in (lambda n: True, lambda n: n != "t1"):
            items = list(owner.changed_items(old, new, xor_ok))
            self.assertEqual(sorted(i[0] for i in items), ["t0", "t1", "t2"])  # unchanged: no item
            for name, _, _, enc, _, _ in items:
                self.assertEqual(enc, dcr.XOR if xor_ok(name) else dcr.OVERWRITE)
            for buf in owner.encode(old, new, tau=3, owner=0, xor_ok=xor_ok, bucket_bytes=512):
                with dcr.Payload.decode(buf) as p:
                    for item in p.items():
                        got = bits(old[item.name]).copy()
                        item.apply(got)
                        np.testing.assert_array_equal(got, bits(new[item.name]))


class BenchTest(unittest.TestCase):
    def test_bench_detectors_agree(self):
        """examples/bench_owner_encode.py at a small size: it exits non-zero
        when numpy's and libdcr's detection disagree or their payloads differ."""
        bench = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples",
                             "bench_owner_encode.py")
        out = subprocess.run([sys.executable, bench, "--hidden", "256", "--layers", "1", "--vocab", "1024",
                              "--repeats", "1"], check=True, capture_output=True, text=True).stdout
        d = json.loads(out)
        self.assertGreater(d["records"], 0)
        self.assertGreater(d["libdcr_detect_s"], 0)
        r = subprocess.run([sys.executable, bench, "--rate", "2"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 2)
        self.assertIn("0 < --rate <= 1", r.stderr)


if __name__ == "__main__":
    unittest.main()
