#!/usr/bin/env bash
# Installs the Debian 12 packages dcr builds and tests with. Idempotent: it runs
# apt-get (update first) only when a package is missing, so a second call is instant.
# Run as root (or with sudo available). Later modules add their packages here.
set -euo pipefail

packages=(
  build-essential cmake pkg-config git
  libcmocka-dev    # unit tests under CTest
  libjansson-dev   # model configs, --json output
  libzstd-dev      # payload compression
  libb2-dev        # BLAKE2b-128 payload digests
  libsqlite3-dev   # embedded control plane
  libhdf5-dev      # bench results (--out RESULTS.h5)
  libsimgrid-dev   # sim/: the capacity planner
  gnuplot-nox      # reports/: figures
  clang            # libFuzzer targets
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
