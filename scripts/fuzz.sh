#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz/ (clang, SHARDPACK_FUZZ=ON, into build-fuzz/ or
# $SHARDPACK_FUZZ_BUILD_DIR), generates their seed corpora, runs each target for
# SECONDS_PER_TARGET seconds (default 60) and prints a summary: executions, exec/s, libFuzzer's
# final cov/ft, corpus size and crashes. Exits 1 if any target crashed (ASan/UBSan report, an
# escaped exception, a broken invariant, too much memory, a timeout), printing the inputs.
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]      # TARGET: shard manifest decode csv stream
#
# Environment: SHARDPACK_FUZZ_PARALLEL=N runs N targets at once (default 1, one process each).
# Corpora grow across runs in $out/corpus/TARGET; crash inputs land in $out/crashes/; logs in
# $out/logs/ ($out = BUILD_DIR/fuzz-out). Re-run one input: BUILD_DIR/tests/fuzz/fuzz_TARGET FILE
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-60}
[ $# -gt 0 ] && shift
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(shard manifest decode csv stream)
parallel=${SHARDPACK_FUZZ_PARALLEL:-1}

./scripts/install-deps.sh clang libclang-rt-14-dev llvm
build=${SHARDPACK_FUZZ_BUILD_DIR:-build-fuzz}
cmake -S . -B "$build" -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DSHARDPACK_FUZZ=ON \
  -DSHARDPACK_BUILD_TESTS=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j"$(nproc)" --target fuzz_all >/dev/null

out=$build/fuzz-out
rm -rf "$out/seeds" "$out/logs"
mkdir -p "$out/corpus" "$out/crashes" "$out/logs"
"$build/tests/fuzz/fuzz_make_seeds" "$out/seeds" >/dev/null

# Options per target: a dictionary, and the decoders' longest input (PngSuite and the JPEG test
# images are under 64 KiB but for one 190 KiB PNG, which is then fuzzed cut short).
options() {
  local t=$1
  echo "-max_total_time=$seconds -rss_limit_mb=2048 -malloc_limit_mb=2048 -timeout=25 -print_final_stats=1"
  echo "-dict=tests/fuzz/dicts/$t.dict -artifact_prefix=$out/crashes/$t-"
  [ "$t" = decode ] && echo "-max_len=65536"
  return 0
}

run_target() {
  local t=$1 bin=$build/tests/fuzz/fuzz_$1 log=$out/logs/$1.log
  mkdir -p "$out/corpus/$t"
  # shellcheck disable=SC2046
  "$bin" $(options "$t") "$out/corpus/$t" "$out/seeds/$t" >"$log" 2>&1 &
  local pid=$!
  local rc=0
  wait "$pid" || rc=$?
  echo "$rc" >"$out/logs/$t.rc"
  # What a crashed process left in its scratch folder (fuzz_common.hpp: scratch_dir).
  rm -rf /dev/shm/shardpack-fuzz-*-"$pid" "${TMPDIR:-/tmp}"/shardpack-fuzz-*-"$pid"
}

started=$(date +%s)
echo "fuzzing ${targets[*]} for ${seconds}s each (${parallel} at a time); logs in $out/logs" >&2
before=$(find "$out/crashes" -type f | sort)
running=0
for t in "${targets[@]}"; do
  [ -x "$build/tests/fuzz/fuzz_$t" ] || { echo "no fuzz target '$t' (shard, manifest, decode, csv, stream)" >&2; exit 2; }
  run_target "$t" &
  running=$((running + 1))
  if [ "$running" -ge "$parallel" ]; then
    wait -n || true
    running=$((running - 1))
  fi
done
wait

# The summary: libFuzzer's final stats and its last status line (cov, ft, corpus).
failed=0
printf '\n%-14s %6s %12s %9s %7s %8s %8s %8s\n' target time executions exec/s cov ft corpus crashes
for t in "${targets[@]}"; do
  log=$out/logs/$t.log
  rc=$(cat "$out/logs/$t.rc")
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  status=$(grep -E '^#[0-9]+.*cov: ' "$log" | tail -1 || true)
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$status")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$status")
  corpus=$(find "$out/corpus/$t" -type f | wc -l)
  crashes=$(comm -13 <(echo "$before") <(find "$out/crashes" -type f -name "$t-*" ! -name "$t-slow-unit-*" | sort) | grep -c . || true)
  printf '%-14s %5ss %12s %9s %7s %8s %8s %8s\n' "fuzz_$t" "$seconds" "${runs:-?}" "${rate:-?}" "${cov:-?}" "${ft:-?}" \
    "$corpus" "$crashes"
  if [ "$crashes" -gt 0 ] || [ "$rc" -ne 0 ]; then
    failed=1
    echo "  fuzz_$t FAILED (exit $rc); log: $log" >&2
    grep -E '^(==[0-9]+==ERROR|FUZZ FINDING|SUMMARY)' "$log" | head -5 | sed 's/^/    /' >&2
    comm -13 <(echo "$before") <(find "$out/crashes" -type f -name "$t-*" ! -name "$t-slow-unit-*" | sort) |
      sed 's/^/    input: /' >&2
  fi
done
echo "fuzzing took $(($(date +%s) - started))s" >&2
if [ "$failed" -ne 0 ]; then
  echo "fuzzing found crashes: re-run an input with $build/tests/fuzz/fuzz_TARGET INPUT" >&2
  exit 1
fi
