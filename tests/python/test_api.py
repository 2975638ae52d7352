"""The package's API as a NumPy user meets it (#18 item 4, #19 items 1 and 5, #21 item 3): argument
errors that are shardpack.Error and the matching built-in, indices checked for every integer
type, out= arrays that overlap refused, threads capped, names that are not UTF-8, a huge crop,
uint8 index labels, recycled fresh outputs, no nanobind leak report at exit, one version, the
type stubs, the allocation benchmark. About 25 s (the subprocess tests start Python; PyTorch in a
spawned worker takes 12 s of it)."""
import importlib.metadata
import inspect
import os
import pathlib
import re
import shutil
import subprocess
import sys
import warnings
import zlib

import numpy as np
import pytest

import shardpack
from conftest import ROOT, cpp_dump, run, tool


# -- argument errors: a shardpack.Error and the matching built-in

def test_argument_errors_are_shardpack_errors_and_the_matching_builtin(built):
    ds = shardpack.open(built["onehot"])
    assert issubclass(shardpack.ArgumentValueError, shardpack.Error) and issubclass(shardpack.ArgumentValueError,
                                                                                    ValueError)
    assert issubclass(shardpack.ArgumentTypeError, shardpack.Error) and issubclass(shardpack.ArgumentTypeError,
                                                                                   TypeError)
    assert issubclass(shardpack.IndexOutOfRange, shardpack.Error) and issubclass(shardpack.IndexOutOfRange, IndexError)
    value_errors = [dict(dtype="float16"), dict(layout="CHW"), dict(label="rgb"), dict(normalize="cifar"),
                    dict(normalize=([0.5, 0.5], [1, 1])), dict(normalize=(0.5, 0.0)), dict(threads=-1),
                    dict(dtype="uint8", normalize=(0.5, 0.5)), dict(dtype="uint8", normalize="imagenet"),
                    dict(crop=(0, 4)), dict(crop=(70000, 4)), dict(hflip=1.5), dict(seed=-1), dict(epoch=2**64),
                    dict(label="index", label_dtype="float32"), dict(label="onehot", label_dtype="int64"),
                    dict(crop_position="top")]
    for kwargs in value_errors:
        with pytest.raises(shardpack.ArgumentValueError):
            ds.read_batch([0], **kwargs)
    type_errors = [dict(dtype=3.5), dict(layout=1), dict(threads=2.0), dict(threads="2"), dict(crop=5),
                   dict(crop=(2.5, 3)), dict(hflip="yes"), dict(seed=1.5), dict(normalize=3), dict(out=np.zeros(3)),
                   dict(label_dtype="complex")]
    for kwargs in type_errors:
        with pytest.raises((shardpack.ArgumentTypeError, shardpack.ArgumentValueError)) as e:
            ds.read_batch([0], **kwargs)
        assert isinstance(e.value, shardpack.Error)
    with pytest.raises(shardpack.ArgumentTypeError, match="integers"):
        ds.read_batch([0.5])
    with pytest.raises(shardpack.ArgumentTypeError, match="integers"):
        ds.read_batch(np.array([True, False]))
    with pytest.raises(shardpack.ArgumentValueError, match="1-d"):
        ds.read_batch([[0, 1]])
    with pytest.raises(shardpack.ArgumentTypeError):
        ds[1.0]
    with pytest.raises(shardpack.ArgumentTypeError):
        ds.key("3")
    with pytest.raises(shardpack.ArgumentTypeError):
        ds.batch_spec(2.0)
    with pytest.raises(shardpack.ArgumentValueError):
        shardpack.epoch_order(10, rank=3, world=2)


# The words each option takes (#20 item 3): written out here, not taken from the package's tables,
# so that a changed table shows.
WORDS = {"dtype": ("float32", "uint8", "uint16"), "layout": ("NCHW", "NHWC"), "label": ("onehot", "index", "stored"),
         "crop_position": ("center", "random", "foreground"), "order": ("global", "blocks")}


def check_word_errors(make, options, words_only=()):
    """make(**{option: bad}) for each of `options` (names in WORDS), with a word it does not take
    and with a number: an ArgumentValueError and an ArgumentTypeError (shardpack.Errors that are a
    ValueError and a TypeError), their message naming the option and every word it takes.
    words_only: options whose non-strings mean something else (read_batch's crop boxes)."""
    for option in options:
        for bad, kind in (("bogus", shardpack.ArgumentValueError), (7.5, shardpack.ArgumentTypeError)):
            if not isinstance(bad, str) and option in words_only:
                continue
            with pytest.raises((ValueError, TypeError)) as caught:
                make(**{option: bad})
            assert isinstance(caught.value, kind), (option, bad, type(caught.value), caught.value)
            assert isinstance(caught.value, shardpack.Error)
            message = str(caught.value)
            assert option in message and all(repr(w) in message for w in WORDS[option]), (option, bad, message)


def test_bad_words_are_value_and_type_errors_naming_the_words(built):
    """read_batch, epoch_order and the adapters' shared checks (shardpack._adapt: Keras, tf.data
    and Grain; each of those is also tried in test_keras_tf.py / test_grain.py) and
    shardpack.torch's Dataset, Loader, Sampler and to_device. Under a second."""
    from shardpack import _adapt
    ds = shardpack.open(built["onehot"])
    check_word_errors(lambda **kw: ds.read_batch([0], **kw), ["dtype", "layout", "label", "crop_position"],
                      words_only=["crop_position"])
    check_word_errors(lambda **kw: ds.batch_spec(2, **kw), ["dtype", "layout", "label"])
    check_word_errors(lambda **kw: shardpack.epoch_order(ds, **kw), ["order"])
    options = dict(dtype="float32", layout="NHWC", normalize="auto", label="onehot", crop=None,
                   crop_position="center", hflip=0.0, vflip=0.0, seed=0, threads=0)
    check_word_errors(lambda **kw: _adapt.Options(ds, **{**options, **kw}),
                      ["dtype", "layout", "label", "crop_position"])
    check_word_errors(lambda **kw: _adapt.Order(ds, batch_size=2, shuffle=True, seed=0, drop_last=False, rank=0,
                                                world=1, **kw), ["order"])
    pytest.importorskip("torch")
    import shardpack.torch as spt
    check_word_errors(lambda **kw: spt.Dataset(ds, **kw), ["dtype", "layout", "label", "crop_position"])
    check_word_errors(lambda **kw: spt.Loader(ds, 2, **kw), ["dtype", "layout", "label", "crop_position", "order"])
    check_word_errors(lambda **kw: spt.Sampler(ds, **kw), ["order"])
    batch = spt.Loader(ds, 2, dtype="uint8", shuffle=False).__iter__().__next__()
    check_word_errors(lambda **kw: spt.to_device(batch, "cpu", **kw), ["layout"])
    # The adapters' other argument errors are the same two classes, no longer a bare shardpack.Error.
    for make in (lambda: spt.Loader(ds, 2, hflip=1.5), lambda: spt.Loader(ds, 0), lambda: spt.Loader(ds, 2, prefetch=0),
                 lambda: spt.Dataset(ds, seed=-1), lambda: spt.Sampler(ds, rank=2, world=2),
                 lambda: spt.Sampler(ds).load_state_dict({**spt.Sampler(ds).state_dict(), "position": 10**6}),
                 lambda: spt.Dataset(ds)[[[0, 1]]]):
        with pytest.raises(shardpack.ArgumentValueError):
            make()
    for make in (lambda: spt.Loader(ds, 2, hflip="yes"), lambda: spt.Dataset(ds, seed=1.5),
                 lambda: spt.Dataset(ds).__getitems__([0.5])):
        with pytest.raises(shardpack.ArgumentTypeError):
            make()


def test_literal_aliases_match_the_word_tables():
    """The typing aliases repeat the tables' words for type checkers (a Literal cannot be made from
    a tuple): the two must agree."""
    import typing

    def literal(alias):
        return next(a for a in (alias, *typing.get_args(alias)) if typing.get_origin(a) is typing.Literal)

    for alias, table in [(shardpack.DType, shardpack._DTYPES), (shardpack.Layout, shardpack._LAYOUTS),
                         (shardpack.Label, shardpack._LABELS), (shardpack.CropPosition, shardpack._CROP_POSITIONS),
                         (shardpack.IO, shardpack._IOS), (shardpack.Order, shardpack._ORDERS),
                         (shardpack.Normalize, shardpack._NORMALIZE_WORDS)]:
        assert set(typing.get_args(literal(alias))) == set(table), (alias, table)
    assert set(typing.get_args(literal(shardpack.LabelDType))) == \
        set(shardpack._ONEHOT_LABEL_DTYPES) | set(shardpack._INDEX_LABEL_DTYPES)
    assert tuple(WORDS[k] for k in ("dtype", "layout", "label", "crop_position", "order")) == \
        (shardpack._DTYPES, shardpack._LAYOUTS, shardpack._LABELS, shardpack._CROP_POSITIONS, shardpack._ORDERS)


def test_options_are_keyword_only(built):
    ds = shardpack.open(built["onehot"])
    with pytest.raises(TypeError):
        ds.read_batch([0], "uint8")
    with pytest.raises(TypeError):
        ds.batch_spec(2, "uint8")
    with pytest.raises(TypeError):
        shardpack.open(built["onehot"], False)
    for name, p in inspect.signature(shardpack.Dataset.read_batch).parameters.items():
        if name not in ("self", "indices"):
            assert p.kind is inspect.Parameter.KEYWORD_ONLY, name


# -- indices: in range for any integer type, never wrapped

@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64])
def test_indices_of_every_integer_type_are_read_and_checked(built, dtype):
    ds = shardpack.open(built["raw"])
    n = len(ds)
    want = ds.read_batch([1, 3], dtype="uint8")[0]
    assert np.array_equal(ds.read_batch(np.array([1, 3], dtype=dtype), dtype="uint8")[0], want)
    assert np.array_equal(ds[dtype(3)][0], ds[3][0])
    info = np.iinfo(dtype)
    for bad in {info.max, info.min} - set(range(-n, n)):
        with pytest.raises(shardpack.IndexOutOfRange, match=f"index {bad} is out of range"):
            ds.read_batch(np.array([0, bad], dtype=dtype))
        with pytest.raises(shardpack.IndexOutOfRange):
            ds[dtype(bad)]
        with pytest.raises(shardpack.IndexOutOfRange):
            ds.key(dtype(bad))


def test_huge_and_negative_indices(built):
    ds = shardpack.open(built["raw"])
    n = len(ds)
    # np.uint64(2**64 - 1) is -1 as int64: it used to read the last record.
    for bad in (np.uint64(2**64 - 1), 2**64 - 1, 2**70, -2**70, n, -n - 1):
        with pytest.raises(shardpack.IndexOutOfRange):
            ds.read_batch([bad])
        with pytest.raises(shardpack.IndexOutOfRange):
            ds[bad]
    with pytest.raises(shardpack.IndexOutOfRange):
        ds.read_batch(np.array([2**64 - 1], dtype=np.uint64))
    assert np.array_equal(ds.read_batch([-1, -n])[0], ds.read_batch([n - 1, 0])[0])
    assert ds.key(-1) == ds.key(n - 1)


def test_int64_index_arrays_are_checked_once_in_the_extension(built):
    """int64 arrays go to the extension unchecked (its copy checks them: one pass, no NumPy
    calls per batch); the message, the class and the wrapping of negatives are those of the
    other index types, for contiguous and strided arrays."""
    ds = shardpack.open(built["raw"])
    n = len(ds)
    for bad in (n, -n - 1, 2**63 - 1, -2**63):
        for indices in (np.array([0, bad], dtype=np.int64), np.array([0, 0, bad, 0], dtype=np.int64)[::2]):
            with pytest.raises(shardpack.IndexOutOfRange) as raised:
                ds.read_batch(indices)
            assert isinstance(raised.value, IndexError) and isinstance(raised.value, shardpack.Error)
            assert str(raised.value) == f"{ds.path}: index {bad} is out of range ({n} records)"
    both = np.array([-1, -n, 0, n - 1], dtype=np.int64)
    assert np.array_equal(ds.read_batch(both, dtype="uint8")[0], ds.read_batch([n - 1, 0, 0, n - 1], dtype="uint8")[0])
    assert np.array_equal(ds.read_batch(both[::2], dtype="uint8")[0], ds.read_batch([n - 1, 0], dtype="uint8")[0])


def test_remembered_options_are_still_checked_by_type(built):
    """read_batch remembers resolved options per set of arguments; an argument equal to an
    accepted one but of a type that is refused (a float crop, a boolean) is still refused."""
    ds = shardpack.open(built["raw"])
    h, w = ds.image_shape[:2]
    for _ in range(2):
        assert ds.read_batch([0], crop=(h, w))[0].shape[2:] == (h, w)
        with pytest.raises(shardpack.ArgumentTypeError):
            ds.read_batch([0], crop=(float(h), float(w)))
        assert ds.read_batch([0], crop=(1, 1))[0].shape[2:] == (1, 1)
        with pytest.raises(shardpack.ArgumentTypeError):
            ds.read_batch([0], crop=(True, True))
        with pytest.raises(shardpack.ArgumentValueError):  # unhashable options: checked every time
            ds.read_batch([0], crop=[h, w], normalize=[[0.5], [0.5]], dtype="float64")
        images = ds.read_batch([0], normalize=((0.5,), (0.25,)))[0]
        assert np.array_equal(images, ds.read_batch([0], normalize=((0.5,), (0.25,)))[0])


def test_plain_python_and_numpy_scalars_give_the_same_batch(built):
    """read_batch takes Python floats and ints for flips, seed and epoch without NumPy's calls
    (a shortcut for the usual case); NumPy scalars, booleans and the edges 0.0 and 1.0 give the
    same batch and boxes, and values out of range are refused whatever their type."""
    ds = shardpack.open(built["raw"])
    h, w = ds.image_shape[:2]
    idx = np.arange(min(len(ds), 8), dtype=np.int64)
    opts = dict(dtype="uint8", crop=(h // 2, w // 2), crop_position="random", return_boxes=True)
    for flip, same in ((0.5, np.float64(0.5)), (0.5, np.float32(0.5)), (1.0, True), (0.0, False), (1.0, 1),
                       (-0.0, 0.0)):
        for seed, same_seed in ((3, np.uint64(3)), (2**64 - 1, np.int64(-1).astype(np.uint64))):
            a = ds.read_batch(idx, hflip=flip, vflip=flip, seed=seed, epoch=2, **opts)
            b = ds.read_batch(idx, hflip=same, vflip=same, seed=same_seed, epoch=np.int16(2), **opts)
            for x, y in zip(a, b):
                assert np.array_equal(x, y)
    assert (ds.read_batch(idx, hflip=1.0, **opts)[2][:, 2] == 1).all()
    assert (ds.read_batch(idx, hflip=0.0, **opts)[2][:, 2] == 0).all()
    for bad in (1.0000001, -1e-9, float("nan"), float("inf")):
        with pytest.raises(shardpack.ArgumentValueError):
            ds.read_batch(idx, hflip=bad)
    for bad_seed in (-1, 2**64, np.int64(-1)):
        with pytest.raises(shardpack.ArgumentValueError):
            ds.read_batch(idx, seed=bad_seed)
    with pytest.raises(shardpack.ArgumentTypeError):
        ds.read_batch(idx, seed=1.0)


# -- out= arrays

def test_out_arrays_that_overlap_are_refused(built):
    ds = shardpack.open(built["raw-index"])
    (ishape, idtype), (lshape, ldtype) = ds.batch_spec(2, dtype="uint8", layout="NHWC", label="index",
                                                       label_dtype="uint8")
    isize, lsize = int(np.prod(ishape)), int(np.prod(lshape))
    buf = np.zeros(isize + lsize, dtype=np.uint8)
    images, labels = buf[:isize].reshape(ishape), buf[isize - 1:isize - 1 + lsize].reshape(lshape)
    with pytest.raises(shardpack.ArgumentValueError, match="overlap"):
        ds.read_batch([0, 1], dtype="uint8", layout="NHWC", label="index", label_dtype="uint8", out=(images, labels))
    # Adjacent, not overlapping: filled.
    images, labels = buf[:isize].reshape(ishape), buf[isize:].reshape(lshape)
    x, y = ds.read_batch([0, 1], dtype="uint8", layout="NHWC", label="index", label_dtype="uint8",
                         out=(images, labels))
    want = ds.read_batch([0, 1], dtype="uint8", layout="NHWC", label="index", label_dtype="uint8")
    assert x is images and np.array_equal(x, want[0]) and np.array_equal(y, want[1])


def test_out_array_errors_are_typed(built):
    ds = shardpack.open(built["onehot"])
    x, y = ds.read_batch([0, 1])
    with pytest.raises(shardpack.ArgumentTypeError, match="is float64 .* needs float32"):
        ds.read_batch([0, 1], out=(x.astype(np.float64), y))
    with pytest.raises(shardpack.ArgumentValueError, match=r"needs float32 \(2, 6, 24, 32\)"):
        ds.read_batch([0, 1], out=(x, y[:, :5].copy()))
    with pytest.raises(shardpack.ArgumentTypeError, match="writable, C-contiguous"):
        ds.read_batch([0, 1], out=(x, "labels"))
    with pytest.raises(shardpack.ArgumentTypeError, match="pair"):
        ds.read_batch([0, 1], out=(x, None))


# -- threads

def test_threads_are_capped_at_four_times_the_cores_with_a_warning(built):
    ds = shardpack.open(built["onehot"])
    cores = len(os.sched_getaffinity(0))
    before = len(os.listdir("/proc/self/task"))
    with pytest.warns(RuntimeWarning, match=f"threads={10**6}: using {4 * cores} "):
        x = ds.read_batch(range(len(ds)), threads=10**6)[0]
    # The pool grew by at most 4 x cores - 1 threads (the caller takes a part), not thousands.
    assert len(os.listdir("/proc/self/task")) - before <= 4 * cores
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert np.array_equal(ds.read_batch(range(len(ds)), threads=4 * cores)[0], x)


# -- names that are not UTF-8

def test_names_that_are_not_utf8_come_back_with_surrogateescape(built, tmp_path):
    src = pathlib.Path(os.path.dirname(built.class_dict))
    work = tmp_path / "src"
    shutil.copytree(src, work)
    os.rename(os.fsencode(work / "images" / "img_0001.png"), os.fsencode(work / "images") + b"/img_\xff01.png")
    listing = (work / "list.csv").read_bytes().replace(b"images/img_0001.png", b"images/img_\xff01.png")
    (work / "list.csv").write_bytes(listing)
    classes = (work / "class_dict.csv").read_bytes().replace(b"sky,", b"sk\xe9,", 1)  # Latin-1, not UTF-8
    (work / "class_dict.csv").write_bytes(classes)
    out = os.fsencode(tmp_path) + b"/data\xff"  # the folder's own name is not UTF-8 either
    run(tool("shardpack"), "-q", "build", "--csv", work / "list.csv", "--classes", work / "class_dict.csv",
        "--size", "32x24", "--out", os.fsdecode(out))
    for path in (out, os.fsdecode(out), pathlib.Path(os.fsdecode(out))):
        ds = shardpack.open(path)
        assert os.fsencode(ds.path) == out
        assert os.fsencode(ds.classes[0]) == b"sk\xe9"
        keys = [os.fsencode(ds.key(i)) for i in range(len(ds))]
        assert b"images/img_\xff01.png" in keys
        assert "\udcff" in ds.key(keys.index(b"images/img_\xff01.png"))
        repr(ds)
    # An error naming the folder names it readably, whatever its bytes.
    with pytest.raises(shardpack.Error, match="data"):
        shardpack.open(out + b"-missing")


# -- a crop larger than the records

def test_a_huge_crop_is_an_error_naming_the_record_not_a_memory_error(built, tmp_path):
    ds = shardpack.open(built["raw"])
    with pytest.raises(shardpack.Error, match=r"crop 65536x65536 is larger than record 3 \(32x24"):
        ds.read_batch([3, 0], crop=(65536, 65536))
    # Built without --size (the schema fixes no size): the first record smaller than the crop is
    # named, though the batch's arrays (100 GB) could not be allocated.
    src = os.path.dirname(built.class_dict)
    out = tmp_path / "mixed"
    run(tool("shardpack"), "-q", "build", "--csv", f"{src}/list.csv", "--classes", built.class_dict, "--out", out)
    mixed = shardpack.open(out)
    assert mixed.image_shape is None
    with pytest.raises(shardpack.Error, match=r"crop 65536x65536 is larger than record 2 "):
        mixed.read_batch([2, 5], crop=(65536, 65536))
    assert mixed.read_batch([2, 5], crop=(8, 8))[0].shape == (2, 3, 8, 8)
    # ds[i] of zstd records of different sizes (copied out of the context's buffer) are the
    # C++ reader's records.
    for i, w in enumerate(cpp_dump(str(out))):
        img, label = mixed[i]
        assert img.shape[:2] == (w["height"], w["width"]) and img.flags.writeable
        assert zlib.crc32(img.tobytes()) == w["image_crc"] and zlib.crc32(label.tobytes()) == w["label_crc"]


# -- uint8 delivery: normalize and index labels

def test_normalize_auto_is_imagenet_for_float32_and_nothing_for_uint8(built):
    ds = shardpack.open(built["onehot"])
    assert np.array_equal(ds.read_batch([0, 1])[0], ds.read_batch([0, 1], normalize="imagenet")[0])
    raw = ds.read_batch([0, 1], dtype="uint8")[0]
    assert np.array_equal(raw, ds.read_batch([0, 1], dtype="uint8", normalize=None)[0])
    for bad in ("imagenet", (0.5, 0.5)):
        with pytest.raises(ValueError, match="float32"):
            ds.read_batch([0, 1], dtype="uint8", normalize=bad)


@pytest.mark.parametrize("name", ["onehot", "index", "raw", "raw-index", "cls", "cls-raw"])
def test_index_labels_in_uint8_uint16_and_int64_are_equal(built, name):
    ds = shardpack.open(built[name])
    idx = [4, 0, len(ds) - 1]
    want = ds.read_batch(idx, label="index")[1]
    assert want.dtype == np.int64
    for label_dtype in ("uint8", np.uint8, "uint16", np.dtype(np.uint16), "int64"):
        spec = ds.batch_spec(len(idx), label="index", label_dtype=label_dtype)[1]
        for threads in (1, 2):
            y = ds.read_batch(idx, label="index", label_dtype=label_dtype, threads=threads)[1]
            assert (y.shape, y.dtype) == spec and y.dtype == np.dtype(label_dtype)
            assert np.array_equal(y.astype(np.int64), want)
        out = np.full(spec[0], 7, dtype=spec[1])
        ds.read_batch(idx, label="index", label_dtype=label_dtype, out=(np.empty(ds.batch_spec(3)[0][0], np.float32), out))
        assert np.array_equal(out.astype(np.int64), want)
        # Crops and flips give the same labels in every dtype too.
        y8 = ds.read_batch(idx, label="index", label_dtype=label_dtype, crop=(8, 8), crop_position="random",
                           hflip=0.5, seed=3)[1]
        y64 = ds.read_batch(idx, label="index", crop=(8, 8), crop_position="random", hflip=0.5, seed=3)[1]
        assert np.array_equal(y8.astype(np.int64), y64)
    if ds.task == "segmentation":
        ignored = ds.read_batch(range(len(ds)), label="index", label_dtype="uint8")[1]
        assert ignored.max() < len(ds.classes) or ds.ignore_value == 255


def test_uint8_index_labels_need_classes_that_fit(built, tmp_path):
    # 300 classes: the dataset stores uint16 index maps; uint8 cannot hold the ids.
    src = os.path.dirname(built.class_dict)
    rows = pathlib.Path(built.class_dict).read_text().splitlines()
    extra = [f"extra{j},{j % 250},{(j * 7) % 256},{200 + j % 50},filler" for j in range(300 - (len(rows) - 1))]
    many = tmp_path / "many.csv"
    many.write_text("\n".join(rows + extra) + "\n")
    out = tmp_path / "many"
    run(tool("shardpack"), "-q", "build", "--csv", f"{src}/list.csv", "--classes", many, "--out", out, "--size",
        "32x24", "--label-layout", "index")
    ds = shardpack.open(out)
    assert len(ds.classes) == 300 and ds.ignore_value == 65535
    with pytest.raises(shardpack.ArgumentValueError, match="uint8 cannot hold the 300 classes"):
        ds.read_batch([0], label="index", label_dtype="uint8")
    with pytest.raises(ValueError):
        ds.batch_spec(1, label="index", label_dtype="uint8")
    y16 = ds.read_batch([0, 1], label="index", label_dtype="uint16")[1]
    assert y16.dtype == np.uint16 and np.array_equal(y16, ds.read_batch([0, 1], label="index")[1])


def test_one_hot_labels_in_another_dtype_than_the_images(built):
    ds = shardpack.open(built["index"])
    x, y = ds.read_batch([0, 1], label="onehot", label_dtype="uint8")
    assert x.dtype == np.float32 and y.dtype == np.uint8
    assert np.array_equal(y, ds.read_batch([0, 1], label="onehot")[1].astype(np.uint8))


# -- fresh outputs: recycled blocks

def test_fresh_batches_reuse_freed_blocks_and_never_live_ones(built):
    ds = shardpack.open(built["raw"])
    n = len(ds)
    idx = np.arange(n).repeat(2000 // n + 1)[:2000]  # > 1 MiB of float32 images
    first = ds.read_batch(idx)[0]
    address = first.__array_interface__["data"][0]
    want = first.copy()
    second = ds.read_batch(idx[::-1].copy())[0]
    assert not np.shares_memory(first, second)  # a live batch is never handed out again
    assert np.array_equal(first, want)
    del first
    third = ds.read_batch(idx)[0]
    assert third.__array_interface__["data"][0] == address  # the freed block, already mapped
    assert np.array_equal(third, want)
    assert third.flags.writeable and third.flags.c_contiguous


def test_records_of_zstd_datasets_are_private_copies(built):
    ds = shardpack.open(built["index"])
    a = [ds[i] for i in range(len(ds))]
    b = [ds[i] for i in range(len(ds))]
    for (ia, la), (ib, lb) in zip(a, b):
        assert ia.flags.writeable and la.flags.writeable and not np.shares_memory(ia, ib)
        assert np.array_equal(ia, ib) and np.array_equal(la, lb)
    a[0][0][:] = 0
    assert np.array_equal(ds[0][0], b[0][0])


# -- exit: no nanobind leak report

LEAK_SCRIPT = r"""
import sys, threading, time
import numpy as np
import shardpack
ds = shardpack.open(sys.argv[1])
x = ds.read_batch([0, 1])
item = ds[0]
class Cycle:
    pass
c = Cycle(); c.me = c; c.ds = ds; c.batch = x       # kept only by a reference cycle
sys.modules["keeper"] = Cycle(); sys.modules["keeper"].ds = shardpack.open(sys.argv[1])
def forever():                                       # a daemon thread inside read_batch at exit
    while True:
        ds.read_batch(range(len(ds)), threads=2)
threading.Thread(target=forever, daemon=True).start()
time.sleep(0.2)
print("ok")
"""

TORCH_SCRIPT = r"""
import sys
from torch.utils.data import DataLoader
import shardpack.torch as spt
if __name__ == "__main__":
    dl = DataLoader(spt.Dataset(sys.argv[1]), batch_size=None, num_workers=1, multiprocessing_context="spawn")
    for i, _ in enumerate(dl):
        if i == 2:
            break
    print("ok")
"""


def run_python(tmp_path, script, *args):
    path = tmp_path / "script.py"
    path.write_text(script)
    r = subprocess.run([sys.executable, str(path), *args], capture_output=True, text=True, timeout=120)
    return r


def test_no_leak_report_and_no_abort_at_exit(built, tmp_path):
    r = run_python(tmp_path, LEAK_SCRIPT, built["onehot"])
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr
    assert "leaked" not in r.stderr and "terminate" not in r.stderr, r.stderr


def test_no_leak_report_from_a_spawned_dataloader_worker(built, tmp_path):
    pytest.importorskip("torch")
    r = run_python(tmp_path, TORCH_SCRIPT, built["onehot"])
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr
    assert "leaked" not in r.stderr, r.stderr


# -- one version, typed package

def test_one_version_for_cmake_and_python():
    cmake = re.search(r"project\(shardpack VERSION ([0-9.]+)", (ROOT / "CMakeLists.txt").read_text()).group(1)
    assert shardpack.__version__ == cmake
    assert importlib.metadata.version("shardpack") == cmake


def test_the_package_is_typed_with_stubs_for_the_extension():
    package = pathlib.Path(shardpack.__file__).parent
    assert (package / "py.typed").exists()
    stub = (package / "_shardpack.pyi").read_text()
    for name in ("class Reader", "def read_batch(", "class ArgumentValueError(Error, ValueError)", "version: str"):
        assert name in stub
    for name in ("open", "permutation", "epoch_order"):
        assert inspect.signature(getattr(shardpack, name)).return_annotation is not inspect.Signature.empty
    for name, f in inspect.getmembers(shardpack.Dataset, inspect.isfunction):
        if not name.startswith("_") or name in ("__getitem__", "__len__", "__init__", "__iter__"):
            assert "return" in f.__annotations__, name


def test_mypy_strict_passes_on_the_package_and_its_stub(tmp_path):
    try:
        import mypy  # noqa: F401
    except ImportError:
        pytest.skip("mypy is not installed (pip install mypy): the type check did not run")
    r = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(tmp_path / "cache"),
                        "-m", "shardpack", "-m", "shardpack._shardpack"],
                       capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr


def test_the_allocation_benchmark_runs(tmp_path):
    # scripts/bench/py_alloc_bench.py on 4 records, one round: every method and its figures.
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "bench" / "py_alloc_bench.py"), "--build-dir",
                        os.path.dirname(tool("shardpack")), "--work", str(tmp_path), "--records", "4", "--batch", "2",
                        "--rounds", "1", "--batches", "1"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    for method in ("fresh_pool", "fresh_plain", "fresh_no_checksum", "out", "numpy_index"):
        assert r.stdout.count(f"\n{method} ") == 2, r.stdout
    assert "ds[i] of zstd" in r.stdout


# -- a dataset built without --size whose images all have one size (issue #35)

def test_records_of_one_size_batch_without_size(built, tmp_path):
    src = os.path.dirname(built.class_dict)  # 40x30 images and masks
    out = tmp_path / "unsized"
    run(tool("shardpack"), "-q", "build", "--csv", f"{src}/list.csv", "--classes", built.class_dict, "--out", out,
        "--compression", "zstd-record")
    ds = shardpack.open(out)
    assert ds.image_shape is None  # the schema fixes no size: nothing at open says they agree
    idx = np.array([7, 0, 3, 9])
    assert ds.batch_spec(4, dtype="uint8", layout="NHWC", label="index")[0][0] == (4, 30, 40, 3)
    images, labels = ds.read_batch(idx, dtype="uint8", layout="NHWC", label="index", threads=3)
    assert images.shape == (4, 30, 40, 3) and labels.shape == (4, 30, 40)
    for j, i in enumerate(idx):
        img, onehot = ds[int(i)]
        assert np.array_equal(images[j], img) and np.array_equal(labels[j], onehot.argmax(axis=-1))
    # The same bytes as the build with --size 40x30 gives.
    sized = tmp_path / "sized"
    run(tool("shardpack"), "-q", "build", "--csv", f"{src}/list.csv", "--classes", built.class_dict, "--out", sized,
        "--size", "40x30", "--compression", "zstd-record")
    want = shardpack.open(sized).read_batch(idx)
    got = ds.read_batch(idx, out=tuple(np.empty(spec[0], spec[1]) for spec in ds.batch_spec(4)))
    assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])


# -- the normalisation default, said where a user meets it (issue #35)

def test_the_imagenet_default_is_logged_once_when_implicit(built, monkeypatch, caplog):
    import logging
    monkeypatch.setattr(shardpack, "_imagenet_default_said", False)
    ds, gray = shardpack.open(built["onehot"]), shardpack.open(built["cls-raw"])

    def said(read):
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="shardpack"):
            read()
        return [r.getMessage() for r in caplog.records if r.name == "shardpack" and "ImageNet" in r.getMessage()]

    # Asked for by name, or another normalisation, or uint8: nothing to say.
    assert said(lambda: ds.read_batch([0], normalize="imagenet")) == []
    assert said(lambda: ds.read_batch([0], normalize=None)) == []
    assert said(lambda: ds.read_batch([0], dtype="uint8")) == []
    # The default, implicit: said once, with the statistics used, then never again this process.
    first = said(lambda: ds.read_batch([0]))
    assert len(first) == 1 and "mean 0.485 0.456 0.406 and std 0.229 0.224 0.225" in first[0]
    assert 'normalize=None for x / 255' in first[0]
    assert said(lambda: ds.read_batch([1], layout="NHWC")) == []
    assert said(lambda: gray.read_batch([0])) == []
    # A grey dataset's first implicit use names its one channel's statistics.
    monkeypatch.setattr(shardpack, "_imagenet_default_said", False)
    assert "mean 0.449 and std 0.226" in said(lambda: gray.read_batch([0], layout="NHWC"))[0]


def test_the_adapters_docstrings_state_the_normalisation_default():
    pytest.importorskip("torch", reason="torch is not installed in this environment")
    import shardpack.torch as spt
    docs = {"shardpack.torch.Dataset": spt.Dataset.__doc__, "shardpack.torch.Loader": spt.Loader.__doc__}
    for module in ("keras", "tf"):  # their source: importing them needs .venv-tf
        text = (ROOT / "src" / "python" / "shardpack" / f"{module}.py").read_text(encoding="utf-8")
        docs[f"shardpack.{module}"] = text
    for name, doc in docs.items():
        flat = " ".join(doc.split())
        assert 'normalize="auto" (the default) gives float32 images as (x / 255 - mean) / std' in flat, name
        assert "mean 0.485 0.456 0.406 and std 0.229 0.224 0.225" in flat and "normalize=None gives x / 255" in flat, name
