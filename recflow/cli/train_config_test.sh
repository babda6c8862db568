#!/usr/bin/env bash
# recflow train / eval / gen-data refuse run configs and flags that cannot
# work, up front and by name, instead of crashing, aborting or running for
# minutes (issue 22): huge batch sizes and thread counts, duplicate keys,
# keys without a value, non-finite numbers, parameter counts that overflow,
# models that cannot fit the machine's memory. Every case must exit with a
# status (never a signal) and say what is wrong. A few seconds.
set -u
RECFLOW=$1
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fails=0

fail() {
  echo "FAIL $*"
  fails=$((fails + 1))
}

# expect NAME EXIT_STATUS REGEX CMD...: the command exits with EXIT_STATUS
# (not killed by a signal) and its output matches REGEX.
expect() {
  local name=$1 want=$2 regex=$3
  shift 3
  local out rc
  out=$("$@" 2>&1)
  rc=$?
  if [[ $rc -ne $want ]] || ! grep -qE -- "$regex" <<<"$out"; then
    fail "$name: exit $rc (want $want), output: $(head -c 600 <<<"$out")"
  fi
}

"$RECFLOW" gen-data --rows 2000 --test_rows 200 --seed 5 --out "$TMP/data" >/dev/null 2>&1 ||
  { echo "FAIL gen-data"; exit 1; }

# config BODY: a small lr run config on the generated data, with BODY's
# sections; written to $TMP/c.yaml.
config() {
  {
    echo "data: {train: $TMP/data/train-*.tsv, eval: $TMP/data/test-*.tsv, parse_threads: 1}"
    printf '%b\n' "$1"
  } >"$TMP/c.yaml"
}
train() { "$RECFLOW" train --config "$TMP/c.yaml" --model_dir "$TMP/m$RANDOM" "$@"; }
FEATURES='features: {dense: 13, sparse: 26, sparse_defaults: {vocabulary_size: 1000}}'

# 1. A batch of 1e9 crashed the line reader (SIGSEGV); the bound is 2^24.
config "model: {type: lr}\n$FEATURES\ntrain: {batch_size: 1000000000}"
expect batch_size 1 "c.yaml:4:21: train.batch_size must be <= 16777216, got 1000000000" train
# At the bound, a file of 2000 lines is one batch of 2000.
config "model: {type: lr}\n$FEATURES\ntrain: {batch_size: 16777216, threads: 1, steps: 1}"
expect batch_size_at_bound 0 "trained 1 steps" train

# 2. Thread counts: keys and flags are bounded and named.
config "model: {type: lr}\n$FEATURES"
sed -i 's/parse_threads: 1/parse_threads: 1000000/' "$TMP/c.yaml"
expect parse_threads 1 "c.yaml:1:.*data.parse_threads is 1000000; must be between 0 and 4096 threads" train
config "model: {type: lr}\n$FEATURES\ntrain: {threads: 100000}"
expect train_threads 1 "c.yaml:4:18: train.threads is 100000; must be between 0 and 4096 threads" train
config "model: {type: lr}\n$FEATURES"
expect threads_flag 2 "^error: --threads is 100000; must be between 0 and 4096 threads" train --threads 100000
expect threads_flag_range 2 "^error: --threads is -1; must be between 0 and 4096" train --threads -1
expect gen_data_threads 2 "--threads is 100000; must be between 0 and 4096 threads" \
  "$RECFLOW" gen-data --rows 10 --threads 100000 --out "$TMP/g"
[[ -e "$TMP/g" ]] && fail "gen-data --threads 100000 created its output directory"

# 3. Duplicate keys, keys without a value, numbers that are not finite.
config "model: {type: lr}\n$FEATURES\ntrain:\n  batch_size: 64\n  batch_size: 128"
expect duplicate_key 1 "c.yaml:6:3: duplicate key 'train.batch_size' \(lines 5 and 6\)" train
config "model: {type: lr}\n$FEATURES\ntrain: {batch_size: ~}"
expect null_batch_size 1 "c.yaml:4:9: train.batch_size has no value \(null\); expected an integer, or leave the key out for the default \(4096\)" train
config "model: {type: lr}\n$FEATURES\noptimizer: {dense: {learning_rate: .inf}}"
expect inf_learning_rate 1 "c.yaml:4:36: optimizer.dense.learning_rate must be a finite number" train

# 4. Sizes: a parameter count that overflows, 100,000 layers, a model that
# cannot fit any machine's memory (about 12 TB to train), refused before
# the first step.
config "model: {type: deepfm}\nfeatures: {dense: 13, sparse: 26, sparse_defaults: {vocabulary_size: 9223372036854775807}}"
expect vocabulary_overflow 1 "c.yaml:3:.*the table of 'C1' \(vocabulary_size 9223372036854775807 \+ 1 missing-id row x dim 16\) has more parameters than fit in int64" train
units=$(seq -s, 1 100000 | sed 's/[0-9]\+/1/g')
config "model: {type: mlp, hidden_units: [$units]}\n$FEATURES"
expect many_layers 1 "model.hidden_units has 100000 entries; at most 1024" train
config "model: {type: mlp, hidden_units: [1000000, 1000000]}\n$FEATURES"
expect too_large 1 "model 'mlp' cannot fit in memory: training it needs at least [0-9.]+ TB .* The largest: variable '.*/kernel' \[1000000, 1000000\]" train
# eval reads the same config: the weights alone (4 TB) do not fit either.
mkdir -p "$TMP/e"
expect too_large_eval 1 "model 'mlp' cannot fit in memory: running it needs at least 4.0 TB" \
  "$RECFLOW" eval --config "$TMP/c.yaml" --model_dir "$TMP/e"

echo "train_config_test: $fails failures"
[[ $fails -eq 0 ]]
