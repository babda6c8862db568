# Sourced by distributed_test.sh and online_cluster_test.sh: a local cluster
# of 2 ps, a chief and 2 workers on 127.0.0.1, each task `recflow train
# --config $TMP/deepfm.yaml` with its TF_CONFIG. Needs $RECFLOW, $TMP, the
# PIDS array (killed at exit) and fail.

free_ports() {  # free_ports N: N free TCP ports on 127.0.0.1
  python3 - "$1" <<'PY'
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
PY
}

# start_cluster NAME [train flags...]: starts ps0 ps1 chief0 worker0 worker1
# (and evaluator0 when EVALUATOR=1) for model dir $TMP/NAME; pids in TASK_PID[task].
declare -A TASK_PID
CLUSTER=
start_task() {  # start_task NAME JOB INDEX [flags...]
  local name=$1 job=$2 index=$3
  shift 3
  TF_CONFIG="{$CLUSTER, \"task\": {\"type\": \"$job\", \"index\": $index}}" \
    "$RECFLOW" train --config "$TMP/deepfm.yaml" --model_dir "$TMP/$name" "$@" \
    >>"$TMP/$name.$job$index.out" 2>>"$TMP/$name.$job$index.err" &
  TASK_PID[$job$index]=$!
  PIDS+=($!)
}
TASK_FLAGS=()
start_cluster() {
  local name=$1
  shift
  TASK_FLAGS=("$@")
  read -r p0 p1 p2 p3 p4 p5 <<<"$(free_ports 6)"
  CLUSTER="\"cluster\": {\"chief\": [\"127.0.0.1:$p0\"], \"worker\": [\"127.0.0.1:$p1\", \"127.0.0.1:$p2\"], \"ps\": [\"127.0.0.1:$p3\", \"127.0.0.1:$p4\"], \"evaluator\": [\"127.0.0.1:$p5\"]}"
  for t in "ps 0" "ps 1" "chief 0" "worker 0" "worker 1"; do start_task "$name" $t "$@"; done
  [[ "${EVALUATOR:-0}" == 1 ]] && start_task "$name" evaluator 0 "$@"
}
wait_cluster() {  # wait_cluster NAME: waits (at most 150 s) for every task; fails on a non-zero exit
  local name=$1 task deadline=$((SECONDS + 150))
  for task in "${!TASK_PID[@]}"; do
    while kill -0 "${TASK_PID[$task]}" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.2; done
    if kill -0 "${TASK_PID[$task]}" 2>/dev/null; then
      fail "$name: task $task still running after 150 s: $(tail -3 "$TMP/$name.$task.err")"
      kill -KILL "${TASK_PID[$task]}" 2>/dev/null
    fi
    if ! wait "${TASK_PID[$task]}"; then
      fail "$name: task $task exited with an error: $(tail -3 "$TMP/$name.$task.err")"
    fi
  done
  TASK_PID=()
}
chief_step() {  # the last global step the chief's progress lines show
  grep -oE "^step [0-9]+" "$TMP/$1.chief0.err" 2>/dev/null | tail -1 | awk '{print $2}'
}
wait_step() {  # wait_step NAME STEP: until the chief's progress passes STEP (max 60 s)
  for _ in $(seq 600); do
    local s
    s=$(chief_step "$1")
    [[ -n "$s" && "$s" -ge "$2" ]] && return 0
    sleep 0.1
  done
  fail "$1: the chief never reached step $2"
  return 1
}
kill_restart() {  # kill_restart NAME TASK AT_STEP [DELAY]: kill -9 TASK once the chief passes AT_STEP, restart it DELAY (1) s later
  local name=$1 task=$2 job=${2%[0-9]} index=${2: -1} delay=${4:-1}
  wait_step "$name" "$3" || return
  kill -KILL "${TASK_PID[$task]}" 2>/dev/null
  wait "${TASK_PID[$task]}" 2>/dev/null
  echo "--- killed at step $(chief_step "$name"), restarted" >>"$TMP/$name.$task.err"
  sleep "$delay"
  start_task "$name" "$job" "$index" "${TASK_FLAGS[@]}"
}
