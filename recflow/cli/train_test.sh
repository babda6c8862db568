#!/usr/bin/env bash
# recflow train / eval end to end on a small synthetic click log:
#  - a run trains, checkpoints, evaluates and beats chance;
#  - a run killed with SIGKILL mid-way and started again resumes from its
#    last checkpoint (model, optimizer state, data position) and ends with
#    the AUC of an uninterrupted run;
#  - eval of the trained model directory reproduces the test AUC;
#  - bad configs and data are clear errors.
set -u
RECFLOW=$1
SRC=$2
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fails=0

fail() {
  echo "FAIL $*"
  fails=$((fails + 1))
}

"$RECFLOW" gen-data --rows 60000 --test_rows 10000 --seed 3 --out "$TMP/data" >/dev/null 2>&1 ||
  { echo "FAIL gen-data"; exit 1; }

cat >"$TMP/fm.yaml" <<EOF
model: {type: fm, embedding_dim: 8, seed: 1}
features:
  dense: 13
  sparse: 26
  sparse_defaults: {vocabulary_size: 20000}
optimizer:
  embedding: {type: adagrad, learning_rate: 0.05}
  dense: {type: adam, learning_rate: 0.002}
data: {train: $TMP/data/train-*.tsv, eval: $TMP/data/test-*.tsv, parse_threads: 1}
train: {batch_size: 256, epochs: 1, threads: 2, log_every_secs: 0.2}
checkpoint: {save_steps: 40, save_secs: 0}
EOF

# 1. Uninterrupted.
out=$("$RECFLOW" train --config "$TMP/fm.yaml" --model_dir "$TMP/full" 2>"$TMP/full.err")
rc=$?
full_auc=$(grep -oE "test AUC [0-9.]+" <<<"$out" | awk '{print $3}')
if [[ $rc -ne 0 || -z "$full_auc" ]]; then
  fail "uninterrupted train: exit $rc"; echo "$out"; tail -5 "$TMP/full.err"
fi
grep -q "step " "$TMP/full.err" || fail "no progress lines on stderr"
ls "$TMP/full"/events.out.tfevents.* >/dev/null 2>&1 || fail "no TensorBoard event file"
ls "$TMP/full"/model.ckpt-*.index >/dev/null 2>&1 || fail "no checkpoint"
awk -v a="$full_auc" 'BEGIN { exit !(a > 0.58) }' || fail "test AUC $full_auc not above 0.58"

# 2. Killed with SIGKILL after its first checkpoint, then started again.
"$RECFLOW" train --config "$TMP/fm.yaml" --model_dir "$TMP/killed" >/dev/null 2>&1 &
pid=$!
for _ in $(seq 1 600); do
  ls "$TMP/killed"/model.ckpt-80.index >/dev/null 2>&1 && break
  sleep 0.05
done
kill -9 $pid 2>/dev/null
wait $pid 2>/dev/null
ls "$TMP/killed"/model.ckpt-*.index >/dev/null 2>&1 || fail "killed run left no checkpoint"
out=$("$RECFLOW" train --config "$TMP/fm.yaml" --model_dir "$TMP/killed" 2>"$TMP/killed.err")
rc=$?
grep -q "resumed from" "$TMP/killed.err" || fail "restarted run did not resume: $(tail -3 "$TMP/killed.err")"
resumed_auc=$(grep -oE "test AUC [0-9.]+" <<<"$out" | awk '{print $3}')
steps_full=$(ls "$TMP/full"/model.ckpt-*.index | sed 's/.*ckpt-\([0-9]*\).index/\1/' | sort -n | tail -1)
steps_resumed=$(ls "$TMP/killed"/model.ckpt-*.index | sed 's/.*ckpt-\([0-9]*\).index/\1/' | sort -n | tail -1)
if [[ $rc -ne 0 || -z "$resumed_auc" ]]; then
  fail "resumed train: exit $rc"; echo "$out"; tail -5 "$TMP/killed.err"
else
  [[ "$steps_full" == "$steps_resumed" ]] ||
    fail "resumed run ended at step $steps_resumed, uninterrupted at $steps_full (data position lost?)"
  awk -v a="$full_auc" -v b="$resumed_auc" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d < 0.003) }' ||
    fail "resumed AUC $resumed_auc vs uninterrupted $full_auc"
fi

# 3. Eval of the trained directory gives the same test AUC.
out=$("$RECFLOW" eval --model_dir "$TMP/full" 2>&1)
eval_auc=$(grep -oE "^AUC [0-9.]+" <<<"$out" | awk '{print $2}')
[[ "$eval_auc" == "$full_auc" ]] || fail "eval AUC '$eval_auc' != train's test AUC $full_auc: $out"

# 4. Bad inputs.
expect_error() {
  local name=$1 regex=$2
  shift 2
  local out rc
  out=$("$@" 2>&1)
  rc=$?
  if [[ $rc -eq 0 ]] || ! grep -qE -- "$regex" <<<"$out" || grep -q "Segmentation\|Aborted" <<<"$out"; then
    fail "$name: exit $rc, output: $(head -3 <<<"$out")"
  fi
}
printf 'model: {type: fm, hiden: 1}\nfeatures: {dense: 13}\n' >"$TMP/bad.yaml"
expect_error unknown_key "bad.yaml:1:19: unknown key 'model.hiden'" \
  "$RECFLOW" train --config "$TMP/bad.yaml" --data "$TMP/data/train-*.tsv" --model_dir "$TMP/b1"
expect_error missing_config "cannot read config .*nope.yaml" \
  "$RECFLOW" train --config "$TMP/nope.yaml"
printf 'model: {type: lr}\nfeatures: {dense: 13}\n' >"$TMP/nodata.yaml"
expect_error no_data "data.train is empty" "$RECFLOW" train --config "$TMP/nodata.yaml"
expect_error missing_data "pattern .*none-\*.tsv. matches no file" \
  "$RECFLOW" train --config "$TMP/fm.yaml" --data "$TMP/none-*.tsv" --model_dir "$TMP/b2"
printf 'model: {type: lr}\nfeatures: {dense: [I1, I99]}\n' >"$TMP/badfeat.yaml"
expect_error unknown_feature "'I99' is not a dense column" \
  "$RECFLOW" train --config "$TMP/badfeat.yaml" --data "$TMP/data/train-*.tsv" --model_dir "$TMP/b3"
expect_error eval_no_model "checkpoint|not found|NotFound" \
  "$RECFLOW" eval --config "$TMP/fm.yaml" --model_dir "$TMP/empty"
expect_error bad_steps "--steps: not a number" \
  "$RECFLOW" train --config "$TMP/fm.yaml" --steps x

# 5. DIN from files: gen-data --history writes the sequence column H1, the
# Criteo parser reads it for the config's {name: H1, sequence_of: C1}.
"$RECFLOW" gen-data --rows 20000 --test_rows 4000 --seed 4 --history 12 --out "$TMP/hist" >/dev/null 2>&1 ||
  fail "gen-data --history"
sed -e 's/vocabulary_size: 100000/vocabulary_size: 20000/' -e 's/batch_size: 1024/batch_size: 256/' \
  "$SRC/examples/configs/din.yaml" >"$TMP/din.yaml"
out=$("$RECFLOW" train --config "$TMP/din.yaml" --data "$TMP/hist/train-*.tsv" \
  --eval_data "$TMP/hist/test-*.tsv" --model_dir "$TMP/din" --threads 2 2>"$TMP/din.err")
din_auc=$(grep -oE "test AUC [0-9.]+" <<<"$out" | awk '{print $3}')
if [[ -z "$din_auc" ]]; then
  fail "din train on --history files: $out $(tail -3 "$TMP/din.err")"
else
  awk -v a="$din_auc" 'BEGIN { exit !(a > 0.6) }' || fail "din test AUC $din_auc not above 0.6"
fi
expect_error din_plain_files "has 40 columns on line 1, but the config's 1 sequence feature" \
  "$RECFLOW" train --config "$TMP/din.yaml" --data "$TMP/data/train-*.tsv" --model_dir "$TMP/b4"
expect_error history_files_no_sequence "has 41 columns on line 1, but the config has no sequence" \
  "$RECFLOW" train --config "$TMP/fm.yaml" --data "$TMP/hist/train-*.tsv" --model_dir "$TMP/b5"
sed 's/{name: H1, sequence_of: C1}/{name: hist, sequence_of: C1}/' "$TMP/din.yaml" >"$TMP/din_hist.yaml"
expect_error sequence_not_named_h1 "sequence 'hist' \(sequence_of: C1\): with criteo data the 1 sequence feature\(s\) must be named H1..H1" \
  "$RECFLOW" train --config "$TMP/din_hist.yaml" --data "$TMP/hist/train-*.tsv" --model_dir "$TMP/b6"
expect_error gen_data_history_range "--history must be an integer in \[0, 32\], got '33'" \
  "$RECFLOW" gen-data --rows 10 --history 33 --out "$TMP/b7"
expect_error gen_data_history_field "--history_field must be a categorical field C1..C26, got 'C27'" \
  "$RECFLOW" gen-data --rows 10 --history 3 --history_field C27 --out "$TMP/b7"
expect_error gen_data_history_tfrecord "histories are written only in the criteo format" \
  "$RECFLOW" gen-data --rows 10 --history 3 --format tfrecord --out "$TMP/b7"

# 6. Issue 22, on a small log: bad data, restarts and damaged state files.
"$RECFLOW" gen-data --rows 2000 --test_rows 300 --seed 6 --out "$TMP/small" >/dev/null 2>&1 ||
  fail "gen-data small"
cat >"$TMP/small.yaml" <<EOF
model: {type: fm, embedding_dim: 4, seed: 1}
features:
  dense: 13
  sparse: 26
  sparse_defaults: {vocabulary_size: 1000}
data: {train: $TMP/small/train-*.tsv, eval: $TMP/small/test-*.tsv, parse_threads: 1}
train: {batch_size: 100, epochs: 5, threads: 1, log_every_secs: 100}
checkpoint: {save_steps: 10, save_secs: 0}
EOF
good=$(ls "$TMP"/small/train-*.tsv)
ckpts() { ls "$1" 2>/dev/null | sed -n 's/^model.ckpt-\([0-9]*\).index$/\1/p' | sort -n | tr '\n' ' '; }
expect_ok() {  # expect_ok NAME REGEX CMD...: exit 0 and the output matches
  local name=$1 regex=$2
  shift 2
  local out rc
  out=$("$@" 2>&1)
  rc=$?
  if [[ $rc -ne 0 ]] || ! grep -qE -- "$regex" <<<"$out"; then
    fail "$name: exit $rc, output: $(tail -4 <<<"$out")"
  fi
}
# A file whose last lines are all bad: their batch is skipped and counted
# (was: "NaN loss at step 3", exit 1, no checkpoint).
sed 's/epochs: 5/epochs: 1/' "$TMP/small.yaml" >"$TMP/small1.yaml"
{ head -250 "$good"; for i in $(seq 150); do echo "garbage line $i"; done; } >"$TMP/tail_bad.tsv"
out=$("$RECFLOW" train --config "$TMP/small1.yaml" --data "$TMP/tail_bad.tsv" --eval_data "$good" \
  --model_dir "$TMP/i4a" 2>&1)
grep -q "1 batch of only bad lines skipped" <<<"$out" || fail "tail_bad_lines: $(tail -4 <<<"$out")"
# The examples are counted, not steps x batch_size (was "300 examples").
grep -q "trained 3 steps (250 examples)" <<<"$out" || fail "tail_bad_examples: $(tail -4 <<<"$out")"
[[ "$(ckpts "$TMP/i4a")" == "3 " ]] || fail "tail_bad_lines: checkpoints '$(ckpts "$TMP/i4a")', expected 3"
# A file without a good line is an error naming it (was: "NaN loss at step 1").
for i in $(seq 30); do echo "garbage $i"; done >"$TMP/all_bad.tsv"
expect_error all_bad_file "data file .*all_bad.tsv has no good line: its 30 line\(s\) are all bad" \
  "$RECFLOW" train --config "$TMP/small.yaml" --data "$TMP/all_bad.tsv" --model_dir "$TMP/i4b"
# ... also after good files (no checkpoint by then): the steps done are
# saved, past that file, so the same command then has nothing left to do.
cp "$TMP/all_bad.tsv" "$TMP/z_all_bad.tsv"
sed 's/save_steps: 10/save_steps: 0/' "$TMP/small1.yaml" >"$TMP/small1_nosave.yaml"
out=$("$RECFLOW" train --config "$TMP/small1_nosave.yaml" --data "$good,$TMP/z_all_bad.tsv" \
  --model_dir "$TMP/i4c" 2>&1)
rc=$?
if [[ $rc -ne 1 ]] || ! grep -q "z_all_bad.tsv has no good line" <<<"$out" ||
  ! grep -qE "^  saved .*i4c/model.ckpt-20 \(the last completed step\)" <<<"$out"; then
  fail "bad_file_last: exit $rc, output: $(tail -3 <<<"$out")"
fi
[[ "$(ckpts "$TMP/i4c")" == "20 " ]] || fail "bad_file_last: checkpoints '$(ckpts "$TMP/i4c")', expected 20"
expect_ok bad_file_last_rerun "nothing to do: .*model.ckpt-20 \(global step 20\) has already read" \
  "$RECFLOW" train --config "$TMP/small1_nosave.yaml" --data "$good,$TMP/z_all_bad.tsv" --model_dir "$TMP/i4c"
# A NaN loss keeps the last good checkpoint and says so.
sed -e 's/save_steps: 10/save_steps: 1/' \
  -e 's/^model: .*/&\noptimizer: {embedding: {type: sgd, learning_rate: 1e38}, dense: {type: sgd, learning_rate: 1e38}}/' \
  "$TMP/small.yaml" >"$TMP/nan.yaml"
expect_error nan_keeps_last_good "not saved .*the last good checkpoint is .*i4d/model.ckpt-1$" \
  "$RECFLOW" train --config "$TMP/nan.yaml" --model_dir "$TMP/i4d"
[[ "$(ckpts "$TMP/i4d")" == "1 " ]] || fail "nan: checkpoints '$(ckpts "$TMP/i4d")', expected 1"

# Restarted at its last step: nothing to do (was: one more step, ckpt-21).
expect_ok steps_first "trained 20 steps" "$RECFLOW" train --config "$TMP/small.yaml" --steps 20 --model_dir "$TMP/i5"
for again in 1 2; do
  expect_ok "steps_again_$again" "^nothing to do: .*model.ckpt-20 is at global step 20, train.steps is 20" \
    "$RECFLOW" train --config "$TMP/small.yaml" --steps 20 --model_dir "$TMP/i5"
done
[[ "$(ckpts "$TMP/i5")" == "10 20 " ]] || fail "steps: checkpoints '$(ckpts "$TMP/i5")', expected 10 20"
expect_ok steps_more "resumed from .*model.ckpt-20 \(step 20\)" \
  "$RECFLOW" train --config "$TMP/small.yaml" --steps 25 --model_dir "$TMP/i5"
[[ "$(ckpts "$TMP/i5")" == "10 20 25 " ]] || fail "steps 25: checkpoints '$(ckpts "$TMP/i5")'"

# A damaged `checkpoint` state file: train resumes from the newest intact
# checkpoint (was: from step 0, listing the old ones under its own), and
# eval, export and ckpt inspect use the same one (was: "names no checkpoint").
for kind in empty garbage missing outside; do
  d="$TMP/i6_$kind"
  cp -r "$TMP/i5" "$d" && rm -f "$d"/model.ckpt-25.*
  case $kind in
    empty) : >"$d/checkpoint" ;;
    garbage) echo 'model_checkpoint_path: 12 {' >"$d/checkpoint" ;;
    missing) echo 'model_checkpoint_path: "model.ckpt-30"' >"$d/checkpoint" ;;
    outside) echo 'model_checkpoint_path: "/etc/passwd"' >"$d/checkpoint" ;;
  esac
  expect_ok "state_$kind: inspect" "warning: .*using .*i6_$kind/model.ckpt-20, the newest intact" \
    "$RECFLOW" ckpt inspect "$d"
  expect_ok "state_$kind: eval" "^checkpoint .*i6_$kind/model.ckpt-20" "$RECFLOW" eval --model_dir "$d" --batches 1
  expect_ok "state_$kind: export" "^exported .*i6_$kind/model.ckpt-20" \
    "$RECFLOW" export --model_dir "$d" --export_dir "$d.export"
  expect_ok "state_$kind: train" "resumed from .*i6_$kind/model.ckpt-20 \(step 20\)" \
    "$RECFLOW" train --config "$TMP/small.yaml" --steps 30 --model_dir "$d"
  [[ "$(ckpts "$d")" == "10 20 30 " ]] || fail "state_$kind: checkpoints '$(ckpts "$d")'"
done
# ... and with no intact checkpoint to fall back on, an error, not a fresh start.
rm -f "$TMP/i6_empty"/model.ckpt-* && : >"$TMP/i6_empty/checkpoint"
expect_error state_nothing_to_recover "names no checkpoint; and .* holds no intact checkpoint" \
  "$RECFLOW" train --config "$TMP/small.yaml" --steps 30 --model_dir "$TMP/i6_empty"
[[ -z "$(ckpts "$TMP/i6_empty")" ]] || fail "state_nothing_to_recover trained: $(ckpts "$TMP/i6_empty")"

echo "train_test: uninterrupted AUC $full_auc, resumed AUC $resumed_auc, eval AUC $eval_auc, din AUC ${din_auc:-none}; $fails failures"
[[ $fails -eq 0 ]]
