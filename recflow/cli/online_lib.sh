# Shared by online_test.sh and online_faults_test.sh: sourced after
# RECFLOW=$1. Sets TMP (removed at exit), PIDS (killed at exit), fail and
# $fails, and the helpers below.
TMP=$(mktemp -d)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null; done
  rm -rf "$TMP"
}
trap cleanup EXIT
fails=0
fail() {
  echo "FAIL $*"
  fails=$((fails + 1))
}

# serve NAME ARGS... : starts a server, sets URL_<NAME> and PID_<NAME>.
serve() {
  local name=$1
  shift
  "$RECFLOW" serve --rest_api_port=auto --port=0 --file_system_poll_wait_seconds=0 "$@" \
    >"$TMP/$name.out" 2>"$TMP/$name.err" &
  PIDS+=($!)
  printf -v "PID_$name" '%s' "$!"
  for _ in $(seq 200); do
    grep -q "^serving model" "$TMP/$name.out" && break
    sleep 0.05
  done
  local url
  url=$(grep -oE "http://127.0.0.1:[0-9]+" "$TMP/$name.out" | head -1)
  [[ -n "$url" ]] || fail "server $name did not start: $(tail -3 "$TMP/$name.err")"
  printf -v "URL_$name" '%s' "$url"
}

# predict URL: a fixed request of 3 examples (ids seen in training and not).
predict() {
  python3 - "$1/v1/models/ctr:predict" <<'PY'
import json, sys, urllib.request
inputs = {"dense": [[0.5] * 13, [1.0] * 13, [0.0] * 13]}
for f in range(1, 27):
    inputs["C%d/ids" % f] = [f * 7, f * 11 + 3, 123456789]
    inputs["C%d/row_splits" % f] = [0, 1, 2, 3]
req = urllib.request.Request(sys.argv[1], data=json.dumps({"inputs": inputs}).encode(), method="POST")
try:
    with urllib.request.urlopen(req) as r:
        print(r.status, r.read().decode())
except Exception as e:
    print("error", e, getattr(e, "read", lambda: b"")().decode())
PY
}

# update_status URL FIELD: the field of the first version's
# recflow_model_update in GET /v1/models/ctr ("none" when it has none).
update_status() {
  python3 - "$1/v1/models/ctr" "$2" <<'PY'
import json, sys, urllib.request
with urllib.request.urlopen(sys.argv[1]) as r:
    v = json.loads(r.read().decode())["model_version_status"][0]
print(v.get("recflow_model_update", {}).get(sys.argv[2], "none"))
PY
}

# predict_rows URL TSV: a request of the first 20 rows of a Criteo TSV, as
# recflow train parses them (log1p dense values, ids (field << 32) | hex):
# ids the model was trained on.
predict_rows() {
  python3 - "$1/v1/models/ctr:predict" "$2" <<'PY'
import json, math, sys, urllib.request
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[2]).readlines()[:20]]
inputs = {"dense": [[math.log1p(max(float(v), 0)) if v else 0.0 for v in r[1:14]] for r in rows]}
for f in range(26):
    ids, splits = [], [0]
    for r in rows:
        if r[14 + f]:
            ids.append((f << 32) | int(r[14 + f], 16))
        splits.append(len(ids))
    inputs["C%d/ids" % (f + 1)] = ids
    inputs["C%d/row_splits" % (f + 1)] = splits
req = urllib.request.Request(sys.argv[1], data=json.dumps({"inputs": inputs}).encode(), method="POST")
with urllib.request.urlopen(req) as r:
    print(r.status, r.read().decode())
PY
}

metric() {  # metric URL NAME -> the value of the first sample of NAME
  python3 - "$1/monitoring/prometheus/metrics" "$2" <<'PY'
import sys, urllib.request
with urllib.request.urlopen(sys.argv[1]) as r:
    for line in r.read().decode().splitlines():
        if line.startswith(sys.argv[2] + "{"):
            print(line.rsplit(" ", 1)[1])
            break
PY
}

newest_update() {  # newest_update [DIR]: the highest update number in DIR ($TMP/m/updates)
  ls "${1:-$TMP/m/updates}" | grep -oE '^update-[0-9]+\.index$' | sort | tail -1 | grep -oE '[0-9]+' |
    sed 's/^0*//'
}


# start_load URL: one predict request every 20 ms to URL's model ctr, in the
# background, until stop_load; stop_load sets LOAD_RESULT ("ok=N failed=M
# first=ERROR").
start_load() {
  rm -f "$TMP/stop-load"
  python3 - "$1/v1/models/ctr:predict" "$TMP/stop-load" >"$TMP/load.out" 2>&1 <<'PY' &
import json, os, sys, time, urllib.request
inputs = {"dense": [[0.5] * 13, [1.0] * 13]}
for f in range(1, 27):
    inputs["C%d/ids" % f] = [f * 7, f * 11 + 3]
    inputs["C%d/row_splits" % f] = [0, 1, 2]
body = json.dumps({"inputs": inputs}).encode()
ok = failed = 0
first = ""
while not os.path.exists(sys.argv[2]):
    try:
        req = urllib.request.Request(sys.argv[1], data=body, method="POST")
        with urllib.request.urlopen(req, timeout=10) as r:
            if r.status == 200 and "probabilities" in r.read().decode():
                ok += 1
            else:
                failed += 1
    except Exception as e:
        failed += 1
        first = first or repr(e)
    time.sleep(0.02)
print("ok=%d failed=%d first=%s" % (ok, failed, first))
PY
  LOAD_PID=$!
  PIDS+=($LOAD_PID)
}
stop_load() {
  touch "$TMP/stop-load"
  wait "$LOAD_PID"
  read -r LOAD_RESULT <"$TMP/load.out"
}

# finish: stops what is left and exits with the verdict.
finish() {
  for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
  PIDS=()
  if [[ $fails -ne 0 ]]; then
    echo "$fails check(s) failed"
    exit 1
  fi
  echo "$1: all checks passed"
}
