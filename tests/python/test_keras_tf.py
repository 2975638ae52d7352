"""shardpack.keras.PyDataset and shardpack.tf.dataset give read_batch's batches, in
shardpack.epoch_order's order, a new one each epoch, with read_batch's crops and flips.

TensorFlow and Keras come from PyPI into their own venv (scripts/python-env.sh --tf makes
.venv-tf); scripts/test-python.sh runs this file there. In an interpreter without them it is
skipped with the reason printed (pytest -rs), never passed. About 20 s on 2 cores (most of it
TensorFlow's start and two small model.fit runs)."""
import inspect
import json
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
try:
    import tensorflow as tf
    import keras
except ImportError as e:
    pytest.skip(f"TensorFlow/Keras are not importable in {sys.executable} ({e}); scripts/test-python.sh runs this "
                f"file in .venv-tf, made from PyPI by scripts/python-env.sh --tf", allow_module_level=True)

import shardpack  # noqa: E402
import shardpack.keras  # noqa: E402
import shardpack.tf  # noqa: E402

from conftest import ROOT  # noqa: E402


def expected(ds, order, batch_size, **options):
    return [ds.read_batch(order[s:s + batch_size], **options) for s in range(0, len(order), batch_size)]


def same(got, want):
    assert len(got) == len(want)
    for (x, y), (wx, wy) in zip(got, want):
        assert np.array_equal(np.asarray(x), wx) and np.array_equal(np.asarray(y), wy)


# -- Keras


def test_keras_pydataset_gives_read_batch_batches_shuffled_per_epoch(built):
    ds = shardpack.open(built["onehot"])
    seq = shardpack.keras.PyDataset(ds, batch_size=4, shuffle=True, seed=3)
    assert isinstance(seq, keras.utils.PyDataset) and len(seq) == 3
    for epoch in (0, 1):  # Keras's calls: on_epoch_begin, the batches, on_epoch_end
        seq.on_epoch_begin()
        want = expected(ds, shardpack.epoch_order(len(ds), 3, epoch), 4, layout="NHWC")
        got = [seq[b] for b in range(len(seq))]
        assert got[0][0].shape[1:] == (24, 32, 3) and got[0][1].shape[1:] == (24, 32, 6)
        same(got, want)
        seq.on_epoch_end()
    assert seq.epoch == 1
    seq.set_epoch(0)
    same([seq[b] for b in range(3)], expected(ds, shardpack.epoch_order(len(ds), 3, 0), 4, layout="NHWC"))
    with pytest.raises(IndexError):
        seq[3]


def test_keras_pydataset_crops_and_flips_as_read_batch_per_epoch(built):
    ds = shardpack.open(built["index"])
    options = dict(crop=(16, 20), crop_position="random", hflip=0.5, vflip=0.5)
    seq = shardpack.keras.PyDataset(ds, batch_size=5, seed=7, label="index", **options)
    windows = []
    for epoch in (0, 1):
        order = shardpack.epoch_order(len(ds), 7, epoch)
        want = [ds.read_batch(order[s:s + 5], layout="NHWC", label="index", seed=7, epoch=epoch, **options)
                for s in (0, 5)]
        got = [seq[b] for b in range(len(seq))]
        assert got[0][0].shape == (5, 16, 20, 3) and got[0][1].shape == (5, 16, 20)
        same(got, want)
        windows.append(ds.read_batch(order, seed=7, epoch=epoch, return_boxes=True, **options)[2])
        seq.set_epoch(epoch + 1)
    assert not np.array_equal(windows[0], windows[1])  # new windows and flips each epoch


def test_keras_fits_a_model_on_the_pydataset_epoch_0_then_1(built):
    reads = []

    class Recorded(shardpack.keras.PyDataset):
        def __getitem__(self, index):
            reads.append((self.epoch, index))
            return super().__getitem__(index)

    seq = Recorded(built["cls"], batch_size=4, label="index")
    model = keras.Sequential([keras.Input((20, 24, 3)), keras.layers.Flatten(),
                              keras.layers.Dense(len(seq.dataset.classes))])
    model.compile(optimizer="sgd", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    history = model.fit(seq, epochs=2, verbose=0)
    assert len(history.history["loss"]) == 2 and np.isfinite(history.history["loss"]).all()
    # Keras reads a batch or two to learn the shapes, then calls on_epoch_end; then each epoch.
    by_epoch = {e: sorted(i for f, i in reads if f == e) for e, _ in reads}
    assert sorted(by_epoch) == [0, 1] and by_epoch[1] == [0, 1, 2] and set(by_epoch[0]) == {0, 1, 2}
    assert seq.epoch == 1
    model.fit(seq, epochs=1, verbose=0)  # a later fit goes on with the next epoch
    assert seq.epoch == 2 and sorted(i for f, i in reads if f == 2) == [0, 1, 2]


# -- tf.data


def test_tf_dataset_gives_read_batch_batches_with_its_element_spec(built):
    ds = shardpack.open(built["onehot"])
    data = shardpack.tf.dataset(built["onehot"], batch_size=4, shuffle=True, seed=5, label="index")
    spec = data.element_spec
    assert spec[0].shape.as_list() == [None, 24, 32, 3] and spec[0].dtype == tf.float32
    assert spec[1].shape.as_list() == [None, 24, 32] and spec[1].dtype == tf.int64
    for epoch in (0, 1):  # each iteration is the next epoch
        want = expected(ds, shardpack.epoch_order(len(ds), 5, epoch), 4, layout="NHWC", label="index")
        same([(x.numpy(), y.numpy()) for x, y in data], want)
    fixed = shardpack.tf.dataset(ds, batch_size=4, shuffle=False, drop_last=True, layout="NCHW", dtype="uint8",
                                 normalize=None)
    assert fixed.element_spec[0].shape.as_list() == [4, 3, 24, 32] and fixed.element_spec[0].dtype == tf.uint8
    got = list(fixed)
    assert len(got) == 2 and int(fixed.cardinality()) == 2
    assert np.array_equal(got[1][0].numpy(), ds.read_batch(range(4, 8), layout="NCHW", dtype="uint8")[0])


def test_tf_dataset_cardinality_and_epochs_per_pass(built):
    ds = shardpack.open(built["index"])
    n = len(ds)
    data = shardpack.tf.dataset(ds, batch_size=3, seed=2, label="index")
    assert int(data.cardinality()) == len(data) == 4  # 10 records: 3 + 3 + 3 + 1
    assert int(data.repeat(3).cardinality()) == 12
    assert int(data.repeat().cardinality()) == tf.data.INFINITE_CARDINALITY

    def epoch_batches(e, seed=2):
        return expected(ds, shardpack.epoch_order(n, seed, e), 3, layout="NHWC", label="index")

    same(list(data), epoch_batches(0))                   # the first pass: epoch 0
    same(list(data), epoch_batches(1))                   # a new iterator: epoch 1
    same(list(data.repeat(2)), epoch_batches(2) + epoch_batches(3))  # each round of repeat: the next
    it = iter(data.repeat())
    same([next(it) for _ in range(8)], epoch_batches(4) + epoch_batches(5))
    # A new dataset starts at epoch= again (0 by default): pass epoch= to resume.
    same(list(shardpack.tf.dataset(ds, batch_size=3, seed=2, label="index")), epoch_batches(0))
    same(list(shardpack.tf.dataset(ds, batch_size=3, seed=2, label="index", epoch=7)), epoch_batches(7))
    # The ranks of a world of 3 read disjoint thirds (padded to 4 each) of the same epoch.
    shares = [np.concatenate([y.numpy() for _, y in shardpack.tf.dataset(ds, 2, seed=2, label="index", rank=r,
                                                                         world=3, shuffle=False)]) for r in range(3)]
    assert [len(s) for s in shares] == [4, 4, 4]


def test_tf_dataset_crops_and_flips_as_read_batch_per_epoch(built):
    ds = shardpack.open(built["index"])
    options = dict(crop=(16, 20), crop_position="random", hflip=0.5, vflip=0.5)
    data = shardpack.tf.dataset(ds, batch_size=4, seed=9, label="index", drop_last=True, **options)
    assert data.element_spec[0].shape.as_list() == [4, 16, 20, 3]
    assert data.element_spec[1].shape.as_list() == [4, 16, 20]
    for epoch in (0, 1):
        order = shardpack.epoch_order(len(ds), 9, epoch, drop_last=True)
        want = [ds.read_batch(order[s:s + 4], layout="NHWC", label="index", seed=9, epoch=epoch, **options)
                for s in (0, 4)]
        same(list(data), want)
    center = shardpack.tf.dataset(ds, batch_size=10, shuffle=False, crop=(16, 20), label="index", normalize=None,
                                  dtype="uint8")
    (x, y), = list(center)
    full_x, full_y = ds.read_batch(range(10), layout="NHWC", label="index", dtype="uint8")
    assert np.array_equal(x.numpy(), full_x[:, 4:20, 6:26]) and np.array_equal(y.numpy(), full_y[:, 4:20, 6:26])


def test_tf_dataset_batches_stay_intact_while_held(built):
    """TensorFlow wraps read_batch's arrays without copying, and read_batch recycles their
    memory: a batch still referenced (a tensor, or a NumPy view of one) must never be refilled."""
    ds = shardpack.open(built["onehot"])
    data = shardpack.tf.dataset(ds, batch_size=1, seed=1, label="index", prefetch=2)  # 10 batches an epoch
    held = list(data)  # the tensors of epoch 0, kept while epochs 1 and 2 are read
    for _ in range(2):
        for x, y in data:
            pass
    same([(x.numpy(), y.numpy()) for x, y in held],
         expected(ds, shardpack.epoch_order(len(ds), 1, 0), 1, layout="NHWC", label="index"))
    views = [x.numpy() for x, _ in data]  # NumPy views of epoch 3's tensors, the tensors dropped
    for x, y in data:
        pass
    assert all(np.array_equal(v, w[0]) for v, w in
               zip(views, expected(ds, shardpack.epoch_order(len(ds), 1, 3), 1, layout="NHWC", label="index")))


def test_keras_fit_on_tf_dataset_knows_the_steps_and_reads_an_epoch_per_keras_epoch(built):
    ds = shardpack.open(built["cls"])
    data = shardpack.tf.dataset(ds, batch_size=4, label="index")  # 12 records: 3 steps
    steps = []

    class Steps(keras.callbacks.Callback):
        def on_train_begin(self, logs=None):
            steps.append(self.params["steps"])

    model = keras.Sequential([keras.Input((20, 24, 3)), keras.layers.Flatten(), keras.layers.Dense(len(ds.classes))])
    model.compile(optimizer="sgd", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        history = model.fit(data, epochs=2, verbose=0, callbacks=[Steps()])
    assert steps == [3]
    assert not [w for w in caught if "ran out of data" in str(w.message)]
    assert np.isfinite(history.history["loss"]).all()
    # Keras made one pass per epoch (epochs 0 and 1), so the next pass is epoch 2.
    same(list(data), expected(ds, shardpack.epoch_order(len(ds), 0, 2), 4, layout="NHWC", label="index"))


def test_tf_dataset_raises_shardpack_errors_as_tf_errors(built, tmp_path):
    from test_core import damage
    path, _ = damage(built, tmp_path)
    with pytest.raises(Exception, match="checksum mismatch"):
        for _ in shardpack.tf.dataset(path, batch_size=2):
            pass


# -- the options and defaults of both


@pytest.mark.parametrize("make", [
    lambda path, **kw: shardpack.keras.PyDataset(path, 4, **kw),
    lambda path, **kw: shardpack.tf.dataset(path, 4, **kw),
], ids=["keras", "tf"])
def test_bad_options_are_value_and_type_errors(built, make):
    path = built["onehot"]
    for bad, kind in [(dict(dtype="uint8", normalize="imagenet"), ValueError),  # float32 only
                      (dict(crop_position="left"), ValueError), (dict(hflip=1.5), ValueError),
                      (dict(layout="HWC"), ValueError), (dict(label="rgb"), ValueError),
                      (dict(rank=2, world=2), ValueError), (dict(seed=-1), ValueError),
                      (dict(crop=(0, 4)), ValueError), (dict(hflip="yes"), TypeError),
                      (dict(shuffle="yes"), TypeError), (dict(epoch=1.5), TypeError)]:
        with pytest.raises(kind) as caught:
            make(path, **bad)
        assert isinstance(caught.value, shardpack.Error), bad
    from test_api import check_word_errors  # a bad word or a non-string: the checks of read_batch
    check_word_errors(lambda **kw: make(path, **kw), ["dtype", "layout", "label", "crop_position", "order"])
    # normalize="auto", the default: ImageNet statistics for float32, none for uint8.
    data = make(path, dtype="uint8", shuffle=False, label="index")
    x, _ = data[0] if isinstance(data, keras.utils.PyDataset) else next(iter(data))
    assert np.array_equal(np.asarray(x), shardpack.open(path).read_batch(range(4), layout="NHWC", dtype="uint8",
                                                                         normalize=None, label="index")[0])
    with pytest.raises(ValueError):
        shardpack.tf.dataset(path, 0)
    with pytest.raises(ValueError):
        shardpack.keras.PyDataset(path, 0)
    with pytest.raises(TypeError):  # options are keyword-only
        shardpack.tf.dataset(path, 4, True)
    with pytest.raises(TypeError):
        shardpack.keras.PyDataset(path, 4, True)


def test_the_defaults_agree():
    """The defaults table of the Python guide, src/python/README.md (#21): shuffle on, drop_last off,
    seed 0, first epoch 0, in every training iterator; the table's rows match."""
    from test_defaults import check_rows
    want = {"shuffle": True, "drop_last": False, "seed": 0, "epoch": 0}
    for f in (shardpack.keras.PyDataset.__init__, shardpack.tf.dataset):
        params = inspect.signature(f).parameters
        assert {k: params[k].default for k in want} == want, f
        assert all(params[k].kind is inspect.Parameter.KEYWORD_ONLY for k in want)
    assert check_rows({"keras", "tf"}) == 2


def test_tf_adapter_benchmark_runs_and_reports_ratios(built):
    """scripts/bench/tf_adapter_bench.py, on a tiny dataset (one round, a few seconds): it runs
    every way and reports the rates and ratios."""
    out = subprocess.run([sys.executable, str(ROOT / "scripts/bench/tf_adapter_bench.py"), "--dataset",
                          built["onehot"], "--batch", "4", "--rounds", "1", "--epochs", "1"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert set(report["ratio_to_read_batch"]) == {"read_batch", "read_batch_out", "tf_dataset",
                                                  "tf_dataset_noprefetch", "tf_from_generator"}
    assert all(c[0] >= 0 for c in report["cpu_s_per_1000"].values())
    assert report["ratio_to_read_batch"]["read_batch"] == 1.0
    assert all(r[0] > 0 for r in report["rates"].values())


def test_the_locality_aware_order_in_keras_and_tf(built):
    """order="blocks" (with block and window) gives shardpack.epoch_order's blocks order over the
    dataset, epoch by epoch, in both adapters."""
    ds = shardpack.open(built["onehot"])  # several shards
    kw = dict(seed=4, order="blocks", block=3, window=2, label="index")

    def epoch_batches(e):
        order = shardpack.epoch_order(ds, 4, e, order="blocks", block=3, window=2)
        assert not np.array_equal(order, shardpack.epoch_order(ds, 4, e))
        return expected(ds, order, 4, layout="NHWC", label="index")

    data = shardpack.tf.dataset(ds, 4, **kw)
    same(list(data), epoch_batches(0))
    same(list(data), epoch_batches(1))
    seq = shardpack.keras.PyDataset(ds, 4, **kw)
    for e in (0, 1):
        seq.on_epoch_begin()
        same([seq[b] for b in range(len(seq))], epoch_batches(e))
        seq.on_epoch_end()
    for bad in (dict(order="nearby"), dict(order="blocks", block=0)):
        with pytest.raises(ValueError):
            shardpack.tf.dataset(ds, 4, **bad)
        with pytest.raises(ValueError):
            shardpack.keras.PyDataset(ds, 4, **bad)


def test_mypy_strict_passes_on_the_adapters(tmp_path):
    """mypy --strict on shardpack.keras, shardpack.tf and their shared shardpack._adapt (the
    frameworks have no type information: their imports are taken as Any). shardpack.grain is
    checked in test_grain.py, which is skipped where Grain is missing. About 30 s."""
    pytest.importorskip("mypy", reason="mypy is not installed in this venv (scripts/python-env.sh --tf installs it)")
    modules = ["shardpack._adapt", "shardpack.keras", "shardpack.tf"]
    r = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--ignore-missing-imports", "--follow-imports=silent",
                        "--cache-dir", str(tmp_path / "cache")] + [a for m in modules for a in ("-m", m)],
                       capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr


# -- to_device: uint8 batches converted by TensorFlow (issue #35)

@pytest.mark.parametrize("layout", ["NHWC", "NCHW"])
def test_tf_to_device_gives_read_batch_float32_and_one_hot(built, layout):
    for name in ("index", "cls", "cls-raw"):  # RGB segmentation, RGB and grey classification
        ds = shardpack.open(built[name])
        idx = [3, 0, 5]
        raw = ds.read_batch(idx, dtype="uint8", layout=layout, label="index", label_dtype="uint8")
        for normalize in ("imagenet", None, ((0.5,), (0.25,))):
            want = ds.read_batch(idx, dtype="float32", layout=layout, label="onehot", normalize=normalize)
            images, labels = shardpack.tf.to_device(raw, normalize=normalize, onehot=len(ds.classes), layout=layout)
            assert images.dtype == tf.float32 and labels.dtype == tf.float32
            assert np.array_equal(images.numpy(), want[0]), (name, normalize)  # bit for bit
            assert np.array_equal(labels.numpy(), want[1])
        # Without onehot the labels are as given; under tf.device too.
        images, labels = shardpack.tf.to_device(raw, layout=layout, device="/CPU:0")
        assert np.array_equal(labels.numpy(), raw[1])
    # Ids beyond the classes (the ignore value) give all-zero vectors, as read_batch's.
    images = np.zeros((1, 2, 2, 3), np.uint8)
    _, labels = shardpack.tf.to_device((images, np.array([[[0, 255], [1, 2]]], np.uint8)), onehot=3)
    assert labels.numpy()[0, 0, 1].tolist() == [0, 0, 0] and labels.numpy()[0, 1, 1].tolist() == [0, 0, 1]


def test_tf_to_device_refuses_what_it_cannot_convert():
    images = np.zeros((2, 4, 4, 3), np.uint8)
    with pytest.raises(shardpack.ArgumentValueError, match="images must be uint8"):
        shardpack.tf.to_device((images.astype(np.float32), np.zeros(2, np.int64)))
    with pytest.raises(shardpack.ArgumentValueError, match="onehot needs index labels"):
        shardpack.tf.to_device((images, np.zeros((2, 3), np.float32)), onehot=3)
    with pytest.raises(shardpack.ArgumentValueError, match="layout"):
        shardpack.tf.to_device((images, np.zeros(2, np.int64)), layout="HWC")
    with pytest.raises(TypeError, match="pair"):
        shardpack.tf.to_device(images)
