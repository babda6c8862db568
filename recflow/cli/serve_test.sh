#!/usr/bin/env bash
# End-to-end test of `recflow serve`: serves TensorFlow's half_plus_two over
# REST, answers predict / classify / regress / status / metrics as TF Serving
# does, picks up a new version by polling, refuses bad requests and bad
# flags with clear errors, and exits cleanly on SIGTERM.
set -u
RECFLOW=$1
SRC=$2
TMP=$(mktemp -d)
SERVER_PID=
cleanup() {
  [[ -n "$SERVER_PID" ]] && kill -KILL "$SERVER_PID" 2>/dev/null
  rm -rf "$TMP"
}
trap cleanup EXIT
source "$(dirname "${BASH_SOURCE[0]}")/testdata.sh"
fails=0
pass=0

check() {  # check NAME REGEX TEXT
  if grep -qE -- "$2" <<<"$3"; then
    pass=$((pass + 1))
  else
    echo "FAIL $1: /$2/ not in: $(head -c 600 <<<"$3")"
    fails=$((fails + 1))
  fi
}

# http METHOD URL [BODY] -> prints "CODE BODY" (a local request to the
# server under test, through python3's urllib: no extra tool needed).
http() {
  python3 - "$@" <<'PY'
import sys, urllib.request, urllib.error
method, url = sys.argv[1], sys.argv[2]
data = sys.argv[3].encode() if len(sys.argv) > 3 else None
req = urllib.request.Request(url, data=data, method=method)
try:
    with urllib.request.urlopen(req) as r:
        print(r.status, r.read().decode())
except urllib.error.HTTPError as e:
    print(e.code, e.read().decode())
PY
}

mkdir -p "$TMP/models/h2"
cp -r "$HPT" "$TMP/models/h2/123"
SERVE_H2=(--model_base_path="$TMP/models/h2" --rest_api_port=auto --port=0)
"$RECFLOW" serve --model_name=half_plus_two --model_base_path="$TMP/models/h2" \
  --rest_api_port=auto --port=auto --file_system_poll_wait_seconds=0.2 --num_load_threads=2 \
  >"$TMP/out" 2>"$TMP/err" &
SERVER_PID=$!
for _ in $(seq 100); do
  grep -q "^serving model" "$TMP/out" && break
  sleep 0.1
done
check started "serving model half_plus_two version 123 on http://127.0.0.1:[0-9]+" "$(cat "$TMP/out")"
URL=$(grep -oE "http://127.0.0.1:[0-9]+" "$TMP/out" | head -1)
M=$URL/v1/models/half_plus_two

check predict '^200 \{"predictions": \[2.5, 3.0, 4.5\]\}' \
  "$(http POST "$M:predict" '{"instances": [1.0, 2.0, 5.0]}')"
check predict_version '^200 .*2.5' \
  "$(http POST "$M/versions/123:predict" '{"instances": [1.0]}')"
check regress_context '^200 .*"results": \[7.0, 2.5\]' \
  "$(http POST "$M:regress" '{"signature_name": "regress_x_to_y", "context": {"x": 10.0}, "examples": [{}, {"x": 1.0}]}')"
check classify '^200 .*"results": \[\[\["", 3.0\]\]\]' \
  "$(http POST "$M:classify" '{"signature_name": "classify_x_to_y", "examples": [{"x": 2.0}]}')"
check status '^200 .*"version": "123", "state": "AVAILABLE"' "$(http GET "$M")"
check metadata '^200 .*serving_default' "$(http GET "$M/metadata")"
check unknown_model '^404 \{"error": ".*model .nope. is not served' \
  "$(http POST "$URL/v1/models/nope:predict" '{"instances": [1.0]}')"
check unknown_version '^404 .*version 7 of model' \
  "$(http POST "$M/versions/7:predict" '{"instances": [1.0]}')"
check bad_json '^400 \{"error"' "$(http POST "$M:predict" '{"instances": [1.0,')"
check wrong_method '^400 .*tensorflow/serving/classify' \
  "$(http POST "$M:classify" '{"examples": [{"x": 2.0}]}')"

# A new version is picked up and swapped in.
cp -r "$HPT" "$TMP/models/h2/.tmp-124" && mv "$TMP/models/h2/.tmp-124" "$TMP/models/h2/124"
for _ in $(seq 50); do
  http GET "$M" | grep -q '"version": "124", "state": "AVAILABLE"' && break
  sleep 0.1
done
check new_version '"version": "124", "state": "AVAILABLE"' "$(http GET "$M")"
check metrics 'recflow_serving_request_count\{model="half_plus_two",version="124"|recflow_serving_available_versions\{model="half_plus_two"\} 1' \
  "$(http GET "$URL/monitoring/prometheus/metrics")"
# The gRPC server's admission control reports on the same page.
check grpc_metrics '^recflow_serving_grpc_requests_shed_total 0$' \
  "$(http GET "$URL/monitoring/prometheus/metrics")"

kill -TERM "$SERVER_PID"
for _ in $(seq 50); do
  kill -0 "$SERVER_PID" 2>/dev/null || break
  sleep 0.1
done
if kill -0 "$SERVER_PID" 2>/dev/null; then
  echo "FAIL sigterm: the server did not exit within 5 s"
  fails=$((fails + 1))
else
  wait "$SERVER_PID"
  rc=$?
  check sigterm_exit "^0$" "$rc"
  check sigterm_message "received SIGTERM; shutting down" "$(cat "$TMP/out")"
fi
SERVER_PID=

# Bad flags and config files: a clear error, exit 1, no crash.
expect_fail() {  # expect_fail NAME REGEX ARGS...
  local name=$1 regex=$2
  shift 2
  local out rc
  out=$(timeout 10 "$RECFLOW" serve "$@" 2>&1)
  rc=$?
  if [[ $rc -ne 1 ]] || ! grep -qE -- "$regex" <<<"$out"; then
    echo "FAIL $name: exit $rc, output: $(head -c 400 <<<"$out")"
    fails=$((fails + 1))
  else
    pass=$((pass + 1))
  fi
}
expect_fail nothing "nothing to serve" --port=0 --rest_api_port=auto
expect_fail missing_base "model 'm': base_path '$TMP/none'" \
  --model_name=m --model_base_path="$TMP/none" --rest_api_port=auto --port=0
printf 'model_config_list {\n  config { name: "m" bse_path: "x" }\n}\n' >"$TMP/bad.config"
expect_fail bad_config "Error parsing text-format tensorflow.serving.ModelServerConfig: 2:[0-9]+: .*bse_path.*bad.config" \
  --model_config_file="$TMP/bad.config" --port=auto
: >"$TMP/empty.config"
expect_fail empty_config "lists no model" --model_config_file="$TMP/empty.config" --port=auto
printf 'max_batch_size { value: 0 }\n' >"$TMP/batching.config"
expect_fail bad_batching "max_batch_size must be >= 1" --model_base_path="$TMP/models/h2" \
  --batching_parameters_file="$TMP/batching.config" --port=auto
expect_fail bad_port "--port must be a port" --model_base_path="$TMP/models/h2" --port=x
expect_fail poll_nan "--file_system_poll_wait_seconds must be a number of seconds" \
  "${SERVE_H2[@]}" --file_system_poll_wait_seconds=nan
printf 'model_config_list {\n  config {\n    name: "m" base_path: "%s"\n    model_version_policy { latest { num_versions: 0 } }\n  }\n}\n' \
  "$TMP/models/h2" >"$TMP/zero.config"
expect_fail num_versions_0 "zero.config' line 4: model 'm' has model_version_policy \{ latest \{ num_versions: 0 \} \}" \
  --model_config_file="$TMP/zero.config" --rest_api_port=auto --port=0
printf 'model_config_list {\n  config {\n    name: "m" base_path: "%s"\n    model_version_policy { specific { versions: -5 } }\n  }\n}\n' \
  "$TMP/models/h2" >"$TMP/negative.config"
expect_fail negative_version "model 'm' has model_version_policy \{ specific \{ versions: -5 \} \}" \
  --model_config_file="$TMP/negative.config" --rest_api_port=auto --port=0

# Thread counts are bounded up front, naming the flag; a thread that cannot
# start is an error (exit 1), never an abort.
expect_fail rest_threads "--rest_api_num_threads is 100000; must be between 0 and 4096" \
  "${SERVE_H2[@]}" --rest_api_num_threads=100000
expect_fail intra_threads "--tensorflow_intra_op_parallelism is 1000000; must be between 0 and 4096" \
  "${SERVE_H2[@]}" --tensorflow_intra_op_parallelism=1000000
expect_fail inter_threads "--tensorflow_inter_op_parallelism is 5000" \
  "${SERVE_H2[@]}" --tensorflow_inter_op_parallelism=5000
expect_fail grpc_threads "--grpc_max_threads is 99999" \
  --model_base_path="$TMP/models/h2" --port=auto --grpc_max_threads=99999
printf 'num_batch_threads { value: 100000 }\n' >"$TMP/threads.config"
expect_fail batch_threads "num_batch_threads is 100000; must be between 1 and 4096" \
  "${SERVE_H2[@]}" --batching_parameters_file="$TMP/threads.config"
# A 32 TiB default stack: no thread can start, as under a process limit.
# (OPENBLAS_NUM_THREADS=1: OpenBLAS starts its own threads when it is
# loaded, and raises SIGINT when it cannot.)
out=$( (ulimit -s 34359738368 &&
  OPENBLAS_NUM_THREADS=1 timeout 20 "$RECFLOW" serve "${SERVE_H2[@]}") 2>&1)
rc=$?
check no_threads_exit "^1$" "$rc"
check no_threads_message "^error: .*cannot start thread" "$out"

expect_fail idle_timeout "--rest_api_idle_timeout_in_ms is 0; must be between 1 and 86400000" \
  "${SERVE_H2[@]}" --rest_api_idle_timeout_in_ms=0
# Admission control (docs/serving_rest.md#overload).
expect_fail max_queued "--rest_api_max_queued_requests must be 'auto' or an integer between 0 and 1000000 .*, got '-3'" \
  "${SERVE_H2[@]}" --rest_api_max_queued_requests=-3
expect_fail max_queued_text "--rest_api_max_queued_requests must be .* got 'many'" \
  "${SERVE_H2[@]}" --rest_api_max_queued_requests=many
expect_fail max_queue_wait "--rest_api_max_queue_wait_ms is 0; must be between 1 and 86400000" \
  "${SERVE_H2[@]}" --rest_api_max_queue_wait_ms=0
expect_fail grpc_max_concurrent "--grpc_max_concurrent_requests must be 'auto' or an integer between 0 and 1000000 \(0: no admission control\), got 'x'" \
  "${SERVE_H2[@]}" --grpc_max_concurrent_requests=x
expect_fail grpc_max_queued "--grpc_max_queued_requests must be .* got '-1'" \
  "${SERVE_H2[@]}" --grpc_max_queued_requests=-1
expect_fail grpc_max_queue_wait "--grpc_max_queue_wait_ms is 0; must be between 1 and 86400000" \
  "${SERVE_H2[@]}" --grpc_max_queue_wait_ms=0
# Loading flags (TF Serving's names): bounded, naming the flag.
expect_fail load_threads "--num_load_threads is 5000; must be between 0 and 4096" \
  "${SERVE_H2[@]}" --num_load_threads=5000
expect_fail unload_threads "--num_unload_threads must be a non-negative integer, got '-1'" \
  "${SERVE_H2[@]}" --num_unload_threads=-1
expect_fail load_retries "--max_num_load_retries is 4294967296; must be at most 2147483647" \
  "${SERVE_H2[@]}" --max_num_load_retries=4294967296
expect_fail retry_interval "--load_retry_interval_micros must be a number of microseconds, at most 86400000000" \
  "${SERVE_H2[@]}" --load_retry_interval_micros=1e9

# An absurd batch timeout is refused at load, naming the field; a request
# waiting for its batch is answered at once on SIGTERM, and the server exits
# without waiting out the timeout (issue 22 item 8).
printf 'batch_timeout_micros { value: 9223372036854775807 }\n' >"$TMP/forever.config"
expect_fail batch_timeout "batch_timeout_micros is 9223372036854775807; must be between 0 and 60000000" \
  "${SERVE_H2[@]}" --batching_parameters_file="$TMP/forever.config"
printf 'batch_timeout_micros { value: 59000000 }\nmax_batch_size { value: 64 }\n' >"$TMP/slow.config"
"$RECFLOW" serve "${SERVE_H2[@]}" --batching_parameters_file="$TMP/slow.config" \
  --rest_api_idle_timeout_in_ms=300 >"$TMP/out2" 2>"$TMP/err2" &
SERVER_PID=$!
for _ in $(seq 100); do
  grep -q "^serving model" "$TMP/out2" && break
  sleep 0.1
done
URL2=$(grep -oE "http://127.0.0.1:[0-9]+" "$TMP/out2" | head -1)
# --rest_api_idle_timeout_in_ms: a connection that sends nothing is closed.
check idle_closed "^closed$" "$(python3 - "${URL2##*:}" <<'PY'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.settimeout(10)
try:
    print("closed" if s.recv(1) == b"" else "data")
except socket.timeout:
    print("still open 10 s later")
PY
)"
http POST "$URL2/v1/models/default:predict" '{"instances": [1.0, 2.0]}' >"$TMP/pending" &
PREDICT_PID=$!
for _ in $(seq 100); do
  http GET "$URL2/monitoring/prometheus/metrics" |
    grep -q 'recflow_serving_batch_queue_depth{model="default"} 1' && break
  sleep 0.1
done
check batch_pending 'recflow_serving_batch_queue_depth\{model="default"\} 1' \
  "$(http GET "$URL2/monitoring/prometheus/metrics")"
kill -TERM "$SERVER_PID"
for _ in $(seq 50); do
  kill -0 "$SERVER_PID" 2>/dev/null || break
  sleep 0.1
done
if kill -0 "$SERVER_PID" 2>/dev/null; then
  echo "FAIL batch_sigterm: the server did not exit within 5 s of SIGTERM"
  fails=$((fails + 1))
  kill -KILL "$SERVER_PID"
else
  wait "$SERVER_PID"
  check batch_sigterm_exit "^0$" "$?"
fi
SERVER_PID=
wait "$PREDICT_PID"
check batch_flushed '^200 \{"predictions": \[2.5, 3.0\]\}' "$(cat "$TMP/pending")"

echo "serve_test: $pass passed, $fails failed"
[[ $fails -eq 0 ]]
