#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test. Works on a fresh Debian machine.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/build.sh
ctest --test-dir "${SHARDPACK_BUILD_DIR:-build}" --output-on-failure -j"$(nproc)" --timeout 600
