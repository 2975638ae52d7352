"""shardpack.open(io=...): mmap and pread read the same bytes; raw records are zero-copy views only
where the shard is mapped; bad values are refused; the choice survives pickling. Runs in a few
seconds."""
import pickle

import numpy as np
import pytest

import shardpack


@pytest.mark.parametrize("name", ["onehot", "raw", "cls", "cls-raw"])
def test_pread_reads_what_mmap_reads(built, name):
    m = shardpack.open(built[name], io="mmap")
    p = shardpack.open(built[name], io="pread")
    a = shardpack.open(built[name])
    assert (m.io, p.io, a.io) == ("mmap", "pread", "auto")
    order = np.arange(len(m))[::-1].copy()
    for ds in (p, a):
        for i in range(len(m)):
            x, y = m[i], ds[i]
            assert np.array_equal(x[0], y[0]) and np.array_equal(x[1], y[1])
        bm = m.read_batch(order, dtype="uint8", label="stored")
        bp = ds.read_batch(order, dtype="uint8", label="stored")
        assert all(np.array_equal(u, v) for u, v in zip(bm, bp))


def test_raw_records_are_views_only_when_mapped(built):
    m = shardpack.open(built["raw"], io="mmap")
    p = shardpack.open(built["raw"], io="pread")
    image_m, image_p = m[0][0], p[0][0]
    assert not image_m.flags.writeable  # a view into the read-only mapping
    assert image_p.flags.writeable  # a copy the caller owns
    assert np.array_equal(image_m, image_p)


def test_bad_io_is_refused(built):
    with pytest.raises(ValueError, match="io must be one of"):
        shardpack.open(built["raw"], io="direct")
    with pytest.raises(TypeError):
        shardpack.open(built["raw"], io=1)


def test_io_survives_pickling(built):
    p = shardpack.open(built["onehot"], io="pread")
    q = pickle.loads(pickle.dumps(p))
    assert q.io == "pread"
    assert np.array_equal(q[3][0], p[3][0])


_MANY_SHARDS_CHILD = """
import sys
import numpy as np
import shardpack
ds = shardpack.open(sys.argv[1], max_open_shards=64)
for i in range(0, len(ds), 7):
    ds[i]
ds.read_batch(np.arange(0, len(ds), 97), dtype="uint8")
assert ds.open_shards <= 64
# VmHWM, not ru_maxrss: Linux carries ru_maxrss over from the forking parent through execve.
print(next(line.split()[1] for line in open("/proc/self/status") if line.startswith("VmHWM:")))
"""


def test_many_shards_open_lazily_with_bounded_memory(tmp_path):
    """20,000 one-record shards (beyond the automatic 4,096 open at once): open() parses the
    manifest and opens shard 0 only; reading every 7th record keeps at most max_open_shards
    open. About 10 s (most of it writing the shards)."""
    import subprocess
    import sys
    import time
    from conftest import tool

    folder = tmp_path / "many"
    subprocess.run([tool("make_many_shards"), str(folder), "--shards", "20000"], check=True, capture_output=True)
    t0 = time.monotonic()
    ds = shardpack.open(folder, max_open_shards=64)
    opened = time.monotonic() - t0
    assert len(ds) == 20000
    assert ds.open_shards == 1 and ds.max_open_shards == 64
    assert opened < 5.0  # measured ~0.15 s; generous for a loaded CI machine
    for i in range(0, len(ds), 7):
        image, label = ds[i]
        assert image.shape == (4, 4, 3) and int(image[0, 0, 0]) == 0
    assert ds.open_shards <= 64
    batch = ds.read_batch(np.arange(0, 20000, 97), dtype="uint8")
    assert batch[0].shape[0] == len(range(0, 20000, 97))
    assert ds.open_shards <= 64
    # Peak RSS in a fresh process: this one's peak also holds whatever earlier tests allocated.
    child = subprocess.run([sys.executable, "-c", _MANY_SHARDS_CHILD, str(folder)], check=True,
                           capture_output=True, text=True, timeout=120)
    assert int(child.stdout.split()[-1]) < 400 * 1024  # KB
    with pytest.raises(ValueError):
        shardpack.open(folder, max_open_shards=-1)
