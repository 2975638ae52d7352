"""shardpack.torch: the Dataset in DataLoaders (0 or 2 workers, fork and spawn), the distributed
Sampler (coverage over ranks, resume), Loader, errors in workers, and RSS per worker."""
import multiprocessing
import threading

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not importable (apt-get install python3-torch)")
from torch.utils.data import BatchSampler, DataLoader  # noqa: E402

import shardpack  # noqa: E402
import shardpack.torch as spt  # noqa: E402
from test_core import damage  # noqa: E402


class Indexed(spt.Dataset):
    """Also returns the indices of a batch, so that tests can see which records came."""

    def __getitems__(self, indices):
        images, labels = super().__getitems__(indices)
        return spt.Batch((images, labels, torch.as_tensor(np.asarray(indices, dtype=np.int64))))


def private_kb():
    """This process's own memory (USS): pages no other process maps. A forked worker shares
    its parent's pages until it writes to them (or Python touches a refcount there)."""
    total = 0
    with open("/proc/self/smaps_rollup") as f:
        for line in f:
            if line.startswith(("Private_Clean:", "Private_Dirty:")):
                total += int(line.split()[1])
    return total


class WithMemory(spt.Dataset):
    def __getitems__(self, indices):
        images, labels = super().__getitems__(indices)
        info = torch.utils.data.get_worker_info()
        return spt.Batch((images, labels, torch.tensor([info.id if info else -1, private_kb()])))


class WithPythonKeys(WithMemory):
    """The control: what a hand-written Dataset does, a Python list with an object per record."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.keys = [f"images/img_{i:06d}.png" for i in range(len(self))]

    def __getitems__(self, indices):
        for i in indices:
            self.keys[i]
        return super().__getitems__(indices)


def batches(loader):
    return [tuple(t.clone() for t in b) for b in loader]


def same(a, b):
    return len(a) == len(b) and all(len(x) == len(y) and all(torch.equal(u, v) for u, v in zip(x, y))
                                    for x, y in zip(a, b))


@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_two_workers_yield_exactly_the_batches_of_zero_workers(built, context):
    tds = spt.Dataset(built["onehot"], layout="NCHW", label="index")

    def loader(workers, **kw):
        sampler = spt.Sampler(tds, shuffle=True, seed=7)
        sampler.set_epoch(3)
        return DataLoader(tds, batch_size=3, sampler=sampler, collate_fn=spt.collate, num_workers=workers,
                          multiprocessing_context=multiprocessing.get_context(context) if workers else None, **kw)

    reference = batches(loader(0))
    assert len(reference) == 4 and reference[0][0].shape == (3, 3, 24, 32) and reference[-1][0].shape[0] == 1
    assert same(batches(loader(2)), reference)
    # The batch-sampler form (each index a whole batch) gives the same batches.
    sampler = spt.Sampler(tds, shuffle=True, seed=7)
    sampler.set_epoch(3)
    dl = DataLoader(tds, sampler=BatchSampler(sampler, 3, drop_last=False), batch_size=None, num_workers=2,
                    multiprocessing_context=multiprocessing.get_context(context))
    assert same(batches(dl), reference)
    # And they are read_batch's.
    order = shardpack.epoch_order(len(tds), seed=7, epoch=3)
    x, y = shardpack.open(built["onehot"]).read_batch(order[:3], label="index")
    assert torch.equal(reference[0][0], torch.from_numpy(x)) and torch.equal(reference[0][1], torch.from_numpy(y))


@pytest.mark.parametrize("drop_last", [True, False])
def test_three_ranks_of_two_workers_cover_every_index(built, drop_last):
    tds = Indexed(built["onehot"], label="index")
    n, world = len(tds), 3
    for epoch in (0, 1):
        seen = []
        for rank in range(world):
            sampler = spt.Sampler(tds, shuffle=True, seed=11, rank=rank, world=world, drop_last=drop_last)
            sampler.set_epoch(epoch)
            dl = DataLoader(tds, batch_size=2, sampler=sampler, collate_fn=spt.collate, num_workers=2)
            got = torch.cat([b[2] for b in dl]).tolist()
            assert len(got) == len(sampler) == (n // world if drop_last else -(-n // world))
            # The same with no workers: the order does not depend on the worker count.
            assert got == list(sampler)
            seen.append(got)
        flat = sum(seen, [])
        if drop_last:
            assert len(flat) == len(set(flat)) == world * (n // world)  # each index at most once
        else:
            assert set(flat) == set(range(n)) and len({len(s) for s in seen}) == 1
        if epoch == 0:
            first = flat
    assert flat != first  # a new permutation per epoch


def test_sampler_resumes_mid_epoch_exactly(built):
    n = 10
    full = spt.Sampler(n, shuffle=True, seed=5, rank=1, world=2)
    full.set_epoch(4)
    everything = list(full)
    s = spt.Sampler(n, shuffle=True, seed=5, rank=1, world=2)
    s.set_epoch(4)
    it = iter(s)
    head = [next(it) for _ in range(2)]
    state = s.state_dict()
    resumed = spt.Sampler(n, shuffle=True, seed=0, rank=1, world=2)  # the seed comes from the state
    resumed.load_state_dict(state)
    resumed.set_epoch(4)  # the usual loop calls set_epoch again: it keeps the position
    rest = list(resumed)
    assert head + rest == everything and len(rest) == len(everything) - 2
    assert list(resumed) == everything  # the pass after the rest is the whole epoch again
    # With a DataLoader that prefetches, the state is what the loop consumed.
    tds = Indexed(built["onehot"], label="index")
    sampler = spt.Sampler(tds, shuffle=True, seed=5)
    dl = DataLoader(tds, batch_size=2, sampler=sampler, collate_fn=spt.collate, num_workers=2)
    it = iter(dl)
    consumed = [next(it)[2] for _ in range(2)]
    state = sampler.state_dict(consumed=4)
    del it
    again = spt.Sampler(tds, shuffle=True, seed=5)
    again.load_state_dict(state)
    rest = [b[2] for b in DataLoader(tds, batch_size=2, sampler=again, collate_fn=spt.collate)]
    assert torch.cat(consumed + rest).tolist() == shardpack.epoch_order(len(tds), seed=5).tolist()
    with pytest.raises(shardpack.Error, match="world"):
        spt.Sampler(n, rank=0, world=3).load_state_dict(state)


def test_loader_batches_equal_read_batch(built):
    ds = shardpack.open(built["onehot"])
    loader = spt.Loader(ds, batch_size=4, shuffle=True, seed=2, threads=2, prefetch=2)
    for epoch in (0, 1):
        got = batches(loader)  # no set_epoch: each complete pass is the next epoch
        order = shardpack.epoch_order(len(ds), seed=2, epoch=epoch)
        assert len(got) == len(loader) == 3 and got[-1][0].shape[0] == 2
        for b, (images, labels) in enumerate(got):
            x, y = ds.read_batch(order[4 * b:4 * b + 4])
            assert images.dtype == torch.float32 and torch.equal(images, torch.from_numpy(x))
            assert torch.equal(labels, torch.from_numpy(y))
    dropped = spt.Loader(ds, batch_size=4, drop_last=True, dtype="uint8", layout="NHWC", label="index")
    got = batches(dropped)
    assert len(got) == len(dropped) == 2 and got[0][0].dtype == torch.uint8 and got[0][1].dtype == torch.int64
    x, y = ds.read_batch(range(4, 8), dtype="uint8", layout="NHWC", label="index")
    assert torch.equal(got[1][0], torch.from_numpy(x)) and torch.equal(got[1][1], torch.from_numpy(y))
    if not torch.cuda.is_available():
        with pytest.warns(UserWarning, match="pin_memory"):
            spt.Loader(ds, batch_size=4, pin_memory=True)


def test_loader_ranks_share_the_epoch(built):
    ds = shardpack.open(built["cls"])
    labels = []
    for rank in range(3):
        loader = spt.Loader(ds, batch_size=5, shuffle=True, seed=1, rank=rank, world=3, label="index")
        loader.set_epoch(2)
        labels.append(torch.cat([b[1] for b in loader]))
    want = ds.read_batch(shardpack.permutation(len(ds), 1, 2), label="index")[1]
    assert len(ds) % 3 == 0 and torch.equal(torch.stack(labels, 1).reshape(-1), torch.from_numpy(want))


def test_loader_resumes_mid_epoch_exactly(built):
    ds = shardpack.open(built["onehot"])
    full = spt.Loader(ds, batch_size=3, shuffle=True, seed=9)
    full.set_epoch(1)
    everything = batches(full)
    first = spt.Loader(ds, batch_size=3, shuffle=True, seed=9, prefetch=3)
    first.set_epoch(1)
    it = iter(first)
    head = [tuple(t.clone() for t in next(it))]
    state = first.state_dict()  # one batch delivered, more prepared ahead
    it.close()
    second = spt.Loader(ds, batch_size=3, shuffle=True, seed=9)
    second.load_state_dict(state)
    second.set_epoch(1)
    assert len(second) == len(everything) - 1
    assert same(head + batches(second), everything)


def test_loader_stops_its_thread_when_abandoned(built):
    before = threading.active_count()
    loader = spt.Loader(built["onehot"], batch_size=2, prefetch=1)
    it = iter(loader)
    next(it)
    it.close()
    assert threading.active_count() == before


def test_a_damaged_record_raises_shardpack_error_in_a_worker_and_in_the_loader(built, tmp_path):
    path, shard = damage(built, tmp_path)
    tds = spt.Dataset(path)
    with pytest.raises(shardpack.Error, match="checksum mismatch"):
        for _ in DataLoader(tds, batch_size=len(tds), collate_fn=spt.collate):
            pass
    with pytest.raises(shardpack.Error, match=rf"{shard}.*checksum mismatch"):
        for _ in DataLoader(tds, batch_size=2, collate_fn=spt.collate, num_workers=1):
            pass
    with pytest.raises(shardpack.Error, match="checksum mismatch"):
        for _ in spt.Loader(path, batch_size=2):
            pass


def worker_growth_kb(tds):
    """Per worker: how much its private memory grew from its 5th batch to the end of an epoch
    (batches of 250, shuffled, 2 workers)."""
    dl = DataLoader(tds, batch_size=250, sampler=spt.Sampler(tds, shuffle=True), collate_fn=spt.collate,
                    num_workers=2)
    per_worker, count = {}, 0
    for images, labels, info in dl:
        count += images.shape[0]
        per_worker.setdefault(int(info[0]), []).append(int(info[1]))
    assert count == len(tds) and sorted(per_worker) == [0, 1]
    return {w: max(kb[5:]) - kb[5] for w, kb in per_worker.items()}


def test_rss_per_worker_stays_flat_over_100k_records(big):
    bound_kb = 2048
    growth = worker_growth_kb(WithMemory(big, label="index"))
    assert len(WithMemory(big)) == 100_000
    print(f"private memory growth per worker over an epoch of 100k records: {growth} kB")
    assert max(growth.values()) < bound_kb, f"workers' private memory grew {growth} kB"
    # The control shows that the bound catches per-record Python objects (their refcounts,
    # touched in the workers, copy the parent's pages one by one).
    control = worker_growth_kb(WithPythonKeys(big, label="index"))
    print(f"the same with a Python list of 100k keys: {control} kB")
    assert min(control.values()) > bound_kb


def test_read_batch_fills_torch_tensors_in_place_through_dlpack(built):
    ds = shardpack.open(built["index"])
    idx = [5, 1, 8]
    x, y = ds.read_batch(idx, label="index")
    images, labels = torch.empty(x.shape), torch.empty(y.shape, dtype=torch.int64)
    address = images.data_ptr()
    got = ds.read_batch(idx, label="index", out=(images, labels))
    assert got[0] is images and got[1] is labels and images.data_ptr() == address
    assert torch.equal(images, torch.from_numpy(x)) and torch.equal(labels, torch.from_numpy(y))
    with pytest.raises(shardpack.Error, match="C-contiguous"):
        ds.read_batch(idx, label="index", out=(torch.empty(3, 24, 32, 3).permute(0, 3, 1, 2), labels))
    with pytest.raises(shardpack.Error, match="int64"):
        ds.read_batch(idx, label="index", out=(images, torch.empty(y.shape, dtype=torch.int32)))


def test_the_process_exits_cleanly_with_a_loader_iterator_still_running(built):
    # Python kills daemon threads at exit wherever they are; one killed inside read_batch would
    # abort the process ("terminate called without an active exception", exit 134).
    import subprocess
    import sys
    code = ("import shardpack.torch as spt\n"
            f"it = iter(spt.Loader({built['onehot']!r}, batch_size=2, prefetch=1, threads=2))\n"
            "next(it)\n")
    for _ in range(3):
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
