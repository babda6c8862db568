#!/usr/bin/env bash
# Installs the Debian 12 packages recflow's build and tests need, and only
# those. Idempotent: when everything is present it changes nothing and
# needs no network. Run as root (or with sudo available).
#
#   scripts/install-deps.sh          # build + test dependencies
#   scripts/install-deps.sh --bench  # also the benchmark peers (PyTorch, RocksDB)
set -euo pipefail

BUILD_PACKAGES=(
  cmake ninja-build g++ make pkg-config   # toolchain
  libprotobuf-dev protobuf-compiler       # GraphDef/SavedModel protos
  libabsl-dev                             # Status, strings, containers, sync
  libopenblas-dev                         # MatMul
  libfarmhash-dev                         # Fingerprint64 (string ids, as TF)
  libsnappy-dev                           # old TF checkpoint indexes (snappy blocks)
  libyaml-cpp-dev                         # model configs (YAML, with line numbers in errors)
  libgrpc++-dev protobuf-compiler-grpc    # TF Serving's gRPC API
  rapidjson-dev                           # TF Serving's REST API (JSON)
  libgtest-dev libgmock-dev               # tests
  python3-dev pybind11-dev python3-pybind11 python3-numpy  # the Python package (build/python)
  python3-pytest                          # its tests
  python3-venv                            # make install-python (a venv with the package)
  python3-grpcio                          # recflow.client.grpc (the model server's gRPC client)
)
BENCH_PACKAGES=(python3-torch python3-numpy python3-pandas
                librocksdb-dev)  # bench/run cold_store's peer

packages=("${BUILD_PACKAGES[@]}")
if [[ ${1:-} == --bench ]]; then packages+=("${BENCH_PACKAGES[@]}"); fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
SUDO=""
if ((EUID != 0)); then
  command -v sudo >/dev/null || { echo "install-deps: need root to install: ${missing[*]}" >&2; exit 1; }
  SUDO=sudo
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "install-deps: done"
