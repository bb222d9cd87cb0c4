#!/usr/bin/env bash
# dcr testbed: a multi-host cluster on one machine (issue 16).
#
# Every emulated host is a Linux network namespace with one veth link to a
# bridge; each link is shaped by the kernel (htb for rate and burst, netem for
# latency, fq for the per-flow cap), from the same flags `dcr bench` uses for
# its emulated links. A script rather than a C subcommand: every step is an
# `ip`/`tc` command, which a C command would only fork anyway, and this file is
# what an operator reads when a run leaves something behind. Input is still
# validated and every error is one line (exit 2 usage, 1 failure).
#
# The bridge lives in its own namespace (<prefix>sw), not the root one: the
# host's interfaces, routes, iptables and br_netfilter never see a packet of
# the testbed, and no address of the private subnet exists outside it.
#
# Run `scripts/testbed.sh --help` for the commands.
set -euo pipefail

PROG=testbed
SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_DIR=$(cd "$SCRIPT_DIR/.." && pwd)
STATE_ROOT=${DCR_TESTBED_STATE:-/run}

die() { echo "$PROG: $*" >&2; exit 1; }
usage_die() { echo "$PROG: $*" >&2; exit 2; }

usage() {
    cat <<'EOF'
usage: scripts/testbed.sh COMMAND [options]

  up        build the testbed (idempotent: an identical one already up is kept)
  down      remove it, and whatever a crashed run left (found by name prefix)
  status    what exists: hosts, addresses, qdiscs, services (--json for a harness)
  measure   timed TCP transfers over every shaped link; fails when one is off
            its configured rate by more than 15% (--json: one array)
  hostfile  an mpirun hostfile of the training hosts ([--slots K], default 1)
  mpirun    -np K [mpirun args] -- PROG ARGS: run PROG under mpirun across the
            training hosts (launch agent scripts/testbed-agent.sh)
  exec      HOST CMD...: run CMD inside host HOST (t0, r1, svc)
  reach     FROM TO [--within S]: exit 0 when a 64 KiB TCP transfer FROM -> TO
            completes in S seconds (default 3; a lossy link needs more)
  fault     link-down HOST SECONDS | netem HOST [--loss PCT] [--reorder PCT]
            | partition HOST HOST | heal HOST HOST | clear HOST

options (up):
  --id N            testbed id 0..55 (default 0): names dcrtb-N-*, subnet 10.(200+N).0.0/16
  --train N         training hosts 1..64 (default 2)
  --rollout M       rollout hosts 1..64 (default 2)
  --link-gbps G     cross-cluster Gbps per host link (0: unlimited; default 1)
  --flow-gbps G     cross-cluster Gbps per flow, sender side (0: no cap; default 0)
  --local-gbps G    Gbps per host inside its own cluster (0: unlimited; default 0)
  --latency-ms L    one-way cross-cluster latency 0..10000 (default 0)
  --no-services     do not start etcd and s3rver on the services host
  --owner PID       the process this testbed belongs to (a test, a dcr bench):
                    once it is gone, the next up of any id removes the testbed
                    (a run killed with its whole process tree leaves none behind)
  --all             (down) remove every dcrtb-* testbed, not only --id
Hosts: t<i> training (10.S.1.i+1), r<j> rollout (10.S.2.j+1), svc services
(10.S.0.2: etcd on :2379, s3rver on :4568). Must run as root.
EOF
}

# ---- validation -------------------------------------------------------------

# check_num NAME VALUE MIN MAX: a non-negative decimal within [MIN, MAX].
check_num() {
    [[ $2 =~ ^[0-9]+(\.[0-9]+)?$ ]] || usage_die "$1 '$2': expected a non-negative number"
    awk -v v="$2" -v lo="$3" -v hi="$4" 'BEGIN { exit !(v >= lo && v <= hi) }' ||
        usage_die "$1 '$2': expected $3..$4"
}
# check_rate NAME GBPS: 0 (unlimited) or 0.001..100 Gbps (htb is not exact below 1 Mbit).
check_rate() {
    check_num "$1" "$2" 0 100
    awk -v v="$2" 'BEGIN { exit !(v == 0 || v >= 0.001) }' ||
        usage_die "$1 '$2': expected 0 (unlimited) or 0.001..100 Gbps"
}
check_int() {
    [[ $2 =~ ^[0-9]+$ ]] && ((10#$2 >= $3 && 10#$2 <= $4)) || usage_die "$1 '$2': expected an integer $3..$4"
}

need_root() {
    [[ $(id -u) -eq 0 ]] || die "must run as root (network namespaces and tc need CAP_NET_ADMIN)"
    command -v ip >/dev/null && command -v tc >/dev/null || die "ip and tc (iproute2) are required"
}

# lock_testbeds: one up or down at a time on this machine (a lock on the
# state root directory itself, so no lock file is left behind).
lock_testbeds() {
    exec 9<"$STATE_ROOT"
    flock -w 120 9 || die "another testbed up/down has held the lock on $STATE_ROOT for 120 s"
}

# process_start PID: the process's start time in clock ticks since boot
# (field 22 of /proc/PID/stat), empty when there is no such process or it
# has exited (a zombie). A pid and its start time name one process: a
# reused pid has another start.
process_start() {
    local stat
    stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 0
    stat=${stat##*) } # comm may hold spaces and parentheses
    awk '$1 != "Z" && $1 != "X" {print $20}' <<<"$stat"
}

# reap_orphans: remove every testbed whose owner (up --owner) is gone. Runs
# under the lock; testbeds without an owner are never touched.
reap_orphans() {
    local f pid start id
    for f in "$STATE_ROOT"/dcrtb-*/owner; do
        [[ -f $f ]] || continue
        read -r pid start <"$f" || continue
        [[ $pid =~ ^[0-9]+$ && $start =~ ^[0-9]+$ ]] || continue
        [[ $(process_start "$pid") == "$start" ]] && continue
        id=${f%/owner}
        id=${id##*/dcrtb-}
        [[ $id =~ ^[0-9]+$ ]] || continue
        echo "$PROG: testbed $id: its owner (pid $pid) is gone; removing it"
        teardown "dcrtb-$id-"
    done
}

# ---- names ------------------------------------------------------------------

ID=0
set_id() {
    check_int --id "$1" 0 55
    ID=$((10#$1))
    PFX="dcrtb-$ID-"
    NET="10.$((200 + ID))"
    STATE="$STATE_ROOT/dcrtb-$ID"
    SW="${PFX}sw"
}
set_id 0

# host_ns SHORT -> namespace name; host_ip SHORT -> address; host_cluster SHORT -> third octet.
host_ns() { echo "$PFX$1"; }
host_cluster() {
    case $1 in svc) echo 0 ;; t*) echo 1 ;; r*) echo 2 ;; esac
}
host_ip() {
    case $1 in
    svc) echo "$NET.0.2" ;;
    t*) echo "$NET.1.$((${1#t} + 1))" ;;
    r*) echo "$NET.2.$((${1#r} + 1))" ;;
    esac
}
# host_pref SHORT: a number unique per host, used as the tc filter priority of
# a partition against it so `heal` can delete exactly that filter.
host_pref() {
    case $1 in svc) echo 100 ;; t*) echo $((101 + ${1#t})) ;; r*) echo $((201 + ${1#r})) ;; esac
}

load_config() {
    [[ -f $STATE/config ]] || die "testbed $ID is not up (no $STATE/config); run: scripts/testbed.sh up --id $ID"
    # shellcheck disable=SC1091
    source "$STATE/config"
}
all_hosts() {
    local i
    for ((i = 0; i < TRAIN; i++)); do echo "t$i"; done
    for ((i = 0; i < ROLLOUT; i++)); do echo "r$i"; done
}
check_host() {
    local h=$1
    [[ $h == svc ]] && return 0
    if [[ $h =~ ^t([0-9]+)$ ]] && ((10#${BASH_REMATCH[1]} < TRAIN)); then return 0; fi
    if [[ $h =~ ^r([0-9]+)$ ]] && ((10#${BASH_REMATCH[1]} < ROLLOUT)); then return 0; fi
    usage_die "host '$h': expected svc, t0..t$((TRAIN - 1)) or r0..r$((ROLLOUT - 1))"
}

# ---- shaping ----------------------------------------------------------------

# tc rate of a Gbps figure (0: unlimited, which htb cannot express: 100gbit,
# far above what veth moves here).
tc_rate() { awk -v g="$1" 'BEGIN { if (g == 0) g = 100; printf "%dkbit", g * 1e6 }'; }
# htb burst: 5 ms at the rate, at least one 64 KiB GSO segment plus headers.
tc_burst() { awk -v g="$1" 'BEGIN { if (g == 0) g = 100; b = g * 1e9 / 8 * 0.005; if (b < 98304) b = 98304; printf "%.0f", b }'; }
# netem queue (packets): twice the bandwidth-delay product, so netem never drops.
netem_limit() {
    awk -v g="$1" -v l="$2" 'BEGIN { if (g == 0) g = 100; n = 2 * g * 1e9 / 8 * l / 1000 / 1500 + 1000;
        if (n > 1000000) n = 1000000; printf "%.0f", n }'
}
netem_args() { # LATENCY_MS [extra netem args]
    local lat=$1
    shift
    echo "limit $(netem_limit "$LINK_GBPS" "$lat") delay ${lat}ms $*"
}

# shape_host SHORT: both directions of one host's link, as htb classes:
#   1:10 cross-cluster traffic at --link-gbps (the default class);
#   1:20 traffic inside the host's own cluster at --local-gbps;
#   1:30 a black hole (pfifo limit 0) that `fault partition` steers a peer to.
# Host side (eth0 egress, what the host sends): 1:10 has an fq leaf capping
# each flow at --flow-gbps when set. Switch side (the bridge port's egress,
# what the host receives): 1:10 has a netem leaf delaying by --latency-ms when
# set, so every cross-cluster path is delayed exactly once, at its receiver.
# The services host is not rate-shaped (the store has no per-node cap in the
# bench) but receives with the same latency. Filter priorities: 1 loss
# (fault netem), 100..264 partitions (host_pref), 500 the local class.
shape_host() {
    local h=$1 ns port cl cross loc
    ns=$(host_ns "$h")
    port=$h
    cl=$(host_cluster "$h")
    cross=$LINK_GBPS loc=$LOCAL_GBPS
    [[ $h == svc ]] && cross=0 loc=0
    local side
    for side in host switch; do
        local run=(ip netns exec "$ns" tc) dev=eth0 match=dst
        [[ $side == switch ]] && run=(ip netns exec "$SW" tc) dev=$port match=src
        "${run[@]}" qdisc replace dev "$dev" root handle 1: htb default 10
        htb_class "${run[@]}" "$dev" 1:10 "$cross"
        htb_class "${run[@]}" "$dev" 1:20 "$loc"
        htb_class "${run[@]}" "$dev" 1:30 0
        "${run[@]}" qdisc add dev "$dev" parent 1:30 handle 30: pfifo limit 0
        "${run[@]}" filter add dev "$dev" parent 1: protocol ip prio 500 u32 \
            match ip "$match" "$NET.$cl.0/24" flowid 1:20
    done
    if [[ $h != svc ]] && is_positive "$FLOW_GBPS"; then
        ip netns exec "$ns" tc qdisc add dev eth0 parent 1:10 handle 10: fq maxrate "$(tc_rate "$FLOW_GBPS")"
    fi
    if is_positive "$LATENCY_MS"; then
        # shellcheck disable=SC2046
        ip netns exec "$SW" tc qdisc add dev "$port" parent 1:10 handle 10: netem $(netem_args "$LATENCY_MS")
    fi
}

# htb_class TC... DEV CLASSID GBPS (the tc command is the leading words).
htb_class() {
    local n=$#
    local gbps=${!n} cid=${*:n-1:1} dev=${*:n-2:1}
    "${@:1:n-3}" class add dev "$dev" parent 1: classid "$cid" htb rate "$(tc_rate "$gbps")" \
        burst "$(tc_burst "$gbps")" cburst "$(tc_burst "$gbps")" quantum 200000
}

is_positive() { awk -v g="$1" 'BEGIN { exit !(g > 0) }'; }

# has_qdisc KIND ARGS...: whether this kernel has the qdisc (tried on the
# switch namespace's loopback). Debian kernels have netem and fq; minimal VM
# kernels often lack both, and then latency and per-flow caps cannot be shaped.
has_qdisc() {
    if ip netns exec "$SW" tc qdisc add dev lo root handle 9: "$@" 2>/dev/null; then
        ip netns exec "$SW" tc qdisc del dev lo root
        return 0
    fi
    return 1
}

# ---- up / down --------------------------------------------------------------

add_host() { # SHORT
    local h=$1 ns
    ns=$(host_ns "$h")
    ip netns add "$ns"
    # Both ends are created inside namespaces: nothing appears in the root one.
    ip -n "$SW" link add "$h" type veth peer name eth0 netns "$ns"
    ip -n "$SW" link set "$h" master br0 up
    ip -n "$ns" link set lo up
    ip -n "$ns" addr add "$(host_ip "$h")/16" dev eth0
    ip -n "$ns" link set eth0 up
    # Windows large enough for the bandwidth-delay product (per-namespace sysctls).
    ip netns exec "$ns" sysctl -qw net.ipv4.tcp_rmem="4096 131072 67108864" \
        net.ipv4.tcp_wmem="4096 65536 67108864"
    # Name resolution of testbed hosts inside the testbed (ip netns exec binds
    # /etc/netns/NS/hosts over /etc/hosts): mpirun resolves its hostfile.
    mkdir -p "/etc/netns/$ns"
    hosts_file >"/etc/netns/$ns/hosts"
    shape_host "$h"
}

hosts_file() {
    printf '127.0.0.1 localhost\n%s %s\n' "$(host_ip svc)" "$(host_ns svc)"
    local h
    for h in $(all_hosts); do printf '%s %s\n' "$(host_ip "$h")" "$(host_ns "$h")"; done
}

# wait_port NS ADDR PORT WHAT: until something accepts on ADDR:PORT (20 s).
wait_port() {
    local i
    for ((i = 0; i < 200; i++)); do
        if ip netns exec "$1" timeout 1 bash -c "exec 3<>/dev/tcp/$2/$3" 2>/dev/null; then return 0; fi
        sleep 0.1
    done
    die "$4 did not accept on $2:$3 within 20 s (log: $STATE/$4.log)"
}

start_services() {
    local ns ip s3
    ns=$(host_ns svc)
    ip=$(host_ip svc)
    s3=${DCR_S3RVER:-$REPO_DIR/.deps/s3rver/node_modules/.bin/s3rver}
    [[ -x /usr/bin/etcd ]] || die "etcd not found at /usr/bin/etcd (Debian package etcd-server)"
    [[ -x $s3 ]] || die "s3rver not found at $s3; run: bash scripts/install-deps.sh (or --no-services)"
    # 9<&-: the services must not inherit the up/down lock.
    mkdir -p "$STATE/etcd" "$STATE/s3"
    ip netns exec "$ns" setsid /usr/bin/etcd --name dcrtb --data-dir "$STATE/etcd" \
        --listen-client-urls "http://$ip:2379" --advertise-client-urls "http://$ip:2379" \
        --listen-peer-urls "http://$ip:2380" --initial-advertise-peer-urls "http://$ip:2380" \
        --initial-cluster "dcrtb=http://$ip:2380" </dev/null >"$STATE/etcd.log" 2>&1 9<&- &
    echo $! >"$STATE/etcd.pid"
    # Bucket "dcr" for dcr bench --testbed (--store s3://dcr/...). s3rver 3.7
    # makes listing continuation tokens with DES, which Node 17+ offers only
    # through the legacy provider: without it a second listing page answers 500.
    ip netns exec "$ns" env NODE_OPTIONS=--openssl-legacy-provider setsid "$s3" -d "$STATE/s3" \
        -a "$ip" -p 4568 -s --configure-bucket dcr </dev/null >"$STATE/s3rver.log" 2>&1 9<&- &
    echo $! >"$STATE/s3rver.pid"
    wait_port "$ns" "$ip" 2379 etcd
    wait_port "$ns" "$ip" 4568 s3rver
}

# teardown ID_PREFIX: kill every process in the prefix's namespaces, delete
# the namespaces (which deletes their veths and qdiscs), the /etc/netns
# entries and the state directory. Safe on a half-built or crashed testbed.
teardown() {
    local pfx=$1 ns pids i
    local nss
    nss=$(ip netns list 2>/dev/null | awk '{print $1}' | grep "^$pfx" || true)
    for ns in $nss; do
        pids=$(ip netns pids "$ns" 2>/dev/null || true)
        [[ -n $pids ]] && kill -TERM $pids 2>/dev/null || true
    done
    for ((i = 0; i < 50; i++)); do
        pids=""
        for ns in $nss; do pids+=" $(ip netns pids "$ns" 2>/dev/null || true)"; done
        [[ -z ${pids// /} ]] && break
        sleep 0.1
    done
    [[ -n ${pids// /} ]] && kill -KILL $pids 2>/dev/null || true
    for ns in $nss; do ip netns del "$ns" 2>/dev/null || true; done
    rm -rf /etc/netns/"$pfx"*
    rmdir /etc/netns 2>/dev/null || true # only when empty: ours, or meaningless
    rm -rf "${STATE_ROOT:?}/${pfx%-}"
    return 0
}

cmd_up() {
    local train=2 rollout=2 link=1 flow=0 local_g=0 lat=0 services=1 owner=0 owner_start=
    while (($#)); do
        case $1 in
        --id) set_id "${2-}"; shift 2 ;;
        --train) check_int --train "${2-}" 1 64; train=$((10#$2)); shift 2 ;;
        --rollout) check_int --rollout "${2-}" 1 64; rollout=$((10#$2)); shift 2 ;;
        --link-gbps) check_rate --link-gbps "${2-}"; link=$2; shift 2 ;;
        --flow-gbps) check_rate --flow-gbps "${2-}"; flow=$2; shift 2 ;;
        --local-gbps) check_rate --local-gbps "${2-}"; local_g=$2; shift 2 ;;
        --latency-ms) check_num --latency-ms "${2-}" 0 10000; lat=$2; shift 2 ;;
        --no-services) services=0; shift ;;
        --owner) check_int --owner "${2-}" 1 4194304; owner=$((10#$2)); shift 2 ;;
        *) usage_die "up: unknown option '$1' (see --help)" ;;
        esac
    done
    need_root
    if ((owner)); then
        owner_start=$(process_start "$owner")
        [[ -n $owner_start ]] || usage_die "--owner $owner: no such process"
    fi
    lock_testbeds
    reap_orphans
    local want
    want=$(printf 'TRAIN=%s\nROLLOUT=%s\nLINK_GBPS=%s\nFLOW_GBPS=%s\nLOCAL_GBPS=%s\nLATENCY_MS=%s\nSERVICES=%s\n' \
        "$train" "$rollout" "$link" "$flow" "$local_g" "$lat" "$services")
    if [[ -f $STATE/config ]]; then
        if [[ $(cat "$STATE/config") == "$want" ]] && testbed_complete; then
            echo "$PROG: testbed $ID already up"
            ((owner)) && echo "$owner $owner_start" >"$STATE/owner"
            return 0
        fi
        if [[ $(cat "$STATE/config") != "$want" ]] && testbed_complete; then
            die "testbed $ID is up with other settings ($STATE/config); run: scripts/testbed.sh down --id $ID"
        fi
    fi
    teardown "$PFX" # leftovers of a crashed run under this id
    TRAIN=$train ROLLOUT=$rollout LINK_GBPS=$link FLOW_GBPS=$flow LOCAL_GBPS=$local_g
    LATENCY_MS=$lat SERVICES=$services
    # From here on any failure or signal removes what was built.
    # shellcheck disable=SC2154 # rc is assigned inside the trap
    trap 'rc=$?; trap - EXIT INT TERM; teardown "$PFX"; exit $rc' EXIT
    trap 'exit 130' INT TERM
    # A failing ip/tc command (its own message above) ends up with one line
    # naming the step, exit 1; set -E carries the trap into functions.
    set -E
    trap 'echo "$PROG: up failed at: $BASH_COMMAND" >&2; exit 1' ERR
    mkdir -p "$STATE"
    ip netns add "$SW" 2>/dev/null || die "cannot create network namespace $SW (ip netns add failed: no CAP_SYS_ADMIN or no netns support?)"
    ip -n "$SW" link set lo up
    if is_positive "$LATENCY_MS" && ! has_qdisc netem delay 1ms; then
        die "--latency-ms $LATENCY_MS: this kernel has no netem qdisc (CONFIG_NET_SCH_NETEM), latency cannot be shaped; use --latency-ms 0"
    fi
    if is_positive "$FLOW_GBPS" && ! has_qdisc fq; then
        die "--flow-gbps $FLOW_GBPS: this kernel has no fq qdisc (CONFIG_NET_SCH_FQ), per-flow caps cannot be shaped; use --flow-gbps 0"
    fi
    ip -n "$SW" link add br0 type bridge
    ip -n "$SW" link set br0 up
    local h
    add_host svc
    for h in $(all_hosts); do add_host "$h"; done
    ((services)) && start_services
    echo "$want" >"$STATE/config"
    ((owner)) && echo "$owner $owner_start" >"$STATE/owner"
    trap - EXIT INT TERM ERR
    echo "$PROG: testbed $ID up: $train training + $rollout rollout hosts + svc on $NET.0.0/16" \
        "(link ${link} Gbps, flow ${flow}, local ${local_g}, latency ${lat} ms)"
}

# testbed_complete: every namespace of the recorded config exists and the
# services (when configured) are alive.
testbed_complete() {
    (
        # shellcheck disable=SC1091
        source "$STATE/config"
        local h list
        list=$(ip netns list | awk '{print $1}')
        for h in sw svc $(all_hosts); do grep -qx "$PFX$h" <<<"$list" || exit 1; done
        if ((SERVICES)); then
            kill -0 "$(cat "$STATE/etcd.pid")" 2>/dev/null || exit 1
            kill -0 "$(cat "$STATE/s3rver.pid")" 2>/dev/null || exit 1
        fi
        exit 0
    )
}

cmd_down() {
    parse_opts "--all" "$@"
    need_root
    lock_testbeds
    if ((OPT_all)); then
        local p
        for p in $(ip netns list | awk '{print $1}' | sed -n 's/^\(dcrtb-[0-9]*-\).*/\1/p' | sort -u); do
            teardown "$p"
        done
        rm -rf "$STATE_ROOT"/dcrtb-[0-9]*
        echo "$PROG: every dcrtb-* testbed removed"
    else
        teardown "$PFX"
        echo "$PROG: testbed $ID removed"
    fi
}

# ---- status / measure -------------------------------------------------------

# parse_opts "FLAGS" ARGS...: --id N and the listed flags (--all, --json), each
# setting OPT_<name>=1; anything else is a usage error.
OPT_all=0 OPT_json=0
parse_opts() {
    local allowed=$1
    shift
    while (($#)); do
        if [[ $1 == --id ]]; then
            set_id "${2-}"
            shift 2
        elif [[ -n $allowed && " $allowed " == *" $1 "* ]]; then
            printf -v "OPT_${1#--}" 1
            shift
        else
            usage_die "$CMD: unknown option '$1' (expected --id N${allowed:+ or ${allowed// /, }})"
        fi
    done
}

# status [--id N] [--json]: what exists. --json is what a harness reads:
# {id, subnet, link_gbps, flow_gbps, local_gbps, latency_ms,
#  hosts: [{name, role, netns, ip}], control (etcd://, for --control), s3 (null
#  with --no-services), pids {etcd, s3rver} (with services: what dcr bench
#  --testbed reads the services' CPU time from)}.
cmd_status() {
    parse_opts "--json" "$@"
    local json=$OPT_json
    need_root
    if [[ ! -f $STATE/config ]]; then
        local left
        left=$(ip netns list | awk '{print $1}' | grep "^$PFX" || true)
        [[ -n $left ]] && die "testbed $ID: namespaces left without state (${left//$'\n'/ }); run: scripts/testbed.sh down --id $ID"
        ((json)) && { echo "null"; return 0; }
        echo "$PROG: testbed $ID is down"
        return 0
    fi
    load_config
    testbed_complete || die "testbed $ID is incomplete (a namespace or service is gone); run down, then up"
    local h role sep=""
    if ((json)); then
        printf '{"id": %d, "subnet": "%s.0.0/16", "link_gbps": %s, "flow_gbps": %s, "local_gbps": %s, "latency_ms": %s,\n  "hosts": [' \
            "$ID" "$NET" "$LINK_GBPS" "$FLOW_GBPS" "$LOCAL_GBPS" "$LATENCY_MS"
        for h in svc $(all_hosts); do
            case $h in svc) role=services ;; t*) role=training ;; *) role=rollout ;; esac
            printf '%s\n    {"name": "%s", "role": "%s", "netns": "%s", "ip": "%s"}' "$sep" "$h" "$role" \
                "$(host_ns "$h")" "$(host_ip "$h")"
            sep=,
        done
        if ((SERVICES)); then
            printf '],\n  "control": "etcd://%s:2379", "s3": "http://%s:4568",\n' "$(host_ip svc)" "$(host_ip svc)"
            printf '  "pids": {"etcd": %d, "s3rver": %d}}\n' "$(cat "$STATE/etcd.pid")" "$(cat "$STATE/s3rver.pid")"
        else
            printf '],\n  "control": null, "s3": null}\n'
        fi
        return 0
    fi
    echo "testbed $ID: link ${LINK_GBPS} Gbps, flow ${FLOW_GBPS}, local ${LOCAL_GBPS}, latency ${LATENCY_MS} ms"
    for h in svc $(all_hosts); do
        printf '  %-4s %-14s %-12s %s\n' "$h" "$(host_ns "$h")" "$(host_ip "$h")" \
            "$(ip netns exec "$(host_ns "$h")" tc qdisc show dev eth0 | awk '{print $2}' | sort | uniq | tr '\n' ' ')"
    done
    if ((SERVICES)); then
        echo "  etcd   etcd://$(host_ip svc):2379 (pid $(cat "$STATE/etcd.pid"))"
        echo "  s3rver http://$(host_ip svc):4568 (pid $(cat "$STATE/s3rver.pid"))"
    fi
}

# xfer_tool: the probe binary, built once per testbed from scripts/testbed-xfer.c.
xfer_tool() {
    local bin=$STATE/testbed-xfer
    if [[ ! -x $bin ]]; then
        cc -O2 -std=c11 -Wall -o "$bin" "$SCRIPT_DIR/testbed-xfer.c" ||
            die "cannot build the probe $SCRIPT_DIR/testbed-xfer.c with cc"
    fi
    echo "$bin"
}

# probe FROM TO GBPS: one timed transfer FROM -> TO, sized for ~1.5 s at the
# expected rate. Prints "FROM -> TO measured Mbit/s configured C ok|OFF", or
# with --json one object per line (collected into an array by cmd_measure).
PROBE_FAIL=0
JSON=0
probe() {
    local from=$1 to=$2 gbps=$3 bin bytes out mbit port=5201
    bin=$(xfer_tool)
    bytes=$(awk -v g="$gbps" 'BEGIN { if (g == 0) g = 1; b = g * 1e9 / 8 * 1.5; if (b < 1048576) b = 1048576; printf "%.0f", b }')
    ip netns exec "$(host_ns "$to")" "$bin" recv $port >"$STATE/probe.out" 2>"$STATE/probe.err" &
    local rpid=$!
    if ! ip netns exec "$(host_ns "$from")" "$bin" send "$(host_ip "$to")" $port "$bytes"; then
        kill "$rpid" 2>/dev/null || true
        wait "$rpid" 2>/dev/null || true
        die "probe $from->$to: transfer failed"
    fi
    wait "$rpid" || die "probe $from->$to: receiver failed: $(cat "$STATE/probe.err")"
    out=$(cat "$STATE/probe.out")
    mbit=${out##* }
    local conf ok verdict
    conf=$(awk -v g="$gbps" 'BEGIN { print g * 1000 }')
    if ! is_positive "$gbps"; then
        ok=true verdict="(unlimited)"
    else
        verdict=$(awk -v m="$mbit" -v e="$conf" 'BEGIN { d = (m - e) / e;
            printf "%s %+.1f%%", ((d <= 0.15 && d >= -0.15) ? "ok" : "OFF"), d * 100 }')
        ok=false
        [[ $verdict == ok* ]] && ok=true
    fi
    $ok || PROBE_FAIL=1
    if ((JSON)); then
        printf '{"from": "%s", "to": "%s", "measured_mbit": %s, "configured_mbit": %s, "ok": %s}\n' \
            "$from" "$to" "$mbit" "$(is_positive "$gbps" && echo "$conf" || echo null)" "$ok"
    elif is_positive "$gbps"; then
        printf '  %-4s -> %-4s %10.1f Mbit/s  configured %10.1f  %s\n' "$from" "$to" "$mbit" "$conf" "$verdict"
    else
        printf '  %-4s -> %-4s %10.1f Mbit/s  %s\n' "$from" "$to" "$mbit" "$verdict"
    fi
}

min_rate() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == 0) print b; else if (b == 0 || a < b) print a; else print b }'; }

# measure [--id N] [--json]: every shaped link, both ways; exit 1 when one is
# more than 15% off its setting. --json: one array of
# {from, to, measured_mbit, configured_mbit (null: unlimited), ok}.
cmd_measure() {
    parse_opts "--json" "$@"
    JSON=$OPT_json
    need_root
    load_config
    testbed_complete || die "testbed $ID is incomplete; run down, then up"
    local pairs=() h i
    # Cross-cluster, per host, both directions against the unshaped services
    # host: sending is capped by the link and the per-flow cap, receiving by the link.
    for h in $(all_hosts); do
        pairs+=("$h svc $(min_rate "$LINK_GBPS" "$FLOW_GBPS")" "svc $h $LINK_GBPS")
    done
    # Inside a cluster: the local rate.
    ((TRAIN > 1)) && pairs+=("t0 t1 $LOCAL_GBPS")
    ((ROLLOUT > 1)) && pairs+=("r0 r1 $LOCAL_GBPS")
    if ((JSON)); then
        echo "["
        for ((i = 0; i < ${#pairs[@]}; i++)); do
            # shellcheck disable=SC2086 # "FROM TO GBPS"
            probe ${pairs[i]} >"$STATE/probe.json" # not $(...): PROBE_FAIL must reach here
            printf '  %s%s\n' "$(cat "$STATE/probe.json")" "$( ((i + 1 < ${#pairs[@]})) && echo ,)"
        done
        echo "]"
    else
        echo "testbed $ID: measured rates (timed TCP transfer, last 80% of the bytes; tolerance 15%)"
        for i in "${pairs[@]}"; do
            # shellcheck disable=SC2086
            probe $i
        done
    fi
    ((PROBE_FAIL == 0)) || die "testbed $ID: a link is off its configured rate by more than 15%"
}

# reach FROM TO [--within S]: whether a 64 KiB TCP transfer FROM -> TO
# completes within S seconds (default 3; exit 0 reachable, 1 not): what the
# tests and the faults are checked with. Under heavy netem loss TCP's
# retransmission timeouts (SYN: 1 s, then 3 s) can outlast 3 s on a link that
# still delivers, so a lossy check passes a longer --within.
cmd_reach() {
    local within=3 hosts=()
    while (($#)); do
        case $1 in
        --id) set_id "${2-}"; shift 2 ;;
        --within)
            [[ ${2-} =~ ^[0-9]+$ ]] && ((${2} >= 1 && ${2} <= 600)) ||
                usage_die "reach: --within expects whole seconds 1..600, got '${2-}'"
            within=$2; shift 2 ;;
        *) hosts+=("$1"); shift ;;
        esac
    done
    set -- "${hosts[@]}"
    (($# == 2)) || usage_die "reach: expected FROM TO (hosts such as t0, r1, svc)"
    need_root
    load_config
    check_host "$1"
    check_host "$2"
    local bin rpid ok=0
    bin=$(xfer_tool)
    ip netns exec "$(host_ns "$2")" timeout $((within + 1)) "$bin" recv 5202 >/dev/null 2>&1 &
    rpid=$!
    ip netns exec "$(host_ns "$1")" timeout "$within" "$bin" send "$(host_ip "$2")" 5202 65536 2>/dev/null && ok=1
    wait "$rpid" 2>/dev/null || ok=0
    if ((ok)); then echo "$PROG: $1 -> $2 reachable"; else echo "$PROG: $1 -> $2 unreachable"; return 1; fi
}

# ---- mpirun -------------------------------------------------------------------

# hostfile [--id N] [--slots K]: one line per training host, K slots each
# (default 1; dcr bench --testbed gives its GPUs per training node).
cmd_hostfile() {
    local slots=1 a=()
    while (($#)); do
        if [[ $1 == --slots ]]; then check_int --slots "${2-}" 1 1024; slots=$((10#$2)); shift 2
        else a+=("$1"); shift; fi
    done
    parse_opts "" "${a[@]}"
    load_config
    local i
    for ((i = 0; i < TRAIN; i++)); do echo "$(host_ns "t$i") slots=$slots"; done
}

# mpirun [--id N] [mpirun options] -- PROG ARGS: mpirun itself runs in t0 (its
# out-of-band channel must reach the daemons, which only exists inside the
# testbed); the agent starts each daemon in its host's namespace.
cmd_mpirun() {
    local args=()
    while (($#)) && [[ $1 != -- ]]; do
        if [[ $1 == --id ]]; then set_id "${2-}"; shift 2; else args+=("$1"); shift; fi
    done
    (($#)) || usage_die "mpirun: expected '-- PROG ARGS' after the mpirun options"
    shift
    (($#)) || usage_die "mpirun: expected a program after '--'"
    need_root
    load_config
    testbed_complete || die "testbed $ID is incomplete; run down, then up"
    cmd_hostfile --id "$ID" >"$STATE/hostfile"
    ip netns exec "$(host_ns t0)" env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
        mpirun --hostfile "$STATE/hostfile" \
        --mca plm_rsh_agent "$SCRIPT_DIR/testbed-agent.sh" \
        --mca oob_tcp_if_include "$NET.0.0/16" --mca btl_tcp_if_include "$NET.0.0/16" \
        --mca btl tcp,self "${args[@]}" "$@"
}

cmd_exec() {
    local a=()
    while (($#)) && [[ $1 == --id ]]; do set_id "${2-}"; shift 2; done
    (($# >= 2)) || usage_die "exec: expected HOST CMD..."
    need_root
    load_config
    check_host "$1"
    a=("$@")
    ip netns exec "$(host_ns "${a[0]}")" "${a[@]:1}"
}

# ---- faults -------------------------------------------------------------------

# fault link-down HOST SECONDS: the host's link goes down (the bridge port, so
# the host's own addresses and routes stay), comes back after SECONDS, and
# comes back also when this command is interrupted.
fault_link_down() {
    check_host "$1"
    check_num SECONDS "${2-}" 0.001 3600
    local port=$1
    trap 'ip -n "$SW" link set "$port" up' EXIT
    ip -n "$SW" link set "$port" down
    echo "$PROG: $port link down for $2 s"
    sleep "$2"
    ip -n "$SW" link set "$port" up
    trap - EXIT
    echo "$PROG: $port link up"
}

# fault netem HOST [--loss PCT] [--reorder PCT]: loss and reordering of what
# the host receives (its switch port). Loss is a classic-BPF classifier in
# direct-action mode that drops with the given probability (cls_bpf; works
# without netem). Reordering needs netem (it reorders delayed packets: without
# --latency-ms, 1 ms is added); refused with one line where the kernel lacks it.
fault_netem() {
    check_host "$1"
    local h=$1 loss=0 reorder=0 lat=$LATENCY_MS
    shift
    while (($#)); do
        case $1 in
        --loss) check_num --loss "${2-}" 0 100; loss=$2; shift 2 ;;
        --reorder) check_num --reorder "${2-}" 0 100; reorder=$2; shift 2 ;;
        *) usage_die "fault netem: unknown option '$1' (expected --loss PCT, --reorder PCT)" ;;
        esac
    done
    if is_positive "$reorder"; then
        has_qdisc netem delay 1ms || die "fault netem --reorder: this kernel has no netem qdisc (CONFIG_NET_SCH_NETEM)"
        is_positive "$lat" || lat=1
        # shellcheck disable=SC2046
        ip netns exec "$SW" tc qdisc replace dev "$h" parent 1:10 handle 10: netem \
            $(netem_args "$lat" "reorder ${reorder}% 50%")
    fi
    ip netns exec "$SW" tc filter del dev "$h" parent 1: prio 1 2>/dev/null || true
    if is_positive "$loss"; then
        # ld rand; if rand >= threshold: TC_ACT_UNSPEC (go on classifying) else TC_ACT_SHOT.
        local thr
        thr=$(awk -v p="$loss" 'BEGIN { t = p / 100 * 4294967296; if (t > 4294967295) t = 4294967295; printf "%.0f", t }')
        ip netns exec "$SW" tc filter add dev "$h" parent 1: protocol all prio 1 bpf da \
            bytecode "4,32 0 0 4294963256,53 0 1 $thr,6 0 0 4294967295,6 0 0 2," ||
            die "fault netem --loss: the kernel refused the cls_bpf filter (CONFIG_NET_CLS_BPF)"
    fi
    echo "$PROG: $h receives with loss ${loss}%, reorder ${reorder}%"
}

# fault partition A B: every IP packet between A and B dropped, both ways: a
# filter on each one's switch port steers the other's source address to the
# black-hole class 1:30 (priority host_pref of the other side, so heal removes
# exactly it; htb, u32 and pfifo only, no netem or gact needed).
fault_partition() {
    check_host "$1"
    check_host "$2"
    [[ $1 != "$2" ]] || usage_die "fault partition: expected two different hosts"
    ip netns exec "$SW" tc filter replace dev "$1" parent 1: protocol ip prio "$(host_pref "$2")" u32 \
        match ip src "$(host_ip "$2")/32" flowid 1:30
    ip netns exec "$SW" tc filter replace dev "$2" parent 1: protocol ip prio "$(host_pref "$1")" u32 \
        match ip src "$(host_ip "$1")/32" flowid 1:30
    echo "$PROG: $1 and $2 partitioned"
}

fault_heal() {
    check_host "$1"
    check_host "$2"
    ip netns exec "$SW" tc filter del dev "$1" parent 1: prio "$(host_pref "$2")" 2>/dev/null || true
    ip netns exec "$SW" tc filter del dev "$2" parent 1: prio "$(host_pref "$1")" 2>/dev/null || true
    echo "$PROG: $1 and $2 healed"
}

# fault clear HOST: every fault on the host undone (link up, loss filter gone,
# netem back to the configured latency, partitions against any host removed).
fault_clear() {
    check_host "$1"
    local h=$1 other
    ip -n "$SW" link set "$h" up
    ip netns exec "$SW" tc filter del dev "$h" parent 1: prio 1 2>/dev/null || true
    if is_positive "$LATENCY_MS"; then
        # shellcheck disable=SC2046
        ip netns exec "$SW" tc qdisc replace dev "$h" parent 1:10 handle 10: netem $(netem_args "$LATENCY_MS")
    else
        ip netns exec "$SW" tc qdisc del dev "$h" parent 1:10 handle 10: 2>/dev/null || true
    fi
    for other in svc $(all_hosts); do
        [[ $other == "$h" ]] || fault_heal "$h" "$other" >/dev/null
    done
    echo "$PROG: $h cleared"
}

cmd_fault() {
    while (($#)) && [[ $1 == --id ]]; do set_id "${2-}"; shift 2; done
    (($#)) || usage_die "fault: expected link-down | netem | partition | heal | clear"
    local kind=$1
    shift
    need_root
    load_config
    testbed_complete || die "testbed $ID is incomplete; run down, then up"
    case $kind in
    link-down) (($# == 2)) || usage_die "fault link-down: expected HOST SECONDS"; fault_link_down "$@" ;;
    netem) (($# >= 1)) || usage_die "fault netem: expected HOST [--loss PCT] [--reorder PCT]"; fault_netem "$@" ;;
    partition) (($# == 2)) || usage_die "fault partition: expected HOST HOST"; fault_partition "$@" ;;
    heal) (($# == 2)) || usage_die "fault heal: expected HOST HOST"; fault_heal "$@" ;;
    clear) (($# == 1)) || usage_die "fault clear: expected HOST"; fault_clear "$@" ;;
    *) usage_die "fault '$kind': expected link-down | netem | partition | heal | clear" ;;
    esac
}

# ---- main -------------------------------------------------------------------

CMD=${1-}
(($#)) && shift
case $CMD in
up) cmd_up "$@" ;;
down) cmd_down "$@" ;;
status) cmd_status "$@" ;;
measure) cmd_measure "$@" ;;
hostfile) cmd_hostfile "$@" ;;
mpirun) cmd_mpirun "$@" ;;
exec) cmd_exec "$@" ;;
reach) cmd_reach "$@" ;;
fault) cmd_fault "$@" ;;
-h | --help | help) usage ;;
"") usage_die "expected a command: up | down | status | measure | hostfile | mpirun | exec | reach | fault (see --help)" ;;
*) usage_die "unknown command '$CMD': expected up | down | status | measure | hostfile | mpirun | exec | reach | fault" ;;
esac
