"""shardpack.keras.PyDataset and shardpack.tf.dataset give read_batch's batches, in
shardpack.epoch_order's order, a new one each epoch.

TensorFlow and Keras come from PyPI into their own venv (scripts/python-env.sh --tf makes
.venv-tf); scripts/test.sh runs this file there. In an interpreter without them it is skipped
with the reason printed (pytest -rs), never passed."""
import os
import sys

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
try:
    import tensorflow as tf
    import keras
except ImportError as e:
    pytest.skip(f"TensorFlow/Keras are not importable in {sys.executable} ({e}); scripts/test.sh runs this file "
                f"in .venv-tf, made from PyPI by scripts/python-env.sh --tf", allow_module_level=True)

import shardpack  # noqa: E402
import shardpack.keras  # noqa: E402
import shardpack.tf  # noqa: E402


def expected(ds, order, batch_size, **options):
    return [ds.read_batch(order[s:s + batch_size], **options) for s in range(0, len(order), batch_size)]


def test_keras_pydataset_gives_read_batch_batches_shuffled_per_epoch(built):
    ds = shardpack.open(built["onehot"])
    seq = shardpack.keras.PyDataset(ds, batch_size=4, shuffle=True, seed=3)
    assert isinstance(seq, keras.utils.PyDataset) and len(seq) == 3
    for epoch in (0, 1):
        want = expected(ds, shardpack.epoch_order(len(ds), 3, epoch), 4, layout="NHWC")
        for b in range(len(seq)):
            x, y = seq[b]
            assert x.shape[1:] == (24, 32, 3) and y.shape[1:] == (24, 32, 6)
            assert np.array_equal(x, want[b][0]) and np.array_equal(y, want[b][1])
        seq.on_epoch_end()
    assert not np.array_equal(want[0][0], expected(ds, shardpack.epoch_order(len(ds), 3, 0), 4, layout="NHWC")[0][0])


def test_keras_fits_a_model_on_the_pydataset(built):
    seq = shardpack.keras.PyDataset(built["cls"], batch_size=4, label="index")
    model = keras.Sequential([keras.Input((20, 24, 3)), keras.layers.Flatten(), keras.layers.Dense(len(seq.dataset.classes))])
    model.compile(optimizer="sgd", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    history = model.fit(seq, epochs=2, verbose=0)
    assert len(history.history["loss"]) == 2 and np.isfinite(history.history["loss"]).all()


def test_tf_dataset_gives_read_batch_batches_with_its_element_spec(built):
    ds = shardpack.open(built["onehot"])
    data = shardpack.tf.dataset(built["onehot"], batch_size=4, shuffle=True, seed=5, label="index")
    spec = data.element_spec
    assert spec[0].shape.as_list() == [None, 24, 32, 3] and spec[0].dtype == tf.float32
    assert spec[1].shape.as_list() == [None, 24, 32] and spec[1].dtype == tf.int64
    for epoch in (0, 1):  # each iteration is the next epoch
        want = expected(ds, shardpack.epoch_order(len(ds), 5, epoch), 4, layout="NHWC", label="index")
        got = [(x.numpy(), y.numpy()) for x, y in data]
        assert len(got) == len(want) == 3
        for (x, y), (wx, wy) in zip(got, want):
            assert np.array_equal(x, wx) and np.array_equal(y, wy)
    fixed = shardpack.tf.dataset(ds, batch_size=4, drop_last=True, layout="NCHW", dtype="uint8")
    assert fixed.element_spec[0].shape.as_list() == [4, 3, 24, 32] and fixed.element_spec[0].dtype == tf.uint8
    got = list(fixed)
    assert len(got) == 2
    assert np.array_equal(got[1][0].numpy(), ds.read_batch(range(4, 8), layout="NCHW", dtype="uint8")[0])


def test_tf_dataset_raises_shardpack_errors_as_tf_errors(built, tmp_path):
    from test_core import damage
    path, _ = damage(built, tmp_path)
    with pytest.raises(Exception, match="checksum mismatch"):
        for _ in shardpack.tf.dataset(path, batch_size=2):
            pass
