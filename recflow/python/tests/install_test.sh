#!/usr/bin/env bash
# The install path of docs/python.md: a venv (seeing Debian's NumPy), the
# package installed by pip through pyproject.toml's in-tree backend, without
# network, then used from outside the source and build trees.
#   install_test.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src=$1
build=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
/usr/bin/python3 -m venv --system-site-packages "$tmp/venv"
cd "$src"
RECFLOW_BUILD_DIR=$build "$tmp/venv/bin/pip" install -q --no-build-isolation --no-index \
    --no-deps --no-cache-dir .
cd "$tmp"
env -u PYTHONPATH "$tmp/venv/bin/python" - <<'PY'
import recflow, recflow.compat.v1 as tf
import recflow.contrib.slim as slim  # subpackages are in the wheel too
from recflow.contrib.slim.nets import nets_factory
assert "/venv/" in recflow.__file__, recflow.__file__
assert "lenet" in nets_factory.networks_map and tf.contrib.slim.conv2d is slim.conv2d
x = tf.placeholder(tf.float32, [None])
with tf.Session() as sess:
  assert sess.run(x * 2.0, {x: [1.5]}).tolist() == [3.0]
print("install_test: ok,", recflow.__file__)
PY
