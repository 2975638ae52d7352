#!/usr/bin/env bash
# scripts/python-env.sh [--tf] [--minimal]
#
# Builds the Python package (pip wheel .) and installs it into .venv/: a venv of Debian's /usr/bin/python3
# with its system site packages, so that Debian's python3-numpy, python3-torch and
# python3-pytest (installed here when missing) are used as they are. The build takes
# scikit-build-core and nanobind from PyPI.
#
# --tf also makes .venv-tf/ with TensorFlow and Keras from PyPI (scripts/bench/setup_tf_venv.sh)
# and installs the package, pytest and grain there. Where PyPI cannot be reached, or TensorFlow cannot
# be installed, it says so on stderr and leaves .venv-tf/ out (exit 0): the Keras and tf.data
# tests are then reported as skipped.
#
# --minimal installs only what the package needs from Debian (python3-venv, python3-dev,
# python3-numpy), not PyTorch and pytest (scripts/demo.sh).
#
# Prints one line per venv: "python-env: VENV ready (pip install . took N s)".
set -euo pipefail
cd "$(dirname "$0")/.."
with_tf=0 debian=(python3-venv python3-dev python3-numpy python3-torch python3-pytest)
for a in "$@"; do
  case $a in
    --tf) with_tf=1 ;;
    --minimal) debian=(python3-venv python3-dev python3-numpy) ;;
    *) echo "usage: $0 [--tf] [--minimal]" >&2; exit 2 ;;
  esac
done
./scripts/install-deps.sh "${debian[@]}"

log() { echo "python-env: $*" >&2; }

seconds_since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }

# The wheel is built once (pip wheel ., in .venv) and installed into each venv: both run
# Debian's /usr/bin/python3, so one wheel fits both.
wheel_dir=build-python/wheel
# The wheel carries the CLI (cmake/wheel_cli.cmake): taken from the CMake build folder where
# there is one (scripts/build.sh, scripts/demo.sh), instead of compiling the packer a second time.
cli_build=${SHARDPACK_BUILD_DIR:-build}
if grep -qs "^SHARDPACK_BUILD_TOOLS:BOOL=ON" "$cli_build/CMakeCache.txt"; then
  export SKBUILD_CMAKE_DEFINE="SHARDPACK_WHEEL_CLI_BUILD_DIR=$(realpath "$cli_build")${SKBUILD_CMAKE_DEFINE:+;$SKBUILD_CMAKE_DEFINE}"
fi
# SHARDPACK_PIP_VERBOSE=1 shows the build's progress (pip -v), as scripts/demo.sh does.
pip_quiet=-q
[ "${SHARDPACK_PIP_VERBOSE:-0}" = 1 ] && pip_quiet=-v
build_wheel() {
  local t0
  t0=$(date +%s.%N)
  rm -rf "$wheel_dir"
  if ! .venv/bin/python -m pip wheel --disable-pip-version-check $pip_quiet --no-deps -w "$wheel_dir" . >&2; then
    log "pip wheel . failed (the build needs scikit-build-core and nanobind from PyPI)"
    return 1
  fi
  echo "python-env: built $(basename "$wheel_dir"/shardpack-*.whl) in $(seconds_since "$t0") s (pip wheel .)"
}

install_package() {  # $1: venv
  local t0
  t0=$(date +%s.%N)
  "$1/bin/python" -m pip install --disable-pip-version-check -q --no-deps --force-reinstall "$wheel_dir"/shardpack-*.whl >&2
  "$1/bin/python" -c 'import numpy' 2>/dev/null || "$1/bin/python" -m pip install --disable-pip-version-check -q numpy >&2
  echo "python-env: $1 ready (installed in $(seconds_since "$t0") s)"
}

if [ ! -x .venv/bin/python ]; then
  log "creating .venv with $(/usr/bin/python3 --version 2>&1) and Debian's site packages"
  /usr/bin/python3 -m venv --system-site-packages .venv
fi
build_wheel
install_package .venv
if [ ${#debian[@]} -gt 3 ]; then
  .venv/bin/python -c 'import pytest' 2>/dev/null || .venv/bin/python -m pip install --disable-pip-version-check -q pytest
  # mypy for the typed-API test (mypy --strict on shardpack and its stub); where PyPI cannot be
  # reached that test reports itself skipped.
  .venv/bin/python -c 'import mypy' 2>/dev/null || .venv/bin/python -m pip install --disable-pip-version-check -q mypy ||
    log "mypy could not be installed: the type check of the package will be skipped"
  # The COCO converter's extra (shardpack[coco]: pycocotools: 4 s and 2 MB here) for
  # test_convert.py; where PyPI cannot be reached the COCO tests report themselves skipped.
  # shardpack[hf] (datasets: 74 s and 371 MB with pyarrow, pandas and its own numpy) is left out: test_hf skips.
  .venv/bin/python -c 'import pycocotools' 2>/dev/null ||
    .venv/bin/python -m pip install --disable-pip-version-check -q "$(echo "$wheel_dir"/shardpack-*.whl)[coco]" >&2 ||
    log "pycocotools could not be installed (shardpack[coco]): the COCO converter tests will be skipped"
fi

if [ $with_tf = 1 ]; then
  set +e
  scripts/bench/setup_tf_venv.sh .venv-tf >/dev/null
  rc=$?
  set -e
  case $rc in
    0) install_package .venv-tf
       .venv-tf/bin/python -c 'import pytest' 2>/dev/null ||
         .venv-tf/bin/python -m pip install --disable-pip-version-check -q pytest
       # Grain (shardpack.grain and its Keras 3 fit test); without it those tests are skipped.
       .venv-tf/bin/python -c 'import grain' 2>/dev/null ||
         .venv-tf/bin/python -m pip install --disable-pip-version-check -q grain >&2 ||
         log "grain could not be installed into .venv-tf: the Grain tests will be skipped"
       # mypy, for the type check of the Keras, tf.data and Grain adapters (test_keras_tf.py).
       .venv-tf/bin/python -c 'import mypy' 2>/dev/null ||
         .venv-tf/bin/python -m pip install --disable-pip-version-check -q mypy >&2 ||
         log "mypy could not be installed into .venv-tf: the adapters' type check will be skipped" ;;
    3) log "PyPI unreachable: no TensorFlow venv; the Keras and tf.data tests will be skipped" ;;
    *) log "TensorFlow could not be installed (setup_tf_venv.sh exit $rc); the Keras and tf.data tests will be skipped" ;;
  esac
fi
