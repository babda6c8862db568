# Sourced by distributed_test.sh and netns_test.sh: the small training job
# both run. Needs $RECFLOW (the binary) and $TMP (a scratch directory).

# A 60K-row synthetic click log (10K test rows) in $TMP/data.
make_job_data() {
  "$RECFLOW" gen-data --rows 60000 --test_rows 10000 --seed 5 --out "$TMP/data" >/dev/null 2>&1 ||
    { echo "FAIL gen-data"; exit 1; }
}

# $TMP/deepfm.yaml: DeepFM on hash tables over that log. Its Adagrad is
# TensorFlow 1's (accumulator from 0.1, no epsilon): the faults job runs ~2
# epochs of this small log and is compared with a 1-epoch single process,
# and the zoo's default (PyTorch's rule, accumulator from 0) overfits a
# second epoch here (single process, 3 epochs / 500 steps: test AUC 0.649
# against 0.714 with this rule).
# $1: epochs, $2: steps (0: by epochs), $3: save_steps, $4: batch size (256)
write_job_config() {
  cat >"$TMP/deepfm.yaml" <<CONFIG
model: {type: deepfm, embedding_dim: 8, hidden_units: [32, 16], seed: 1}
features:
  dense: 13
  sparse: 26
  sparse_defaults: {hash_table: true}
optimizer:
  embedding: {type: adagrad, learning_rate: 0.05, initial_accumulator_value: 0.1, epsilon: 0}
  dense: {type: adam, learning_rate: 0.002}
data: {train: $TMP/data/train-*.tsv, eval: $TMP/data/test-*.tsv, parse_threads: 1}
train: {batch_size: ${4:-256}, epochs: $1, steps: $2, threads: 1, log_every_secs: 0.2}
checkpoint: {save_steps: $3, save_secs: 0}
CONFIG
}
