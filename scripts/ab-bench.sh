#!/usr/bin/env bash
# Prefer `dcr bench --ab-binary OTHER_DCR --out AB.h5` (two builds) or
# `dcr bench --ab KEY=VALUE --out AB.h5` (two configurations): they
# alternate the sides refit by refit (ABBA pairs) in one job and write one
# file that `dcr compare AB.h5` judges pair by pair (docs/commands/bench.md).
# This script stays for what they cannot do: a side A build older than
# --ab-binary, a third side (--side-c), or blocks run side by side
# (--concurrent).
#
# Interleaved A/B measurement: alternates two dcr builds (or two
# configurations of one build) block by block in one job, so that both
# sides see the same neighbours on a shared machine, and appends side A's
# runs to A.h5 and side B's to B.h5 for `dcr compare A.h5 B.h5`.
#
#   scripts/ab-bench.sh [--rounds R] [--block K] [--side-c DCR_C] [--concurrent] OUTDIR DCR_A DCR_B \
#       [BENCH_ARGS...] [--a-args ARGS...] [--b-args ARGS...] [--c-args ARGS...]
#
# Each round runs one block of K timed refits per side (dcr bench --refits K,
# after the bench's own warm-up refits, which never reach the file), in the
# order A B in odd rounds and B A in even ones (ABBA), so a linear drift of
# the machine's load adds the same to both sides. Defaults: 4 rounds of 10
# refits, 40 refits per side. Nothing is dropped as an outlier: dcr compare
# judges medians. Runs of one side are pooled by dcr compare (their
# configurations are equal). Two configurations of one build: pass the same
# binary twice and tell the sides apart with --a-args / --b-args, then
# compare with --match-ignore on the keys they differ in.
#
# Example: a 20% slower link against the default, one build:
#   scripts/ab-bench.sh /tmp/ab build/dcr build/dcr --a-args --link-gbps 0.05 \
#       --b-args --link-gbps 0.04
#   build/dcr compare /tmp/ab/A.h5 /tmp/ab/B.h5 --match-ignore cross_gbps
set -euo pipefail

usage() {
    sed -n '2,/^[^#]/{/^#/p}' "$0" >&2
    exit 2
}
rounds=6 block=10 dcr_c="" concurrent=0
while [ $# -gt 0 ]; do
    case $1 in
    --rounds) rounds=${2:-}; shift 2 ;;
    --block) block=${2:-}; shift 2 ;;
    --side-c) dcr_c=${2:-}; [ -n "$dcr_c" ] || usage; shift 2 ;;
    --concurrent) concurrent=1; shift ;;
    *) break ;;
    esac
done
for n in "$rounds" "$block"; do
    case $n in '' | *[!0-9]* | 0) echo "ab-bench: --rounds and --block take a positive number" >&2; exit 2 ;; esac
done
[ $# -ge 3 ] || usage
out=$1 dcr_a=$2 dcr_b=$3
shift 3
for d in "$dcr_a" "$dcr_b" ${dcr_c:+"$dcr_c"}; do
    [ -x "$d" ] || { echo "ab-bench: $d is not an executable" >&2; exit 2; }
done
common=() a_args=() b_args=() c_args=() dest=common
for a in "$@"; do
    case $a in
    --a-args) dest=a ;;
    --b-args) dest=b ;;
    --c-args) dest=c ;;
    --out | --refits) echo "ab-bench: $a is set by the script" >&2; exit 2 ;;
    --rounds | --block | --side-c | --concurrent)
        echo "ab-bench: $a is an option of the script: put it before OUTDIR" >&2
        exit 2
        ;;
    *)
        case $dest in
        common) common+=("$a") ;;
        a) a_args+=("$a") ;;
        b) b_args+=("$a") ;;
        c) c_args+=("$a") ;;
        esac
        ;;
    esac
done
mkdir -p "$out"
rm -f "$out/A.h5" "$out/B.h5" "$out/C.h5"
sides="A B${dcr_c:+ C}"

block_of() { # side round
    local side=$1 round=$2 bin
    case $side in
    A) bin=$dcr_a; set -- "${a_args[@]}" ;;
    B) bin=$dcr_b; set -- "${b_args[@]}" ;;
    *) bin=$dcr_c; set -- "${c_args[@]}" ;;
    esac
    echo "round $round: side $side" >&2
    "$bin" bench "${common[@]}" "$@" --refits "$block" --out "$out/$side.h5" \
        >"$out/$side-$round.log" 2>&1 || {
        echo "ab-bench: side $side, round $round failed (see $out/$side-$round.log)" >&2
        exit 1
    }
}

for r in $(seq 1 "$rounds"); do
    order=$sides
    [ $((r % 2)) -eq 1 ] || order=$(echo "$sides" | tr ' ' '\n' | tac | tr '\n' ' ')
    if [ $concurrent = 1 ]; then
        pids=()
        for side in $order; do
            block_of "$side" "$r" &
            pids+=($!)
        done
        for p in "${pids[@]}"; do wait "$p" || exit 1; done
    else
        for side in $order; do block_of "$side" "$r"; done
    fi
done
echo "wrote $(for s in $sides; do printf '%s ' "$out/$s.h5"; done)($rounds rounds of $block refits per side)"
