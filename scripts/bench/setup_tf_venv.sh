#!/usr/bin/env bash
# setup_tf_venv.sh VENV_DIR
#
# Creates a virtual environment with TensorFlow (CPU) and NumPy from PyPI, for
# scripts/bench/tfrecord_bench.py. Uses Debian's /usr/bin/python3, not whatever
# python3 is first on PATH.
#
#   exit 0  VENV_DIR/bin/python imports tensorflow (already did, or does now);
#           one line of JSON on stdout: {"tool":"setup_tf_venv",...}
#   exit 2  bad usage
#   exit 3  the package index cannot be reached (one line on stderr:
#           "PyPI unreachable: TFRecord comparison left out")
#   exit 1  anything else failed (the log says what)
#
# Idempotent: when the venv already imports tensorflow nothing is downloaded.
# The index is pip's own setting (PIP_INDEX_URL / pip.conf), else https://pypi.org/simple/.
set -euo pipefail

usage() { echo "usage: $0 VENV_DIR" >&2; exit 2; }
[[ $# -eq 1 ]] || usage
[[ $1 != -* ]] || usage
venv=$1
py=/usr/bin/python3
log() { echo "setup_tf_venv: $*" >&2; }

start=$(date +%s.%N)
elapsed() { awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }'; }

tf_version() {  # prints the version and succeeds when the venv imports tensorflow
  [[ -x $venv/bin/python ]] || return 1
  TF_CPP_MIN_LOG_LEVEL=3 "$venv/bin/python" -c 'import tensorflow as tf; print(tf.__version__)' 2>/dev/null
}

report() {  # $1: installed now (true/false), $2: tf version
  printf '{"tool":"setup_tf_venv","venv":"%s","tf_version":"%s","installed_now":%s,"seconds":%s}\n' \
    "$venv" "$2" "$1" "$(elapsed)"
}

if v=$(tf_version); then
  log "$venv already imports tensorflow $v; nothing to do"
  report false "$v"
  exit 0
fi

[[ -x $py ]] || { log "$py not found (apt-get install python3)"; exit 1; }

# Is the package index reachable? A short timeout, so an offline machine answers at once.
index=${PIP_INDEX_URL:-}
if [[ -z $index ]]; then
  index=$("$py" -m pip config get global.index-url 2>/dev/null || true)
fi
index=${index:-https://pypi.org/simple/}
index=${index%/}/
probe="${index}tensorflow-cpu/"
reachable=0
if command -v curl >/dev/null 2>&1; then
  curl -fsS -o /dev/null --max-time 15 "$probe" 2>/dev/null && reachable=1
else
  "$py" - "$probe" <<'PY' && reachable=1
import sys, urllib.request
urllib.request.urlopen(sys.argv[1], timeout=15).read(1)
PY
fi
if [[ $reachable -ne 1 ]]; then
  echo "PyPI unreachable: TFRecord comparison left out" >&2
  exit 3
fi

if [[ ! -x $venv/bin/python ]]; then
  log "creating $venv with $("$py" --version 2>&1)"
  rm -rf "$venv"
  "$py" -m venv "$venv" || { log "python3 -m venv failed (apt-get install python3-venv)"; exit 1; }
fi
pip=("$venv/bin/python" -m pip --disable-pip-version-check)

# tensorflow-cpu is the CPU-only build (no CUDA wheels, ~250 MB); where it has no
# wheel for this Python, the full tensorflow package runs on the CPU as well.
installed=
for pkg in tensorflow-cpu tensorflow; do
  log "pip install $pkg numpy (from $index)"
  if "${pip[@]}" install --timeout 60 "$pkg" numpy >&2; then
    installed=$pkg
    break
  fi
  log "pip install $pkg failed"
done
[[ -n $installed ]] || { log "could not install tensorflow-cpu or tensorflow"; exit 1; }

if v=$(tf_version); then
  log "$installed installed: tensorflow $v in $(elapsed) s"
  report true "$v"
  exit 0
fi
log "tensorflow was installed but does not import:"
TF_CPP_MIN_LOG_LEVEL=3 "$venv/bin/python" -c 'import tensorflow' >&2 || true
exit 1
