#!/usr/bin/env bash
# Fails when a fuzz target registered in recflow_fuzz_replay has no corpus
# folder under tests/fuzz/corpus/ (its replay test would not exist), or a
# corpus folder names no target.
set -euo pipefail
replay=$1 corpus=$2
status=0
targets=$("$replay" --list)
for t in $targets; do
  if [[ ! -d $corpus/$t ]] || [[ -z $(ls -A "$corpus/$t") ]]; then
    echo "fuzz target '$t' has no corpus: run recflow_fuzz_replay --write_seeds tests/fuzz/corpus"
    status=1
  fi
done
for d in "$corpus"/*/; do
  d=$(basename "$d")
  if ! grep -qx "$d" <<<"$targets"; then
    echo "tests/fuzz/corpus/$d names no fuzz target"
    status=1
  fi
done
((status == 0)) && echo "$(wc -w <<<"$targets") fuzz targets, each with a corpus"
exit $status
