#!/usr/bin/env bash
# The GPU check of engine/device, in one run of at most 8 minutes on a GPU
# machine (sized for an H200 with 16 cores): builds with CUDA, runs the
# device tests (the CPU harness suite and the GPU suite, which must not be
# skipped here), times the kernels, probes the CLI commands that should take
# --device cuda, and prints one summary. Exit 0 when everything that exists
# passed, 1 otherwise. Paste the summary into BENCHMARKS.md with the GPU's
# name.
#
#   scripts/device-check.sh            # build dir build-device (DCR_DEVICE_BUILD overrides)
#
# The CLI steps: `dcr microbench detect|apply --device cuda` (detect against
# a device-to-device copy of the same bytes, record application against a
# dense host-to-device reload), `dcr construct --device cuda` (payloads
# compared byte for byte with --device cpu), `dcr calibrate --device cuda
# --out FILE` (GPU-side detect and apply costs for the simulator). Receivers
# with resident storage on the GPU run in test_receiver_device --gpu (views
# paths: dense loads, sparse, full XOR, placeholder and tracked passes,
# against the CPU path's dense load, and cast/cat paths on the GPU).
# `dcr bench --device cuda` (the default workload, then the FP32-norms
# variant whose loader casts on the GPU, then Nemotron-H, whose -exp maps
# run there and must give the host's bits) must verify bit-exact against
# dense refits on the CPU path after every timed refit and send the same
# payload bytes per refit as `--device cpu` with the same seed; a CLI that
# still refuses it (exit 2) is reported NOT WIRED.
set -uo pipefail

cd "$(dirname "$0")/.." || exit 1
build=${DCR_DEVICE_BUILD:-build-device}
jobs=${JOBS:-$(nproc)}
start=$(date +%s)
summary=()
failed=0
mkdir -p "$build"
log="$build/device-check"

note() { summary+=("$1"); echo "== $1"; }
fail() { note "FAIL $1"; failed=1; }
elapsed() { echo $(($(date +%s) - start)); }
# Every step's timeout is its own cap or what is left of the 8 minutes
# (470 s, keeping 10 s for the summary), whichever is less.
limit=${DCR_DEVICE_CHECK_BUDGET:-470}
cap() {
    local left=$((limit - $(elapsed)))
    [ "$left" -lt "$1" ] && echo $((left > 1 ? left : 1)) || echo "$1"
}

gpu=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)
note "GPU: ${gpu:-none found by nvidia-smi}"

# 1. Configure and build (the device tests depend on the CLI, so it builds too).
if ! timeout "$(cap 150)" cmake -S . -B "$build" -DDCR_WERROR=ON -DDCR_WITH_CUDA=ON \
        -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$log.configure.log" 2>&1; then
    fail "configure (see $log.configure.log): $(grep -m1 -i error "$log.configure.log")"
elif ! grep -q "dcr: CUDA ON" "$log.configure.log"; then
    fail "configure: CMake found no CUDA compiler ($(grep -m1 'dcr: CUDA' "$log.configure.log"))"
elif ! timeout "$(cap 300)" cmake --build "$build" -j "$jobs" --target test_device test_device_gpu test_device_nvtx test_receiver_device \
        >"$log.build.log" 2>&1; then
    fail "build (see $log.build.log): $(grep -m1 -E 'error' "$log.build.log")"
else
    note "build with CUDA: ok in $(elapsed) s"
fi

# 2. Tests. On a GPU machine the GPU suites must run: a skip is a failure here.
if [ -x "$build/test_device" ]; then
    if timeout "$(cap 120)" "$build/test_device" >"$log.test_device.log" 2>&1; then
        note "PASS test_device (CPU harness of every kernel, cpu backend)"
    else
        fail "test_device: $(grep -m1 -E 'ERROR|FAIL' "$log.test_device.log")"
    fi
fi
if [ -x "$build/test_device_nvtx" ]; then
    if timeout "$(cap 60)" "$build/test_device_nvtx" >"$log.test_device_nvtx.log" 2>&1; then
        note "PASS test_device_nvtx (device NVTX ranges in the engine's tag format)"
    else
        fail "test_device_nvtx: $(grep -m1 -E 'ERROR|FAIL|SKIPPED' "$log.test_device_nvtx.log")"
    fi
fi
if [ -x "$build/test_device_gpu" ]; then
    timeout "$(cap 180)" "$build/test_device_gpu" >"$log.test_device_gpu.log" 2>&1
    rc=$?
    case $rc in
    0) note "PASS test_device_gpu (cuda backend against the CPU path and the harness)" ;;
    77) fail "test_device_gpu skipped: $(head -1 "$log.test_device_gpu.log")" ;;
    *) fail "test_device_gpu rc=$rc: $(grep -m1 -E 'ERROR|FAIL|error' "$log.test_device_gpu.log")" ;;
    esac
    # 3. Kernel timings (ratios, one run; no pass/fail on time).
    if [ $rc -eq 77 ]; then
        note "SKIP kernel timings: no GPU"
    elif timeout "$(cap 150)" "$build/test_device_gpu" --bench >"$log.bench.log" 2>&1; then
        while IFS= read -r line; do note "$line"; done < <(grep -E '^(detect|apply)' "$log.bench.log")
    else
        fail "test_device_gpu --bench: $(tail -1 "$log.bench.log")"
    fi
fi
if [ -x "$build/test_receiver_device" ]; then
    timeout "$(cap 120)" "$build/test_receiver_device" --gpu >"$log.test_receiver_device_gpu.log" 2>&1
    rc=$?
    case $rc in
    0) note "PASS test_receiver_device --gpu (resident storage on the GPU against the CPU path)" ;;
    77) fail "test_receiver_device --gpu skipped: $(head -1 "$log.test_receiver_device_gpu.log")" ;;
    *) fail "test_receiver_device --gpu rc=$rc: $(grep -m1 -E 'ERROR|FAIL|error' "$log.test_receiver_device_gpu.log")" ;;
    esac
fi

# 4. CLI commands with --device cuda: reported NOT WIRED until they take it.
probe() {
    local what=$1
    shift
    local out rc
    out=$(timeout "$(cap 90)" "$build/dcr" "$@" 2>&1)
    rc=$?
    if [ $rc -eq 0 ] && [ "${whole:-0}" = 1 ]; then
        note "PASS $what:"
        while IFS= read -r line; do note "  $line"; done <<<"$out"
    elif [ $rc -eq 0 ]; then
        note "PASS $what: $(echo "$out" | tail -1)"
    elif [ $rc -eq 2 ]; then
        note "NOT WIRED $what: $(echo "$out" | head -1)"
    else
        fail "$what rc=$rc: $(echo "$out" | tail -1)"
    fi
}
# Construction on the GPU emits the same payloads as on the CPU, byte for byte.
construct_same() {
    local d=$build/construct-payloads
    rm -rf "$d"
    mkdir -p "$d"
    local args=(construct --scale 16 --layers 2 --change-rate 0.01 --chunk-mib 0.0625 --bucket-mib 0.25)
    if ! timeout "$(cap 60)" "$build/dcr" "${args[@]}" --device cpu --keep-payloads "$d/cpu" \
            >"$log.construct-cpu.log" 2>&1; then
        fail "dcr construct --device cpu: $(tail -1 "$log.construct-cpu.log")"
    elif ! timeout "$(cap 60)" "$build/dcr" "${args[@]}" --device cuda --keep-payloads "$d/cuda" \
            >"$log.construct-cuda.log" 2>&1; then
        fail "dcr construct --device cuda: $(tail -1 "$log.construct-cuda.log")"
    elif diff -r -x .dcr-workdir "$d/cpu" "$d/cuda" >/dev/null; then
        note "PASS dcr construct --device cuda: $(find "$d/cuda" -type f -name '*.dcrp' | wc -l) payloads identical to --device cpu"
    else
        fail "dcr construct --device cuda: payloads differ from --device cpu"
    fi
}
# dcr bench on the GPU: every timed refit verified bit-exact (dense refits
# on the CPU path), and refit by refit the payload bytes of --device cpu.
bench_same() {
    local what="dcr bench --device cuda $*"
    local args=(bench --warmup 1 --refits 3 --json "$@")
    local out rc
    out=$(timeout "$(cap 120)" "$build/dcr" "${args[@]}" --device cuda 2>"$log.bench-cuda.log")
    rc=$?
    if [ $rc -eq 2 ]; then
        note "NOT WIRED $what: $(head -1 "$log.bench-cuda.log")"
        return
    elif [ $rc -ne 0 ]; then
        fail "$what rc=$rc: $(tail -1 "$log.bench-cuda.log")"
        return
    fi
    echo "$out" >"$log.bench-cuda.json"
    if ! timeout "$(cap 120)" "$build/dcr" "${args[@]}" --device cpu >"$log.bench-cpu.json" \
            2>"$log.bench-cpu.log"; then
        fail "dcr bench --device cpu $*: $(tail -1 "$log.bench-cpu.log")"
        return
    fi
    local verdict
    verdict=$(python3 - "$log.bench-cuda.json" "$log.bench-cpu.json" <<'PY'
import json, sys
g, c = (json.load(open(p)) for p in sys.argv[1:3])
gr, cr = g["refits"], c["refits"]
exact = g["bit_exact"] and all(r["verified"] and r["bit_exact"] for r in gr)
same = [r["payload_bytes"] for r in gr] == [r["payload_bytes"] for r in cr]
print("ok" if exact and same else "bad",
      "bit-exact" if exact else "MISMATCH",
      "payload bytes per refit %s cpu" % ("equal to" if same else "DIFFER from"),
      "mean latency %.3f s (cpu %.3f s)" % (g["mean_latency_s"], c["mean_latency_s"]))
PY
)
    case $verdict in
    ok*) note "PASS $what: ${verdict#ok }" ;;
    *) fail "$what: ${verdict#bad }" ;;
    esac
}
# A table of the device microbenchmarks goes into the summary whole.
table() { whole=1 probe "$@"; }
if [ -x "$build/dcr" ]; then
    table "dcr microbench detect --device cuda" microbench detect --device cuda
    table "dcr microbench apply --device cuda" microbench apply --device cuda --rates 0.01,0.05
    construct_same
    bench_same
    bench_same --fp32-norms
    bench_same --model nemotron-3-nano-30b-a3b --scale 64 --layers 6
    probe "dcr calibrate --device cuda" calibrate --quick --device cuda --out "$build/calibrate-cuda.json"
fi

echo
echo "==== device-check summary ($(elapsed) s, $(git describe --always --dirty 2>/dev/null)) ===="
printf '%s\n' "${summary[@]}"
exit $failed
