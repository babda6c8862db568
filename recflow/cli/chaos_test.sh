#!/usr/bin/env bash
# Chaos (`make chaos`, docs/fuzzing.md): randomized faults against a
# trainer and a model server, each followed by a check that nothing was
# lost. CHAOS_SEED picks the kill moments (printed; rerun with it to repeat
# a run); CHAOS_KILLS the number of trainer kills (default 10).
#  1. The trainer killed (-9) at random moments, up to 10 times (it saves
#     every 25 steps, so a kill may land inside a save): after each kill
#     the checkpoint a restart resumes from loads whole (`ckpt inspect
#     --verify`) and the newest step never goes back; the run finished at
#     last ends at exactly the step of an uninterrupted run (no step
#     counted twice, no batch lost or repeated) with its test AUC (within
#     0.003).
#  2. The newest checkpoint damaged on disk: the restart resumes from the
#     newest one that restores, says so, and ends at the same step.
#  3. The disk full during a checkpoint save (a size-limited tmpfs; skipped
#     with a message where one cannot be mounted): the run stops with a
#     clear error, leaves no temporary file, the last good checkpoint loads;
#     with room again the run resumes and ends at the same step. An export
#     into a full disk fails clearly and publishes no version directory.
#  4. The model server under steady load while new versions are published
#     every second: no request fails across the swaps; then killed (-9) and
#     restarted: it serves the newest version again, with no failed request.
set -u
RECFLOW=$1
source "$(dirname "$0")/online_lib.sh"
MOUNTS=()
cleanup_chaos() {
  for m in "${MOUNTS[@]}"; do umount "$m" 2>/dev/null; done
  cleanup
}
trap cleanup_chaos EXIT

seed=${CHAOS_SEED:-$((RANDOM * 32768 + RANDOM))}
kills=${CHAOS_KILLS:-10}
RANDOM=$seed
echo "chaos: seed $seed (CHAOS_SEED=$seed repeats the kill moments)"

"$RECFLOW" gen-data --rows 120000 --test_rows 10000 --seed 3 --out "$TMP/data" >/dev/null 2>&1 ||
  { echo "FAIL gen-data"; exit 1; }
cat >"$TMP/fm.yaml" <<YAML
model: {type: fm, embedding_dim: 8, seed: 1}
features: {dense: 13, sparse: 26, sparse_defaults: {vocabulary_size: 5000}}
optimizer:
  embedding: {type: adagrad, learning_rate: 0.05}
  dense: {type: adam, learning_rate: 0.002}
data: {train: $TMP/data/train-*.tsv, eval: $TMP/data/test-*.tsv, parse_threads: 1}
train: {batch_size: 64, epochs: 1, threads: 2, log_every_secs: 100}
checkpoint: {save_steps: 25, save_secs: 0, keep: 4}
YAML

newest_step() {  # newest_step DIR: the highest STEP of DIR/model.ckpt-STEP.index (0: none)
  ls "$1" 2>/dev/null | sed -n 's/^model\.ckpt-\([0-9]*\)\.index$/\1/p' | sort -n | tail -1 |
    grep . || echo 0
}
# eval_auc DIR: the test AUC of DIR's latest checkpoint.
eval_auc() { "$RECFLOW" eval --model_dir "$1" 2>/dev/null | grep -oE "^AUC [0-9.]+" | awk '{print $2}'; }
# close A B: |A - B| < 0.003
close() { awk -v a="$1" -v b="$2" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d < 0.003) }'; }

# The reference: one uninterrupted run.
"$RECFLOW" train --config "$TMP/fm.yaml" --model_dir "$TMP/ref" >"$TMP/ref.out" 2>"$TMP/ref.err" ||
  { echo "FAIL reference run: $(tail -3 "$TMP/ref.err")"; exit 1; }
ref_step=$(newest_step "$TMP/ref")
ref_auc=$(eval_auc "$TMP/ref")
echo "chaos: reference run ends at step $ref_step, test AUC $ref_auc"

# 1. Kills at random moments.
dir=$TMP/killed
prev=0 landed=0 verified=0
for k in $(seq "$kills"); do
  "$RECFLOW" train --config "$TMP/fm.yaml" --model_dir "$dir" >"$TMP/k.out" 2>"$TMP/k.err" &
  pid=$!
  # Wait for the run to get past its last checkpoint (so every run makes
  # progress), then up to 0.6 s more: the kill lands anywhere, a save too.
  for _ in $(seq 400); do
    (($(newest_step "$dir") > prev)) && break
    kill -0 $pid 2>/dev/null || break
    sleep 0.05
  done
  sleep "0.$((RANDOM % 6))$((RANDOM % 10))"
  if kill -KILL $pid 2>/dev/null; then landed=$((landed + 1)); fi
  wait $pid 2>/dev/null
  step=$(newest_step "$dir")
  ((step >= prev)) || fail "kill $k: the newest checkpoint went back from step $prev to $step"
  if "$RECFLOW" ckpt inspect --verify "$dir" >"$TMP/inspect.out" 2>&1; then
    verified=$((verified + 1))
  else
    fail "kill $k: the checkpoint a restart would use does not load: $(tail -2 "$TMP/inspect.out")"
  fi
  prev=$step
  ((step >= ref_step)) && break
done
"$RECFLOW" train --config "$TMP/fm.yaml" --model_dir "$dir" >"$TMP/last.out" 2>"$TMP/last.err" ||
  fail "the run after the kills: $(tail -3 "$TMP/last.err")"
step=$(newest_step "$dir")
[[ $step == "$ref_step" ]] || fail "after $landed kills the run ended at step $step, uninterrupted at $ref_step"
auc=$(eval_auc "$dir")
[[ -n $auc ]] && close "$auc" "$ref_auc" || fail "after $landed kills test AUC '$auc', uninterrupted $ref_auc"
echo "chaos: 1. $landed kills, $verified checkpoints verified after them; ended at step $step," \
  "test AUC $auc"

# 2. The newest checkpoint damaged: every byte of its data flipped at one bit.
f=$(ls "$dir"/model.ckpt-"$step".data-*)
python3 -c "import sys; p=sys.argv[1]; b=bytearray(open(p,'rb').read())
for i in range(0, len(b), 4096): b[i] ^= 0x10
open(p,'wb').write(b)" "$f"
"$RECFLOW" ckpt inspect --verify "$dir" >/dev/null 2>&1 && fail "a damaged checkpoint verified"
"$RECFLOW" train --config "$TMP/fm.yaml" --model_dir "$dir" >"$TMP/dmg.out" 2>"$TMP/dmg.err" ||
  fail "the run after damage: $(tail -3 "$TMP/dmg.err")"
grep -q "could not be restored.*resumed from model.ckpt-" "$TMP/dmg.err" ||
  fail "no recovery line after damage: $(grep -v 'step ' "$TMP/dmg.err" | tail -3)"
[[ $(newest_step "$dir") == "$ref_step" ]] || fail "after damage the run ended at $(newest_step "$dir")"
auc=$(eval_auc "$dir")
[[ -n $auc ]] && close "$auc" "$ref_auc" || fail "after damage test AUC '$auc', uninterrupted $ref_auc"
"$RECFLOW" ckpt inspect --verify "$dir" >/dev/null 2>&1 || fail "the rewritten checkpoint does not verify"
echo "chaos: 2. $(grep -o 'resumed from model.ckpt-[0-9]*' "$TMP/dmg.err"), ended at step $ref_step," \
  "test AUC $auc"

# 3. A full disk.
ckpt_bytes=$(du -cb "$TMP/ref"/model.ckpt-"$ref_step".* | tail -1 | cut -f1)
mkdir -p "$TMP/small" "$TMP/tiny"
if mount -t tmpfs -o size=$((ckpt_bytes * 5 / 2 + 4 * 1048576)) tmpfs "$TMP/small" 2>/dev/null; then
  MOUNTS+=("$TMP/small")
  full=$TMP/small/m
  "$RECFLOW" train --config "$TMP/fm.yaml" --model_dir "$full" >"$TMP/full.out" 2>"$TMP/full.err"
  rc=$?
  [[ $rc -ne 0 ]] || fail "a run on a full disk exited 0"
  grep -q "No space left on device" "$TMP/full.err" ||
    fail "a full disk is not named: $(tail -2 "$TMP/full.err")"
  ls "$full" | grep -q tempstate && fail "temporary files left after a failed save: $(ls "$full")"
  saved=$(newest_step "$full")
  ((saved > 0)) || fail "no checkpoint before the disk filled"
  "$RECFLOW" ckpt inspect --verify "$full" >/dev/null 2>&1 ||
    fail "the last good checkpoint on the full disk does not load"
  mount -o remount,size=$((ckpt_bytes * 8 + 8 * 1048576)) "$TMP/small" ||
    fail "cannot grow the tmpfs"
  "$RECFLOW" train --config "$TMP/fm.yaml" --model_dir "$full" >"$TMP/full2.out" 2>"$TMP/full2.err" ||
    fail "the run with room again: $(tail -3 "$TMP/full2.err")"
  [[ $(newest_step "$full") == "$ref_step" ]] ||
    fail "the run with room again ended at $(newest_step "$full"), not $ref_step"
  if mount -t tmpfs -o size=1m tmpfs "$TMP/tiny" 2>/dev/null; then
    MOUNTS+=("$TMP/tiny")
    "$RECFLOW" export --model_dir "$TMP/ref" --export_dir "$TMP/tiny/1" >"$TMP/exp.out" 2>&1 &&
      fail "an export into a full disk exited 0"
    grep -q "No space left on device" "$TMP/exp.out" ||
      fail "the export does not name the full disk: $(tail -2 "$TMP/exp.out")"
    [[ -e $TMP/tiny/1 ]] && fail "a failed export left a version directory: $(ls -R "$TMP/tiny")"
  fi
  echo "chaos: 3. the disk filled after step $saved (clean error, last checkpoint loads);" \
    "with room the run ended at step $ref_step; an export into a full disk published nothing"
else
  echo "chaos: 3. SKIPPED: cannot mount a tmpfs here (needs root); the full-disk checks did not run"
fi

# 4. Version swaps under load, then a kill.
base=$TMP/versions
mkdir -p "$base"
"$RECFLOW" export --model_dir "$TMP/ref" --export_dir "$base/1" >/dev/null 2>&1 || fail "export 1"
serve live --model_name=ctr --model_base_path="$base" --file_system_poll_wait_seconds=0.2
start_load "$URL_live"
for v in 2 3 4 5 6; do
  sleep "0.$((RANDOM % 10))"
  "$RECFLOW" export --model_dir "$TMP/ref" --export_dir "$base/$v" >/dev/null 2>&1 || fail "export $v"
  for _ in $(seq 100); do
    grep -q "version $v is available" "$TMP/live.err" && break
    sleep 0.05
  done
done
stop_load
grep -q " failed=0 " <<<"$LOAD_RESULT " || fail "requests failed across version swaps: $LOAD_RESULT"
swaps=$LOAD_RESULT
kill -KILL "$PID_live"
wait "$PID_live" 2>/dev/null
serve again --model_name=ctr --model_base_path="$base" --file_system_poll_wait_seconds=0.2
start_load "$URL_again"
sleep 2
stop_load
grep -q " failed=0 " <<<"$LOAD_RESULT " || fail "requests failed after the restart: $LOAD_RESULT"
python3 - "$URL_again/v1/models/ctr" >"$TMP/status.out" <<'PY'
import json, sys, urllib.request
with urllib.request.urlopen(sys.argv[1]) as r:
    print(" ".join(v["version"] for v in json.loads(r.read().decode())["model_version_status"]
                   if v["state"] == "AVAILABLE"))
PY
[[ $(cat "$TMP/status.out") == 6 ]] || fail "the restarted server serves '$(cat "$TMP/status.out")', not 6"
echo "chaos: 4. 5 swaps under load ($swaps); killed and restarted: version 6, $LOAD_RESULT"
finish chaos
