#!/usr/bin/env bash
# Online learning under faults (docs/online_learning.md), with a streaming
# trainer publishing every 0.2 s and a server following its update log
# under a steady load of requests:
#  - the trainer killed (-9) in the middle of writing an update (the full
#    update a restarted trainer writes first), and at random moments: the
#    server never applies half an update and never fails a request; the
#    restarted trainer numbers on without a gap (the half-written update's
#    leftovers are removed) and its full update resets the server to the
#    restored model;
#  - a damaged update in the log: the server stays at the one before it,
#    answering, until a full update past it heals it;
#  - the server killed (-9) while updates flow: restarted, it catches up
#    before it answers;
#  - a second server follows the trainer's gRPC update stream
#    (--update_port): every trainer kill drops the stream, every restart
#    restores it on the same port;
#  - at the end, the server's predictions equal those of a fresh export of
#    the trainer's final checkpoint: no update lost.
set -u
RECFLOW=$1
source "$(dirname "$0")/online_lib.sh"

"$RECFLOW" gen-data --rows 40000 --test_rows 100 --seed 11 --out "$TMP/data" >/dev/null 2>&1 ||
  { echo "FAIL gen-data"; exit 1; }
train_file=$(ls "$TMP"/data/train-*.tsv)
cat >"$TMP/run.yaml" <<EOF
model: {type: deepfm, embedding_dim: 16, hidden_units: [16], seed: 1}
features: {dense: 13, sparse: 26, sparse_defaults: {hash_table: true}}
data: {parse_threads: 1}
train: {batch_size: 256, threads: 1, log_every_secs: 100}
checkpoint: {save_steps: 8, save_secs: 0}
EOF
mkdir -p "$TMP/stream"
parts=0
# feed: the next 2500 lines as a new log file (written whole, then renamed).
feed() {
  local from=$((parts * 2500 + 1))
  sed -n "${from},$((from + 2499))p" "$train_file" >"$TMP/part.tmp"
  mv "$TMP/part.tmp" "$(printf '%s/stream/log-%03d.tsv' "$TMP" $parts)"
  parts=$((parts + 1))
}
runs=0
UPORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
start_trainer() {
  runs=$((runs + 1))
  "$RECFLOW" train --config "$TMP/run.yaml" --model_dir "$TMP/m" --data "$TMP/stream/log-*.tsv" \
    --stream --publish_interval_secs 0.2 --update_port "$UPORT" \
    >"$TMP/train$runs.out" 2>"$TMP/train$runs.err" &
  trainer=$!
  PIDS+=($trainer)
}
temporaries() { ls "$TMP/m/updates" 2>/dev/null | grep -c tempstate; }
applied() { metric "$URL_live" recflow_serving_model_update_sequence; }
# wait_applied N: until the server reports update N or a later one (a
# trainer still running publishes on; a slow machine may see the server
# pass N between two looks).
wait_applied() {
  local now
  for _ in $(seq 300); do
    now=$(applied)
    [[ -n $now && $now -ge $1 ]] && return 0
    sleep 0.05
  done
  fail "the server is at update '$(applied)', expected $1 or later: $(tail -3 "$TMP/live.err")"
}

# A trainer with a first checkpoint, exported and served.
feed
feed
start_trainer
for _ in $(seq 200); do
  [[ -f "$TMP/m/checkpoint" ]] && break
  sleep 0.1
done
"$RECFLOW" export --model_dir "$TMP/m" --export_dir "$TMP/models/ctr/1" >/dev/null 2>&1 ||
  fail "export"
serve live --model_name=ctr --model_base_path="$TMP/models/ctr" \
  --model_update_source=dir:"$TMP/m/updates" --model_update_poll_ms=20
serve stream --model_name=ctr --model_base_path="$TMP/models/ctr" \
  --model_update_source=grpc:127.0.0.1:"$UPORT" --model_update_poll_ms=20
grep -q "serving model updates on grpc:127.0.0.1:$UPORT" "$TMP/train$runs.err" ||
  fail "the trainer does not say where it serves updates: $(head -3 "$TMP/train$runs.err")"

# A steady load: one request every 20 ms until $TMP/stop-load exists.
start_load "$URL_live"

# 1. The trainer killed while writing its first (full) update, twice; and
#    at random moments, three times. The server keeps answering.
mid=0
for round in 1 2 3 4 5; do
  feed
  sleep 0.$((RANDOM % 9 + 1))
  kill -KILL $trainer
  wait $trainer 2>/dev/null
  at=$(applied)
  start_trainer
  if [[ $round -le 2 ]]; then
    # Kill it as soon as an update is half written.
    for _ in $(seq 20000); do
      [[ $(temporaries) -gt 0 ]] && break
    done
    kill -KILL $trainer
    wait $trainer 2>/dev/null
    if [[ $(temporaries) -gt 0 ]]; then
      mid=$((mid + 1))
      sleep 0.2
      [[ "$(applied)" -ge "$at" ]] || fail "the server went back from $at to $(applied)"
      start_trainer
    else
      start_trainer
    fi
  fi
  sleep 1
done
[[ $mid -ge 1 ]] || fail "no kill landed in the middle of an update (the check did not run)"
sleep 1
[[ $(temporaries) -eq 0 ]] || fail "a restarted trainer left temporaries: $(ls "$TMP/m/updates")"
# Numbered without a gap.
n=$(newest_update)
count=$(ls "$TMP/m/updates" | grep -cE '^update-[0-9]+\.index$')
[[ "$count" == "$n" ]] || fail "updates 1..$n with $count files: $(ls "$TMP/m/updates")"
wait_applied "$(newest_update)"

# 2. A damaged update after the newest (the trainer stopped, so that it
#    does not write that number itself): the server stays before it; the
#    restarted trainer numbers past it, and its full update heals the server.
kill -TERM $trainer
wait $trainer || fail "trainer exit after SIGTERM: $(tail -3 "$TMP/train$runs.err")"
n=$(newest_update)
wait_applied "$n"
bad=$(printf '%s/m/updates/update-%020d' "$TMP" $((n + 1)))
echo garbage >"$bad.data-00000-of-00001"
cp "$(printf '%s/m/updates/update-%020d' "$TMP" "$n").index" "$TMP/bad.index"
mv "$TMP/bad.index" "$bad.index"
sleep 0.5
[[ "$(applied)" == "$n" ]] || fail "applied '$(applied)' past the damaged update $((n + 1))"
feed
start_trainer
for _ in $(seq 100); do
  [[ "$(newest_update)" -ge $((n + 3)) ]] && break
  sleep 0.1
done
wait_applied "$(newest_update)"
grep -q "model updates apply again" "$TMP/live.err" || fail "the server did not say it healed"

# 3. The server killed while updates flow; restarted, it catches up before
#    it answers (its first metrics page already shows the newest update).
stop_load
load_result=$LOAD_RESULT
grep -q " failed=0 " <<<"$load_result " || fail "requests failed while the trainer was killed: $load_result"
feed
sleep 0.5
kill -KILL "$PID_live"
wait "$PID_live" 2>/dev/null
n=$(newest_update)
serve live --model_name=ctr --model_base_path="$TMP/models/ctr" \
  --model_update_source=dir:"$TMP/m/updates" --model_update_poll_ms=20
[[ "$(applied)" -ge "$n" ]] || fail "the restarted server answered at update '$(applied)' < $n"
grep -q "listening\|serving model" "$TMP/live.out" || fail "the server did not restart"

# 4. The end: every update applied, predictions equal the final checkpoint's.
feed
sleep 1.5
kill -TERM $trainer
wait $trainer || fail "trainer exit after SIGTERM: $(tail -3 "$TMP/train$runs.err")"
wait_applied "$(newest_update)"
"$RECFLOW" export --model_dir "$TMP/m" --export_dir "$TMP/fresh/ctr/1" >/dev/null 2>&1 ||
  fail "final export"
serve fresh --model_name=ctr --model_base_path="$TMP/fresh/ctr"
got=$(predict "$URL_live")
want=$(predict "$URL_fresh")
grep -qE '^200 ' <<<"$got" || fail "predict: $got"
[[ "$got" == "$want" ]] || fail "served after the faults: $got; the final checkpoint: $want"
for _ in $(seq 300); do
  [[ "$(metric "$URL_stream" recflow_serving_model_update_sequence)" == "$(newest_update)" ]] && break
  sleep 0.05
done
streamed=$(metric "$URL_stream" recflow_serving_model_update_sequence)
[[ "$streamed" == "$(newest_update)" ]] ||
  fail "the gRPC follower is at '$streamed', the log at $(newest_update): $(tail -3 "$TMP/stream.err")"
got=$(predict "$URL_stream")
[[ "$got" == "$want" ]] || fail "served through the gRPC stream: $got; the final checkpoint: $want"
echo "trainer runs: $runs, kills mid-update: $mid, updates: $(newest_update); load: $load_result"
finish "online learning under faults"
