"""A weighted mix (shardpack.mix, weights 0.6/0.3/0.1) read through shardpack.keras.PyDataset,
shardpack.tf.dataset and shardpack.grain.dataset: per epoch, every adapter delivers each
dataset's count (largest-remainder shares of the weights), the same on every rank of 4, and each
sample's bytes are those of its record read directly from its own dataset (labels renumbered to
the mix's classes by name); datasets of different image sizes go through a crop, and are refused
without one.

The three datasets are made from different images (make_sample_data --seed), so each delivered
image names its dataset and record: the counts are measured from what the adapters gave, not from
the order they were told to read. TensorFlow and Keras come from PyPI into .venv-tf (scripts/
python-env.sh --tf); scripts/test-python.sh runs this file there. Elsewhere it is skipped with the
reason (pytest -rs), never passed. About 15 s on 2 cores (most of it TensorFlow's start)."""
import os
import pathlib
import sys

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
try:
    import tensorflow  # noqa: F401
    import keras
except ImportError as e:
    pytest.skip(f"TensorFlow/Keras are not importable in {sys.executable} ({e}); scripts/test-python.sh runs this "
                f"file in .venv-tf, made from PyPI by scripts/python-env.sh --tf", allow_module_level=True)

import shardpack  # noqa: E402
import shardpack.keras  # noqa: E402
import shardpack.tf  # noqa: E402

from conftest import run, tool  # noqa: E402

WEIGHTS = [0.6, 0.3, 0.1]
EPOCH = 40  # samples per epoch: 24, 12 and 4
SEED = 11
RAW = dict(dtype="uint8", normalize=None, layout="NHWC")  # the stored bytes, channels last


@pytest.fixture(scope="module")
def parts(tmp_path_factory):
    """Three segmentation datasets of different images: "a" one-hot in several shards (20 records),
    "b" index labels with the classes in reverse order (12), "c" stored raw with one class more (8);
    and "c-small", c at 28x20 instead of 32x24."""
    root = tmp_path_factory.mktemp("mix-keras-tf")
    out = {}
    sources = {}
    for name, seed, count in (("a", 1, 20), ("b", 2, 12), ("c", 3, 8)):
        src = root / f"src-{name}"
        run(tool("make_sample_data"), "--out", src, "--count", count, "--width", 40, "--height", 30, "--seed", seed)
        sources[name] = src
    rows = (sources["a"] / "class_dict.csv").read_text().splitlines()
    reversed_dict = root / "class_dict_reversed.csv"
    reversed_dict.write_text("\n".join([rows[0]] + rows[1:][::-1]) + "\n")
    extra_dict = root / "class_dict_extra.csv"
    extra_dict.write_text("\n".join(rows + ["zzz_extra,1,2,3,a colour no mask has"]) + "\n")
    builds = {"a": ("a", sources["a"] / "class_dict.csv", ["--shard-size", "16KiB"], "32x24"),
              "b": ("b", reversed_dict, ["--label-layout", "index"], "32x24"),
              "c": ("c", extra_dict, ["--compression", "none"], "32x24"),
              "c-small": ("c", extra_dict, ["--compression", "none"], "28x20")}
    for name, (src, classes, options, size) in builds.items():
        out[name] = str(root / name)
        run(tool("shardpack"), "-q", "build", "--csv", sources[src] / "list.csv", "--classes", classes, "--size", size,
            "--out", out[name], *options)
    return out


def mixed(parts, third="c"):
    return shardpack.mix([parts["a"], parts["b"], parts[third]], weights=WEIGHTS, epoch_size=EPOCH)


def label_table(m, k):
    """Dataset k's index value -> the mix's, by class name (its ignore value -> the mix's)."""
    d = m.datasets[k]
    table = np.full(max(len(d.classes), d.ignore_value + 1), m.ignore_value, dtype=np.int64)
    table[:len(d.classes)] = [m.classes.index(c) for c in d.classes]
    return table


class Direct:
    """Every record of the mix read directly from its own dataset: its image bytes (which name
    the record: the fixture's images are all different) and its labels in the mix's classes."""

    def __init__(self, m):
        self.m = m
        self.images, self.index, self.onehot = [], [], []
        self.where = {}
        for k, d in enumerate(m.datasets):
            images, index = d.read_batch(np.arange(len(d)), label="index", **RAW)
            onehot = d.read_batch(np.arange(len(d)), label="onehot", **RAW)[1]
            table = label_table(m, k)
            for r in range(len(d)):
                self.where.setdefault(images[r].tobytes(), []).append((k, r))
                self.images.append(images[r])
                self.index.append(table[index[r]])
                planes = np.zeros(onehot.shape[1:3] + (len(m.classes),), dtype=onehot.dtype)
                planes[..., table[:len(d.classes)]] = onehot[r]  # dataset k's plane j is the mix's plane table[j]
                self.onehot.append(planes)
        assert all(len(v) == 1 for v in self.where.values()), "the fixture's images must all differ"

    def check(self, images, labels, label):
        """The (dataset, record) of each sample of a batch, after checking its bytes."""
        got = []
        for image, lab in zip(np.asarray(images), np.asarray(labels)):
            (k, r), = self.where[image.tobytes()]
            g = int(self.m.offsets[k]) + r
            want = self.index[g] if label == "index" else self.onehot[g]
            assert np.array_equal(lab, want), (k, r)
            got.append(k)
        return got


def check_counts(per_rank, m):
    """An epoch's samples of each dataset, over its ranks: the mix's counts, equal shares."""
    assert m.counts == [24, 12, 4]  # 0.6, 0.3, 0.1 of 40: exact here
    assert all(abs(c - EPOCH * w / sum(WEIGHTS)) < 1 for c, w in zip(m.counts, WEIGHTS))  # the documented rounding
    assert len({len(s) for s in per_rank}) == 1
    assert np.bincount(np.concatenate(per_rank), minlength=3).tolist() == m.counts


def test_keras_reads_a_mix_with_its_counts_on_4_ranks_and_the_records_bytes(parts):
    m = mixed(parts)
    direct = Direct(m)
    for label in ("onehot", "index"):
        seqs = [shardpack.keras.PyDataset(m, batch_size=4, seed=SEED, rank=r, world=4, label=label, **RAW)
                for r in range(4)]
        for epoch in (0, 1):
            per_rank = []
            for seq in seqs:  # Keras's calls: on_epoch_begin, the batches, on_epoch_end
                seq.on_epoch_begin()
                assert len(seq) == 3  # 10 samples a rank: 4 + 4 + 2
                per_rank.append([k for b in range(len(seq)) for k in direct.check(*seq[b], label)])
                seq.on_epoch_end()
            check_counts(per_rank, m)
            # And in the order shardpack.epoch_order gives for the mix.
            for r, seq in enumerate(seqs):
                order = shardpack.epoch_order(m, SEED, epoch, rank=r, world=4)
                assert np.array_equal(np.concatenate([seq.batch_indices(b) for b in range(len(seq))]), order)
    # A model fits on it (Keras's own loop over the PyDataset).
    seq = shardpack.keras.PyDataset(m, batch_size=8, seed=SEED, label="index", crop=(16, 16))
    model = keras.Sequential([keras.Input((16, 16, 3)), keras.layers.Conv2D(len(m.classes), 1)])
    model.compile(optimizer="sgd", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True,
                                                                                   ignore_class=m.ignore_value))
    history = model.fit(seq, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"]).all()


def test_tf_data_reads_a_mix_with_its_counts_on_4_ranks_and_the_records_bytes(parts):
    m = mixed(parts)
    direct = Direct(m)
    for label in ("index", "onehot"):
        data = [shardpack.tf.dataset(m, batch_size=4, seed=SEED, rank=r, world=4, label=label, **RAW) for r in range(4)]
        assert int(data[0].cardinality()) == 3
        for epoch in (0, 1):  # each pass over a tf.data dataset is the next epoch
            per_rank = []
            for r, d in enumerate(data):
                batches = [(x.numpy(), y.numpy()) for x, y in d]
                per_rank.append([k for x, y in batches for k in direct.check(x, y, label)])
                # In shardpack.epoch_order's order for the mix: the records it names, in its order.
                order = shardpack.epoch_order(m, SEED, epoch, rank=r, world=4)
                seen = [direct.where[x.tobytes()][0] for b, _ in batches for x in b]
                assert [int(m.offsets[k]) + i for k, i in seen] == order.tolist()
            check_counts(per_rank, m)


def test_grain_reads_a_mix_with_its_counts_and_the_records_bytes(parts):
    pytest.importorskip("grain", reason="Grain is not importable here (scripts/python-env.sh --tf installs it)")
    import shardpack.grain
    m = mixed(parts)
    direct = Direct(m)
    per_rank = []
    for r in range(4):
        batches = shardpack.grain.dataset(m, batch_size=4, seed=SEED, rank=r, world=4, label="index", **RAW)
        per_rank.append([k for b in range(len(batches)) for k in direct.check(*batches[b], "index")])
    check_counts(per_rank, m)


@pytest.mark.parametrize("adapter", ["keras", "tf"])
def test_a_mix_of_image_sizes_is_cropped_to_one_as_each_dataset_crops(parts, adapter):
    """c-small is 28x20, the others 32x24: with crop=(16, 16) every sample is its record's window,
    random and flipped as reading its own dataset with seed + k gives it; without a crop the
    adapter refuses at once, naming the sizes."""
    m = mixed(parts, "c-small")
    assert m.image_shape is None
    options = dict(crop=(16, 16), crop_position="random", hflip=0.5, vflip=0.5, label="index", **RAW)
    for epoch in (0, 1):
        order = shardpack.epoch_order(m, SEED, epoch)
        if adapter == "keras":
            seq = shardpack.keras.PyDataset(m, batch_size=8, seed=SEED, epoch=epoch, **options)
            got = [seq[b] for b in range(len(seq))]
        else:
            got = [(x.numpy(), y.numpy()) for x, y in shardpack.tf.dataset(m, batch_size=8, seed=SEED, epoch=epoch,
                                                                            **options)]
        images = np.concatenate([x for x, _ in got])
        labels = np.concatenate([y for _, y in got])
        assert images.shape == (EPOCH, 16, 16, 3)
        part, local = m.locate(order)
        assert np.bincount(part, minlength=3).tolist() == m.counts
        for j, (k, r) in enumerate(zip(part.tolist(), local.tolist())):
            x, y = m.datasets[k].read_batch([r], seed=SEED + k, epoch=epoch, **options)
            assert np.array_equal(images[j], x[0]), (k, r)
            assert np.array_equal(labels[j], label_table(m, k)[y[0]]), (k, r)
    with pytest.raises(shardpack.ArgumentValueError, match="not all of one size.*crop"):
        if adapter == "keras":
            shardpack.keras.PyDataset(m, batch_size=8)
        else:
            shardpack.tf.dataset(m, batch_size=8)
    # Larger than c-small's 20 rows: refused, naming the dataset, not padded (tf.data raises its
    # own error type, carrying shardpack's message).
    with pytest.raises(shardpack.Error if adapter == "keras" else Exception, match="c-small: crop 22x22 is larger"):
        if adapter == "keras":
            shardpack.keras.PyDataset(m, batch_size=EPOCH, crop=(22, 22), shuffle=False)[0]
        else:
            next(iter(shardpack.tf.dataset(m, batch_size=EPOCH, crop=(22, 22), shuffle=False)))
    # Per-sample fields are each dataset's own: a mix refuses them clearly.
    if adapter == "tf":
        with pytest.raises(shardpack.ArgumentValueError, match="a mix reads no per-sample fields"):
            shardpack.tf.dataset(m, batch_size=8, crop=(16, 16), fields=["x"])


def test_the_fixture_datasets_differ(parts):
    """The counts above are measured from the images: the three datasets share no image."""
    seen = set()
    for name in ("a", "b", "c"):
        d = shardpack.open(parts[name])
        images = d.read_batch(np.arange(len(d)), **RAW)[0]
        for x in images:
            assert x.tobytes() not in seen
            seen.add(x.tobytes())
    assert len(seen) == 40
    assert pathlib.Path(parts["c-small"]).is_dir()
