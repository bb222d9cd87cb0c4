#!/usr/bin/env python3
"""A Python owner's change detection and encode: libdcr's detector (dcr.diff,
the constructor's own) against the numpy bit compare the package used
before, interleaved in one run.

    PYTHONPATH=python DCR_LIBRARY=build/libdcr.so python3 examples/bench_owner_encode.py \\
        [--hidden 1024] [--layers 4] [--vocab 32000] [--rate 0.01] [--repeats 5]

Builds the llama-style test model's BF16 checkpoint (tests/python/
vllm_models.py, as examples/bench_torch_apply.py does), changes `rate` of
every tensor's elements, then --repeats times, alternating: detection alone
over every tensor (numpy: flatnonzero of a word compare and the XOR of the
changed words; libdcr: dcr.diff), then dcr.owner.encode with each detector.
Both must find the same records and write the same payload bytes. Prints
one JSON object; every time is the best of the repeats.
"""

import argparse
import json
import os
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "python"))
import vllm_models as vm  # noqa: E402

import dcr  # noqa: E402
from dcr import owner  # noqa: E402


def numpy_changed_items(old, new, xor_ok=lambda name: True):
    """The numpy detection owner.py used before libdcr's (the reference)."""
    for name, t_new in new.items():
        w_new, dtype = owner.words(t_new)
        w_old, _ = owner.words(old[name])
        idx = np.flatnonzero(w_old != w_new)
        if idx.size == 0:
            continue
        if xor_ok(name):
            yield name, tuple(t_new.shape), dtype, dcr.XOR, idx, w_old[idx] ^ w_new[idx]
        else:
            yield name, tuple(t_new.shape), dtype, dcr.OVERWRITE, idx, w_new[idx]


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def records(items):
    """Records of a stream of items, each dropped once counted (as encode does)."""
    return sum(it[4].size for it in items)


def encode_with(detector, c0, c1):
    saved = owner.changed_items
    owner.changed_items = detector
    try:
        return owner.encode(c0, c1, tau=1, owner=0)
    finally:
        owner.changed_items = saved


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--rate", type=float, default=0.01)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    if a.hidden % 256 or a.layers < 1 or a.vocab < 2 or a.vocab % 64 or not 0 < a.rate <= 1 or a.repeats < 1:
        ap.error("--hidden a multiple of 256, --layers >= 1, --vocab a multiple of 64, 0 < --rate <= 1, "
                 "--repeats >= 1")
    vm.V, vm.H, vm.KV, vm.I, vm.L = a.vocab, a.hidden, a.hidden // 4, (a.hidden * 11) // 4, a.layers
    torch.manual_seed(a.seed)
    c0 = vm.checkpoint_of(vm.init_masters("llama", a.seed))
    gen = torch.Generator().manual_seed(a.seed + 1)
    c1 = {n: torch.where(torch.rand(t.shape, generator=gen) < a.rate, (t.float() * 1.01 + 1e-3).to(t.dtype), t)
          for n, t in c0.items()}
    times = {"numpy_detect": [], "libdcr_detect": [], "numpy_encode": [], "libdcr_encode": []}
    found = {}
    for _ in range(a.repeats):
        t, found["numpy"] = timed(lambda: records(numpy_changed_items(c0, c1)))
        times["numpy_detect"].append(t)
        t, found["libdcr"] = timed(lambda: records(owner.changed_items(c0, c1)))
        times["libdcr_detect"].append(t)
        t, p_numpy = timed(lambda: encode_with(numpy_changed_items, c0, c1))
        times["numpy_encode"].append(t)
        t, p_libdcr = timed(lambda: owner.encode(c0, c1, tau=1, owner=0))
        times["libdcr_encode"].append(t)
        if found["numpy"] != found["libdcr"] or p_numpy != p_libdcr:
            sys.exit("bench_owner_encode: the detectors disagree (%d against %d records)"
                     % (found["numpy"], found["libdcr"]))
    best = {k: min(v) for k, v in times.items()}
    out = {
        "elements": sum(t.numel() for t in c0.values()), "tensors": len(c0), "records": found["libdcr"],
        "payload_bytes": sum(len(p) for p in p_libdcr), "rate": a.rate, "repeats": a.repeats,
        "detect_kernel": dcr.detect_kernel(),
        **{k + "_s": round(v, 5) for k, v in best.items()},
        "detect_libdcr_over_numpy": round(best["libdcr_detect"] / best["numpy_detect"], 3),
        "encode_libdcr_over_numpy": round(best["libdcr_encode"] / best["numpy_encode"], 3),
        "torch": torch.__version__, "loadavg": open("/proc/loadavg").read().split()[:3],
    }
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
