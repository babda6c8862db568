#!/usr/bin/env bash
# Online learning end to end (docs/online_learning.md):
#  - `recflow train --publish_interval_secs` publishes numbered updates
#    beside its checkpoints (the first full), and the export records the
#    last one it holds;
#  - `recflow serve --model_update_source=dir:...` serves that export and
#    applies the updates of a further training run in place: once the last
#    one is applied, its predictions equal those of a fresh export of the
#    trainer's final checkpoint, and its metrics say where it is;
#  - a damaged update stops the server at the update before it (it keeps
#    answering), and the next run's full update heals it;
#  - `recflow train --stream` follows log files as they are written, with
#    progressive validation, stops cleanly on SIGTERM / SIGINT and resumes
#    where it stopped, and continues a model trained on files; TFRecord files stream too (a record half written
#    waits for the rest);
#  - bad flags are clear errors.
set -u
RECFLOW=$1
source "$(dirname "$0")/online_lib.sh"

"$RECFLOW" gen-data --rows 20000 --test_rows 2000 --seed 5 --out "$TMP/data" >/dev/null 2>&1 ||
  { echo "FAIL gen-data"; exit 1; }
cat >"$TMP/run.yaml" <<EOF
model: {type: deepfm, embedding_dim: 4, hidden_units: [16], seed: 1}
features: {dense: 13, sparse: 26, sparse_defaults: {hash_table: true}}
data: {train: $TMP/data/train-*.tsv, eval: $TMP/data/test-*.tsv, parse_threads: 1}
train: {batch_size: 256, threads: 1, log_every_secs: 100}
checkpoint: {save_steps: 10, save_secs: 0}
EOF

# 1. Train 20 steps publishing; export.
out=$("$RECFLOW" train --config "$TMP/run.yaml" --model_dir "$TMP/m" --steps 20 \
  --publish_interval_secs 0.05 2>"$TMP/train1.err")
[[ $? -eq 0 ]] || fail "train 1: $(tail -3 "$TMP/train1.err")"
grep -q "published model update 1 (full, step 0" "$TMP/train1.err" ||
  fail "train 1 did not say where its first update went: $(grep -i update "$TMP/train1.err")"
n1=$(newest_update)
[[ -n "$n1" && "$n1" -ge 2 ]] || fail "train 1 published '$n1' updates: $(ls "$TMP/m/updates")"
out=$("$RECFLOW" export --model_dir "$TMP/m" --export_dir "$TMP/models/ctr/1" 2>&1) ||
  fail "export: $out"
# The checkpoint at step 20 holds the last update published before it.
grep -qE "it reflects model updates up to [0-9]+ \(step [0-9]+\)" <<<"$out" || fail "export base: $out"
[[ -f "$TMP/models/ctr/1/assets.extra/recflow_update_base" ]] || fail "no recflow_update_base"

# 2. Serve it, following the log; train further.
serve live --model_name=ctr --model_base_path="$TMP/models/ctr" \
  --model_update_source=dir:"$TMP/m/updates" --model_update_poll_ms=20
before=$(predict "$URL_live")
grep -qE '^200 .*"probabilities"' <<<"$before" || fail "predict before: $before"
"$RECFLOW" train --config "$TMP/run.yaml" --model_dir "$TMP/m" --steps 50 \
  --publish_interval_secs 0.05 >/dev/null 2>"$TMP/train2.err" || fail "train 2: $(tail -3 "$TMP/train2.err")"
n2=$(newest_update)
[[ "$n2" -gt "$n1" ]] || fail "train 2 published nothing new ($n1 -> $n2)"
applied=
for _ in $(seq 200); do
  applied=$(metric "$URL_live" recflow_serving_model_update_sequence)
  [[ "$applied" == "$n2" ]] && break
  sleep 0.05
done
[[ "$applied" == "$n2" ]] || fail "the server applied up to '$applied', the log has $n2: $(tail -3 "$TMP/live.err")"
after=$(predict "$URL_live")
[[ "$after" != "$before" ]] || fail "predictions did not change with the updates: $after"
behind=$(metric "$URL_live" recflow_serving_model_updates_behind)
[[ "$behind" == "0" ]] || fail "updates behind: '$behind'"
# The model status says the same.
[[ "$(update_status "$URL_live" applied)" == "$n2" ]] ||
  fail "model status: applied '$(update_status "$URL_live" applied)', want $n2"
[[ "$(update_status "$URL_live" export_base)" -ge 1 ]] ||
  fail "model status: export_base '$(update_status "$URL_live" export_base)'"

# ... and equal those of a fresh export of the final checkpoint.
"$RECFLOW" export --model_dir "$TMP/m" --export_dir "$TMP/fresh/ctr/1" >/dev/null 2>&1 ||
  fail "fresh export"
serve fresh --model_name=ctr --model_base_path="$TMP/fresh/ctr"
want=$(predict "$URL_fresh")
[[ "$after" == "$want" ]] || fail "served after updates: $after; fresh export: $want"
# An export that says int8 (recflow export --embedding_row_format) is served
# so by default: close to, not equal to, float32.
"$RECFLOW" export --model_dir "$TMP/m" --export_dir "$TMP/q8export/ctr/1" \
  --embedding_row_format int8 >/dev/null 2>&1 || fail "export --embedding_row_format int8"
[[ "$(cat "$TMP/q8export/ctr/1/assets.extra/recflow_embedding_row_format")" == int8 ]] ||
  fail "the export does not record its row format"
serve q8export --model_name=ctr --model_base_path="$TMP/q8export/ctr"
test_file=$(ls "$TMP"/data/test-*.tsv | head -1)
python3 - "$(predict_rows "$URL_fresh" "$test_file")" "$(predict_rows "$URL_q8export" "$test_file")" \
  <<'PY' || fail "int8 export served as float32 or wrong"
import json, sys
a, b = (json.loads(s.split(" ", 1)[1])["outputs"]["probabilities"] for s in sys.argv[1:3])
d = max(abs(x - y) for x, y in zip(a, b))
assert len(a) == len(b) and 0 < d < 0.01, (d, a, b)
PY
out=$("$RECFLOW" export --model_dir "$TMP/m" --export_dir "$TMP/q8bad" --embedding_row_format bf16 2>&1)
grep -q "unknown embedding row format 'bf16'" <<<"$out" || fail "export with a bad row format: $out"

# ... and a server storing the rows as int8 (--embedding_row_format) is close.
serve q8 --model_name=ctr --model_base_path="$TMP/models/ctr" --embedding_row_format=int8 \
  --model_update_source=dir:"$TMP/m/updates" --model_update_poll_ms=20
test_file=$(ls "$TMP"/data/test-*.tsv | head -1)
python3 - "$(predict_rows "$URL_live" "$test_file")" "$(predict_rows "$URL_q8" "$test_file")" \
  <<'PY' || fail "int8 rows differ too much, or not at all"
import json, sys
a, b = (json.loads(s.split(" ", 1)[1])["outputs"]["probabilities"] for s in sys.argv[1:3])
d = max(abs(x - y) for x, y in zip(a, b))
assert len(a) == len(b) == 20 and 0 < d < 0.01, (d, a, b)
PY

# 3. A damaged update: the server stays at the one before and keeps answering.
next=$((n2 + 1))
bad=$(printf '%s/m/updates/update-%020d' "$TMP" "$next")
# Data first, index last (as a real writer): the server never sees it half made.
echo garbage >"$bad.data-00000-of-00001"
cp "$(printf '%s/m/updates/update-%020d' "$TMP" "$n2").index" "$TMP/bad.index"
mv "$TMP/bad.index" "$bad.index"
sleep 0.3
still=$(predict "$URL_live")
[[ "$still" == "$after" ]] || fail "predictions changed with a damaged update: $still"
applied=$(metric "$URL_live" recflow_serving_model_update_sequence)
[[ "$applied" == "$n2" ]] || fail "applied '$applied' past the damaged update $next"
grep -q "stays at model update $n2" "$TMP/live.err" || fail "the damaged update was not reported"
errors=$(metric "$URL_live" recflow_serving_model_update_errors)
[[ "$errors" == "1" ]] || fail "update errors metric '$errors'"
stuck=$(update_status "$URL_live" error)
[[ -n "$stuck" && "$stuck" != none ]] || fail "model status shows no update error: '$stuck'"
# The server asked the trainer for a full update (resync) ...
grep -q "stays at model update $n2" "$TMP/m/updates/full-update-request" 2>/dev/null ||
  fail "the stuck server did not ask for a full update: $(ls "$TMP/m/updates" | tail -3)"
# The next run's first update is full, numbered past it: the server skips
# to it and heals.
"$RECFLOW" train --config "$TMP/run.yaml" --model_dir "$TMP/m" --steps 55 \
  --publish_interval_secs 0.05 >/dev/null 2>"$TMP/train3.err" || fail "train 3: $(tail -3 "$TMP/train3.err")"
n3=$(newest_update)
# ... which the next run's first update is; the request is gone.
[[ ! -e "$TMP/m/updates/full-update-request" ]] || fail "the full-update request was not cleared"
grep -q "is full: a server asked for one" "$TMP/train3.err" ||
  fail "train 3 did not say it answered the request: $(grep -i full "$TMP/train3.err")"
for _ in $(seq 200); do
  applied=$(metric "$URL_live" recflow_serving_model_update_sequence)
  [[ "$applied" == "$n3" ]] && break
  sleep 0.05
done
[[ "$applied" == "$n3" ]] || fail "after the full update: applied '$applied', log $n3"

# 4. Streaming: a trainer follows log files as they are written, publishes,
# reports progressive validation, stops cleanly on SIGTERM, and a restart
# goes on from where it stopped (nothing read twice).
mkdir -p "$TMP/stream"
train_file=$(ls "$TMP"/data/train-*.tsv | head -1)
head -n 1000 "$train_file" >"$TMP/stream/log-001.tsv"
# stream_train NAME ARGS...: a streaming trainer in the background.
stream_train() {
  local name=$1
  shift
  "$RECFLOW" train --config "$TMP/run.yaml" --model_dir "$TMP/s" --data "$TMP/stream/log-*.tsv" \
    --stream "$@" >"$TMP/$name.out" 2>"$TMP/$name.err" &
  trainer=$!
  PIDS+=($trainer)
}
# stop_train NAME SIGNAL: stops it; it must exit 0.
stop_train() {
  kill "-$2" $trainer
  wait $trainer
  local rc=$?
  [[ $rc -eq 0 ]] || fail "streaming trainer $1 exit $rc after SIG$2: $(tail -3 "$TMP/$1.err")"
}
# published_step DIR: the global step of the newest model update in
# DIR/updates (the trainer logs only the first).
published_step() {
  local newest
  newest=$(ls "$1"/updates/update-*.index 2>/dev/null | tail -1)
  [[ -n $newest ]] || return 0
  "$RECFLOW" ckpt inspect "${newest%.index}" --tensor _recflow/update_meta 2>/dev/null |
    grep -oE "^step: [0-9]+" | grep -oE "[0-9]+"
}
# await_stream NAME DIR MIN_STEP: waits until the streaming trainer NAME
# (model dir DIR, publishing every 0.1 s) has published an update at
# MIN_STEP or later, then nothing newer for 2.5 s: its last short batch goes
# out after 1 s without new input (and is published: more than 0.1 s after
# the one before), and how the input's arrival splits into batches varies
# by a step. Up to 300 s: a sanitizer build trains at a few hundred
# examples a second.
await_stream() {
  local last="" step
  local -i start=$SECONDS changed_ms=0 now_ms
  while ((SECONDS - start < 300)); do
    step=$(published_step "$2")
    now_ms=$(date +%s%3N)
    if [[ -n $step && $step -ge $3 ]]; then
      if [[ $step != "$last" ]]; then
        last=$step
        changed_ms=$now_ms
      elif ((now_ms - changed_ms >= 2500)); then
        return 0
      fi
    fi
    sleep 0.1
  done
  fail "streaming trainer $1 did not reach step $3 (newest update: step '$last'): $(tail -3 "$TMP/$1.err")"
}
# 3000 lines of batches of 256: at least 12 steps.
stream_train stream1 --publish_interval_secs 0.1
sleep 1
sed -n '1001,2000p' "$train_file" >>"$TMP/stream/log-001.tsv"
sed -n '2001,3000p' "$train_file" >"$TMP/stream/log-002.tsv"
await_stream stream1 "$TMP/s" 12
stop_train stream1 TERM
grep -q "trained [0-9]* steps (3000 examples)" "$TMP/stream1.out" ||
  fail "streaming trainer did not train on the 3000 lines: $(cat "$TMP/stream1.out")"
grep -qE "progressive validation: AUC [0-9.]+ .* over the last 3000 examples" "$TMP/stream1.out" ||
  fail "no progressive validation: $(cat "$TMP/stream1.out")"
ls "$TMP/s"/model.ckpt-*.index >/dev/null 2>&1 || fail "no checkpoint after SIGTERM"
# Restarted with nothing new: nothing is read again; then 500 new lines
# (2 steps) are.
step1=$(published_step "$TMP/s")
stream_train stream2 --publish_interval_secs 0.1
sleep 1.5
sed -n '3001,3500p' "$train_file" >"$TMP/stream/log-003.tsv"
await_stream stream2 "$TMP/s" $((step1 + 2))
stop_train stream2 INT
grep -q "trained [0-9]* steps (500 examples)" "$TMP/stream2.out" ||
  fail "the restarted stream did not go on where it stopped: $(cat "$TMP/stream2.out")"

# A model trained on files goes on online: its checkpoint's input position
# is not a stream's, so the stream starts at its first file (with a warning):
# its 3500 lines, all there, are 14 steps after the 3 on files.
"$RECFLOW" train --config "$TMP/run.yaml" --model_dir "$TMP/f2s" --steps 3 >/dev/null 2>&1 ||
  fail "train on files before streaming"
"$RECFLOW" train --config "$TMP/run.yaml" --model_dir "$TMP/f2s" --data "$TMP/stream/log-*.tsv" \
  --stream --publish_interval_secs 0.1 >"$TMP/f2s.out" 2>"$TMP/f2s.err" &
trainer=$!
PIDS+=($trainer)
await_stream f2s "$TMP/f2s" 17
stop_train f2s TERM
grep -q "resumed from .*model.ckpt-3" "$TMP/f2s.err" ||
  fail "the stream did not continue the file-trained model: $(tail -3 "$TMP/f2s.err")"
grep -q "is not one of this input pipeline" "$TMP/f2s.err" ||
  fail "no warning that the input starts afresh: $(tail -3 "$TMP/f2s.err")"
grep -q "trained [0-9]* steps (3500 examples)" "$TMP/f2s.out" ||
  fail "the stream did not start at its first file: $(cat "$TMP/f2s.out")"

# 4b. A TFRecord stream: a record half written waits for the rest.
"$RECFLOW" gen-data --rows 1500 --test_rows 200 --seed 6 --num_files 3 --format tfrecord \
  --out "$TMP/tdata" >/dev/null 2>&1 || fail "gen-data --format tfrecord"
sed -e "s|data: {.*}|data: {format: tfrecord, train: $TMP/tstream/log-*.tfrecord, eval: $TMP/tdata/test-*.tfrecord, parse_threads: 1}|" \
  "$TMP/run.yaml" >"$TMP/trun.yaml"
mkdir -p "$TMP/tstream"
cp "$TMP/tdata/train-00000-of-00003.tfrecord" "$TMP/tstream/log-001.tfrecord"
"$RECFLOW" train --config "$TMP/trun.yaml" --model_dir "$TMP/ts" --stream \
  --publish_interval_secs 0.1 >"$TMP/tstream.out" 2>"$TMP/tstream.err" &
trainer=$!
PIDS+=($trainer)
sleep 1
second="$TMP/tdata/train-00001-of-00003.tfrecord"
head -c 1000 "$second" >>"$TMP/tstream/log-001.tfrecord"  # mid-record
sleep 1.2
tail -c +1001 "$second" >>"$TMP/tstream/log-001.tfrecord"
cp "$TMP/tdata/train-00002-of-00003.tfrecord" "$TMP/tstream/log-002.tfrecord"
await_stream tstream "$TMP/ts" 6  # 1500 records: at least 6 steps
stop_train tstream TERM
grep -q "trained [0-9]* steps (1500 examples)" "$TMP/tstream.out" ||
  fail "the TFRecord stream did not train on its 1500 records: $(cat "$TMP/tstream.out" "$TMP/tstream.err" | tail -5)"
grep -q "skipped" "$TMP/tstream.out" "$TMP/tstream.err" &&
  fail "the TFRecord stream skipped records: $(grep skipped "$TMP/tstream.out" "$TMP/tstream.err")"

# 5. Bad flags.
out=$("$RECFLOW" serve --model_name=ctr --model_base_path="$TMP/models/ctr" --rest_api_port=auto \
  --port=0 --model_update_source=grpc:localhost 2>&1)
[[ $? -ne 0 ]] && grep -q "is not \[NAME=\]dir:PATH or \[NAME=\]grpc:HOST:PORT" <<<"$out" ||
  fail "grpc source without a port: $out"
out=$("$RECFLOW" train --config "$TMP/run.yaml" --model_dir "$TMP/m2" --update_port auto 2>&1)
grep -q "update_port serves published model updates; it needs --publish_interval_secs" <<<"$out" ||
  fail "update_port without publishing: $out"
out=$("$RECFLOW" train --config "$TMP/run.yaml" --model_dir "$TMP/m2" --publish_interval_secs 1 \
  --update_port 99999 2>&1)
grep -q "update_port must be \[HOST:\]PORT" <<<"$out" || fail "bad update_port: $out"
out=$("$RECFLOW" serve --model_name=ctr --model_base_path="$TMP/models/ctr" --rest_api_port=auto \
  --port=0 --model_update_source=other=dir:/x 2>&1)
grep -q "model 'other' is not served" <<<"$out" || fail "unknown model: $out"
out=$("$RECFLOW" serve --model_name=ctr --model_base_path="$TMP/models/ctr" --rest_api_port=auto \
  --port=0 --model_update_source=/x 2>&1)
grep -q "is not \[NAME=\]dir:PATH or" <<<"$out" || fail "bad source: $out"
out=$("$RECFLOW" serve --model_name=ctr --model_base_path="$TMP/models/ctr" --rest_api_port=auto \
  --port=0 --embedding_row_format=bf16 2>&1)
grep -q "unknown embedding row format 'bf16' (float32, float16 or int8)" <<<"$out" ||
  fail "bad row format: $out"
out=$("$RECFLOW" train --config "$TMP/run.yaml" --model_dir "$TMP/m2" --publish_interval_secs -1 2>&1)
grep -q "publish_interval_secs: not a number >= 0" <<<"$out" || fail "bad interval: $out"

finish "online learning"
