"""shardpack.grain: a Grain random-access data source of records and a grain.MapDataset of
batches in shardpack's order, and Keras 3 fit on both.

Grain (`grain` from PyPI) and Keras come into .venv-tf (scripts/python-env.sh --tf);
scripts/test-python.sh runs this file there. Without them it is skipped with the reason (pytest
-rs), never passed. About 15 s on 2 cores (TensorFlow's start and two one-step fits)."""
import inspect
import os
import pickle
import subprocess
import sys

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
try:
    import grain
except ImportError as e:
    pytest.skip(f"Grain is not importable in {sys.executable} ({e}); scripts/test-python.sh runs this file in "
                f".venv-tf, where scripts/python-env.sh --tf installs grain from PyPI", allow_module_level=True)

import shardpack  # noqa: E402
import shardpack.grain  # noqa: E402


def test_data_source_reads_records_as_read_batch(built):
    ds = shardpack.open(built["index"])
    source = shardpack.grain.DataSource(built["index"], label="index")
    assert len(source) == len(ds) == 10
    images, labels = ds.read_batch(range(10), layout="NHWC", label="index")
    for i in (0, 3, 9):
        x, y = source[i]
        assert x.shape == (24, 32, 3) and y.shape == (24, 32)
        assert np.array_equal(x, images[i]) and np.array_equal(y, labels[i])
    batch = source._getitems([7, 2, 2])  # Grain's batched read: one read_batch
    assert [np.array_equal(x, images[i]) and np.array_equal(y, labels[i]) for (x, y), i in zip(batch, (7, 2, 2))] \
        == [True] * 3
    with pytest.raises(IndexError):
        source[10]
    with pytest.raises(IndexError):
        source[-1]
    assert repr(source).startswith("shardpack.grain.DataSource(") and "label='index'" in repr(source)
    assert isinstance(source, grain.sources.RandomAccessDataSource)


def test_data_source_pickles_and_crops_per_epoch(built):
    options = dict(crop=(16, 16), crop_position="random", hflip=0.5, seed=4)
    source = shardpack.grain.DataSource(built["index"], label="index", dtype="uint8", normalize=None, **options)
    copy = pickle.loads(pickle.dumps(source))
    assert np.array_equal(copy[5][0], source[5][0]) and repr(copy) == repr(source)
    ds = shardpack.open(built["index"])
    for epoch in (0, 1):
        source.set_epoch(epoch)
        want = ds.read_batch(range(10), layout="NHWC", label="index", dtype="uint8", epoch=epoch, **options)
        assert all(np.array_equal(source[i][0], want[0][i]) and np.array_equal(source[i][1], want[1][i])
                   for i in range(10))
    assert not np.array_equal(ds.read_batch(range(10), epoch=0, return_boxes=True, **options)[2],
                              ds.read_batch(range(10), epoch=1, return_boxes=True, **options)[2])


def test_grain_map_dataset_over_the_source(built):
    source = shardpack.grain.DataSource(built["cls"], label="index")
    train = grain.MapDataset.source(source).shuffle(seed=0).batch(5)
    assert len(train) == 3
    ds = shardpack.open(built["cls"])
    seen = []
    for images, labels in train:
        assert images.shape[1:] == (20, 24, 3) and images.dtype == np.float32
        seen.extend(labels.tolist())
    assert sorted(seen) == sorted(ds.read_batch(range(len(ds)), label="index")[1].tolist())


def test_dataset_batches_in_shardpack_order_epoch_by_epoch(built):
    ds = shardpack.open(built["onehot"])
    train = shardpack.grain.dataset(built["onehot"], batch_size=4, seed=6, label="index")
    assert isinstance(train, grain.MapDataset) and len(train) == 3

    def epoch_batches(e):
        order = shardpack.epoch_order(len(ds), 6, e)
        return [ds.read_batch(order[s:s + 4], layout="NHWC", label="index") for s in (0, 4, 8)]

    def same(got, want):
        assert len(got) == len(want)
        assert all(np.array_equal(x, wx) and np.array_equal(y, wy) for (x, y), (wx, wy) in zip(got, want))

    same(list(train), epoch_batches(0))
    same(list(train), epoch_batches(0))  # a MapDataset has no state: iterating again is epoch 0 again
    same(list(train.repeat(2)), epoch_batches(0) + epoch_batches(1))  # repeat: the next epochs
    same([train[k] for k in (5, 3)], [epoch_batches(1)[2], epoch_batches(1)[0]])
    same(list(train[1:3]), epoch_batches(0)[1:3])
    same(list(shardpack.grain.dataset(ds, 4, seed=6, label="index", epoch=2)), epoch_batches(2))
    copy = pickle.loads(pickle.dumps(train))
    same([copy[4]], [epoch_batches(1)[1]])
    crops = shardpack.grain.dataset(ds, 10, seed=6, crop=(8, 8), crop_position="random", vflip=0.5, drop_last=True)
    assert len(crops) == 1
    x0, x1 = crops[0][0], crops[1][0]
    assert x0.shape == (10, 8, 8, 3) and not np.array_equal(x0, x1)
    order1 = shardpack.epoch_order(len(ds), 6, 1)
    assert np.array_equal(x1, ds.read_batch(order1, layout="NHWC", seed=6, epoch=1, crop=(8, 8),
                                            crop_position="random", vflip=0.5)[0])


def test_dataset_in_the_locality_aware_order(built):
    ds = shardpack.open(built["onehot"])
    train = shardpack.grain.dataset(ds, 5, seed=3, order="blocks", block=2, window=2, label="index")
    for e in (0, 1):
        order = shardpack.epoch_order(ds, 3, e, order="blocks", block=2, window=2)
        for b in range(2):
            x, y = train[e * 2 + b]
            wx, wy = ds.read_batch(order[b * 5:(b + 1) * 5], layout="NHWC", label="index")
            assert np.array_equal(x, wx) and np.array_equal(y, wy)
    with pytest.raises(ValueError):
        shardpack.grain.dataset(ds, 5, order="random")


def test_defaults_and_errors():
    params = inspect.signature(shardpack.grain.dataset).parameters
    assert {k: params[k].default for k in ("shuffle", "drop_last", "seed", "epoch")} == \
        {"shuffle": True, "drop_last": False, "seed": 0, "epoch": 0}
    with pytest.raises(TypeError):
        shardpack.grain.dataset("x", 4, True)
    from test_defaults import check_rows
    assert check_rows({"grain"}) == 2  # the Python guide's defaults table


def test_bad_options_are_value_errors(built):
    from test_api import check_word_errors  # a bad word or a non-string: the checks of read_batch
    words = ["dtype", "layout", "label", "crop_position"]
    for make, options in ((lambda **kw: shardpack.grain.DataSource(built["onehot"], **kw), words),
                          (lambda **kw: shardpack.grain.dataset(built["onehot"], 4, **kw), words + ["order"])):
        check_word_errors(make, options)
        with pytest.raises(ValueError) as caught:
            make(dtype="uint8", normalize="imagenet")  # normalize applies to float32 only
        assert isinstance(caught.value, shardpack.Error)
        with pytest.raises(ValueError):
            make(crop_position="corner")
        make(dtype="uint8")  # normalize="auto", the default, is None for uint8


def _model(keras, shape, classes):
    model = keras.Sequential([keras.Input(shape), keras.layers.Flatten(), keras.layers.Dense(classes)])
    model.compile(optimizer="sgd", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def test_keras_fit_trains_a_step_on_grain_datasets(built):
    keras = pytest.importorskip("keras", reason="Keras 3 is not installed here (scripts/python-env.sh --tf)")
    if not hasattr(keras.src.trainers.data_adapters, "grain_dataset_adapter"):
        pytest.skip(f"Keras {keras.__version__} does not take Grain datasets in fit (3.11 and later do)")
    ds = shardpack.open(built["cls"])
    # Records through Grain's own shuffle and batch.
    source = shardpack.grain.DataSource(ds, label="index")
    model = _model(keras, (20, 24, 3), len(ds.classes))
    weights = [w.copy() for w in model.get_weights()]
    history = model.fit(grain.MapDataset.source(source).shuffle(seed=0).batch(4), epochs=1, steps_per_epoch=1,
                        shuffle=False, verbose=0)
    assert np.isfinite(history.history["loss"]).all()
    assert any(not np.array_equal(a, b) for a, b in zip(weights, model.get_weights()))  # it trained
    # Batches in shardpack's order, two epochs, each its own order (repeat), Grain reading ahead.
    train = shardpack.grain.dataset(ds, batch_size=4, label="index")
    model = _model(keras, (20, 24, 3), len(ds.classes))
    history = model.fit(train.repeat(2).to_iter_dataset(shardpack.grain.read_options()), epochs=2,
                        steps_per_epoch=len(train), shuffle=False, verbose=0)
    assert len(history.history["loss"]) == 2 and np.isfinite(history.history["loss"]).all()


def test_mypy_strict_passes_on_the_grain_adapter(tmp_path):
    """mypy --strict on shardpack.grain and shardpack._adapt, as test_keras_tf.py checks the Keras
    and tf.data adapters (Grain's imports are taken as Any). One mypy run: 169 s measured on the
    shared 2-core machine under a load of 9, far less on an idle one."""
    pytest.importorskip("mypy", reason="mypy is not installed in this venv (scripts/python-env.sh --tf installs it)")
    r = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--ignore-missing-imports", "--follow-imports=silent",
                        "--cache-dir", str(tmp_path / "cache"), "-m", "shardpack._adapt", "-m", "shardpack.grain"],
                       capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
