#!/usr/bin/env bash
# Installs the Debian 12 packages recflow's build and tests need, and only
# those. Idempotent: when everything is present it changes nothing and
# needs no network. Run as root (or with sudo available).
#
#   scripts/install-deps.sh          # build + test dependencies
#   scripts/install-deps.sh --bench  # also the benchmark peers (PyTorch, RocksDB,
#                                    # Node.js + onnxruntime-node for bench/run serving)
#   scripts/install-deps.sh --fuzz   # also clang and libFuzzer (make fuzz)
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_PACKAGES=(
  cmake ninja-build g++ make pkg-config   # toolchain
  libprotobuf-dev protobuf-compiler       # GraphDef/SavedModel protos
  libabsl-dev                             # Status, strings, containers, sync
  libopenblas-dev                         # MatMul
  libdnnl-dev                             # oneDNN: int8 matmuls (serve --matmul_precision=int8)
  libfarmhash-dev                         # Fingerprint64 (string ids, as TF)
  libsnappy-dev                           # old TF checkpoint indexes (snappy blocks)
  libpng-dev libjpeg62-turbo-dev          # DecodePng/DecodeJpeg/EncodePng/EncodeJpeg
  libyaml-cpp-dev                         # model configs (YAML, with line numbers in errors)
  libgrpc++-dev protobuf-compiler-grpc    # TF Serving's gRPC API
  rapidjson-dev                           # TF Serving's REST API (JSON)
  libgtest-dev libgmock-dev               # tests
  python3-dev pybind11-dev python3-pybind11 python3-numpy  # the Python package (build/python)
  python3-pytest                          # its tests
  python3-venv                            # make install-python (a venv with the package)
  python3-grpcio                          # recflow.client.grpc (the model server's gRPC client)
  python3-sklearn                         # the digits data set of examples/python/slim (docs/slim.md)
)
BENCH_PACKAGES=(python3-torch python3-numpy python3-pandas
                python3-onnx    # bench/run serving: the ONNX export's check
                librocksdb-dev)  # bench/run cold_store's peer
# make fuzz (scripts/fuzz.sh): clang, its sanitizer and libFuzzer runtimes,
# and llvm-symbolizer for readable stacks in the reports.
FUZZ_PACKAGES=(clang-14 libclang-rt-14-dev llvm-14)
# bench/run serving's ONNX Runtime peer (bench/peers/serving_ort.js): Node.js
# and npm (Debian's, unless a node is already installed), then the exact
# npm packages of bench/peers/ort/package-lock.json (onnxruntime-node
# 1.30.0) in bench/peers/ort/node_modules (gitignored).
ORT_DIR=bench/peers/ort
ORT_VERSION=1.30.0

bench=0 fuzz=0
case ${1:-} in
  --bench) bench=1 ;;
  --fuzz) fuzz=1 ;;
  "") ;;
  *) echo "install-deps: unknown option '$1' (--bench, --fuzz)" >&2; exit 2 ;;
esac
packages=("${BUILD_PACKAGES[@]}")
if ((fuzz)); then packages+=("${FUZZ_PACKAGES[@]}"); fi
if ((bench)); then
  packages+=("${BENCH_PACKAGES[@]}")
  # Only when absent: a node from elsewhere (e.g. a newer nodejs package
  # that bundles npm) would conflict with Debian's npm package.
  if ! command -v node >/dev/null || ! command -v npm >/dev/null; then packages+=(nodejs npm); fi
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#packages[@]} packages present"
else
  echo "install-deps: installing ${missing[*]}"
  SUDO=""
  if ((EUID != 0)); then
    command -v sudo >/dev/null || { echo "install-deps: need root to install: ${missing[*]}" >&2; exit 1; }
    SUDO=sudo
  fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

if ((bench)); then
  have=$(node -p "require('./$ORT_DIR/node_modules/onnxruntime-node/package.json').version" \
           2>/dev/null || true)
  if [[ $have == "$ORT_VERSION" ]]; then
    echo "install-deps: onnxruntime-node $ORT_VERSION present in $ORT_DIR/node_modules"
  else
    # --ignore-scripts: onnxruntime-node's install script only fetches GPU
    # providers; the CPU library ships in the package.
    echo "install-deps: npm ci in $ORT_DIR (onnxruntime-node $ORT_VERSION)"
    (cd "$ORT_DIR" && npm ci --ignore-scripts --no-audit --no-fund)
  fi
fi
echo "install-deps: done"
