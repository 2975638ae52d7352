#!/usr/bin/env bash
# setup_ray.sh [VENV_DIR]
#
# Installs Ray (PyPI's ray, pinned) into a virtual environment (default: .venv-ray/ at the
# repository root) for the test of scripts/ray/build_parts.py (ctest ray_tasks_merge,
# tests/ray/run_ray_test.sh), which finds it at VENV_DIR/bin/python (or $SHARDPACK_RAY_PYTHON).
#
# Prints the venv's python on stdout. Exit 0 when Ray imports there, 3 when it cannot be installed
# (PyPI unreachable: the test then reports itself skipped with this reason), 1 otherwise.
# Idempotent: an installed Ray of the pinned version is kept.
set -euo pipefail
cd "$(dirname "$0")/../.."
venv=${1:-.venv-ray}
version=2.60.0
log() { echo "setup_ray: $*" >&2; }

if [[ -x $venv/bin/python ]] && [[ "$("$venv/bin/python" -c 'import ray; print(ray.__version__)' 2>/dev/null)" == "$version" ]]; then
  echo "$venv/bin/python"
  exit 0
fi
if [[ ! -x $venv/bin/python ]]; then
  /usr/bin/python3 -m venv "$venv" || { log "python3 -m venv failed (apt-get install python3-venv)"; exit 1; }
fi
if ! "$venv/bin/python" -m pip install --disable-pip-version-check -q --timeout 60 "ray==$version" >&2; then
  log "pip install ray==$version failed (offline?)"
  exit 3
fi
"$venv/bin/python" -c 'import ray' || { log "ray $version installed but does not import"; exit 1; }
log "ray $version in $venv"
echo "$venv/bin/python"
