#!/usr/bin/env python3
"""Concatenates dcr results files (schema version 1) into one, runs in the
order given (file by file, each file's runs in order), renumbered
/runs/000000, 000001, ...: to judge many interleaved jobs of
scripts/ab-bench.sh as one long paired comparison (dcr compare --paired).

    scripts/merge-results.py OUT.h5 IN.h5...

Needs h5py (Debian: python3-h5py)."""
import sys

import h5py


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    with h5py.File(sys.argv[1], "w") as out:
        runs = out.create_group("runs")
        n = 0
        for path in sys.argv[2:]:
            with h5py.File(path, "r") as f:
                version = f.attrs["dcr_results_version"]
                if "dcr_results_version" not in out.attrs:
                    out.attrs["dcr_results_version"] = version
                elif out.attrs["dcr_results_version"] != version:
                    sys.exit("merge-results: %s is of another schema version" % path)
                for name in sorted(f["runs"]):
                    f.copy(f["runs"][name], runs, "%06d" % n)
                    n += 1
    print("%s: %d runs" % (sys.argv[1], n))


if __name__ == "__main__":
    main()
