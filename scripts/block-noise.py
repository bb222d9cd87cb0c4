#!/usr/bin/env python3
"""Where the noise of a paired comparison comes from (BASE.h5 NEW.h5 written
by scripts/ab-bench.sh): for each block pair, the log ratio of the blocks'
latency_s medians, and the part of it that the refits inside the blocks
explain (the standard error of a block's log median, by a bootstrap of its
refits). When the spread of the log ratios between blocks is far above the
within-block part, more refits per block (dcr bench --refits) cannot narrow
the interval; only more blocks can.

    scripts/block-noise.py BASE.h5 NEW.h5 [COLUMN]

Needs h5py and numpy (Debian: python3-h5py)."""
import sys

import h5py
import numpy as np


def blocks(path, column):
    with h5py.File(path, "r") as f:
        return [np.asarray(f["runs"][r]["refits"][column][:]) for r in sorted(f["runs"])]


def log_median_se(v, rng, iters=2000):
    meds = np.median(rng.choice(v, size=(iters, len(v)), replace=True), axis=1)
    return float(np.std(np.log(meds)))


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    column = sys.argv[3] if len(sys.argv) == 4 else "latency_s"
    a, b = blocks(sys.argv[1], column), blocks(sys.argv[2], column)
    if len(a) != len(b) or len(a) < 2:
        sys.exit("block-noise: the files need the same number (>= 2) of blocks")
    rng = np.random.default_rng(29)
    d = np.array([np.log(np.median(y) / np.median(x)) for x, y in zip(a, b)])
    within = np.sqrt(np.mean([log_median_se(x, rng) ** 2 + log_median_se(y, rng) ** 2
                              for x, y in zip(a, b)]))
    print("blocks %d, refits per block %d" % (len(a), len(a[0])))
    print("block ratios: " + " ".join("%.3f" % r for r in np.exp(d)))
    print("sd of log block ratio between blocks %.3f; within blocks (refits) %.3f" %
          (np.std(d, ddof=1), within))


if __name__ == "__main__":
    main()
