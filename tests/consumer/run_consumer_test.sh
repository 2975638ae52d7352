#!/usr/bin/env bash
# Installs the reader into a temporary prefix, then builds tests/consumer against it twice:
# with find_package(shardpack) and with pkg-config. Both read a dataset the CLI packed. Then the
# threaded example of include/shardpack/README.md, compiled as written there.
# Arguments: SOURCE_DIR WORK_DIR SHARDPACK_CLI MAKE_SAMPLE_DATA
set -euo pipefail
src=$1 work=$2 cli=$3 tool=$4
rm -rf "$work"
mkdir -p "$work"
cmake -S "$src" -B "$work/reader-build" -DSHARDPACK_BUILD_TOOLS=OFF -DCMAKE_INSTALL_PREFIX="$work/prefix" >/dev/null
cmake --install "$work/reader-build" >/dev/null
test -f "$work/prefix/include/shardpack/reader.hpp"
test ! -e "$work/prefix/include/shardpack/../image.hpp"  # only the reader's headers are installed

cmake -S "$src/tests/consumer" -B "$work/consumer-build" -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/consumer-build" >/dev/null

"$tool" --out "$work/data" --count 3 --width 48 --height 32 >/dev/null
"$cli" -q build --csv "$work/data/list.csv" --classes "$work/data/class_dict.csv" --out "$work/ds" --size 32x32
"$work/consumer-build/consumer" "$work/ds"

export PKG_CONFIG_PATH="$work/prefix/share/pkgconfig"
# shellcheck disable=SC2046
g++ -std=c++17 -Wall -Wextra -Werror "$src/tests/consumer/consumer.cpp" -o "$work/consumer-pc" \
  $(pkg-config --cflags --libs shardpack)
"$work/consumer-pc" "$work/ds"

# The threaded read_batch example of include/shardpack/README.md, compiled as the README shows
# it (the block after the marker line), against a dataset built with --size and one built
# without it whose images all share one size.
awk '/compiles the next block/ {found = 1; next} found && /^```cpp$/ {inside = 1; next}
     inside && /^```$/ {exit} inside {print}' "$src/include/shardpack/README.md" >"$work/threaded_example.hpp"
grep -q "read_batch_threaded" "$work/threaded_example.hpp"
# shellcheck disable=SC2046
g++ -std=c++17 -Wall -Wextra -Wshadow -Wconversion -Werror -pthread -I"$work" "$src/tests/consumer/threaded.cpp" \
  -o "$work/threaded" $(pkg-config --cflags --libs shardpack)
"$work/threaded" "$work/ds"
"$cli" -q build --csv "$work/data/list.csv" --classes "$work/data/class_dict.csv" --out "$work/ds-unsized"
"$work/threaded" "$work/ds-unsized"
