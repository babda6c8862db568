#!/usr/bin/env bash
# Builds recflow with a sanitizer in its own folder and runs the fast tests
# under it (docs/fuzzing.md, "Sanitizer builds"):
#
#   scripts/sanitize.sh address     # build-asan:  every fast test (make test-asan)
#   scripts/sanitize.sh undefined   # build-ubsan: every fast test (make test-ubsan)
#   scripts/sanitize.sh thread      # build-tsan:  the concurrent tests (make test-tsan)
#
# Extra arguments go to ctest (e.g. -R Batching). Any sanitizer report
# fails its test: ASan and UBSan stop at the first error
# (halt_on_error), TSan exits non-zero after a race.
set -euo pipefail
cd "$(dirname "$0")/.."
kind=${1:-}
shift || true
case $kind in
  address) dir=${SAN_BUILD_DIR:-build-asan} ;;
  undefined) dir=${SAN_BUILD_DIR:-build-ubsan} ;;
  thread) dir=${SAN_BUILD_DIR:-build-tsan} ;;
  *) echo "usage: scripts/sanitize.sh address|undefined|thread [ctest args]" >&2; exit 2 ;;
esac
jobs=${JOBS:-$(nproc)}
scripts/install-deps.sh
if [[ ! -f $dir/build.ninja ]]; then
  cmake -G Ninja -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release -DRECFLOW_SANITIZE="$kind"
fi
cmake --build "$dir" -j "$jobs"

export ASAN_OPTIONS=${ASAN_OPTIONS:-allocator_may_return_null=1:detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1:suppressions=$PWD/tests/ubsan_suppressions.txt}
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=0:exitcode=66:second_deadlock_stack=1:suppressions=$PWD/tests/tsan_suppressions.txt}
args=(--test-dir "$dir" --output-on-failure -j "$jobs" -LE slow --timeout 1800)
if [[ $kind == thread ]]; then
  # The concurrent code: thread pool, executor, sessions, hash tables and
  # their tiers, the data pipeline's parallel stages, batching, the model
  # server and its updates, the parameter servers and workers.
  args+=(-R 'ThreadPool|Executor|Session|Concurren|Parallel|Thread|HashTable|Embedding|Tier|Batch|Serv|Rest|Grpc|Http|Update|Ps|Worker|Cluster|Distributed|Sync|Queue|Iterator|Prefetch|Interleave|Saver|Checkpoint')
fi
ctest "${args[@]}" "$@"
