#!/usr/bin/env bash
# Measures dcr compare's false-alarm and detection rates (BENCHMARKS.md):
# PAIRS pairs of `dcr bench` runs, BASE with the common arguments plus
# --base-args, NEW with the common arguments plus --new-args, run back to
# back (the order alternates pair by pair, so slow drift of the machine's
# load favours neither side), each pair compared with `dcr compare` and its
# latency_s verdict and overall exit status tallied.
#
#   scripts/regress-pairs.sh DCR OUTDIR PAIRS [COMPARE_ARGS...] \
#       -- BENCH_ARGS... [--base-args ARGS...] [--new-args ARGS...]
#
# Example (false alarms, identical runs; detection, a 20% slower link):
#   scripts/regress-pairs.sh build/dcr /tmp/fa 20 -- --refits 20
#   scripts/regress-pairs.sh build/dcr /tmp/det 20 --match-ignore cross_gbps -- \
#       --refits 20 --base-args --link-gbps 0.05 --new-args --link-gbps 0.04
# Prints one line per pair and a tally; the files stay in OUTDIR.
set -euo pipefail

if [ $# -lt 4 ]; then
    sed -n '2,17p' "$0" >&2
    exit 2
fi
dcr=$1 out=$2 pairs=$3
shift 3
case $pairs in '' | *[!0-9]*) echo "regress-pairs: PAIRS must be a number" >&2; exit 2 ;; esac
compare_args=() common=() base_args=() new_args=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do compare_args+=("$1"); shift; done
[ $# -gt 0 ] && shift
dest=common
for a in "$@"; do
    case $a in
    --base-args) dest=base_args ;;
    --new-args) dest=new_args ;;
    *)
        case $dest in
        common) common+=("$a") ;;
        base_args) base_args+=("$a") ;;
        new_args) new_args+=("$a") ;;
        esac
        ;;
    esac
done
mkdir -p "$out"

run_side() { # side index
    local side=$1 file=$out/$1-$2.h5
    shift 2
    rm -f "$file"
    "$dcr" bench "${common[@]}" "$@" --out "$file" >"$out/$side-$pair.log" 2>&1
}

regressed=0 inconclusive=0 same=0 other=0 status_hist=""
for pair in $(seq 1 "$pairs"); do
    if [ $((pair % 2)) -eq 1 ]; then
        run_side base "$pair" "${base_args[@]}"
        run_side new "$pair" "${new_args[@]}"
    else
        run_side new "$pair" "${new_args[@]}"
        run_side base "$pair" "${base_args[@]}"
    fi
    set +e
    "$dcr" compare "$out/base-$pair.h5" "$out/new-$pair.h5" --json "${compare_args[@]}" \
        >"$out/compare-$pair.json"
    rc=$?
    set -e
    line=$(python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))
m = [x for p in j["matched"] for x in p["metrics"] if x["name"] == "latency_s"]
if not m:
    print("unmatched - - - -")
else:
    x = m[0]
    iv = x["interval"] or [float("nan")] * 2
    print(x["verdict"], "%.3f" % x["ratio"], "[%.3f, %.3f]" % tuple(iv),
          x["base"]["median"], x["new"]["median"])
' "$out/compare-$pair.json")
    echo "pair $pair: exit $rc latency_s $line"
    case $line in
    regressed*) regressed=$((regressed + 1)) ;;
    inconclusive*) inconclusive=$((inconclusive + 1)) ;;
    same* | improved*) same=$((same + 1)) ;;
    *) other=$((other + 1)) ;;
    esac
    status_hist="$status_hist $rc"
done
echo "pairs $pairs: latency_s regressed $regressed, inconclusive $inconclusive, same or improved $same, other $other; exit statuses:$status_hist"
