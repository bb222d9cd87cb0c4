#!/usr/bin/env bash
# Measures the false-alarm and detection rates of interleaved A/B runs
# (dcr bench --ab, compared with `dcr compare AB.h5`; BENCHMARKS.md,
# regression tracking). Each of PAIRS rounds runs two jobs, one after the
# other so that both see the same stretch of load:
#   A/A: dcr bench AA_ARGS --ab same --refits N --out OUTDIR/aa-I.h5
#        (identical sides: a regression verdict is a false alarm)
#   A/B: dcr bench AB_ARGS --refits N --out OUTDIR/ab-I.h5
#        (AB_ARGS must hold --ab KEY=VALUE: the slowdown; REGRESSED is a detection)
# then `dcr compare FILE --json --threshold PCT` on each; the verdicts on
# latency_s, the ratios with their intervals, the exit statuses and the
# load average at each job's end are tallied.
#
#   scripts/regress-ab.sh DCR OUTDIR PAIRS [--refits N] [--threshold PCT] \
#       [--aa-args "ARGS"] [--ab-args "ARGS"]
#   scripts/regress-ab.sh --tally-only OUTDIR
#
# Defaults: 20 refits a side (the bench's default: 20 pairs, one block each),
# threshold 10, A/A on the default bench, A/B `--link-gbps 0.0122 --ab
# link_gbps=0.01` (transport bound: 1.2x slower here, BENCHMARKS.md).
# ARGS are split on blanks into words, never evaluated. --tally-only
# re-tallies the compare outputs already in OUTDIR.
set -euo pipefail

usage() {
    sed -n '2,22p' "$0" >&2
    exit 2
}

tally() {
    local out=$1
    python3 - "$out" <<'PY'
import glob, json, os, re, sys
out = sys.argv[1]
def rows(kind):
    res = []
    for path in sorted(glob.glob(os.path.join(out, kind + "-*.json")),
                       key=lambda p: int(re.findall(r"-(\d+)\.json$", p)[0])):
        try:
            j = json.load(open(path))
        except (ValueError, OSError):
            continue
        rc = open(path[:-5] + ".rc").read().strip() if os.path.exists(path[:-5] + ".rc") else "?"
        load = open(path[:-5] + ".load").read().split()[:3] if os.path.exists(path[:-5] + ".load") else ["?"]
        m = next((m for m in j["matched"][0]["metrics"] if m["name"] == "latency_s"), None) if j.get("matched") else None
        res.append((os.path.basename(path)[:-5], m, rc, " ".join(load)))
    return res
for kind, want in (("aa", "no regression"), ("ab", "regression")):
    r = rows(kind)
    print(f"{kind.upper()[0]}/{kind.upper()[1]} ({want} expected): {len(r)} pairs")
    reg = 0
    for name, m, rc, load in r:
        if m is None:
            print(f"  {name}: no latency_s comparison (exit {rc})")
            continue
        iv = m.get("interval") or [None, None]
        ivs = "[%.3f, %.3f]" % tuple(iv) if None not in iv else "-"
        reg += m["verdict"] == "regressed"
        print(f"  {name}: latency_s {m['verdict']:<12} {m['ratio']:.3f} {ivs:<16} blocks {m.get('blocks')}  exit {rc}  load {load}")
    print(f"  regression verdicts on latency_s: {reg} of {len(r)}")
PY
}

if [ "${1:-}" = --tally-only ]; then
    [ $# -eq 2 ] || usage
    tally "$2"
    exit 0
fi
[ $# -ge 3 ] || usage
dcr=$1 out=$2 pairs=$3
shift 3
refits=20 threshold=10 aa_args="" ab_args="--link-gbps 0.0122 --ab link_gbps=0.01"
while [ $# -gt 0 ]; do
    case $1 in
    --refits) refits=${2:?}; shift 2 ;;
    --threshold) threshold=${2:?}; shift 2 ;;
    --aa-args) aa_args=${2?}; shift 2 ;;
    --ab-args) ab_args=${2:?}; shift 2 ;;
    *) usage ;;
    esac
done
[[ $pairs =~ ^[1-9][0-9]*$ && $refits =~ ^[1-9][0-9]*$ ]] || {
    echo "regress-ab.sh: PAIRS and --refits must be positive integers" >&2
    exit 2
}
[[ " $ab_args " == *" --ab "* ]] || {
    echo "regress-ab.sh: --ab-args must hold --ab KEY=VALUE (the slowdown)" >&2
    exit 2
}
read -ra aa_words <<<"$aa_args"
read -ra ab_words <<<"$ab_args"
mkdir -p "$out"

# One job: bench (its log kept), compare (JSON, exit status), load average.
job() {
    local name=$1
    shift
    rm -f "$out/$name.h5"
    "$dcr" bench "$@" --refits "$refits" --out "$out/$name.h5" >"$out/$name.bench.log" 2>&1 || {
        echo "regress-ab.sh: $name: dcr bench failed (see $out/$name.bench.log)" >&2
        return 0
    }
    cut -d' ' -f1-3 /proc/loadavg >"$out/$name.load"
    local rc=0
    "$dcr" compare "$out/$name.h5" --json --threshold "$threshold" >"$out/$name.json" || rc=$?
    echo "$rc" >"$out/$name.rc"
    echo "$(date -u +%H:%M:%S) $name: exit $rc, load $(cat "$out/$name.load")"
}

for i in $(seq 1 "$pairs"); do
    job "aa-$i" "${aa_words[@]}" --ab same
    job "ab-$i" "${ab_words[@]}"
done
tally "$out"
