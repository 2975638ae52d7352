"""shardpack.open(io=...): mmap, pread, stream and blocks read the same bytes; raw records are
zero-copy views only where the shard is mapped; io="auto" chooses mmap for data in the page cache,
stream for cold data that fits cache_bytes and blocks (logged once, and the loaders' order="auto"
then takes the blocks order) for cold data that does not; bad values are refused; the choice
survives pickling. Runs in a few seconds."""
import glob
import logging
import os
import pickle

import numpy as np
import pytest

import shardpack


@pytest.mark.parametrize("name", ["onehot", "raw", "cls", "cls-raw"])
def test_pread_reads_what_mmap_reads(built, name):
    m = shardpack.open(built[name], io="mmap")
    p = shardpack.open(built[name], io="pread")
    a = shardpack.open(built[name])
    s = shardpack.open(built[name], io="stream")
    b = shardpack.open(built[name], io="blocks", cache_bytes=64 << 10)
    assert (m.io, p.io, a.io, s.io, b.io) == ("mmap", "pread", "mmap", "stream", "blocks")  # a: just built, resident
    assert (m.preferred_order, s.preferred_order, b.preferred_order) == ("global", "global", "blocks")
    order = np.arange(len(m))[::-1].copy()
    for ds in (p, a, s, b):
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
    for bad in (0, -5):
        with pytest.raises(ValueError, match="cache_bytes"):
            shardpack.open(built["raw"], cache_bytes=bad)
    with pytest.raises(TypeError):
        shardpack.open(built["raw"], cache_bytes=1.5)
    with pytest.raises(ValueError, match="io_threads"):
        shardpack.open(built["raw"], io="stream", io_threads=0)


def _drop(folder):
    for path in glob.glob(os.path.join(folder, "shard-*.spk")):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def _evict(folder):
    """Drops the folder's shards from the page cache (fsynced first: dirty pages stay). False
    where the file system keeps them (tmpfs). The reader's own look (an open) reads the shards'
    headers and indexes, which on these tiny shards are most of their pages: dropped again after."""
    _drop(folder)
    probe = shardpack.open(folder, io="auto", cache_bytes=1 << 40)
    cold = probe.io == "stream"
    del probe
    _drop(folder)
    return cold


def test_auto_streams_cold_data_that_fits_and_reads_blocks_of_the_rest(built, tmp_path, caplog):
    import shardpack.torch as spt

    folder = built.copy("onehot", tmp_path / "cold")
    if not _evict(folder):
        pytest.skip("the file system keeps evicted pages (tmpfs?): no cold data to test with here")
    warm = shardpack.open(built["onehot"], io="pread")
    size = warm.data_bytes
    assert _evict(folder)
    ds = shardpack.open(folder, cache_bytes=2 * size)
    assert (ds.io, ds.preferred_order, ds.cache_bytes) == ("stream", "global", 2 * size)
    for i in range(len(ds)):
        assert np.array_equal(ds[i][0], warm[i][0]) and np.array_equal(ds[i][1], warm[i][1])
    counters = ds.io_counters()
    assert counters["extent_bytes"] == size and counters["peak_cached_bytes"] <= 2 * size
    loader = spt.Loader(ds, 4, seed=1)
    assert loader.sampler.order == "global"
    del ds, loader
    assert _evict(folder)
    with caplog.at_level(logging.WARNING, logger="shardpack"):
        big = shardpack.open(folder, cache_bytes=size // 2)
        _drop(folder)  # the open read the tiny shards' headers and indexes (see _evict)
        again = shardpack.open(folder, cache_bytes=size // 2)
    assert (big.io, big.preferred_order, again.io) == ("blocks", "blocks", "blocks")
    said = [r.getMessage() for r in caplog.records if r.name == "shardpack" and "reader's cache" in r.getMessage()]
    assert len(said) == 1 and "blocks order" in said[0] and "cache_bytes" in said[0]  # once a process
    # The loaders' order="auto" takes the blocks order, and the batches are right.
    loader = spt.Loader(big, 4, seed=1, dtype="uint8", label="index", label_dtype="uint8")
    assert loader.sampler.order == "blocks"
    forced = spt.Loader(big, 4, seed=1, order="global", dtype="uint8", label="index", label_dtype="uint8")
    assert forced.sampler.order == "global"
    seen = []
    for images, labels in loader:
        seen.append((images.numpy().copy(), labels.numpy().copy()))
    order = shardpack.epoch_order(big, 1, 0, order="blocks")
    expect = warm.read_batch(order, dtype="uint8", label="index", label_dtype="uint8")
    assert np.array_equal(np.concatenate([b[0] for b in seen]), expect[0])
    assert np.array_equal(np.concatenate([b[1] for b in seen]), expect[1])
    assert big.io_counters()["peak_cached_bytes"] <= size // 2
    # Every choice can be forced on the Loader too.
    reopened = spt.Loader(big, 4, io="stream", cache_bytes=4 * size)
    assert (reopened.dataset.io, reopened.dataset.cache_bytes, reopened.sampler.order) == ("stream", 4 * size, "global")


def test_a_stream_the_page_cache_dropped_is_read_again_at_the_next_epoch(built, tmp_path):
    import shardpack.torch as spt

    folder = built.copy("onehot", tmp_path / "epochs")
    if not _evict(folder):
        pytest.skip("the file system keeps evicted pages (tmpfs?): no dropped pages to test with here")
    warm = shardpack.open(built["onehot"], io="pread")
    size = warm.data_bytes
    ds = shardpack.open(folder, io="stream")
    # keep_decoded=False: with the decoded copy (the Loader's default) nothing is read again
    loader = spt.Loader(ds, 4, seed=2, dtype="uint8", label="index", label_dtype="uint8", keep_decoded=False)
    expect = warm.read_batch(shardpack.epoch_order(warm, 2, 1), dtype="uint8", label="index", label_dtype="uint8")
    for epoch in range(2):
        loader.set_epoch(epoch)
        got = [(i.numpy().copy(), l.numpy().copy()) for i, l in loader]
        counters = ds.io_counters()
        assert counters["extent_bytes"] == size  # epoch 1: in the page cache still, nothing read again
        assert counters["held_bytes"] == counters["peak_held_bytes"] == 0  # the page cache holds it, not the reader
    assert np.array_equal(np.concatenate([b[0] for b in got]), expect[0])
    assert not ds.begin_epoch()
    _drop(folder)
    loader.set_epoch(2)  # the Loader's epoch begins with the check: streamed again, whole
    got = [(i.numpy().copy(), l.numpy().copy()) for i, l in loader]
    assert ds.io_counters()["extent_bytes"] == 2 * size
    expect = warm.read_batch(shardpack.epoch_order(warm, 2, 2), dtype="uint8", label="index", label_dtype="uint8")
    assert np.array_equal(np.concatenate([b[1] for b in got]), expect[1])
    assert not shardpack.open(folder, io="pread").begin_epoch()  # only a stream has anything to do


@pytest.mark.parametrize("name", ["onehot", "raw", "cls"])
def test_keep_decoded_decodes_a_streamed_dataset_as_it_arrives_and_the_loader_reads_the_copy(built, tmp_path, name):
    import time

    import shardpack.torch as spt

    folder = built.copy(name, tmp_path / "decoded")
    _evict(folder)  # cold where the file system lets it; io="stream" reads through the engine either way
    warm = shardpack.open(built[name], io="pread")
    ds = shardpack.open(folder, io="stream")
    assert ds.decoded_count == 0
    assert not shardpack.open(folder, io="pread").keep_decoded()  # only a stream keeps one
    size = ds.data_bytes  # a cache that holds the stream but not a decoded copy beside it
    assert not shardpack.open(folder, io="stream", cache_bytes=size + 1024).keep_decoded()
    assert ds.keep_decoded() and ds.keep_decoded()  # asked twice: one copy
    assert ds.decoded_count == 0  # nothing is decoded before the first read
    loader = spt.Loader(ds, 5, seed=4, crop=(16, 16), crop_position="random", hflip=0.5)
    options = dict(crop=(16, 16), crop_position="random", hflip=0.5, seed=4)
    for epoch in range(3):
        loader.set_epoch(epoch)
        got = [(i.numpy().copy(), l.numpy().copy()) for i, l in loader]
        order = shardpack.epoch_order(warm, 4, epoch)
        expect = warm.read_batch(order, epoch=epoch, **options)
        assert np.array_equal(np.concatenate([b[0] for b in got]), expect[0])
        assert np.array_equal(np.concatenate([b[1] for b in got]), expect[1])
        if epoch == 0:  # the copy's thread may still be finishing
            deadline = time.monotonic() + 30
            while ds.decoded_count < len(ds) and time.monotonic() < deadline:
                time.sleep(0.01)
            assert ds.decoded_count == len(ds)
            read = ds.io_counters()["extent_bytes"]
            assert read == ds.data_bytes
            _drop(folder)  # complete: a later epoch streams nothing again, wherever the pages went
    assert ds.io_counters()["extent_bytes"] == read
    assert ds.keep_decoded()


def test_the_loader_keeps_a_streamed_datasets_decoded_copy_unless_told_not_to(built, tmp_path):
    import time

    import shardpack.torch as spt

    folder = built.copy("cls", tmp_path / "loader-copy")
    warm = shardpack.open(built["cls"], io="pread")
    expect = warm.read_batch(shardpack.epoch_order(warm, 3, 0), dtype="uint8", label="index")
    for keep in (True, False):
        ds = shardpack.open(folder, io="stream")
        loader = spt.Loader(ds, 7, seed=3, dtype="uint8", label="index") if keep else \
            spt.Loader(ds, 7, seed=3, dtype="uint8", label="index", keep_decoded=False)
        loader.set_epoch(0)
        got = [(i.numpy().copy(), l.numpy().copy()) for i, l in loader]
        assert np.array_equal(np.concatenate([b[0] for b in got]), expect[0])
        assert np.array_equal(np.concatenate([b[1] for b in got]), expect[1])
        deadline = time.monotonic() + 30
        while keep and ds.decoded_count < len(ds) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert ds.decoded_count == (len(ds) if keep else 0)
    assert ds.decoded_bytes > ds.data_bytes  # zstd records: the copy saves their decoding
    # raw records decode to their stored bytes: the page cache holds them already, no copy
    raw = shardpack.open(built.copy("raw", tmp_path / "loader-raw"), io="stream")
    assert 0 < raw.decoded_bytes < raw.data_bytes
    spt.Loader(raw, 7)
    assert raw.decoded_count == 0 and raw.keep_decoded()  # asked for, it is still kept
    # where the reader does not stream there is no copy to keep, and the Loader reads as before
    mapped = shardpack.open(folder, io="mmap")
    spt.Loader(mapped, 7)
    assert mapped.decoded_count == 0 and not mapped.keep_decoded()
    with pytest.raises(shardpack.ArgumentTypeError, match="Loader: keep_decoded"):
        spt.Loader(mapped, 7, keep_decoded="yes")


def test_io_survives_pickling(built):
    p = shardpack.open(built["onehot"], io="pread")
    q = pickle.loads(pickle.dumps(p))
    assert q.io == "pread"
    s = shardpack.open(built["onehot"], io="blocks", cache_bytes=1 << 20)
    t = pickle.loads(pickle.dumps(s))
    assert (t.io, t.cache_bytes) == ("blocks", 1 << 20)
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


def test_blocks_layout_fits_the_cache_and_a_resume_keeps_the_saved_one(built):
    torch_sp = pytest.importorskip("shardpack.torch", reason="torch is not installed")
    path = built["cls"]
    mapped = shardpack.open(path, io="mmap")
    per_record = mapped.data_bytes / len(mapped)
    assert mapped.blocks_layout == (max(1, round((4 << 20) / per_record)), 16)
    small = shardpack.open(path, io="blocks", cache_bytes=12 << 20)
    block, window = small.blocks_layout
    # Three windows fit the cache: 12 MiB gives 2 windows of 2 MiB blocks.
    assert (block, window) == (max(1, round((2 << 20) / per_record)), 2)
    assert shardpack.open(path, io="blocks", cache_bytes=48 << 20).blocks_layout[1] == 4
    s = torch_sp.Sampler(small, seed=3, drop_last=True)
    assert s.order == "blocks"
    everything = list(s)
    assert everything == shardpack.epoch_order(small, 3, 0, drop_last=True, order="blocks", block=block,
                                               window=window).tolist()
    it = iter(s)
    head = [next(it) for _ in range(min(5, len(everything)))]
    state = s.state_dict()
    assert (state["block"], state["window"]) == (block, window)
    # Reopened with another cache (other defaults): the resume reads the order it was saved in.
    larger = shardpack.open(path, io="blocks", cache_bytes=1 << 30)
    assert larger.blocks_layout != (block, window)
    resumed = torch_sp.Sampler(larger, seed=3, drop_last=True)
    resumed.load_state_dict(state)
    assert head + list(resumed) == everything


_RANK_SCRIPT = r"""
import json, os, sys
import torch.distributed as dist
import shardpack, shardpack.torch as spt
path, out = sys.argv[1], sys.argv[2]
dist.init_process_group("gloo", init_method="env://")
rank = dist.get_rank()
# The ranks' readers choose apart: rank 0 reads blocks through a small cache, rank 1 maps the files.
ds = shardpack.open(path, io="blocks", cache_bytes=12 << 20) if rank == 0 else shardpack.open(path, io="mmap")
s = spt.Sampler(ds, seed=5)
json.dump({"order": s.order, "state": s.state_dict(), "indices": list(s), "preferred": ds.preferred_order},
          open(out, "w"))
dist.destroy_process_group()
"""


def test_ranks_of_a_distributed_job_agree_on_the_auto_order(built, tmp_path):
    """Two torch.distributed ranks (gloo, on this machine) whose readers choose apart read one
    order: every sample once across the ranks (without the agreement, rank 0 would read the
    blocks order and rank 1 the global one)."""
    pytest.importorskip("torch.distributed", reason="torch is not installed")
    import socket
    import subprocess
    import sys
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    script = tmp_path / "rank.py"
    script.write_text(_RANK_SCRIPT)
    procs = []
    for rank in range(2):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        procs.append(subprocess.Popen([sys.executable, str(script), built["cls"], str(tmp_path / f"{rank}.json")],
                                      env=env, stderr=subprocess.PIPE, text=True))
    for p in procs:
        _, err = p.communicate(timeout=120)
        if p.returncode != 0 and "gloo" in err.lower() and "unsupported" in err.lower():
            pytest.skip(f"torch.distributed gloo cannot run here: {err.strip()[-200:]}")
        assert p.returncode == 0, err
    import json
    got = [json.loads((tmp_path / f"{rank}.json").read_text()) for rank in range(2)]
    assert [g["preferred"] for g in got] == ["blocks", "global"]
    assert [g["order"] for g in got] == ["blocks", "blocks"]
    assert got[0]["state"]["block"] == got[1]["state"]["block"] and got[0]["state"]["window"] == got[1]["state"]["window"]
    n = len(shardpack.open(built["cls"]))
    together = got[0]["indices"] + got[1]["indices"]
    assert sorted(set(together)) == list(range(n))  # every sample, each rank its share (padding repeats a few)
    assert len(together) == 2 * -(-n // 2)
