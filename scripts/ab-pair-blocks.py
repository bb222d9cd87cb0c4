#!/usr/bin/env python3
"""Copies a results file written by `dcr bench --ab` before block ids were
pair ids (commit 17f72f0 wrote the ABBA block k // 2 for the k-th refit of
each side) with the block column of every A/B run rewritten to the pair id
k, as `dcr bench --ab` writes it now: the same refits, judged pair by pair
by `dcr compare OUT.h5`. Other runs and every other dataset are copied
unchanged.

    scripts/ab-pair-blocks.py IN.h5 OUT.h5

Needs h5py (Debian: python3-h5py)."""
import json
import shutil
import sys

import h5py


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    src, dst = sys.argv[1], sys.argv[2]
    if src == dst:
        sys.exit("ab-pair-blocks: OUT.h5 must differ from IN.h5")
    shutil.copyfile(src, dst)
    rewritten = 0
    with h5py.File(dst, "r+") as f:
        for name in sorted(f["runs"]):
            run = f["runs"][name]
            summary = json.loads(run.attrs["summary"])
            if "ab_side" not in summary or "block" not in run["refits"]:
                continue
            block = run["refits"]["block"]
            block[...] = [float(k) for k in range(block.shape[0])]
            rewritten += 1
    if rewritten == 0:
        sys.exit("ab-pair-blocks: %s holds no A/B run" % src)


if __name__ == "__main__":
    main()
