#!/usr/bin/env bash
# Distributed training over a real (virtual) network: every task of the
# cluster (2 ps, a chief, 2 workers) runs in a network namespace of its own,
# on its own address 10.R.0.k, port 2222 each (as Kubeflow's TFJob does);
# the namespaces are joined by veth pairs into a bridge that lives in a
# "hub" namespace. Mid-training worker 1's link goes down for ~5 s and
# comes back. Checks:
#  1. each ps listens on its own address (its log says so), reachable from
#     another namespace there and not on that namespace's 127.0.0.1;
#  2. the chief's global step advances while worker 1 is cut off;
#  3. worker 1 comes back (its retries end: "answers again", or it trains
#     steps after the cut) and the job finishes: every task exits 0;
#  4. the final checkpoint loads in single-process `recflow eval`, AUC > 0.6.
# Needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN) and `ip` with namespaces,
# veth and bridges; without them it prints "SKIP: <why>" and exits 77.
# Every namespace (and with it every veth and the bridge) is deleted on exit,
# even on failure, interruption or the internal time limit; namespaces left
# behind by a run that was SIGKILLed are removed by the next run.
#
# Usage: netns_test.sh RECFLOW_BINARY SOURCE_DIR   (about 30 s)
# Environment: KEEP_TMP=1 keeps the logs; for experiments NETNS_TEST_STEPS
# (3000; the cut starts at a tenth of it), NETNS_TEST_CUT_SECS (5) and
# NETNS_TEST_LIMIT_SECS (150, the internal time limit).
set -u
RECFLOW=$1  # $2, the source directory, is not needed
LIMIT_SECS=${NETNS_TEST_LIMIT_SECS:-150}  # below the ctest TIMEOUT, so cleanup runs

skip() {
  echo "SKIP: $*"
  exit 77
}
fails=0
fail() {
  echo "FAIL $*"
  fails=$((fails + 1))
}

[[ -x "$RECFLOW" ]] || { echo "FAIL no recflow binary at '$RECFLOW'"; exit 1; }
[[ $(id -u) -eq 0 ]] || skip "not root (network namespaces and veth pairs need CAP_NET_ADMIN)"
command -v ip >/dev/null 2>&1 || skip "no 'ip' command (iproute2)"

ID=$$
NAMESPACES=()
PIDS=()
WATCHDOG=
TMP=$(mktemp -d "${TMPDIR:-/tmp}/recflow-netns-$ID.XXXXXX")
cleanup() {
  trap - INT TERM HUP
  local p ns
  [[ -n "$WATCHDOG" ]] && kill -TERM "$WATCHDOG" 2>/dev/null
  for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null; done
  for ns in "${NAMESPACES[@]}"; do
    for p in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$p" 2>/dev/null; done
    ip netns del "$ns" 2>/dev/null
  done
  if [[ -n "${KEEP_TMP:-}" ]]; then touch "$TMP/.kept"; echo "logs kept in $TMP"; else rm -rf "$TMP"; fi
}
trap cleanup EXIT
trap 'echo "FAIL interrupted (signal) after $SECONDS s; cleaning up"; exit 1' INT TERM HUP
# The time limit: TERM to this script, whose trap cleans up (a ctest
# TIMEOUT kills with SIGKILL, which no trap sees). The watchdog ends when
# the script is gone (never signals a recycled pid).
(
  end=$(($(printf '%(%s)T' -1) + LIMIT_SECS))
  while sleep 1; do
    read -r _ _ _ parent _ </proc/$BASHPID/stat
    [[ "$parent" == "$ID" ]] || exit 0
    if (($(printf '%(%s)T' -1) >= end)); then
      echo "FAIL time limit of $LIMIT_SECS s reached"
      kill -TERM "$ID"
      exit 0
    fi
  done
) &
WATCHDOG=$!

# Namespaces and logs of earlier runs that died without cleaning up (SIGKILL).
for dir in "${TMPDIR:-/tmp}"/recflow-netns-*.*; do
  [[ -d "$dir" && ! -e "$dir/.kept" ]] || continue
  owner=${dir##*/recflow-netns-}
  owner=${owner%%.*}
  [[ "$owner" =~ ^[0-9]+$ ]] && ! kill -0 "$owner" 2>/dev/null && rm -rf "$dir"
done
for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E '^rf[0-9]+-(hub|ps[01]|chief0|worker[01])$'); do
  owner=${ns#rf}
  owner=${owner%%-*}
  if ! kill -0 "$owner" 2>/dev/null; then
    for p in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$p" 2>/dev/null; done
    ip netns del "$ns" 2>/dev/null && echo "removed namespace $ns left by an earlier run"
  fi
done

# 1. The network: a bridge in the hub namespace, one namespace per task with
# eth0 (a veth into the bridge) at 10.R.0.k/24 and lo up.
R=$((RANDOM % 250 + 1))
TASKS=(ps0 ps1 chief0 worker0 worker1)
declare -A ADDR NS
HUB=rf$ID-hub
ip netns add "$HUB" 2>"$TMP/setup.err" ||
  skip "cannot create a network namespace: $(head -1 "$TMP/setup.err")"
NAMESPACES+=("$HUB")
ip -n "$HUB" link add br0 type bridge 2>"$TMP/setup.err" ||
  skip "cannot create a bridge in a namespace: $(head -1 "$TMP/setup.err")"
ip -n "$HUB" link set br0 up 2>"$TMP/setup.err" || skip "cannot bring a bridge up: $(head -1 "$TMP/setup.err")"
k=0
for t in "${TASKS[@]}"; do
  k=$((k + 1))
  ns=rf$ID-$t
  NS[$t]=$ns
  ADDR[$t]=10.$R.0.$k
  ip netns add "$ns" 2>"$TMP/setup.err" ||
    skip "cannot create a network namespace: $(head -1 "$TMP/setup.err")"
  NAMESPACES+=("$ns")
  # The hub's end is named rf<ID>-<k> (at most 15 characters), the task's eth0.
  ip link add "rf$ID-$k" netns "$HUB" type veth peer name eth0 netns "$ns" 2>"$TMP/setup.err" ||
    skip "cannot create a veth pair: $(head -1 "$TMP/setup.err")"
  { ip -n "$HUB" link set "rf$ID-$k" master br0 up &&
    ip -n "$ns" link set lo up &&
    ip -n "$ns" addr add "${ADDR[$t]}/24" dev eth0 &&
    ip -n "$ns" link set eth0 up; } 2>"$TMP/setup.err" ||
    skip "cannot set up the veth of $ns: $(head -1 "$TMP/setup.err")"
done
# A bandwidth cap on the training tasks' links (100 Mbit/s out, the pushes;
# about 75 steps/s per task), so that the job's pace, and the share of it
# left after the cut, depend little on how fast the machine is. Without tbf
# the job runs at the machine's pace.
shaped=no
for t in chief0 worker0 worker1; do
  ip netns exec "${NS[$t]}" tc qdisc add dev eth0 root tbf rate 100mbit burst 256kb latency 100ms \
    >/dev/null 2>&1 && shaped=yes
done
setup_secs=$SECONDS

# 2. The job: a small synthetic click log, DeepFM on hash tables, bounded by
# steps (3 training tasks share 3000 steps of 256 examples: about 20-25 s
# on a 2-core machine, so worker 1 comes back well before the end. A worker
# still cut off when the job ends does not finish cleanly: it gets CANCELLED
# from a ps shutting down, or retries a ps that is gone for 5 minutes).
STEPS=${NETNS_TEST_STEPS:-3000}
CUT_AT=$((STEPS / 10))
CUT_SECS=${NETNS_TEST_CUT_SECS:-5}
source "$(dirname "${BASH_SOURCE[0]}")/cluster_test_job.sh"
make_job_data
write_job_config 20 "$STEPS" 1000
CLUSTER="\"cluster\": {\"chief\": [\"${ADDR[chief0]}:2222\"], \"worker\": [\"${ADDR[worker0]}:2222\", \"${ADDR[worker1]}:2222\"], \"ps\": [\"${ADDR[ps0]}:2222\", \"${ADDR[ps1]}:2222\"]}"
declare -A TASK_PID
start_task() {  # start_task TASK (ps0, chief0, worker1, ...)
  local t=$1 job=${1%[0-9]} index=${1: -1}
  ip netns exec "${NS[$t]}" env TF_CONFIG="{$CLUSTER, \"task\": {\"type\": \"$job\", \"index\": $index}}" \
    "$RECFLOW" train --config "$TMP/deepfm.yaml" --model_dir "$TMP/model" \
    >>"$TMP/$t.out" 2>>"$TMP/$t.err" &
  TASK_PID[$t]=$!
  PIDS+=($!)
}
step_of() {  # the last global step of TASK's progress lines
  grep -aoE "^step [0-9]+" "$TMP/$1.err" 2>/dev/null | tail -1 | awk '{print $2}'
}
wait_for() {  # wait_for SECS COMMAND...: until COMMAND succeeds (1 when it never does)
  local deadline=$((SECONDS + $1))
  shift
  until "$@"; do
    ((SECONDS >= deadline)) && return 1
    sleep 0.1
  done
}
step_reached() { local s; s=$(step_of "$1"); [[ -n "$s" && "$s" -ge "$2" ]]; }
# can_connect FROM_TASK HOST: a TCP connect to HOST:2222 from FROM_TASK's namespace.
can_connect() {
  timeout 5 ip netns exec "${NS[$1]}" bash -c "exec 3<>/dev/tcp/$2/2222" 2>/dev/null
}

start_time=$SECONDS
start_task ps0
start_task ps1
for t in ps0 ps1; do
  if ! wait_for 30 grep -q "listening on" "$TMP/$t.err"; then
    fail "$t did not start listening: $(tail -3 "$TMP/$t.err")"
  fi
done
# The ps tasks are on their own addresses: each says so, and is reachable
# there from worker 1's namespace, while nothing listens on that namespace's
# own loopback port 2222.
for t in ps0 ps1; do
  grep -q "listening on ${ADDR[$t]}:2222" "$TMP/$t.err" ||
    fail "$t does not listen on its address ${ADDR[$t]}:2222: $(grep listening "$TMP/$t.err")"
  can_connect worker1 "${ADDR[$t]}" ||
    fail "worker 1's namespace cannot connect to $t at ${ADDR[$t]}:2222 (the bridge does not forward?)"
done
can_connect worker1 127.0.0.1 &&
  fail "127.0.0.1:2222 answers in worker 1's namespace: the namespaces are not separate"
for t in chief0 worker0 worker1; do start_task "$t"; done

worker1_trains_again() {  # a progress line of worker 1 after the link came back
  tail -n +"$((back_lines + 1))" "$TMP/worker1.err" | grep -q "^step"
}

# 3. Cut worker 1 off for ~5 s mid-training.
cut_step='' during_cut='' worker1_before='' cut_lines=0 back_lines=0 resumed_after='never'
if wait_for 60 step_reached chief0 "$CUT_AT" && wait_for 20 step_reached worker1 1; then
  worker1_before=$(step_of worker1)
  cut_step=$(step_of chief0)
  ip -n "${NS[worker1]}" link set eth0 down || fail "cannot take worker 1's link down"
  cut_lines=$(wc -l <"$TMP/worker1.err")
  echo "--- link down at chief step $cut_step" >>"$TMP/worker1.err"
  sleep "$CUT_SECS"
  during_cut=$(step_of chief0)
  ip -n "${NS[worker1]}" link set eth0 up || fail "cannot bring worker 1's link back up"
  echo "--- link up at chief step $during_cut" >>"$TMP/worker1.err"
  back_lines=$(wc -l <"$TMP/worker1.err")
  # How long worker 1 takes to train again (TCP retransmits, or gRPC retries).
  up_time=$EPOCHREALTIME
  if wait_for 30 worker1_trains_again; then
    resumed_after=$(awk -v a="$up_time" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f s", b - a }')
  fi
  ((during_cut - cut_step >= 20)) ||
    fail "the chief's global step went only from $cut_step to $during_cut while worker 1 was cut off"
else
  fail "the job never reached step $CUT_AT (chief: $(tail -2 "$TMP/chief0.err"); worker 1: $(tail -2 "$TMP/worker1.err"))"
fi

# The job finishes: every task exits 0 (the ps tasks when the chief ends the job).
for t in chief0 worker0 worker1 ps0 ps1; do
  if ! wait "${TASK_PID[$t]}"; then
    fail "$t exited with an error: $(grep -av '^step' "$TMP/$t.err" | tail -3)"
  fi
done
job_secs=$((SECONDS - start_time))

# Worker 1 came back: its retries ended ("answers again"), or it trained
# steps after the cut (a call in flight may just resume when TCP does).
answers_again=no
tail -n +"$((cut_lines + 1))" "$TMP/worker1.err" | grep -q "answers again" && answers_again=yes
worker1_after=$(tail -n +"$((back_lines + 1))" "$TMP/worker1.err" | grep -aoE "^step [0-9]+" | tail -1 | awk '{print $2}')
worker1_steps=$(grep -oE "^worker 1: [0-9]+ steps" "$TMP/worker1.out" | awk '{print $3}')
worker1_retries=$(grep -oE "[0-9]+ retried calls" "$TMP/worker1.out" | awk '{print $1}')
if [[ -n "$cut_step" ]]; then
  [[ $answers_again == yes || ( -n "$worker1_after" && -n "$worker1_before" && "$worker1_after" -gt "$worker1_before" ) ]] ||
    fail "worker 1 did not come back after the cut (steps before $worker1_before, after '${worker1_after}'): $(tail -n +"$((cut_lines + 1))" "$TMP/worker1.err" | grep -av '^step' | tail -4)"
fi
[[ -n "$worker1_steps" ]] || fail "worker 1 did not report its steps: $(tail -2 "$TMP/worker1.out")"
grep -q "ps task 0: done at global step" "$TMP/ps0.err" ||
  fail "ps 0 did not end with the job: $(tail -2 "$TMP/ps0.err")"

# 4. The final checkpoint loads in a single process.
last=$(ls "$TMP/model"/model.ckpt-*.index 2>/dev/null | sed 's/.*ckpt-\([0-9]*\).index/\1/' | sort -n | tail -1)
[[ -n "$last" && "$last" -ge "$STEPS" ]] || fail "no final checkpoint at step >= $STEPS: $(ls "$TMP/model" 2>&1)"
out=$("$RECFLOW" eval --model_dir "$TMP/model" 2>&1)
auc=$(grep -oE "^AUC [0-9.]+" <<<"$out" | awk '{print $2}')
awk -v a="${auc:-0}" 'BEGIN { exit !(a > 0.6) }' || fail "single-process eval: AUC '$auc' (want > 0.6): $(tail -3 <<<"$out")"

echo "netns_test: 5 tasks on 10.$R.0.1-5:2222 in their own namespaces (setup ${setup_secs} s, 100 Mbit/s cap: $shaped);" \
  "worker 1 cut off for $CUT_SECS s at chief step ${cut_step:-?} (chief advanced to ${during_cut:-?} meanwhile;" \
  "worker 1 trained again $resumed_after after the link came back, answers again: $answers_again," \
  "${worker1_retries:-?} retried calls, step ${worker1_before:-?} -> ${worker1_after:-?}," \
  "${worker1_steps:-?} steps in all); job done in ${job_secs} s at step ${last:-?}, eval AUC ${auc:-?}; $fails failures"
[[ $fails -eq 0 ]]
