#!/usr/bin/env bash
# The install test (CTest: test_install): installs the build into a fresh
# temporary prefix, checks the layout (headers, versioned libdcr, pkg-config
# file, CMake package config, the dcr binary and its scripts), builds
# examples/apply_payload.c against the installed library three ways (pkg-config
# shared, pkg-config static, find_package(dcr)), and runs each on a payload
# made by the installed Python package; the oracle is the target tensor
# computed independently with numpy.
#   install_test.sh BUILD_DIR SOURCE_DIR PYTHON3
set -euo pipefail
[ $# -eq 3 ] || { echo "usage: install_test.sh BUILD_DIR SOURCE_DIR PYTHON3" >&2; exit 2; }
build=$1 src=$(cd "$2" && pwd) py=$3
work=$(mktemp -d /tmp/dcr-install-test.XXXXXX)
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix
fail() { echo "install test: $*" >&2; exit 1; }

cmake --install "$build" --prefix "$prefix" >/dev/null
libdir=$(cd "$prefix" && ls -d lib*/pkgconfig | head -1 | xargs dirname)
for f in include/dcr/codec.h include/dcr/status.h "$libdir/libdcr.a" "$libdir/pkgconfig/dcr.pc" \
         "$libdir/cmake/dcr/dcrConfig.cmake" bin/dcr share/dcr/scripts/testbed.sh \
         share/dcr/scripts/testbed-agent.sh share/dcr/scripts/testbed-xfer.c \
         share/dcr/models/qwen2.5-0.5b.json share/dcr/models/qwen3-30b-a3b.json \
         share/dcr/sim/clusters/paper-testbed.json share/dcr/sim/calibrations/paper-testbed.json; do
  [ -e "$prefix/$f" ] || fail "$f missing from the installed tree"
done
soname=$(readelf -d "$prefix/$libdir/libdcr.so" | sed -n 's/.*SONAME.*\[\(.*\)\].*/\1/p')
case "$soname" in libdcr.so.[0-9]*) ;; *) fail "libdcr.so has SONAME '$soname', expected libdcr.so.N" ;; esac
[ -e "$prefix/$libdir/$soname" ] || fail "$soname (the SONAME) is not installed"
# No header may include anything but the standard library and dcr/.
if grep -h '#include' "$prefix"/include/dcr/*.h | grep -v '#include <[a-z/]*\.h>' | grep -v '#include "dcr/' >/dev/null; then
  fail "an installed header includes something outside include/dcr and the C library"
fi

export PKG_CONFIG_PATH=$prefix/$libdir/pkgconfig
cc -std=c11 -Wall -Wextra -Werror -o "$work/ap_shared" "$src/examples/apply_payload.c" \
  $(pkg-config --cflags --libs dcr) -Wl,-rpath,"$prefix/$libdir"
# Static: libdcr.a, then its dependencies (Requires.private and Libs.private)
# as shared libraries. `pkg-config --static` would also expand the
# dependencies' own private libraries, which Debian's libcurl lists without
# shipping them (-llber), so the test spells the link out as a user would.
deps=$(pkg-config --print-requires-private dcr | awk '{print $1}')
private=$(sed -n 's/^Libs.private: //p' "$PKG_CONFIG_PATH/dcr.pc")
cc -std=c11 -Wall -Wextra -Werror -o "$work/ap_static" "$src/examples/apply_payload.c" \
  $(pkg-config --cflags dcr) "$prefix/$libdir/libdcr.a" $(pkg-config --libs $deps) $private
readelf -d "$work/ap_shared" | grep -q "NEEDED.*\[$soname\]" || fail "the shared consumer does not need $soname"
if readelf -d "$work/ap_static" | grep -q 'NEEDED.*libdcr'; then fail "the static consumer needs libdcr.so"; fi
cmake -S "$src/examples" -B "$work/cmake-consumer" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$work/cmake-consumer" >/dev/null

# A payload from the installed Python package (no DCR_LIBRARY: it must find
# its own libdcr), and the oracle: the target words, computed with numpy.
env -u DCR_LIBRARY PYTHONPATH="$prefix/$libdir/python3/dist-packages" PYTHONDONTWRITEBYTECODE=1 \
  "$py" - "$work" <<'PY'
import os, sys
import numpy as np
import dcr
work = sys.argv[1]
assert os.path.realpath(dcr._lib.lib._name).startswith(os.path.realpath(work)), dcr._lib.lib._name
rng = np.random.default_rng(7)
base = rng.integers(0, 1 << 16, size=(48, 40), dtype=np.uint16)
target = base.copy()
flat = target.reshape(-1)
idx = np.sort(rng.choice(flat.size, 97, replace=False))
flat[idx] = rng.integers(0, 1 << 16, size=idx.size, dtype=np.uint16)
flat[idx[:3]] = [0x8000, 0x7fc1, 0xff80]  # -0.0, a NaN payload, -inf
ch = np.flatnonzero(base.reshape(-1) != flat)
key_bytes = rng.integers(0, 256, size=32, dtype=np.uint8).tobytes()
open(os.path.join(work, "key"), "wb").write(key_bytes)
with dcr.Encoder(dcr.PayloadKey(key_bytes)) as enc:
    enc.add("w", base.shape, "bf16", dcr.XOR, ch, base.reshape(-1)[ch] ^ flat[ch])
    enc.add("other", (4,), "fp32", dcr.OVERWRITE, None, np.arange(4, dtype=np.uint32))
    open(os.path.join(work, "p.bin"), "wb").write(enc.finish(tau=3, owner=1, payload_id=0))
base.tofile(os.path.join(work, "base.bin"))
target.tofile(os.path.join(work, "target.bin"))
PY
chmod 600 "$work/key"
for exe in "$work/ap_shared" "$work/ap_static" "$work/cmake-consumer/apply_payload"; do
  rm -f "$work/out.bin"
  "$exe" "$work/p.bin" w "$work/base.bin" "$work/out.bin" "$work/key" >/dev/null
  cmp -s "$work/out.bin" "$work/target.bin" || fail "$exe: applied tensor differs from the oracle"
  # Unkeyed verification of a keyed payload must fail, and write nothing.
  rm -f "$work/out.bin"
  if "$exe" "$work/p.bin" w "$work/base.bin" "$work/out.bin" 2>/dev/null; then fail "$exe accepted a keyed payload without its key"; fi
  [ ! -e "$work/out.bin" ] || fail "$exe wrote output for a refused payload"
done
# The installed binary runs, and finds its helper scripts without any
# environment variable (it would name the path it looked in otherwise).
env -u DCR_TESTBED_SCRIPT "$prefix/bin/dcr" --help >/dev/null || fail "the installed dcr does not run"
# README's PyTorch example against the installed package (torch present:
# scripts/install-deps.sh installs it).
if "$py" -c 'import torch' 2>/dev/null; then
  env -u DCR_LIBRARY PYTHONPATH="$prefix/$libdir/python3/dist-packages" PYTHONDONTWRITEBYTECODE=1 \
    "$py" "$src/examples/torch_receiver.py" >/dev/null || fail "examples/torch_receiver.py fails against the installed package"
fi
# The installed binary reads its model configs from the prefix, found
# relative to itself: a copy of the prefix elsewhere resolves a config that
# exists only in that copy, by name, and resolves built-in names with the
# source tree hidden (an empty tmpfs over it, in a private mount namespace,
# where unprivileged user namespaces are allowed).
moved=$work/moved
cp -a "$prefix" "$moved"
cp "$moved/share/dcr/models/qwen2.5-0.5b.json" "$moved/share/dcr/models/install-probe.json"
inv() { env -u DCR_MODELS_DIR "$@" inventory --model "$model" 2>&1; }
model=install-probe
out=$(inv "$moved/bin/dcr") || fail "the moved dcr does not find a model of its own prefix: $out"
grep -q '^canonical  *290 tensors' <<<"$out" || fail "the moved dcr read another config: $out"
if inv "$build/dcr" >/dev/null; then fail "the build tree's dcr found a model only the moved prefix has"; fi
hidden=no
if unshare -rm true 2>/dev/null; then
  model=qwen2.5-0.5b
  out=$(unshare -rm bash -c 'mount -t tmpfs none "$1" && [ ! -e "$1/workloads" ] && shift && env -u DCR_MODELS_DIR "$@" inventory --model qwen2.5-0.5b' \
        _ "$src" "$moved/bin/dcr" 2>&1) || fail "with the source tree hidden the moved dcr fails: $out"
  grep -q '^canonical  *290 tensors' <<<"$out" || fail "with the source tree hidden: $out"
  hidden=yes
fi
# The simulator's cluster descriptions come from the prefix the same way: a
# preset only the moved prefix has is found by name.
cp "$moved/share/dcr/sim/clusters/paper-testbed.json" "$moved/share/dcr/sim/clusters/install-probe.json"
out=$(env -u DCR_SIM_CLUSTERS_DIR "$moved/bin/dcr" sim --cluster install-probe --write-platform "$work/probe.xml" 2>&1) ||
  fail "the moved dcr does not find a cluster description of its own prefix: $out"
[ -s "$work/probe.xml" ] || fail "the moved dcr wrote no platform: $out"
if env -u DCR_SIM_CLUSTERS_DIR "$build/dcr" sim --cluster install-probe --write-platform "$work/probe2.xml" >/dev/null 2>&1; then
  fail "the build tree's dcr found a cluster description only the moved prefix has"
fi
echo "install test: model configs from the moved prefix ok (source tree hidden: $hidden)"
echo "install test: layout, SONAME $soname, pkg-config (shared, static), find_package and payload apply ok"
