#!/usr/bin/env bash
# cmake/wheel_cli.cmake's choices, at configure time (what pip install . runs; nothing is
# compiled): with the packer's dependencies the wheel builds the CLI (AUTO), or takes it from a
# given build folder; without them (TBB disabled through a toolchain file, which the nested
# configure reads from the environment) it is reader-only and records why, or fails with ON;
# OFF is reader-only on purpose. About 30 s to a minute (three configure runs of the packer).
# Arguments: SOURCE_DIR WORK_DIR CLI_BUILD_DIR
set -euo pipefail
src=$1 work=$2 cli_build=$3
rm -rf "$work"
mkdir -p "$work"
probe="$src/tests/install/wheel_cli_probe"
fail() { echo "FAIL: $*" >&2; exit 1; }
# A log as one line: CMake wraps the text of errors and warnings at about 80 columns, where a
# long path moves the break into the phrase looked for.
logtext() { tr '\n' ' ' <"$1" | tr -s ' '; }
configure() {  # configure NAME [cmake args...]: configures the probe into $work/NAME
  local name=$1
  shift
  cmake -S "$probe" -B "$work/$name" -DSHARDPACK_SOURCE="$src" "$@" >"$work/$name.log" 2>&1
}

# AUTO with the dependencies: the packer is configured in the wheel's build folder, and a target
# builds and strips the CLI into the wheel.
configure auto || fail "AUTO with the dependencies did not configure: $(tail -5 "$work/auto.log")"
logtext "$work/auto.log" | grep -qF "shardpack CLI for the wheel: $work/auto/cli/shardpack" || fail "AUTO did not choose to build the CLI"
test -f "$work/auto/cli/CMakeCache.txt" || fail "AUTO did not configure the packer"
test ! -e "$work/auto/cli-missing.txt" || fail "AUTO with the dependencies recorded a missing CLI"
cmake --build "$work/auto" --target help | grep -q "shardpack_wheel_cli" || fail "no target builds the CLI"

# The CLI from a given build folder; a folder that is not one is an error.
configure given -DSHARDPACK_WHEEL_CLI_BUILD_DIR="$cli_build" || fail "a given build folder was refused: $(tail -5 "$work/given.log")"
logtext "$work/given.log" | grep -qF "shardpack CLI for the wheel: $(realpath "$cli_build")/shardpack" || fail "the given build folder was not used"
test ! -e "$work/given/cli" || fail "with a build folder given, the packer was configured again"
! configure bad -DSHARDPACK_WHEEL_CLI_BUILD_DIR="$work" || fail "a folder without CMakeCache.txt was accepted"
logtext "$work/bad.log" | grep -qF "not a configured build folder" || fail "the refusal does not say why"

# Without a dependency: reader-only with the reason (AUTO), an error (ON).
echo 'set(CMAKE_DISABLE_FIND_PACKAGE_TBB ON)' >"$work/no-tbb.cmake"
CMAKE_TOOLCHAIN_FILE="$work/no-tbb.cmake" configure missing || fail "AUTO without TBB did not configure"
grep -q "TBB" "$work/missing/cli-missing.txt" || fail "the reader-only wheel does not name TBB: $(cat "$work/missing/cli-missing.txt")"
logtext "$work/missing.log" | grep -qF "the wheel is reader-only" || fail "no warning for a reader-only wheel"
! CMAKE_TOOLCHAIN_FILE="$work/no-tbb.cmake" configure on -DSHARDPACK_WHEEL_CLI=ON || fail "ON without TBB configured"
logtext "$work/on.log" | grep -qF "SHARDPACK_WHEEL_CLI=ON: the packer's dependencies were not found" || fail "ON's error does not say why"

# OFF: reader-only on purpose, and not remembered by the next configure of the same folder.
configure off -DSHARDPACK_WHEEL_CLI=OFF || fail "OFF did not configure"
grep -q "SHARDPACK_WHEEL_CLI=OFF" "$work/off/cli-missing.txt" || fail "OFF was not recorded"
! grep -q "SHARDPACK_WHEEL_CLI" "$work/off/CMakeCache.txt" || fail "the setting was cached"
echo "wheel_cli.cmake: AUTO builds the CLI, a build folder is taken, a missing TBB is named, ON fails, OFF is reader-only"
rm -rf "$work"
