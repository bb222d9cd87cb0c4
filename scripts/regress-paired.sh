#!/usr/bin/env bash
# Measures `dcr compare --paired`'s false-alarm and detection rates
# (BENCHMARKS.md, regression tracking). Each of PAIRS experiments is one
# interleaved job of scripts/ab-bench.sh with three sides: A (the common
# bench arguments), B (the same plus --new-args: the slower
# configuration) and C (A again); rounds run A B C and C B A in turn. Then
#   dcr compare --paired A.h5 C.h5   (identical sides: a false alarm if REGRESSED)
#   dcr compare --paired A.h5 B.h5   (the slowdown: detected if REGRESSED)
# with COMPARE_ARGS on both (e.g. --match-ignore on the keys B differs in),
# and the latency_s verdicts and exit statuses are tallied.
#
#   scripts/regress-paired.sh DCR OUTDIR PAIRS [--rounds R] [--block K] [--concurrent] [COMPARE_ARGS...] \
#       -- BENCH_ARGS... --new-args ARGS...
#   scripts/regress-paired.sh --tally-only DCR OUTDIR [COMPARE_ARGS...]
#
# --tally-only compares and tallies the experiments already in OUTDIR
# (OUTDIR/e1, e2, ...; an unfinished one is skipped). Defaults: 6 rounds of
# 10 refits, sides one after the other (--concurrent: at the same time, see
# scripts/ab-bench.sh). Example (10 layers against 8, compared with --match-ignore layers):
#   scripts/regress-paired.sh build/dcr /tmp/rp 20 --concurrent --match-ignore layers -- \
#       --no-verify --new-args --layers 10
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

usage() {
    sed -n '2,22p' "$0" >&2
    exit 2
}

tally_only=0
if [ "${1:-}" = --tally-only ]; then
    tally_only=1
    shift
    [ $# -ge 2 ] || usage
    dcr=$1 out=$2 pairs=0
    shift 2
else
    [ $# -ge 4 ] || usage
    dcr=$1 out=$2 pairs=$3
    shift 3
    case $pairs in '' | *[!0-9]*) echo "regress-paired: PAIRS must be a number" >&2; exit 2 ;; esac
fi
rounds=6 block=10 concurrent=()
compare_args=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
    case $1 in
    --rounds) rounds=${2:-}; shift 2 ;;
    --block) block=${2:-}; shift 2 ;;
    --concurrent) concurrent=(--concurrent); shift ;;
    *) compare_args+=("$1"); shift ;;
    esac
done
[ $# -gt 0 ] && shift
common=() new_args=() dest=common
for a in "$@"; do
    case $a in
    --new-args) dest=new ;;
    *) if [ $dest = common ]; then common+=("$a"); else new_args+=("$a"); fi ;;
    esac
done
[ -x "$dcr" ] || { echo "regress-paired: $dcr is not an executable" >&2; exit 2; }
mkdir -p "$out"

# The latency_s verdict, ratio and interval of one comparison, and its exit status.
judge() { # BASE NEW JSON_OUT
    local rc=0
    "$dcr" compare --paired "$1" "$2" --json ${compare_args[@]+"${compare_args[@]}"} >"$3" || rc=$?
    python3 - "$3" "$rc" <<'PY'
import json, sys
try:
    j = json.load(open(sys.argv[1]))
    m = [x for p in j["matched"] for x in p["metrics"] if x["name"] == "latency_s"][0]
    iv = m["interval"] or [float("nan")] * 2
    print(m["verdict"], "%.3f" % m["ratio"], "[%.3f, %.3f]" % tuple(iv), "exit", sys.argv[2])
except (ValueError, IndexError, KeyError):
    print("error - - - exit", sys.argv[2])
PY
}

if [ $tally_only = 0 ]; then
    for i in $(seq 1 "$pairs"); do
        echo "experiment $i: $(date -u +%T), load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
        "$here/ab-bench.sh" --rounds "$rounds" --block "$block" ${concurrent[@]+"${concurrent[@]}"} \
            --side-c "$dcr" "$out/e$i" \
            "$dcr" "$dcr" ${common[@]+"${common[@]}"} --b-args ${new_args[@]+"${new_args[@]}"} \
            >"$out/e$i.log" 2>&1
    done
fi

fa=0 fa_n=0 det=0 det_n=0
for d in $(ls -d "$out"/e* 2>/dev/null | grep -E '/e[0-9]+$' | sort -t e -k2 -n); do
    done_sides=0 # an experiment still running (or cut short) is left out
    for s in A B C; do
        last=$(ls "$d/$s"-*.log 2>/dev/null | sort -V | tail -1)
        [ -n "$last" ] && grep -q "results appended" "$last" && done_sides=$((done_sides + 1))
    done
    [ $done_sides = 3 ] && [ "$(ls "$d"/*-*.log | wc -l)" = $((3 * $(ls "$d"/A-*.log | wc -l))) ] || continue
    same=$(judge "$d/A.h5" "$d/C.h5" "$d/compare-AC.json")
    slow=$(judge "$d/A.h5" "$d/B.h5" "$d/compare-AB.json")
    echo "$(basename "$d"): identical (A/C) $same; slower (A/B) $slow"
    fa_n=$((fa_n + 1)) det_n=$((det_n + 1))
    case $same in regressed*) fa=$((fa + 1)) ;; esac
    case $slow in regressed*) det=$((det + 1)) ;; esac
done
echo "experiments $fa_n: false alarms (identical sides REGRESSED) $fa of $fa_n; slowdown called REGRESSED $det of $det_n"
