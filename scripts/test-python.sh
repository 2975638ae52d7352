#!/usr/bin/env bash
# scripts/test-python.sh: the Python package's tests (tests/python/), after scripts/build.sh.
# Installs the package into .venv/ (and .venv-tf/ with TensorFlow and Keras from PyPI, where
# it can) through scripts/python-env.sh --tf, then runs pytest: everything in .venv (Debian's
# NumPy and PyTorch), the Keras and tf.data tests in .venv-tf. Skipped tests are listed with
# their reason. Exits non-zero when a test fails. The tests find the CLI and tools in
# $SHARDPACK_BUILD_DIR (default build/).
set -euo pipefail
cd "$(dirname "$0")/.."
export SHARDPACK_BUILD_DIR=$(realpath "${SHARDPACK_BUILD_DIR:-build}")
./scripts/python-env.sh --tf
# -rs: every skip with its reason; -p no:cacheprovider: no .pytest_cache in the tree.
pytest_args=(-q -rs -p no:cacheprovider --durations=5)
tf_tests=(tests/python/test_keras_tf.py tests/python/test_grain.py tests/python/test_mix_keras_tf.py
          tests/python/test_fields_keras_tf.py)  # run in .venv-tf
# Cases of the other files that need TensorFlow or Grain: in .venv they skip with the reason, and
# .venv-tf runs them too.
tf_cases=(tests/python/test_depth.py::test_grain_source_delivers_uint16
          tests/python/test_depth.py::test_tf_and_keras_deliver_uint16
          tests/python/test_fields.py::test_tf_dataset_gives_ragged_boxes_equal_to_read_batch
          tests/python/test_convert.py::test_tfrecord_from_tensorflow)
status=0
.venv/bin/python -m pytest "${pytest_args[@]}" tests/python "${tf_tests[@]/#/--ignore=}" || status=1
if [ -x .venv-tf/bin/python ] && TF_CPP_MIN_LOG_LEVEL=3 .venv-tf/bin/python -c 'import tensorflow, keras, shardpack' 2>/dev/null; then
  .venv-tf/bin/python -m pytest "${pytest_args[@]}" "${tf_tests[@]}" "${tf_cases[@]}" || status=1
else
  echo "test-python: no working .venv-tf (see above): the Keras, tf.data and Grain tests are skipped:"
  .venv/bin/python -m pytest "${pytest_args[@]}" "${tf_tests[@]}" || status=1
fi
exit $status
