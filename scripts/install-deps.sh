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
  openmpi-bin libopenmpi-dev  # owner ranks as an MPI job, the "mpi" group backend
  libcurl4-openssl-dev        # S3 object store (SigV4) and etcd's v3 JSON gateway
  libssl-dev                  # libcrypto: MD5 of S3 ETags, base64 of etcd's bytes fields
  libexpat1-dev               # S3's XML responses
  etcd-server                 # tests start etcd on loopback
  iproute2                    # ip and tc: the network-namespace testbed (scripts/testbed.sh)
  python3 python3-numpy       # python/dcr: the ctypes package over libdcr and its tests
  python3-torch               # dcr.torch receivers and their tests (PyTorch 1.13 in Debian 12)
  python3-h5py                # reading results files from Python
  binutils                    # readelf: the install test checks libdcr's SONAME
)
# Node.js and npm run s3rver, the S3 test server (installed project-locally
# below). A machine may already carry them from another source (NodeSource's
# nodejs bundles npm and conflicts with Debian's npm package), so the Debian
# packages are added only for a command that is missing.
command -v node >/dev/null 2>&1 || packages+=(nodejs)
command -v npm >/dev/null 2>&1 || packages+=(npm)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
else
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# s3rver, an S3-compatible test server, goes into the project-local (git-ignored)
# folder .deps/s3rver at a pinned version; tests find it at
# .deps/s3rver/node_modules/.bin/s3rver. Never installed globally.
s3rver_version=3.7.1
s3rver_dir="$(cd "$(dirname "$0")/.." && pwd)/.deps/s3rver"
if [ ! -x "$s3rver_dir/node_modules/.bin/s3rver" ]; then
  echo "install-deps: installing s3rver@$s3rver_version into .deps/s3rver"
  mkdir -p "$s3rver_dir"
  npm install --prefix "$s3rver_dir" --no-audit --no-fund --loglevel=error "s3rver@$s3rver_version" || {
    echo "install-deps: npm could not install s3rver@$s3rver_version (its error is above: the npm registry" \
      "unreachable, or a TLS proxy whose CA node does not trust; NODE_EXTRA_CA_CERTS names one)" >&2
    exit 1
  }
fi
