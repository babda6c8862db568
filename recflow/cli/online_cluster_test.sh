#!/usr/bin/env bash
# Online learning in a cluster (docs/online_learning.md "In a cluster"): a
# local cluster of 2 ps, a chief and 2 workers (`recflow launch`) publishes
# model updates (each ps its part, merged under one sequence number), and a
# server following the log applies them in place:
#  - after a first job, a server started on its export catches up with the
#    log and answers as the export does;
#  - while a second job trains from that checkpoint, the server applies its
#    updates live under a steady load without failing a request;
#  - at the end its predictions equal those of a fresh export of the final
#    checkpoint.
set -u
RECFLOW=$1
source "$(dirname "$0")/online_lib.sh"

"$RECFLOW" gen-data --rows 40000 --test_rows 100 --seed 5 --out "$TMP/data" >/dev/null 2>&1 ||
  { echo "FAIL gen-data"; exit 1; }
cat >"$TMP/run.yaml" <<EOF
model: {type: deepfm, embedding_dim: 4, hidden_units: [16], seed: 1}
features: {dense: 13, sparse: 26, sparse_defaults: {hash_table: true}}
data: {train: $TMP/data/train-*.tsv, parse_threads: 1}
train: {batch_size: 128, threads: 1, log_every_secs: 100}
checkpoint: {save_steps: 20, save_secs: 0}
EOF
launch() {  # launch NAME STEPS: a cluster job publishing every 0.2 s
  "$RECFLOW" launch --config "$TMP/run.yaml" --ps 2 --workers 2 --model_dir "$TMP/m" -- \
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
[[ "$a" == "$b" ]] || fail "after catching up: $a; the export: $b"

# 2. A second job from that checkpoint, applied live under load.
start_load "$URL_live"
launch job2 400 || fail "job 2: $(tail -5 "$TMP/job2.err")"
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

# 3. Equal to the final checkpoint.
"$RECFLOW" export --model_dir "$TMP/m" --export_dir "$TMP/fresh/ctr/1" >/dev/null 2>&1 ||
  fail "final export"
serve fresh --model_name=ctr --model_base_path="$TMP/fresh/ctr"
got=$(predict "$URL_live")
want=$(predict "$URL_fresh")
[[ "$got" != "$a" ]] || fail "predictions did not change with job 2's updates"
[[ "$got" == "$want" ]] || fail "served after job 2: $got; the final checkpoint: $want"
echo "updates: $n1 after job 1, $n2 after job 2; load: $load_result"
finish "online learning in a cluster"
