"""shardpack.Dataset: records equal the C++ reader and `shardpack export`, read_batch in every
layout, zero-copy raw records, out= arrays, the GIL, errors and pickling."""
import gc
import json
import os
import pickle
import struct
import threading
import time
import tracemalloc
import zlib

import numpy as np
import pytest

import shardpack
from conftest import class_colors, cpp_dump, run, tool
from pngread import read_png

ALL = ["onehot", "index", "raw", "raw-index", "cls", "cls-raw"]
SEG = ["onehot", "index", "raw", "raw-index"]


def stored_label_bytes(label):
    if isinstance(label, int):
        return b""
    return np.ascontiguousarray(label).astype(label.dtype.newbyteorder("<"), copy=False).tobytes()


@pytest.mark.parametrize("name", ALL)
def test_records_equal_the_cpp_reader(built, name):
    ds = shardpack.open(built[name])
    want = cpp_dump(built[name])
    assert len(ds) == len(want) > 0
    for i, w in enumerate(want):
        img, label = ds[i]
        assert ds.key(i) == w["key"]
        assert img.shape[:2] == (w["height"], w["width"])
        assert zlib.crc32(img.tobytes()) == w["image_crc"], f"record {i}: image differs from the C++ reader"
        assert zlib.crc32(stored_label_bytes(label)) == w["label_crc"], f"record {i}: label differs"
        assert (label if isinstance(label, int) else -1) == w["class_id"]
    # Iteration gives the same records.
    for i, (img, label) in enumerate(ds):
        assert zlib.crc32(img.tobytes()) == want[i]["image_crc"]


@pytest.mark.parametrize("name", ALL)
def test_records_equal_shardpack_export(built, tmp_path, name):
    ds = shardpack.open(built[name])
    colors = class_colors(built.class_dict)
    for i in (0, len(ds) // 2, len(ds) - 1):
        prefix = tmp_path / f"r{i}"
        info = json.loads(run(tool("shardpack"), "export", built[name], "--index", i, "--out", prefix))
        img, label = ds[i]
        assert info["key"] == ds.key(i)
        exported = read_png(f"{prefix}.image.png")
        assert np.array_equal(exported.reshape(img.shape), img)
        if ds.task == "classification":
            assert info["class_id"] == label
            continue
        ids = label.argmax(-1) if label.ndim == 3 else label.astype(np.int64)
        drawn = read_png(f"{prefix}.label.png")[..., :3]
        assert np.array_equal(drawn, colors[ids]), f"record {i}: label differs from export's drawing"


@pytest.mark.parametrize("name", ALL)
def test_read_batch_in_every_layout_equals_the_records(built, name):
    ds = shardpack.open(built[name])
    idx = [3, 0, len(ds) - 1, 3, -2]
    recs = [ds[i] for i in idx]
    images = np.stack([r[0] for r in recs])
    h, w, c = ds.image_shape
    k = len(ds.classes)
    seg = ds.task == "segmentation"
    if seg:
        onehot = np.stack([r[1] if r[1].ndim == 3 else np.eye(k, dtype=np.uint8)[r[1]] for r in recs])
        ids = onehot.argmax(-1)
    else:
        ids = np.array([r[1] for r in recs])
        onehot = np.eye(k, dtype=np.uint8)[ids]

    x, y = ds.read_batch(idx, dtype="uint8", layout="NHWC", label="onehot")
    assert x.dtype == np.uint8 and x.shape == (5, h, w, c)
    assert np.array_equal(x, images) and np.array_equal(y, onehot)

    x, y = ds.read_batch(idx)  # float32, NCHW, ImageNet, one-hot
    assert x.dtype == np.float32 and x.shape == (5, c, h, w)
    if c == 1:
        mean, std = np.array([0.449]), np.array([0.226])
    else:
        mean, std = np.array([0.485, 0.456, 0.406, 0][:c]), np.array([0.229, 0.224, 0.225, 1][:c])
    want = ((images / np.float32(255) - mean.astype(np.float32)) / std.astype(np.float32)).transpose(0, 3, 1, 2)
    assert np.allclose(x, want, atol=1e-5)
    assert y.dtype == np.float32
    assert np.array_equal(y, onehot.transpose(0, 3, 1, 2) if seg else onehot)

    x, y = ds.read_batch(idx, normalize=None, layout="NHWC", label="index")
    assert np.allclose(x, images / np.float32(255), atol=1e-7)
    assert y.dtype == np.int64 and np.array_equal(y, ids)
    x, y = ds.read_batch(idx, normalize=(0.5, [0.25] * c), label="stored")
    assert np.allclose(x, ((images / 255 - 0.5) / 0.25).transpose(0, 3, 1, 2), atol=1e-5)
    if seg and ds.label_layout == "onehot":
        assert y.shape == (5, k, h, w)
    else:
        assert y.dtype == np.int64 and np.array_equal(y, ids)
    # threads: any split of the batch gives the same result.
    for t in (1, 2, 3, 7):
        xt, yt = ds.read_batch(idx, threads=t, label="stored")
        assert np.array_equal(xt, ds.read_batch(idx, threads=1, label="stored")[0]) and np.array_equal(yt, y)
    # An empty batch, and any integer array or sequence as indices.
    assert ds.read_batch([])[0].shape == (0, c, h, w)
    assert np.array_equal(ds.read_batch(np.array(idx, dtype=np.int32))[0], ds.read_batch(tuple(idx))[0])


def test_ignored_pixels_are_the_ignore_value_in_index_batches(built, tmp_path):
    # --resize fit pads the masks with ignored pixels.
    out = tmp_path / "fit"
    src = os.path.dirname(built.class_dict)
    run(tool("shardpack"), "-q", "build", "--csv", f"{src}/list.csv", "--classes", built.class_dict, "--out", out,
        "--size", "32x32", "--resize", "fit")
    ds = shardpack.open(out)
    x, y = ds.read_batch(range(len(ds)), label="index")
    onehot = ds.read_batch(range(len(ds)), label="onehot", dtype="uint8")[1]
    ignored = onehot.sum(axis=1) == 0
    assert ignored.any()
    assert (y[ignored] == ds.ignore_value).all() and (y[~ignored] < len(ds.classes)).all()


@pytest.mark.parametrize("name", ["raw", "raw-index", "cls-raw"])
def test_raw_records_are_read_only_views_of_the_memory_map(built, name):
    ds = shardpack.open(built[name])
    img, label = ds[4]
    copy = img.copy()
    assert not img.flags.writeable and not img.flags.owndata
    with pytest.raises(ValueError):
        img[0, 0, 0] = 1
    # The same bytes twice: the same address, inside a mapping of one of the dataset's shards.
    again, _ = ds[4]
    address = img.__array_interface__["data"][0]
    assert again.__array_interface__["data"][0] == address
    mapped = []
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split()
            lo, hi = (int(v, 16) for v in fields[0].split("-"))
            if len(fields) >= 6 and fields[5].startswith(built[name] + "/shard-") and lo <= address < hi:
                mapped.append(fields[5])
    assert mapped, "the image is not inside a mapping of a shard file"
    # The view keeps the dataset (and its mapping) alive.
    del ds, again, label
    gc.collect()
    assert np.array_equal(img, copy)


def test_zstd_records_are_private_writable_arrays(built):
    ds = shardpack.open(built["onehot"])
    a, _ = ds[2]
    b, _ = ds[2]
    assert a.flags.writeable and not np.shares_memory(a, b)
    a[:] = 0
    assert not np.array_equal(b, a) and np.array_equal(ds[2][0], b)


def test_out_arrays_are_filled_in_place_without_allocation(built):
    ds = shardpack.open(built["onehot"])
    idx = np.arange(len(ds))
    want_x, want_y = ds.read_batch(idx)
    images, labels = np.empty_like(want_x), np.empty_like(want_y)
    tracemalloc.start()
    got = ds.read_batch(idx, out=(images, labels))
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert got[0] is images and got[1] is labels
    assert np.array_equal(images, want_x) and np.array_equal(labels, want_y)
    assert peak < want_x.nbytes // 10, f"read_batch with out= allocated {peak} bytes"


def test_out_arrays_are_checked(built):
    ds = shardpack.open(built["onehot"])
    x, y = ds.read_batch([0, 1])
    with pytest.raises(shardpack.Error, match="is float64 .* needs float32"):
        ds.read_batch([0, 1], out=(x.astype(np.float64), y))
    with pytest.raises(shardpack.Error, match=r"\(2, 6, 24, 32\)"):
        ds.read_batch([0, 1], out=(x, y[:, :, :, :5].copy()))
    with pytest.raises(shardpack.Error, match="C-contiguous"):
        ds.read_batch([0, 1], out=(np.empty((2, 24, 32, 3), np.float32).transpose(0, 3, 1, 2), y))
    frozen = np.empty_like(x)
    frozen.flags.writeable = False
    with pytest.raises(shardpack.Error, match="writable"):
        ds.read_batch([0, 1], out=(frozen, y))
    with pytest.raises(shardpack.Error, match="pair"):
        ds.read_batch([0, 1], out=x)


def test_bad_arguments_raise_shardpack_error(built):
    ds = shardpack.open(built["onehot"])
    for kwargs, message in [(dict(dtype="float16"), "dtype"), (dict(layout="CHW"), "layout"),
                            (dict(label="rgb"), "label"), (dict(normalize="cifar"), "normalize"),
                            (dict(normalize=([0.5, 0.5], [1, 1])), "3 channels"), (dict(threads=-1), "threads"),
                            (dict(dtype="uint8", normalize=(0.5, 0.5)), "float32")]:
        with pytest.raises(shardpack.Error, match=message):
            ds.read_batch([0], **kwargs)
    with pytest.raises(shardpack.Error, match="out of range"):
        ds.read_batch([0, len(ds)])
    with pytest.raises(shardpack.Error, match="integers"):
        ds.read_batch([0.5])
    with pytest.raises(shardpack.Error, match="1-d"):
        ds.read_batch([[0, 1]])
    with pytest.raises(IndexError):
        ds[len(ds)]
    with pytest.raises(shardpack.Error, match="out of range"):
        ds[-len(ds) - 1]
    with pytest.raises(shardpack.Error, match="manifest.json"):
        shardpack.open(os.path.dirname(built.class_dict))


def test_schema_properties(built):
    ds = shardpack.open(built["onehot"])
    assert ds.task == "segmentation" and ds.label_layout == "onehot"
    assert ds.classes == [line.split(",")[0] for line in open(built.class_dict).read().splitlines()[1:]]
    assert ds.image_shape == (24, 32, 3)
    cls = shardpack.open(built["cls-raw"])
    assert cls.task == "classification" and cls.image_shape == (20, 24, 1)
    assert isinstance(cls[0][1], int)


def damage(built, tmp_path, name="raw", record=5):
    """A copy of a one-shard dataset with one byte flipped in the middle of record `record`
    (found through the shard's index: trailer at the end, 40-byte entries)."""
    path = built.copy(name, tmp_path / "damaged")
    shard = [f for f in os.listdir(path) if f.endswith(".spk")][0]
    with open(os.path.join(path, shard), "r+b") as f:
        size = f.seek(0, 2)
        f.seek(size - 40)
        index_offset, count = struct.unpack("<QQ", f.read(16))
        assert record < count
        f.seek(index_offset + 40 * record)
        offset, stored = struct.unpack("<QQ", f.read(16))
        f.seek(offset + stored // 2)
        b = f.read(1)
        f.seek(offset + stored // 2)
        f.write(bytes([b[0] ^ 0x40]))
    return path, shard


def test_a_damaged_record_raises_an_error_naming_shard_and_record(built, tmp_path):
    path, shard = damage(built, tmp_path)
    ds = shardpack.open(path)
    with pytest.raises(shardpack.Error, match=rf"{shard}: record 5 \(dataset index 5\): checksum mismatch"):
        ds.read_batch(range(len(ds)), threads=2)
    with pytest.raises(shardpack.Error, match="checksum mismatch"):
        for i in range(len(ds)):
            ds[i]
    # Without checksums the damage is read as data, as asked.
    shardpack.open(path, verify_checksums=False).read_batch(range(len(ds)))


def test_a_missing_shard_is_refused_at_open(built, tmp_path):
    path = built.copy("onehot", tmp_path / "missing")
    os.remove(os.path.join(path, sorted(f for f in os.listdir(path) if f.endswith(".spk"))[1]))
    with pytest.raises(shardpack.Error, match="cannot open|No such file"):
        shardpack.open(path)


def test_other_python_threads_run_during_a_long_read_batch(built):
    ds = shardpack.open(built["onehot"])
    idx = np.tile(np.arange(len(ds)), 3000)  # ~30,000 records
    stamps = []  # the counting thread's clock every 1,000 counts
    stop = threading.Event()

    def count():
        i = 0
        while not stop.is_set():
            i += 1
            if i % 1000 == 0:
                stamps.append(time.perf_counter())

    t = threading.Thread(target=count)
    t.start()
    try:
        time.sleep(0.05)
        t0 = time.perf_counter()
        ds.read_batch(idx, threads=1)
        t1 = time.perf_counter()
    finally:
        stop.set()
        t.join()
    assert t1 - t0 > 0.1, "the batch was too short to tell"
    # The middle half of the call is inside C++: with the GIL held there, the other thread
    # could not count at all.
    middle = [s for s in stamps if t0 + 0.25 * (t1 - t0) < s < t0 + 0.75 * (t1 - t0)]
    assert len(middle) > 20, f"the other thread counted {1000 * len(middle)} in the middle {0.5 * (t1 - t0):.2f} s"


def test_pickles_by_path_and_reopens_lazily(built, tmp_path):
    path = built.copy("onehot", tmp_path / "copy")
    ds = shardpack.open(path, verify_checksums=False)
    data = pickle.dumps(ds)
    assert len(data) < 1000  # path and options, not records
    clone = pickle.loads(data)
    assert clone._reader_ is None and clone.verify_checksums is False
    assert np.array_equal(clone.read_batch([1, 2])[0], ds.read_batch([1, 2])[0])
    # A dataset rebuilt under the same path is refused by copies made before.
    stale = pickle.loads(data)
    src = os.path.dirname(built.class_dict)
    run(tool("shardpack"), "-q", "build", "--csv", f"{src}/list.csv", "--classes", built.class_dict, "--out", path,
        "--size", "16x16")
    with pytest.raises(shardpack.Error, match="changed"):
        len(stale)


def test_the_thread_pool_works_in_a_forked_child(built):
    # The parent's pool threads do not exist in a child (and may have held its lock at the
    # fork): the child starts its own pool.
    ds = shardpack.open(built["onehot"])
    want = ds.read_batch(range(len(ds)), threads=3)[0]
    pid = os.fork()
    if pid == 0:  # the child: exit status 0 only when the batch is read and equal
        ok = False
        try:
            ok = np.array_equal(ds.read_batch(range(len(ds)), threads=3)[0], want)
            ok = ok and len(os.listdir("/proc/self/task")) >= 3  # its own pool's threads ran it
        finally:
            os._exit(0 if ok else 1)
    deadline = time.time() + 60
    while time.time() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        time.sleep(0.05)
    else:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        pytest.fail("read_batch in a forked child hung")
    assert os.waitstatus_to_exitcode(status) == 0


def test_out_arrays_in_pinned_memory_are_filled_and_gpu_arrays_refused(built):
    # DLPack reports a pinned CPU tensor (PyTorch) as kDLCUDAHost: CPU memory, filled in place.
    from dlpack_fake import gpu, pinned
    ds = shardpack.open(built["index"])
    want_x, want_y = ds.read_batch([2, 7], label="index")
    x, y = np.zeros_like(want_x), np.zeros_like(want_y)
    ds.read_batch([2, 7], label="index", out=(pinned(x), pinned(y)))
    assert np.array_equal(x, want_x) and np.array_equal(y, want_y)
    with pytest.raises(shardpack.Error, match="not in CPU memory"):
        ds.read_batch([2, 7], label="index", out=(gpu(np.zeros_like(want_x)), y))
