#!/usr/bin/env bash
# Runs recflow's libFuzzer targets (tests/fuzz/, docs/fuzzing.md): builds
# them with clang, AddressSanitizer and UndefinedBehaviorSanitizer in
# FUZZ_BUILD_DIR, then fuzzes each for FUZZ_SECONDS from its committed
# corpus. New inputs go to FUZZ_BUILD_DIR/corpus/<target> (not into the
# repository); a crash leaves FUZZ_BUILD_DIR/crashes/<target>/crash-* and
# makes the run fail.
#
#   scripts/fuzz.sh                      # every target, 60 s each
#   FUZZ_SECONDS=600 scripts/fuzz.sh tfrecord sstable
#   scripts/fuzz.sh --list
#
# Reproduce a crash with `build-fuzz/fuzz/<target> CRASH_FILE`. Ends with
# one line per target: runs, coverage (edges), features, corpus
# size, crashes. Add a crash's input to tests/fuzz/corpus/<target>/ once it
# is fixed, so that `make test` replays it from then on.
set -euo pipefail
cd "$(dirname "$0")/.."
src=$PWD
seconds=${FUZZ_SECONDS:-60}
build=${FUZZ_BUILD_DIR:-build-fuzz}
jobs=${JOBS:-$(nproc)}

scripts/install-deps.sh --fuzz
if [[ ! -f $build/build.ninja ]]; then
  CC=clang-14 CXX=clang++-14 cmake -G Ninja -S . -B "$build" -DCMAKE_BUILD_TYPE=Release \
    -DRECFLOW_PYTHON=OFF -DRECFLOW_FUZZ=ON -DRECFLOW_SANITIZE=address,undefined
fi
cmake --build "$build" -j "$jobs" --target recflow_fuzzers
cd "$build"
# One executable per target file (fuzz/fuzz_<file>); a link per target,
# named after it, picks the target (tests/fuzz/libfuzzer_main.cc).
all=()
for exe in fuzz/fuzz_*; do
  [[ -x $exe && ! -L $exe ]] || continue
  for t in $(RECFLOW_FUZZ_LIST=1 "./$exe"); do
    ln -sf "$(basename "$exe")" "fuzz/$t"
    all+=("$t")
  done
done
mapfile -t all < <(printf '%s\n' "${all[@]}" | sort)
if [[ ${1:-} == --list ]]; then printf '%s\n' "${all[@]}"; exit 0; fi
targets=("$@")
((${#targets[@]})) || targets=("${all[@]}")

# A report that stops the fuzzer: every UBSan finding too; leaks count.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1:suppressions=$src/tests/ubsan_suppressions.txt}
failed=0
summary=()
for t in "${targets[@]}"; do
  exe=fuzz/$t
  [[ -L $exe ]] || { echo "fuzz.sh: no target '$t' (--list shows them)"; exit 1; }
  seeds=$src/tests/fuzz/corpus/$t
  corpus=corpus/$t
  crashes=crashes/$t
  mkdir -p "$corpus" "$crashes"
  log=logs/$t.log
  mkdir -p logs
  echo "fuzz.sh: $t for ${seconds}s"
  status=0
  # The first corpus folder receives new inputs; the seeds are read only.
  "./$exe" -max_total_time="$seconds" -print_final_stats=1 -timeout=10 -rss_limit_mb=4096 \
    -max_len=262144 -artifact_prefix="$crashes/" "$corpus" "$seeds" >"$log" 2>&1 || status=$?
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  done_line=$(grep -E '^#[0-9]+.*(DONE|pulse|NEW|REDUCE|INITED)' "$log" | tail -1 || true)
  cov=$(sed -nE 's/.* cov: ([0-9]+).*/\1/p' <<<"$done_line")
  ft=$(sed -nE 's/.* ft: ([0-9]+).*/\1/p' <<<"$done_line")
  found=$(find "$crashes" -type f | wc -l)
  summary+=("$(printf '%-28s runs %-10s cov %-7s ft %-7s corpus %-6s crashes %s' "$t" \
    "${runs:-?}" "${cov:-?}" "${ft:-?}" "$(ls "$corpus" | wc -l)" "$found")")
  if ((status != 0 || found > 0)); then
    failed=1
    echo "fuzz.sh: $t FAILED (exit $status): see $build/$log and $build/$crashes/"
    grep -m5 -E 'ERROR|FUZZ_CHECK|runtime error|SUMMARY' "$log" || true
  fi
done
echo
printf '%s\n' "${summary[@]}"
exit $failed
