#!/usr/bin/env bash
# The CLI installs by the usual means: `cmake --install BUILD --prefix P` puts P/bin/shardpack,
# which runs from the PATH anywhere and packs a dataset. Takes about a second.
# Arguments: BUILD_DIR WORK_DIR MAKE_SAMPLE_DATA EXPECTED_VERSION
set -euo pipefail
build=$1 work=$2 tool=$3 version=$4
rm -rf "$work"
mkdir -p "$work"
cmake --install "$build" --prefix "$work/prefix" >/dev/null
test -x "$work/prefix/bin/shardpack" || { echo "cmake --install did not put bin/shardpack in the prefix" >&2; exit 1; }
got=$(cd / && PATH="$work/prefix/bin:/usr/bin:/bin" shardpack --version)
[ "$got" = "shardpack $version" ] || { echo "shardpack --version from the prefix printed '$got', expected 'shardpack $version'" >&2; exit 1; }
"$tool" --out "$work/data" --count 2 --width 40 --height 30 >/dev/null
(cd "$work" && PATH="$work/prefix/bin:/usr/bin:/bin" shardpack -q build --csv data/list.csv --classes data/class_dict.csv --out ds)
test -f "$work/ds/manifest.json"
echo "cmake --install: $work/prefix/bin/shardpack ($got) packed a dataset"
rm -rf "$work"
