#!/usr/bin/env bash
# setup_py_venv.sh VENV_DIR [REPO_ROOT]
#
# The virtual environment of the Python reading benchmark (scripts/bench/py_read_bench.py):
# Debian's /usr/bin/python3 with --system-site-packages, so that Debian's python3-torch (1.13.1),
# python3-torchvision, python3-numpy, python3-opencv and python3-pil are seen (the first three
# installed here where missing; OpenCV and Pillow only needed by py_read_bench.py's baselines),
# plus from PyPI:
#   webdataset          1.0.2, with its dependencies;
#   mosaicml-streaming  0.13.0 with --no-deps (its declared dependencies pull cloud SDKs and a
#                       torch from PyPI) plus what it imports: xxhash, zstd, python-snappy,
#                       brotli, tqdm, catalogue, transformers (streaming's DataLoader module
#                       imports it at `import streaming`);
#   litdata             0.2.40 with --no-deps (it declares torch>=2.4; 0.2.40 is the newest
#                       release that imports and runs with Debian's torch 1.13: 0.2.41 on use
#                       torch.uint16) plus lightning-utilities, filelock, boto3, requests,
#                       tifffile;
#   shardpack           `pip install REPO_ROOT` when REPO_ROOT has a pyproject.toml.
# Each is installed on its own: one that cannot be installed or imported is left out and said
# so, with the reason, in the JSON (the benchmark's table then says it too).
#
# Stdout: one line of JSON {"tool":"setup_py_venv","venv":..,"packages":{NAME:{"ok":..,
# "version"|"reason":..}}}. Exit 0 when the venv exists and imports torch (whatever else
# failed), 3 when PyPI cannot be reached and the venv cannot import the peers, 1 otherwise.
# Idempotent: what already imports is not installed again.
set -euo pipefail

[[ $# -ge 1 && $# -le 2 && $1 != -* ]] || { echo "usage: $0 VENV_DIR [REPO_ROOT]" >&2; exit 2; }
venv=$1
repo=${2:-}
py=/usr/bin/python3
log() { echo "setup_py_venv: $*" >&2; }

# python3-torchvision: MosaicML Streaming imports it at `import streaming`.
"$(dirname "$0")/../install-deps.sh" python3-venv python3-numpy python3-torch python3-torchvision >&2 \
  || log "Debian's python3-torch/python3-torchvision could not be installed"
"$py" -c 'import torch, numpy' 2>/dev/null \
  || { log "$py cannot import torch/numpy (apt-get install python3-torch python3-numpy)"; exit 1; }
# OpenCV and Pillow only for py_read_bench.py's baselines: without them the peers of the remote
# benchmark still run, and the JSON says what is missing.
declare -A status
if ! "$py" -c 'import cv2, PIL' 2>/dev/null; then
  log "$py cannot import cv2/PIL: py_read_bench.py's baselines need them (apt-get install python3-torchvision python3-opencv python3-pil)"
  status[opencv-pil]='{"ok":false,"reason":"Debian python3-opencv/python3-pil not installed"}'
fi
if [[ ! -x $venv/bin/python ]]; then
  log "creating $venv (--system-site-packages) with $("$py" --version 2>&1)"
  rm -rf "$venv"
  "$py" -m venv --system-site-packages "$venv" || { log "python3 -m venv failed (apt-get install python3-venv)"; exit 1; }
fi
vpy=$venv/bin/python
pip=("$vpy" -m pip --disable-pip-version-check -q)

# try NAME IMPORT_CHECK INSTALL_ARGS...: install unless IMPORT_CHECK already succeeds
try() {
  local name=$1 check=$2; shift 2
  local err
  if err=$("$vpy" -c "$check" 2>&1 >/dev/null); then
    status[$name]=$("$vpy" -c "$check" 2>/dev/null | tail -n 1)
    status[$name]="{\"ok\":true,\"version\":\"${status[$name]}\"}"
    return 0
  fi
  local ok=1
  while [ $# -gt 0 ]; do
    local args=()
    while [ $# -gt 0 ] && [ "$1" != ";" ]; do args+=("$1"); shift; done
    [ $# -gt 0 ] && shift
    log "$name: pip install ${args[*]}"
    if ! out=$("${pip[@]}" install --timeout 60 "${args[@]}" 2>&1); then
      ok=0
      err=$(grep -E 'ERROR|error' <<<"$out" | head -n 2 | tr -d '"\\' | tr '\n' ' ')
      break
    fi
  done
  if [ $ok = 1 ] && err=$("$vpy" -c "$check" 2>&1 >/dev/null); then
    local v
    v=$("$vpy" -c "$check" 2>/dev/null | tail -n 1)
    status[$name]="{\"ok\":true,\"version\":\"$v\"}"
    log "$name $v installed"
  else
    [ $ok = 1 ] && err="installed but does not import: $(tail -n 1 <<<"$err" | tr -d '"\\')"
    status[$name]="{\"ok\":false,\"reason\":\"${err:0:300}\"}"
    log "$name left out: $err"
  fi
}

try webdataset 'import webdataset, importlib.metadata as m; print(m.version("webdataset"))' \
  webdataset==1.0.2
try mosaicml-streaming 'import streaming; from streaming import MDSWriter, StreamingDataset; print(streaming.__version__)' \
  xxhash zstd python-snappy brotli tqdm catalogue "transformers<5" ";" --no-deps mosaicml-streaming==0.13.0
try litdata 'import litdata, importlib.metadata as m; from litdata import optimize, StreamingDataset, StreamingDataLoader; print(m.version("litdata"))' \
  lightning-utilities filelock boto3 requests tifffile ";" --no-deps litdata==0.2.40
if [[ -n $repo && -f $repo/pyproject.toml ]]; then
  # Always reinstalled: the benchmark measures the working tree's package.
  log "shardpack: pip install $repo"
  out=$("${pip[@]}" install "$repo" 2>&1) || true
  try shardpack 'import shardpack, shardpack.torch, importlib.metadata as m; print(m.version("shardpack"))'
  [[ ${status[shardpack]} == *'"ok":true'* ]] || status[shardpack]="{\"ok\":false,\"reason\":\"pip install . failed: $(grep -E 'ERROR|rror' <<<"$out" | head -n 2 | tr -d '"\\' | tr '\n' ' ' | cut -c1-300)\"}"
else
  status[shardpack]='{"ok":false,"reason":"no pyproject.toml in the repository (the Python package is not built yet)"}'
fi

json=""
for k in "${!status[@]}"; do json+="${json:+,}\"$k\":${status[$k]}"; done
printf '{"tool":"setup_py_venv","venv":"%s","torch":"%s","packages":{%s}}\n' \
  "$venv" "$("$vpy" -c 'import torch; print(torch.__version__)')" "$json"
