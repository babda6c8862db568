#!/usr/bin/env bash
# End-to-end test of `recflow serve`'s TF Serving flags for gRPC and config
# reloads: --grpc_socket_path (the socket is created, announced and removed),
# --grpc_channel_arguments, --model_config_file_poll_wait_seconds (models
# added and removed by rewriting the file; a broken file keeps them) and
# --saved_model_tags, --matmul_precision; bad values are refused naming the
# flag.
set -u
RECFLOW=$1
SRC=$2
TMP=$(mktemp -d /tmp/recflow_serve_flags.XXXXXX)  # short: it holds a socket
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

http() {  # http METHOD URL [BODY] -> "CODE BODY"
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

stop_server() {  # SIGTERM, wait up to 5 s, check exit 0
  kill -TERM "$SERVER_PID"
  for _ in $(seq 50); do
    kill -0 "$SERVER_PID" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$SERVER_PID" 2>/dev/null; then
    echo "FAIL $1: the server did not exit within 5 s of SIGTERM"
    fails=$((fails + 1))
    kill -KILL "$SERVER_PID"
  else
    wait "$SERVER_PID"
    check "$1" "^0$" "$?"
  fi
  SERVER_PID=
}

wait_started() {  # wait_started OUTFILE
  for _ in $(seq 100); do
    grep -q "^serving model" "$1" && return
    sleep 0.1
  done
}

mkdir -p "$TMP/models/a" "$TMP/models/b"
cp -r "$HPT" "$TMP/models/a/1"
cp -r "$HPT" "$TMP/models/b/2"
write_config() {  # write_config NAME... (atomically, as the docs advise)
  {
    echo "model_config_list {"
    for m in "$@"; do
      echo "  config { name: \"$m\" base_path: \"$TMP/models/$m\" model_platform: \"tensorflow\" }"
    done
    echo "}"
  } >"$TMP/models.config.tmp"
  mv "$TMP/models.config.tmp" "$TMP/models.config"
}
write_config a

# One server: a config file re-read every 0.2 s, gRPC on TCP and a socket,
# channel arguments.
SOCKET=$TMP/tfs.sock
"$RECFLOW" serve --model_config_file="$TMP/models.config" \
  --model_config_file_poll_wait_seconds=0.2 --rest_api_port=auto --port=auto \
  --grpc_socket_path="$SOCKET" \
  --grpc_channel_arguments=grpc.max_connection_age_ms=60000,grpc.primary_user_agent=recflow-test \
  >"$TMP/out" 2>"$TMP/err" &
SERVER_PID=$!
wait_started "$TMP/out"
check socket_announced "serving model a version 1 on unix:$SOCKET" "$(cat "$TMP/out")"
check tcp_announced "serving model a version 1 on grpc://127.0.0.1:[0-9]+" "$(cat "$TMP/out")"
if [[ -S $SOCKET ]]; then pass=$((pass + 1)); else
  echo "FAIL socket_exists: $SOCKET is not a socket"; fails=$((fails + 1)); fi
URL=$(grep -oE "http://127.0.0.1:[0-9]+" "$TMP/out" | head -1)
check a_serves '^200 \{"predictions": \[2.5\]\}' \
  "$(http POST "$URL/v1/models/a:predict" '{"instances": [1.0]}')"
check b_absent '^404' "$(http POST "$URL/v1/models/b:predict" '{"instances": [1.0]}')"

# Model b added by rewriting the file.
write_config a b
for _ in $(seq 100); do
  http GET "$URL/v1/models/b" | grep -q '"state": "AVAILABLE"' && break
  sleep 0.1
done
check b_added '^200 \{"predictions": \[4.5\]\}' \
  "$(http POST "$URL/v1/models/b:predict" '{"instances": [5.0]}')"

# A broken file: logged, the models in force keep serving.
printf 'model_config_list {\n  config { name: "a" bse_path: "x" }\n}\n' >"$TMP/models.config.tmp"
mv "$TMP/models.config.tmp" "$TMP/models.config"
for _ in $(seq 100); do
  grep -q "Error parsing text-format" "$TMP/err" && break
  sleep 0.1
done
check broken_logged "Failed to read ModelServerConfig file: Error parsing text-format tensorflow.serving.ModelServerConfig: 2:[0-9]+: .*bse_path" \
  "$(cat "$TMP/err")"
check broken_keeps_b '^200 \{"predictions": \[2.5\]\}' \
  "$(http POST "$URL/v1/models/b:predict" '{"instances": [1.0]}')"

# Model a removed.
write_config b
for _ in $(seq 100); do
  http POST "$URL/v1/models/a:predict" '{"instances": [1.0]}' | grep -q '^404' && break
  sleep 0.1
done
check a_removed '^404' "$(http POST "$URL/v1/models/a:predict" '{"instances": [1.0]}')"
check b_still '^200' "$(http POST "$URL/v1/models/b:predict" '{"instances": [1.0]}')"
stop_server sigterm_exit
if [[ -e $SOCKET ]]; then
  echo "FAIL socket_removed: $SOCKET is left after the server stopped"; fails=$((fails + 1))
else pass=$((pass + 1)); fi

# gRPC on the socket only (--port=0).
"$RECFLOW" serve --model_base_path="$TMP/models/b" --port=0 --grpc_socket_path="$SOCKET" \
  >"$TMP/out2" 2>"$TMP/err2" &
SERVER_PID=$!
wait_started "$TMP/out2"
check socket_only "^serving model default version 2 on unix:$SOCKET$" "$(cat "$TMP/out2")"
check socket_only_no_tcp "^0$" "$(grep -c grpc:// "$TMP/out2")"
stop_server socket_only_exit

# --saved_model_tags: a MetaGraph tagged {train, serve} is served with
# exactly those tags; with the default "serve" its version fails, naming them.
python3 - "$TMP/models/b/2/saved_model.pb" "$TMP/tagged/7" <<'PY' || { echo "FAIL retag"; fails=$((fails + 1)); }
import os, shutil, sys
# Rewrites MetaGraphDef.meta_info_def.tags (field 1 > 1 > 4) without protobuf:
# the test model's saved_model.pb is re-encoded with the tags "train", "serve".
src, dst = sys.argv[1], sys.argv[2]
data = open(src, "rb").read()
def varint(b, i):
    v = s = 0
    while True:
        c = b[i]; i += 1; v |= (c & 0x7f) << s; s += 7
        if c < 0x80: return v, i
def enc(v):
    out = bytearray()
    while True:
        c = v & 0x7f; v >>= 7
        if v: out.append(c | 0x80)
        else: out.append(c); return bytes(out)
def fields(b):
    i = 0
    while i < len(b):
        key, i = varint(b, i); f, w = key >> 3, key & 7
        if w == 2:
            n, i = varint(b, i); yield f, w, b[i:i + n]; i += n
        elif w == 0:
            v, j = varint(b, i); yield f, w, b[i:j]; i = j
        elif w == 5: yield f, w, b[i:i + 4]; i += 4
        elif w == 1: yield f, w, b[i:i + 8]; i += 8
        else: raise SystemExit("unexpected wire type")
def emit(f, w, payload):
    return enc(f << 3 | w) + (enc(len(payload)) if w == 2 else b"") + payload
def retag_info(b):
    out = b"".join(emit(f, w, p) for f, w, p in fields(b) if f != 4)
    return out + emit(4, 2, b"train") + emit(4, 2, b"serve")
def retag_mg(b):
    return b"".join(emit(f, w, retag_info(p) if f == 1 else p) for f, w, p in fields(b))
sm = b"".join(emit(f, w, retag_mg(p) if f == 2 else p) for f, w, p in fields(data))
shutil.copytree(os.path.dirname(src), dst)
open(os.path.join(dst, "saved_model.pb"), "wb").write(sm)
PY
"$RECFLOW" serve --model_base_path="$TMP/tagged" --rest_api_port=auto --port=0 \
  --saved_model_tags=serve,train >"$TMP/out3" 2>"$TMP/err3" &
SERVER_PID=$!
wait_started "$TMP/out3"
URL3=$(grep -oE "http://127.0.0.1:[0-9]+" "$TMP/out3" | head -1)
check tags_serve_train '^200 \{"predictions": \[2.5\]\}' \
  "$(http POST "$URL3/v1/models/default:predict" '{"instances": [1.0]}')"
stop_server tags_exit
"$RECFLOW" serve --model_base_path="$TMP/tagged" --rest_api_port=auto --port=0 \
  >"$TMP/out4" 2>"$TMP/err4" &
SERVER_PID=$!
wait_started "$TMP/out4"
URL4=$(grep -oE "http://127.0.0.1:[0-9]+" "$TMP/out4" | head -1)
check tags_default_fails '"state": "END".*\{serve\}.*\{serve,train\}' "$(http GET "$URL4/v1/models/default")"
stop_server tags_default_exit

# --matmul_precision=int8 serves (this model has no matmul, so its answer is
# exact); a precision it does not know is refused naming the flag.
"$RECFLOW" serve --model_base_path="$TMP/models/b" --rest_api_port=auto --port=0 \
  --matmul_precision=int8 >"$TMP/out5" 2>"$TMP/err5" &
SERVER_PID=$!
wait_started "$TMP/out5"
URL5=$(grep -oE "http://127.0.0.1:[0-9]+" "$TMP/out5" | head -1)
check int8_serves '^200 \{"predictions": \[2.5\]\}' \
  "$(http POST "$URL5/v1/models/default:predict" '{"instances": [1.0]}')"
stop_server int8_exit

# Bad values: a clear error naming the flag, exit 1.
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
SERVE_B=(--model_base_path="$TMP/models/b" --rest_api_port=auto --port=0)
expect_fail channel_no_eq "--grpc_channel_arguments: entry 'grpc.max_connection_age_ms' is not key=value" \
  "${SERVE_B[@]}" --grpc_channel_arguments=grpc.max_connection_age_ms
expect_fail channel_no_key "--grpc_channel_arguments: entry '=5' has an empty key" \
  "${SERVE_B[@]}" --grpc_channel_arguments==5
expect_fail poll_negative "--model_config_file_poll_wait_seconds must be a number of seconds, >= 0" \
  "${SERVE_B[@]}" --model_config_file_poll_wait_seconds=-1
expect_fail tags_empty "--saved_model_tags is empty" "${SERVE_B[@]}" --saved_model_tags=,
expect_fail precision_bad "--matmul_precision: unknown matmul precision 'bf16'; expected float32 or int8" \
  "${SERVE_B[@]}" --matmul_precision=bf16
expect_fail socket_long "--grpc_socket_path '/tmp/x+' is 206 bytes" \
  "${SERVE_B[@]}" --grpc_socket_path="/tmp/$(printf 'x%.0s' $(seq 201))"
expect_fail socket_dir "gRPC server cannot listen on unix:$TMP/no/such/dir.sock" \
  --model_base_path="$TMP/models/b" --port=0 --grpc_socket_path="$TMP/no/such/dir.sock"

echo "serve_flags_test: $pass passed, $fails failed"
[[ $fails -eq 0 ]]
