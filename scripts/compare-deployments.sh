#!/usr/bin/env bash
# dcr deployments side by side (issue 16 item 3): one configuration of
# `dcr bench` run three ways, alternated round by round in one run:
#
#   inproc    every role a thread of one process, links emulated by pacing
#   local     (only when --ways names it) inproc with the embedded default's
#             services, a directory store and SQLite: what the store's
#             service adds
#   processes --processes: owners (mpirun), rollout nodes, coordinator and
#             verifier as processes of one host, links emulated by pacing in
#             each process, S3 and etcd on loopback
#   testbed   --testbed netns: the same processes across the hosts of a
#             network-namespace testbed, links shaped by the kernel, S3 and
#             etcd on its services host, the full-checkpoint reference
#             measured over the shaped links
#
# The store and the control plane are the same kind in all three (s3rver and
# etcd): inproc and processes reach theirs on loopback inside a private
# namespace (dcrtb-<loopback-id>-lo, only `lo`), so they share no port with
# anything else on this machine. --transports objstore,relay runs each way
# with both transports (the relay tree over loopback TCP for processes, over
# the testbed's shaped links for testbed) and prints the relay's speedup over
# the object store per way. A round runs the ways (x transports) in a
# rotated order (abc, bca, cab, ...), so that a drift of the machine weighs
# on all alike.
#
# Every run's JSON goes to --out; the summary (median over rounds per way:
# latency, construction and transport bounds, finalization, reference,
# speedup, bit-exactness) is printed as a Markdown table. Root only (netns).
set -euo pipefail

PROG=compare-deployments
SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_DIR=$(cd "$SCRIPT_DIR/.." && pwd)

die() { echo "$PROG: $*" >&2; exit 1; }
usage_die() { echo "$PROG: $*" >&2; exit 2; }

usage() {
    cat <<'EOF'
usage: scripts/compare-deployments.sh [options] [-- dcr bench flags...]

  --rounds R        rounds of the three ways (default 2; 1..50)
  --ways LIST       comma-separated list of inproc,processes,testbed,local
                    (default inproc,processes,testbed)
  --transports LIST comma-separated list of objstore,relay (default objstore);
                    each way runs once per transport and round
  --testbed-id N    testbed id of the testbed way (default 2)
  --loopback-id M   id whose namespace dcrtb-M-lo holds the loopback services
                    (default 3; must differ from N)
  --out DIR         where each run's JSON and stderr go (default: a new temp dir)
  --dcr PATH        the dcr executable (default build/dcr of this tree)
The bench flags after -- are given to all three ways, after these defaults:
--flow-gbps 0 --latency-ms 0 (kernel qdiscs for per-flow caps and latency, fq
and netem, are missing on many kernels; the testbed refuses them then).
EOF
}

TRANSPORTS=objstore ROUNDS=2 TB_ID=2 LO_ID=3 OUT="" DCR="$REPO_DIR/build/dcr" WAYS="inproc,processes,testbed"
while (($#)); do
    case $1 in
    --rounds)
        [[ ${2-} =~ ^[0-9]+$ ]] && ((10#$2 >= 1 && 10#$2 <= 50)) || usage_die "--rounds '${2-}': expected 1..50"
        ROUNDS=$((10#$2)); shift 2 ;;
    --ways)
        [[ ${2-} =~ ^(inproc|processes|testbed|local)(,(inproc|processes|testbed|local))*$ ]] ||
            usage_die "--ways '${2-}': expected a comma-separated list of inproc,processes,testbed,local"
        WAYS=$2; shift 2 ;;
    --transports)
        [[ ${2-} =~ ^(objstore|relay)(,(objstore|relay))*$ ]] ||
            usage_die "--transports '${2-}': expected a comma-separated list of objstore,relay"
        TRANSPORTS=$2; shift 2 ;;
    --testbed-id)
        [[ ${2-} =~ ^[0-9]+$ ]] && ((10#$2 <= 55)) || usage_die "--testbed-id '${2-}': expected 0..55"
        TB_ID=$((10#$2)); shift 2 ;;
    --loopback-id)
        [[ ${2-} =~ ^[0-9]+$ ]] && ((10#$2 <= 55)) || usage_die "--loopback-id '${2-}': expected 0..55"
        LO_ID=$((10#$2)); shift 2 ;;
    --out) [[ -n ${2-} ]] || usage_die "--out: expected a directory"; OUT=$2; shift 2 ;;
    --dcr) [[ -n ${2-} ]] || usage_die "--dcr: expected the dcr executable"; DCR=$2; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    --) shift; break ;;
    *) usage_die "unknown option '$1' (see --help)" ;;
    esac
done
BENCH=("$@")
((TB_ID != LO_ID)) || usage_die "--testbed-id and --loopback-id must differ (both $TB_ID)"
[[ $(id -u) -eq 0 ]] || die "must run as root (network namespaces)"
[[ -x $DCR ]] || die "dcr executable not found at $DCR (build it, or pass --dcr PATH)"
command -v jq >/dev/null || die "jq is required for the summary"
S3RVER=${DCR_S3RVER:-$REPO_DIR/.deps/s3rver/node_modules/.bin/s3rver}
[[ -x /usr/bin/etcd ]] || die "etcd not found at /usr/bin/etcd (Debian package etcd-server)"
[[ -x $S3RVER ]] || die "s3rver not found at $S3RVER; run: bash scripts/install-deps.sh"
[[ -n $OUT ]] || OUT=$(mktemp -d /tmp/dcr-compare.XXXXXX)
mkdir -p "$OUT"
IFS=, read -r -a WAY_LIST <<<"$WAYS"
IFS=, read -r -a TR_LIST <<<"$TRANSPORTS"
# A run's key: the way, plus "-relay" for the relay tree (the object store's
# keep the plain way's name, and so its file names).
KEYS=()
for way in "${WAY_LIST[@]}"; do
    for tr in "${TR_LIST[@]}"; do
        [[ $tr == relay ]] && KEYS+=("$way-relay") || KEYS+=("$way")
    done
done

# ---- loopback services ----------------------------------------------------------

LO_NS="dcrtb-$LO_ID-lo"
LO_DIR=""
cleanup() {
    local pids
    pids=$(ip netns pids "$LO_NS" 2>/dev/null || true)
    [[ -n $pids ]] && kill -TERM $pids 2>/dev/null || true
    sleep 0.5
    pids=$(ip netns pids "$LO_NS" 2>/dev/null || true)
    [[ -n $pids ]] && kill -KILL $pids 2>/dev/null || true
    ip netns del "$LO_NS" 2>/dev/null || true
    [[ -n $LO_DIR ]] && rm -rf "$LO_DIR"
    bash "$SCRIPT_DIR/testbed.sh" down --id "$TB_ID" >/dev/null 2>&1 || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

wait_port() { # PORT WHAT
    local i
    for ((i = 0; i < 200; i++)); do
        ip netns exec "$LO_NS" timeout 1 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null && return 0
        sleep 0.1
    done
    die "$2 did not accept on 127.0.0.1:$1 within 20 s (log: $LO_DIR/$2.log)"
}

start_loopback() {
    cleanup # what a crashed run left
    LO_DIR=$(mktemp -d /tmp/dcr-compare-lo.XXXXXX)
    ip netns add "$LO_NS"
    ip -n "$LO_NS" link set lo up
    ip netns exec "$LO_NS" setsid /usr/bin/etcd --name cmp --data-dir "$LO_DIR/etcd" \
        --listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
        --listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
        --initial-cluster cmp=http://127.0.0.1:2380 </dev/null >"$LO_DIR/etcd.log" 2>&1 &
    ip netns exec "$LO_NS" env NODE_OPTIONS=--openssl-legacy-provider setsid "$S3RVER" \
        -d "$LO_DIR/s3" -a 127.0.0.1 -p 4568 -s --configure-bucket dcr \
        </dev/null >"$LO_DIR/s3rver.log" 2>&1 &
    wait_port 2379 etcd
    wait_port 4568 s3rver
}

# ---- the runs -----------------------------------------------------------------

# run_way KEY ROUND: one dcr bench --json; its JSON in $OUT/KEY-ROUND.json.
run_way() {
    local way=${1%-relay} round=$2 tag="$1-$2" rc=0 tr=objstore
    [[ $1 == *-relay ]] && tr=relay
    local common=(bench --flow-gbps 0 --latency-ms 0 "${BENCH[@]}" --transport "$tr" --json)
    local lo=(--control "etcd://127.0.0.1:2379/$tag")
    # The relay keeps no payloads: its roles take no store.
    [[ $tr == relay ]] || lo+=(--store "s3://dcr/$tag" --s3-endpoint http://127.0.0.1:4568)
    echo "$PROG: round $round: $1" >&2
    local t0=$SECONDS
    case $way in
    inproc)
        ip netns exec "$LO_NS" env AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER \
            AWS_REGION=us-east-1 "$DCR" "${common[@]}" "${lo[@]}" \
            >"$OUT/$tag.json" 2>"$OUT/$tag.err" || rc=$?
        ;;
    processes)
        ip netns exec "$LO_NS" env AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER \
            AWS_REGION=us-east-1 "$DCR" "${common[@]}" "${lo[@]}" --processes \
            >"$OUT/$tag.json" 2>"$OUT/$tag.err" || rc=$?
        ;;
    local)
        "$DCR" "${common[@]}" >"$OUT/$tag.json" 2>"$OUT/$tag.err" || rc=$?
        ;;
    testbed)
        "$DCR" "${common[@]}" --testbed netns --testbed-id "$TB_ID" \
            >"$OUT/$tag.json" 2>"$OUT/$tag.err" || rc=$?
        ;;
    esac
    ((rc == 0)) || die "round $round, $1: dcr bench exited $rc (see $OUT/$tag.err: $(tail -1 "$OUT/$tag.err"))"
    echo "$PROG: round $round: $1 done in $((SECONDS - t0)) s" >&2
}

start_loopback
LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
n=${#KEYS[@]}
for ((r = 1; r <= ROUNDS; r++)); do
    for ((k = 0; k < n; k++)); do
        run_way "${KEYS[(k + r - 1) % n]}" "$r"
    done
done

# ---- summary --------------------------------------------------------------------

# The median over rounds of one figure (jq path) for one way.
median() { # WAY JQ-EXPR
    local f
    for ((r = 1; r <= ROUNDS; r++)); do jq -r "$2" "$OUT/$1-$r.json"; done |
        sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
ms() { awk -v s="$1" 'BEGIN { printf "%.0f", s * 1000 }'; }

cfg="$OUT/${KEYS[0]}-1.json"
echo
echo "dcr bench $(jq -r '.config | "\(.model) scale \(.scale), \(.layers) layers; \(.train_nodes) x \(.gpus_per_node) training, \(.rollout_nodes) x \(.receivers_per_node) rollout; \(.change_rate * 100)% \(.changes); \(.transport); cross \(.cross_gbps) Gbps, local \(.local_gbps) Gbps"' "$cfg"); checkpoint $(jq -r .checkpoint_bytes "$cfg") B; median of $ROUNDS rounds (JSON in $OUT); load average $LOAD0 at the start, $(cut -d' ' -f1-3 /proc/loadavg) at the end"
echo
echo "| deployment | latency ms | construction LB ms | transport LB ms | finalization ms | reference ms | speedup | bit-exact |"
echo "|---|---:|---:|---:|---:|---:|---:|---|"
for way in "${KEYS[@]}"; do
    exact=yes
    for ((r = 1; r <= ROUNDS; r++)); do
        [[ $(jq -r .bit_exact "$OUT/$way-$r.json") == true ]] || exact=NO
    done
    case ${way%-relay} in
    inproc) label="one process (threads, paced links)" ;;
    processes) label="processes on loopback (paced links)" ;;
    testbed) label="testbed netns (kernel-shaped links)" ;;
    local) label="one process, directory store + SQLite" ;;
    esac
    if ((${#TR_LIST[@]} > 1)); then
        [[ $way == *-relay ]] && label+=", relay tree" || label+=", object store"
    fi
    printf '| %s | %s | %s | %s | %s | %s | %.2fx | %s |\n' "$label" \
        "$(ms "$(median "$way" .mean_latency_s)")" \
        "$(ms "$(median "$way" .construction_lb_s_mean)")" \
        "$(ms "$(median "$way" .transport_lb_s_mean)")" \
        "$(ms "$(median "$way" .finalization_s_mean)")" \
        "$(ms "$(median "$way" .reference_s)")" \
        "$(median "$way" .speedup)" "$exact"
done
# The testbed's reference per host: a rate far below the setting on a busy
# machine is the store's CPU (s3rver), not the link (see the probes).
# Relay vs object store per way: the ratio of their median latencies, and
# each round's (the two ran in the same round, close in time).
if ((${#TR_LIST[@]} > 1)); then
    echo
    for way in "${WAY_LIST[@]}"; do
        per=""
        for ((r = 1; r <= ROUNDS; r++)); do
            per+=" $(jq -n --slurpfile o "$OUT/$way-$r.json" --slurpfile x "$OUT/$way-relay-$r.json" \
                '$o[0].mean_latency_s / $x[0].mean_latency_s * 100 | round / 100')x"
        done
        awk -v w="$way" -v o="$(median "$way" .mean_latency_s)" -v x="$(median "$way-relay" .mean_latency_s)" \
            -v per="$per" 'BEGIN { printf "%s: relay tree %.2fx faster than object store (median latencies); per round:%s\n", w, o / x, per }'
    done
fi
if [[ " ${KEYS[*]} " == *" testbed "* ]]; then
    echo
    echo "testbed reference, measured Mbit/s per host and round (configured: $(jq -r '.testbed.reference.hosts[0].configured_mbit' "$OUT/testbed-1.json")):"
    for ((r = 1; r <= ROUNDS; r++)); do
        jq -r --arg r "$r" '"  round \($r): " + ([.testbed.reference.hosts[] | "\(.host) \(.direction) \(.measured_mbit | floor)"] | join(", ")) + "; cross-link probes " + ([.testbed.links[] | select(.from == "svc" or .to == "svc") | .measured_mbit | floor] | "\(min)-\(max)")' "$OUT/testbed-$r.json"
    done
fi
