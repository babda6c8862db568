#!/usr/bin/env bash
# Chaos (`make chaos`, docs/fuzzing.md): randomized faults against a
# trainer, a training cluster and a model server, each followed by a check
# that nothing was lost. CHAOS_SEED picks the kill moments (printed; rerun
# with it to repeat a run; each phase draws from its own sequence of it, so
# one phase alone repeats too); CHAOS_KILLS the number of trainer kills
# (default 10), CHAOS_CLUSTER_KILLS of cluster task kills (default 5);
# CHAOS_PHASES the phases to run (default "1 2 3 4 5"; 2 brings 1);
# KEEP_TMP=1 keeps the scratch directory (its logs).
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
#  5. An asynchronous cluster (2 ps, a chief, 2 workers; dense variables
#     partitioned over the ps; 2,000 steps, a save every 100): a random task
#     killed (-9) at a random step, 5 times, each restarted after a random
#     0-2 s: after each, the checkpoint a restart resumes from loads whole,
#     holds the steps its name says and is never rewritten, the newest step
#     never goes back, and a restarted ps is restored from the newest
#     checkpoint; the job finishes (every ps says so) at step 2,000 or more,
#     with the test AUC of a single process (within 0.02, as
#     distributed_test.sh).
set -u
RECFLOW=$1
source "$(dirname "$0")/online_lib.sh"
CHAOS_TMP=$TMP  # phase 5 sets TMP to a directory of its own
MOUNTS=()
cleanup_chaos() {
  for m in "${MOUNTS[@]}"; do umount "$m" 2>/dev/null; done
  TMP=$CHAOS_TMP
  if [[ -n ${KEEP_TMP:-} ]]; then
    for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null; done
    echo "chaos: kept $TMP"
  else
    cleanup
  fi
}
trap cleanup_chaos EXIT

seed=${CHAOS_SEED:-$((RANDOM * 32768 + RANDOM))}
kills=${CHAOS_KILLS:-10}
cluster_kills=${CHAOS_CLUSTER_KILLS:-5}
phases=" ${CHAOS_PHASES:-1 2 3 4 5} "
want() { [[ $phases == *" $1 "* ]]; }
want 2 && ! want 1 && phases+="1 "  # 2 damages the checkpoint 1 ends with
echo "chaos: seed $seed (CHAOS_SEED=$seed repeats the kill moments), phases:${phases% }"

newest_step() {  # newest_step DIR: the highest STEP of DIR/model.ckpt-STEP.index (0: none)
  ls "$1" 2>/dev/null | sed -n 's/^model\.ckpt-\([0-9]*\)\.index$/\1/p' | sort -n | tail -1 |
    grep . || echo 0
}
# eval_auc DIR: the test AUC of DIR's latest checkpoint.
eval_auc() { "$RECFLOW" eval --model_dir "$1" 2>/dev/null | grep -oE "^AUC [0-9.]+" | awk '{print $2}'; }
# close A B [TOL]: |A - B| < TOL (0.003)
close() {
  awk -v a="$1" -v b="$2" -v t="${3:-0.003}" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d < t) }'
}

if want 1 || want 3 || want 4; then
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

  # The reference: one uninterrupted run.
  "$RECFLOW" train --config "$TMP/fm.yaml" --model_dir "$TMP/ref" >"$TMP/ref.out" 2>"$TMP/ref.err" ||
    { echo "FAIL reference run: $(tail -3 "$TMP/ref.err")"; exit 1; }
  ref_step=$(newest_step "$TMP/ref")
  ref_auc=$(eval_auc "$TMP/ref")
  echo "chaos: reference run ends at step $ref_step, test AUC $ref_auc"
fi

# 1. Kills at random moments.
if want 1; then
  RANDOM=$seed
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
fi

# 2. The newest checkpoint damaged: every byte of its data flipped at one bit.
if want 2; then
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
fi

# 3. A full disk.
if want 3; then
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
fi

# 4. Version swaps under load, then a kill.
if want 4; then
  RANDOM=$((seed + 3))
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
fi

# 5. A cluster's tasks killed at random. What asynchronous ps training can
# promise: a ps holds its share of the model in memory only, so one killed
# (-9) loses the updates it applied since the newest checkpoint; restarted,
# the chief restores it from that checkpoint (ps 0, which counts the global
# step, with the step), and the steps since are trained again, and counted
# again on ps 0, while the workers read on (docs/distributed.md,
# "Failures"). Those steps were in no checkpoint, so that is not a step
# counted twice; what must hold is that a checkpointed step never is: the
# global step never falls below the newest checkpoint, so its step never
# goes back, the global_step it holds is at least its name's (more when
# pushes land during the save), and a published checkpoint is never saved
# again (its index never changes). A chief or worker killed loses no
# applied update: at most its step in flight, and it re-reads up to 5 s of
# its data (its input position is saved every 5 s).
if want 5; then
  RANDOM=$((seed + 4))
  TMP=$CHAOS_TMP/cluster
  mkdir -p "$TMP"
  source "$(dirname "$0")/cluster_test_job.sh"
  source "$(dirname "$0")/cluster_test_tasks.sh"
  make_job_data
  # The single-process run distributed_test.sh compares with (phase 1's
  # reference is another model on other data).
  write_job_config 1 0 100
  "$RECFLOW" train --config "$TMP/deepfm.yaml" --model_dir "$TMP/single" >"$TMP/single.out" 2>&1 ||
    fail "5. single-process train: $(tail -3 "$TMP/single.out")"
  single=$(eval_auc "$TMP/single")
  # Batches of 64, so that 2,000 steps (long enough for the kills, which
  # stop the job for seconds) read the examples of distributed_test.sh's
  # 500 of 256. Steps-bounded: the epochs (20, over 6,000 steps of each
  # task's share) never end it first, even for a chief that trains most
  # steps while the others are down (a chief out of its share ends the job).
  target=2000
  write_job_config 20 $target 100 64
  job=$TMP/job
  # Kills land at random steps in [first, last), one in each of equal
  # windows, and none in the last tenth of the job: a task restarted after
  # the chief ended it would wait for a chief that is gone.
  first=20 last=$((target * 3 / 4))
  declare -A INDEX_MD5 SHORT  # step -> md5 of the published model.ckpt-STEP.index; said short
  ckpt_step=0           # the newest published checkpoint's step
  # check_job WHAT: the checkpoint a restart resumes from (none before the
  # first save) verifies whole, holds its step, is not older than the last
  # one seen, and no published checkpoint was rewritten. Sets ckpt_step and
  # ckpt_note.
  check_job() {
    local what=$1 prefix step gs s sum
    if [[ ! -e $job/checkpoint && $(newest_step "$job") == 0 ]]; then
      ckpt_note="no checkpoint yet"
      ((ckpt_step == 0)) || fail "5. $what: the checkpoints are gone (the newest was $ckpt_step)"
      return
    fi
    if ! "$RECFLOW" ckpt inspect --verify "$job" >"$TMP/inspect.out" 2>&1; then
      fail "5. $what: the checkpoint a restart would use does not load: $(tail -2 "$TMP/inspect.out")"
      ckpt_note="BAD CHECKPOINT"
      return
    fi
    prefix=$(sed -n 's/^checkpoint //p' "$TMP/inspect.out")
    step=${prefix##*-}
    gs=$("$RECFLOW" ckpt inspect "$prefix" --tensor global_step 2>&1 |
      sed -n 's/^values: \[*\([0-9]*\)\]*$/\1/p')
    ((step >= ckpt_step)) ||
      fail "5. $what: the newest checkpoint went back from step $ckpt_step to $step"
    if ! [[ $gs =~ ^[0-9]+$ ]] || ((gs < step)) && [[ -z ${SHORT[$step]:-} ]]; then
      fail "5. $what: ${prefix##*/} holds global_step '$gs' < $step: steps since $gs would count twice"
      SHORT[$step]=1  # said once
    fi
    for s in $(ls "$job" | sed -n 's/^model\.ckpt-\([0-9]*\)\.index$/\1/p'); do
      ((s <= step)) || continue  # not published yet
      sum=$(md5sum <"$job/model.ckpt-$s.index" 2>/dev/null) || continue  # deleted meanwhile
      [[ -z ${INDEX_MD5[$s]:-} || ${INDEX_MD5[$s]} == "$sum" ]] ||
        fail "5. $what: the published model.ckpt-$s was saved again"
      INDEX_MD5[$s]=$sum
    done
    ckpt_step=$step
    ckpt_note="${prefix##*/} verifies (global_step $gs)"
  }
  # restores PS: how often the chief has initialized ps task PS (its first
  # start included).
  restores_re() { echo "ps task $1( restarted: initialized it|: initialized|: restored from)"; }
  restores() { grep -cE "$(restores_re "$1")" "$TMP/job.chief0.err"; }
  # progress: the newest step the training tasks' progress lines show (the
  # chief's alone lags while it restarts, and stops at the end); ended: the
  # chief has ended the job.
  progress() {
    local f s max=0
    for f in "$TMP"/job.{chief0,worker0,worker1}.err; do
      s=$(grep -oE "^step [0-9]+" "$f" 2>/dev/null | tail -1 | awk '{print $2}')
      ((${s:-0} > max)) && max=$s
    done
    echo $max
  }
  ended() { grep -q "the chief finished the job" "$TMP"/job.ps{0,1}.err; }
  start_cluster job --ps_partition_mb 0.01
  wait_step job "$first"  # the chief has initialized both ps (restores counts from there)
  victims=(ps0 ps1 chief0 worker0 worker1)
  width=$(((last - first) / (cluster_kills > 0 ? cluster_kills : 1)))
  ((width > 0)) || width=1
  declare -A KILLED
  for k in $(seq "$cluster_kills"); do
    victim=${victims[RANDOM % ${#victims[@]}]}
    at=$((first + (k - 1) * width + RANDOM % width))
    delay=$((RANDOM % 2)).$((RANDOM % 10))
    for _ in $(seq 1200); do
      (($(progress) >= at)) || ended && break
      sleep 0.05
    done
    killed_at=$(progress)
    if ((killed_at < at)); then
      fail "5. kill $k: the job made no progress to step $at in 60 s (at $killed_at)"
      break
    fi
    if ((killed_at >= target * 9 / 10)) || ended; then
      echo "chaos: 5. kill $k$( ((k < cluster_kills)) && echo "-$cluster_kills") skipped: the job" \
        "is at step $killed_at, near its end"
      break
    fi
    [[ $victim == ps* ]] && before=$(restores "${victim: -1}")
    kill_restart job "$victim" 0 "$delay"  # now
    KILLED[$victim]=$((${KILLED[$victim]:-0} + 1))
    restored=
    if [[ $victim == ps* ]]; then
      # The chief restores it once it is up again (a chief restarted just
      # before restores it as it starts).
      for _ in $(seq 600); do
        after=$(restores "${victim: -1}")
        ((after > before)) && break
        sleep 0.1
      done
      ((after > before)) ||
        fail "5. kill $k: the restarted $victim was not restored: $(tail -2 "$TMP/job.$victim.err")"
      # From the newest checkpoint: none older than the last one the chief
      # said it saved before.
      line=$(grep -nE "$(restores_re "${victim: -1}")" "$TMP/job.chief0.err" | tail -1 | cut -d: -f1)
      restored=$(sed -n "${line}p" "$TMP/job.chief0.err" | grep -oE "model\.ckpt-[0-9]+")
      saved=$(head -n "$line" "$TMP/job.chief0.err" | grep -oE "^saved .*model\.ckpt-[0-9]+" |
        tail -1 | grep -oE "model\.ckpt-[0-9]+")
      ((${restored#model.ckpt-} + 0 >= ${saved#model.ckpt-} + 0)) ||
        fail "5. kill $k: $victim was restored from '$restored', older than ${saved:-?}"
      restored=", restored from ${restored:-the initializers (no checkpoint yet)}"
    fi
    check_job "kill $k ($victim)"
    echo "chaos: 5. kill $k: $victim at step $killed_at, restarted after $delay s$restored;" \
      "$ckpt_note"
  done
  wait_cluster job
  for ps in 0 1; do
    grep -q "ps task $ps: done at global step" "$TMP/job.ps$ps.err" ||
      fail "5. ps $ps did not end with the job: $(tail -2 "$TMP/job.ps$ps.err")"
  done
  check_job "the end"
  ((ckpt_step >= target)) || fail "5. the final checkpoint is at step $ckpt_step, not $target or more"
  auc=$(eval_auc "$job")
  [[ -n $auc && -n $single ]] && close "$auc" "$single" 0.02 ||
    fail "5. after the kills test AUC '$auc', single process '$single'"
  done_at=$(grep -oE "done at global step [0-9]+" "$TMP/job.ps0.err" | tail -1 | awk '{print $5}')
  killed=$(for t in "${!KILLED[@]}"; do echo "$t x${KILLED[$t]}"; done | sort | paste -sd,)
  echo "chaos: 5. ${killed:-no task} killed; the job ended at global step $done_at, $ckpt_note," \
    "test AUC $auc (single process $single)"
  TMP=$CHAOS_TMP
fi

finish chaos
