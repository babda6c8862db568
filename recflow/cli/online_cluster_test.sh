#!/usr/bin/env bash
# Online learning in a cluster (docs/online_learning.md "In a cluster"): a
# local cluster of 2 ps, a chief and 2 workers (`recflow launch`) publishes
# model updates (each ps its part, merged under one sequence number), and a
# server following the log applies them in place:
#  - after a first job, a server started on its export catches up with the
#    log and answers as the export does (to about one step: see 3.);
#  - while a second job trains from that checkpoint (its tasks started one
#    by one, so that the chief and then ps1 can be killed with -9 and
#    restarted mid-job), the server applies its updates live under a steady
#    load without failing a request; the restored ps's older rows reach the
#    server through a full update;
#  - at the end its predictions equal those of a fresh export of the final
#    checkpoint, once a run started at the last step has published it.
set -u
RECFLOW=$1
source "$(dirname "$0")/online_lib.sh"

"$RECFLOW" gen-data --rows 40000 --test_rows 100 --seed 5 --out "$TMP/data" >/dev/null 2>&1 ||
  { echo "FAIL gen-data"; exit 1; }
cat >"$TMP/deepfm.yaml" <<EOF
model: {type: deepfm, embedding_dim: 4, hidden_units: [16], seed: 1}
features: {dense: 13, sparse: 26, sparse_defaults: {hash_table: true}}
data: {train: $TMP/data/train-*.tsv, parse_threads: 1}
train: {batch_size: 128, epochs: 10, threads: 1, log_every_secs: 0.2}
checkpoint: {save_steps: 20, save_secs: 0}
EOF
within_a_step() {  # within_a_step A B: two predict answers agree to 1e-2 (see 3. below)
  python3 - "$1" "$2" <<'PY'
import json, sys
a, b = (json.loads(x.split(" ", 1)[1])["outputs"]["probabilities"] for x in sys.argv[1:3])
sys.exit(0 if max(abs(x - y) for x, y in zip(a, b)) <= 1e-2 else 1)
PY
}
launch() {  # launch NAME STEPS: a cluster job publishing every 0.2 s
  "$RECFLOW" launch --config "$TMP/deepfm.yaml" --ps 2 --workers 2 --model_dir "$TMP/m" -- \
    --steps "$2" --publish_interval_secs 0.2 >"$TMP/$1.out" 2>"$TMP/$1.err"
}

# 1. A first job; its export served next to a server that follows the log.
launch job1 60 || fail "job 1: $(tail -5 "$TMP/job1.err")"
grep -q "\[chief\] published model update 1 (full" "$TMP/job1.err" ||
  fail "the chief did not publish: $(grep -i "publish\|error" "$TMP/job1.err" | head -5)"
n1=$(newest_update)
[[ -n "$n1" && "$n1" -ge 2 ]] || fail "job 1 published '$n1' updates"
ls "$TMP/m/updates" | grep -q tmp && fail "temporaries left: $(ls -a "$TMP/m/updates")"
# Its parts: every table in two parts (one per ps).
"$RECFLOW" ckpt inspect "$(printf '%s/m/updates/update-%020d' "$TMP" "$n1")" 2>/dev/null |
  grep -q "part_1/keys" || fail "no ps part in update $n1: $("$RECFLOW" ckpt inspect "$(printf '%s/m/updates/update-%020d' "$TMP" "$n1")" 2>&1 | head -5)"
"$RECFLOW" export --model_dir "$TMP/m" --export_dir "$TMP/models/ctr/1" >/dev/null 2>&1 ||
  fail "export"
serve live --model_name=ctr --model_base_path="$TMP/models/ctr" \
  --model_update_source=dir:"$TMP/m/updates" --model_update_poll_ms=20
serve plain --model_name=ctr --model_base_path="$TMP/models/ctr"
[[ "$(metric "$URL_live" recflow_serving_model_update_sequence)" == "$n1" ]] ||
  fail "the server did not catch up to update $n1: $(tail -3 "$TMP/live.err")"
a=$(predict "$URL_live")
b=$(predict "$URL_plain")
grep -qE '^200 ' <<<"$a" || fail "predict: $a"
within_a_step "$a" "$b" || fail "after catching up: $a; the export: $b"

# 2. A second job from that checkpoint, applied live under load.
start_load "$URL_live"
source "$(dirname "$0")/cluster_test_tasks.sh"
# 1500 steps: while the chief is down the workers go on, at up to 150
# steps/s on an idle machine; ps1's kill must still land before the end.
start_cluster m --steps 1500 --publish_interval_secs 0.2
kill_restart m chief0 200
kill_restart m ps1 330
wait_cluster m
kills=$(cat "$TMP"/m.*.err | grep -c "^--- killed at step")
[[ "$kills" == 2 ]] || fail "$kills kills instead of 2 (chief0, ps1)"
# Full updates: the chief's start, the restarted chief's start, and after
# ps1 restored an older state (without it the server would keep ps1's rows
# newer than the checkpoint it restored).
fulls=$(grep -c "published model update [0-9]* (full" "$TMP/m.chief0.err")
[[ "$fulls" -ge 3 ]] || fail "$fulls full updates: $(grep -i "publish\|killed" "$TMP/m.chief0.err" | tail -5)"
n2=$(newest_update)
[[ "$n2" -gt $((n1 + 2)) ]] || fail "job 2 published too few updates: $n1 -> $n2"
for _ in $(seq 200); do
  [[ "$(metric "$URL_live" recflow_serving_model_update_sequence)" == "$n2" ]] && break
  sleep 0.05
done
stop_load
load_result=$LOAD_RESULT
grep -q " failed=0 " <<<"$load_result " || fail "requests failed during the updates: $load_result"
[[ "$(metric "$URL_live" recflow_serving_model_update_sequence)" == "$n2" ]] ||
  fail "the server did not reach update $n2: $(tail -3 "$TMP/live.err")"

# 3. Against the final checkpoint. The workers are asynchronous: a worker's
#    last push can land between the chief's final checkpoint and its final
#    update, so after job 2 the two agree to about one step (1e-2 on these
#    probabilities; a lost update or a ps's restored rows missing would be
#    far more). A run started at its last step trains nothing and publishes
#    the restored checkpoint as a full update: then they are equal.
"$RECFLOW" export --model_dir "$TMP/m" --export_dir "$TMP/fresh/ctr/1" >/dev/null 2>&1 ||
  fail "final export"
serve fresh --model_name=ctr --model_base_path="$TMP/fresh/ctr"
got=$(predict "$URL_live")
want=$(predict "$URL_fresh")
[[ "$got" != "$a" ]] || fail "predictions did not change with job 2's updates"
within_a_step "$got" "$want" || fail "served after job 2: $got; the final checkpoint: $want"
launch job3 1500 || fail "job 3: $(tail -5 "$TMP/job3.err")"
n3=$(newest_update)
[[ "$n3" -gt "$n2" ]] || fail "job 3 published nothing ($n2 -> $n3)"
for _ in $(seq 200); do
  [[ "$(metric "$URL_live" recflow_serving_model_update_sequence)" == "$n3" ]] && break
  sleep 0.05
done
got=$(predict "$URL_live")
[[ "$got" == "$want" ]] || fail "served after job 3's full update: $got; the final checkpoint: $want"
echo "updates: $n1 after job 1, $n2 after job 2 ($fulls full, $kills tasks killed); load: $load_result"
finish "online learning in a cluster"
