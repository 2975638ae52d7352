#!/usr/bin/env bash
# Installs the reader into a temporary prefix, then builds tests/consumer against it twice:
# with find_package(shardpack) and with pkg-config. Both read a dataset the CLI packed.
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
