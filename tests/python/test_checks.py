"""One set of argument checks (shardpack/_checks.py, issue 35): the same mistake is the same
error (ArgumentTypeError for a wrong type, ArgumentValueError for a wrong value, both
shardpack.Errors), with a message naming the argument, whichever entry point it is made at:
read_batch, contact_sheet, mix, write, shardpack.torch (its Dataset, Sampler, Loader and
to_device). The Keras, tf.data and Grain adapters share shardpack._adapt's Options and Order,
tried here without their frameworks. Under a few seconds."""
import pathlib
import re

import numpy as np
import pytest

import shardpack
from shardpack import _adapt

PACKAGE = pathlib.Path(shardpack.__file__).parent


def raises(kind, call, *names):
    """call() raises `kind` (a shardpack.Error), its message naming each of `names`."""
    with pytest.raises(kind) as caught:
        call()
    assert isinstance(caught.value, shardpack.Error), caught.value
    for name in names:
        assert name in str(caught.value), (name, str(caught.value))
    return str(caught.value)


def test_the_package_words_each_argument_check_once():
    """The messages of the checks are written in _checks.py alone: no module keeps its own copy
    of the integer, word, probability or normalize checks (there were 3 to 5 of each)."""
    phrases = ["must be an integer, not", "must be one of {", "must be a number in [0, 1]", "probability {p} is not in",
               "is not in [0, world) for world", "must be finite numbers", "must be True or False",
               "must be None or (height, width)", "seed and epoch must be"]
    for path in sorted(PACKAGE.glob("*.py")):
        text = path.read_text()
        for phrase in phrases:
            if path.name != "_checks.py":
                assert phrase not in text, (path.name, phrase)


def test_an_integer_argument_refuses_booleans_and_floats_everywhere(built):
    ds = shardpack.open(built["onehot"])
    raises(shardpack.ArgumentTypeError, lambda: ds.read_batch([0], seed=True), "read_batch: seed", "boolean")
    raises(shardpack.ArgumentTypeError, lambda: shardpack.epoch_order(ds, world=2.0), "epoch_order: world")
    raises(shardpack.ArgumentTypeError, lambda: _adapt.Options(ds, **options(seed=True)), "seed")
    raises(shardpack.ArgumentTypeError, lambda: _adapt.Order(ds, **order(rank=1.0)), "rank")
    raises(shardpack.ArgumentTypeError, lambda: shardpack.contact_sheet(ds, crop=(8.0, 8.0)), "contact_sheet: crop")
    raises(shardpack.ArgumentTypeError, lambda: shardpack.mix([ds, ds], epoch_size=True), "mix: epoch_size")


def test_ranges_are_value_errors_naming_the_argument(built):
    ds = shardpack.open(built["onehot"])
    raises(shardpack.ArgumentValueError, lambda: ds.read_batch([0], threads=-1), "read_batch: threads", "-1")
    raises(shardpack.ArgumentValueError, lambda: shardpack.epoch_order(ds, order="blocks", block=0), "block")
    raises(shardpack.ArgumentValueError, lambda: shardpack.epoch_order(ds, rank=2, world=2), "rank 2", "world 2")
    raises(shardpack.ArgumentValueError, lambda: _adapt.Order(ds, **order(rank=2, world=2)), "rank 2", "world 2")
    raises(shardpack.ArgumentValueError, lambda: shardpack.contact_sheet(ds, tile=2), "contact_sheet: tile", "[8, 4096]")
    raises(shardpack.ArgumentValueError, lambda: shardpack.contact_sheet(ds, seed=-1), "contact_sheet: seed")
    raises(shardpack.ArgumentValueError, lambda: shardpack.open(built["onehot"], max_open_shards=-1), "max_open_shards")


def test_a_crop_is_checked_alike_by_read_batch_the_adapters_and_contact_sheet(built):
    ds = shardpack.open(built["onehot"])
    for call, what in ((lambda crop: ds.read_batch([0], crop=crop), "read_batch: crop"),
                       (lambda crop: _adapt.Options(ds, **options(crop=crop)), "crop"),
                       (lambda crop: shardpack.contact_sheet(ds, crop=crop), "contact_sheet: crop")):
        assert raises(shardpack.ArgumentTypeError, lambda: call((1, 2, 3)), what).startswith(what)
        raises(shardpack.ArgumentTypeError, lambda: call(8), what)
        raises(shardpack.ArgumentValueError, lambda: call((0, 4)), what, "between 1 and 65536")


def test_a_probability_is_checked_alike_everywhere(built):
    ds = shardpack.open(built["onehot"])
    for call, what in ((lambda p: ds.read_batch([0], hflip=p), "read_batch: hflip"),
                       (lambda p: ds.read_batch([0], fields=[], min_box_visibility=p), "read_batch: min_box_visibility"),
                       (lambda p: _adapt.Options(ds, **options(vflip=p)), "vflip"),
                       (lambda p: shardpack.contact_sheet(ds, alpha=p), "contact_sheet: alpha")):
        raises(shardpack.ArgumentValueError, lambda: call(1.5), what, "[0, 1]")
        raises(shardpack.ArgumentValueError, lambda: call(float("nan")), what)
        raises(shardpack.ArgumentTypeError, lambda: call("half"), what, "[0, 1]")
        if "visibility" not in what:  # (which would go on to read fields this dataset lacks)
            call(True)  # a boolean is 0 or 1, as read_batch always took it


def test_torch_checks_are_the_packages(built):
    torch = pytest.importorskip("torch", reason="PyTorch is not installed (scripts/python-env.sh installs python3-torch)")
    import shardpack.torch as spt
    path = built["onehot"]
    raises(shardpack.ArgumentTypeError, lambda: spt.Dataset(path, seed=True), "seed", "boolean")
    raises(shardpack.ArgumentTypeError, lambda: spt.Sampler(10, rank=1.0, world=2), "rank")
    raises(shardpack.ArgumentValueError, lambda: spt.Sampler(10, rank=2, world=2), "rank 2", "world 2")
    raises(shardpack.ArgumentValueError, lambda: spt.Loader(path, batch_size=0), "Loader: batch_size", "1 or more")
    raises(shardpack.ArgumentValueError, lambda: spt.Loader(path, batch_size=2, hflip=2.0), "hflip", "[0, 1]")
    raises(shardpack.ArgumentTypeError, lambda: spt.Dataset(path)["0"], "record index")
    # to_device's normalize is read_batch's: a non-pair is a TypeError (a ValueError before),
    # a standard deviation of 0 a ValueError (infinities before), onehot an integer.
    images, labels = torch.zeros((1, 2, 2, 3), dtype=torch.uint8), torch.zeros((1, 2, 2), dtype=torch.uint8)
    batch = (images, labels)
    raises(shardpack.ArgumentTypeError, lambda: spt.to_device(batch, "cpu", layout="NHWC", normalize=5),
           "to_device: normalize")
    raises(shardpack.ArgumentValueError, lambda: spt.to_device(batch, "cpu", layout="NHWC", normalize=(0.5, 0.0)),
           "to_device: normalize", "standard deviation")
    raises(shardpack.ArgumentValueError, lambda: spt.to_device(batch, "cpu", layout="NHWC", normalize="auto"),
           "to_device: normalize", "'imagenet'")
    raises(shardpack.ArgumentTypeError, lambda: spt.to_device(batch, "cpu", layout="NHWC", onehot=3.0),
           "to_device: onehot")


def test_write_checks_are_the_packages(tmp_path):
    samples = [(np.zeros((4, 4, 3), np.uint8), 0)]
    raises(shardpack.ArgumentTypeError, lambda: shardpack.write(tmp_path / "d", samples, task="cls", classes=["a"],
                                                                level=True), "write: level", "boolean")
    raises(shardpack.ArgumentValueError, lambda: shardpack.write(tmp_path / "d", samples, task="cls", classes=["a"],
                                                                 level=99), "write: level", "[-7, 22]")
    message = raises(shardpack.ArgumentValueError, lambda: shardpack.write(tmp_path / "d", samples, task="cls",
                                                                           classes=["a"], crop="left"), "write: crop")
    assert re.search(r"must be one of 'center', 'topleft', 'none', not 'left'", message)


def options(**changed):
    """_adapt.Options' arguments (the Keras, tf.data and Grain adapters' read options)."""
    return {**dict(dtype="float32", layout="NHWC", normalize="auto", label="onehot", crop=None, crop_position="center",
                   hflip=0.0, vflip=0.0, seed=0, threads=0), **changed}


def order(**changed):
    return {**dict(batch_size=2, shuffle=True, seed=0, drop_last=False, rank=0, world=1), **changed}
