"""shardpack.torch: the Dataset in DataLoaders (0 or 2 workers, fork and spawn; PyTorch's default
collate and spt.collate), the distributed Sampler (coverage over ranks, resume), Loader (fresh
tensors and the ring of reused buffers), to_device, errors in workers, and RSS per worker.
The whole file takes about 30 s on 2 cores (the 100k-record RSS test most of it)."""
import multiprocessing
import time
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
        images, labels = spt.collate(super().__getitems__(indices))
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
        images, labels = spt.collate(super().__getitems__(indices))
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
    # On another world the rest of the epoch is split between the new ranks (more in test_mix.py).
    thirds = [spt.Sampler(tds, shuffle=True, seed=5, rank=r, world=3) for r in range(3)]
    for t in thirds:
        t.load_state_dict(state)
    assert [len(t) for t in thirds] == [2, 2, 2]
    assert sorted(sum((list(t) for t in thirds), [])) == sorted(shardpack.epoch_order(len(tds), seed=5)[4:].tolist())
    with pytest.raises(shardpack.Error, match="n=10"):
        spt.Sampler(n + 1, rank=0, world=3).load_state_dict(state)  # another dataset


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
    dropped = spt.Loader(ds, batch_size=4, shuffle=False, drop_last=True, dtype="uint8", layout="NHWC", label="index")
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


def test_read_batch_refuses_a_torch_out_tensor_that_requires_grad(built):
    ds = shardpack.open(built["index"])
    idx = [5, 1, 8]
    x, y = ds.read_batch(idx, label="index")
    images, labels = torch.zeros(x.shape, requires_grad=True), torch.empty(y.shape, dtype=torch.int64)
    with pytest.raises(ValueError, match="out images is a tensor that requires grad"):
        ds.read_batch(idx, label="index", out=(images, labels))
    assert torch.count_nonzero(images.detach()) == 0  # nothing was written into it
    with pytest.raises(shardpack.ArgumentValueError, match="requires grad"):
        ds.read_batch(idx, label="onehot", out=(torch.empty(x.shape), torch.zeros((3, 24, 32, 4), requires_grad=True)))
    # Its detached view is the caller's explicit choice: written in place.
    ds.read_batch(idx, label="index", out=(images.detach(), labels))
    assert torch.equal(images.detach(), torch.from_numpy(x))


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


# ---------------------------------------------------------------------------------------------
# PyTorch's defaults: DataLoader(spt.Dataset(path), batch_size=B, num_workers=W), default collate

class PerItem(spt.Dataset):
    """What a DataLoader without __getitems__ support does (PyTorch before it called
    __getitems__): dataset[i] per index, then the default collate."""
    __getitems__ = None


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("dataset", ["onehot", "index", "cls"])
def test_dataloader_defaults_yield_read_batchs_batches(built, dataset, workers):
    ds = shardpack.open(built[dataset])
    want_x, want_y = ds.read_batch(range(len(ds)))  # float32 NCHW ImageNet one-hot: the defaults
    for kind in (spt.Dataset, PerItem):
        # The default collate, the default (sequential) sampler: the __getitems__ path of PyTorch
        # 1.13 and 2.x, and the per-item path.
        got = list(DataLoader(kind(built[dataset]), batch_size=4, num_workers=workers))
        assert [len(b) for b in got] == [2] * 3 and got[0][0].shape == (4,) + want_x.shape[1:]
        assert torch.equal(torch.cat([b[0] for b in got]), torch.from_numpy(want_x)), kind
        assert torch.equal(torch.cat([b[1] for b in got]), torch.from_numpy(want_y)), kind
    # Shuffled by the DataLoader, with index labels: each batch is read_batch of its indices.
    class WithIndex(spt.Dataset):  # per-sample triples, as a user's subclass might add a field
        def __getitems__(self, indices):
            return [(image, label, int(i)) for (image, label), i in zip(super().__getitems__(indices), indices)]

    tds = WithIndex(built[dataset], label="index", dtype="uint8")
    gen = torch.Generator().manual_seed(4)
    got = list(DataLoader(tds, batch_size=5, shuffle=True, num_workers=workers, generator=gen))
    x, y = ds.read_batch(range(len(ds)), label="index", dtype="uint8")
    for images, labels, idx in got:
        assert torch.equal(images, torch.from_numpy(x[idx.numpy()]))
        assert torch.equal(labels, torch.from_numpy(y[idx.numpy()]))
    assert sorted(torch.cat([b[2] for b in got]).tolist()) == list(range(len(ds)))


def test_samples_are_one_read_batch_seen_as_a_list_of_pairs(built):
    tds = spt.Dataset(built["index"], label="index")
    ds = tds.dataset
    samples = tds.__getitems__([7, 2, 5])
    assert isinstance(samples, spt.Samples) and len(samples) == 3
    assert samples.indices.tolist() == [7, 2, 5]
    x, y = ds.read_batch([7, 2, 5], label="index")
    image, label = samples[1]
    assert torch.equal(image, torch.from_numpy(x[1])) and torch.equal(label, torch.from_numpy(y[1]))
    assert [i.shape for i, _ in samples] == [x.shape[1:]] * 3 and len(samples[1:]) == 2
    # The default collate stacks them; spt.collate hands on the very batch that was read.
    stacked = torch.utils.data.default_collate(samples) if hasattr(torch.utils.data, "default_collate") else \
        torch.utils.data.dataloader.default_collate(samples)
    assert torch.equal(stacked[0], torch.from_numpy(x)) and torch.equal(stacked[1], torch.from_numpy(y))
    fast = spt.collate(samples)
    assert type(fast) is tuple and fast[0].data_ptr() == samples.batch()[0].data_ptr()
    # A whole batch by dataset[[...]] (the batch-sampler form), a sample by dataset[i].
    images, labels = tds[[7, 2, 5]]
    assert torch.equal(images, torch.from_numpy(x)) and torch.equal(labels, torch.from_numpy(y))
    assert torch.equal(tds[-1][0], torch.from_numpy(ds.read_batch([len(ds) - 1])[0][0]))
    with pytest.raises(shardpack.IndexOutOfRange):
        tds[len(ds)]
    with pytest.raises(IndexError):
        samples[3]
    with pytest.raises(shardpack.Error, match="1-d sequence of integers"):
        tds.__getitems__([[1, 2]])


def test_fast_path_collate_reads_into_shared_memory_in_workers(built):
    tds = spt.Dataset(built["onehot"], label="index")
    dl = DataLoader(tds, batch_size=4, collate_fn=spt.collate, num_workers=2)
    got = list(dl)
    x, y = tds.dataset.read_batch(range(len(tds)), label="index")
    assert torch.equal(torch.cat([b[0] for b in got]), torch.from_numpy(x))
    assert torch.equal(torch.cat([b[1] for b in got]), torch.from_numpy(y))
    assert all(b[0].is_shared() for b in got)  # written by read_batch in the worker's shared memory


# ---------------------------------------------------------------------------------------------
# The shared defaults (COORDINATION.md): shuffle=True, seed=0, drop_last=False, epoch 0, +1 a pass

def test_loader_and_sampler_defaults(built):
    ds = shardpack.open(built["cls"])
    loader = spt.Loader(ds, batch_size=5, label="index")
    sampler = spt.Sampler(ds)
    assert loader.sampler.shuffle and sampler.shuffle and not loader.drop_last and not sampler.drop_last
    assert len(loader) == -(-len(ds) // 5) and len(list(sampler)) == len(ds)
    _, ids = ds.read_batch(range(len(ds)), label="index")
    for epoch in (0, 1):
        got = torch.cat([b[1] for b in loader])
        assert torch.equal(got, torch.from_numpy(ids[shardpack.epoch_order(len(ds), seed=0, epoch=epoch)]))
    assert loader.sampler.epoch == 2
    assert list(sampler) == shardpack.epoch_order(len(ds), seed=0, epoch=0).tolist()
    for bad in (dict(seed=-1), dict(threads=-1), dict(prefetch=0), dict(batch_size=0)):
        with pytest.raises(shardpack.Error):
            spt.Loader(ds, **{"batch_size": 5, **bad})


# ---------------------------------------------------------------------------------------------
# Loader(reuse_buffers=True): the ring

def read_back(ds, loader, epoch, **options):
    """The batches an epoch of `loader` must deliver, from read_batch."""
    order = shardpack.epoch_order(len(ds), seed=loader.sampler.seed, epoch=epoch)
    b = loader.batch_size
    return [ds.read_batch(order[k:k + b], **options) for k in range(0, len(order), b)]


@pytest.mark.parametrize("dataset", ["onehot", "cls"])
def test_ring_reuses_its_buffers_and_delivers_read_batchs_batches(built, dataset):
    ds = shardpack.open(built[dataset])
    loader = spt.Loader(ds, batch_size=1, reuse_buffers=True, prefetch=2, threads=2)
    addresses = set()
    for epoch in (0, 1, 2):
        want = read_back(ds, loader, epoch)
        n = 0
        for (images, labels), (x, y) in zip(loader, want):
            assert torch.equal(images, torch.from_numpy(x)) and torch.equal(labels, torch.from_numpy(y))
            addresses.add(images.data_ptr())
            n += 1
        assert n == len(want) == len(ds) > loader.prefetch + 3
    # 3 epochs of 10+ batches in at most prefetch + 3 = 5 buffers, allocated once.
    assert 3 <= loader.buffers_allocated <= 5 and len(addresses) == loader.buffers_allocated
    fresh = spt.Loader(ds, batch_size=1)
    assert fresh.buffers_allocated == 0


def test_ring_never_overwrites_a_batch_that_is_still_referenced(built):
    ds = shardpack.open(built["onehot"])
    loader = spt.Loader(ds, batch_size=1, reuse_buffers=True, prefetch=1, threads=2)
    for epoch in (0, 1):
        want = read_back(ds, loader, epoch)
        kept, views, arrays = {}, {}, {}
        for k, (images, labels) in enumerate(loader):
            if k % 3 == 0:
                kept[k] = (images, labels)            # the batch itself
            elif k % 3 == 1:
                views[k] = (images[0, 1], labels[:, 2:])  # views only: they share its memory
            else:
                arrays[k] = images.numpy()             # a NumPy view of it
        # Every batch still referenced holds its own pixels, after 10 later batches went through
        # a ring of 4 buffers.
        for k, (images, labels) in kept.items():
            assert torch.equal(images, torch.from_numpy(want[k][0])) and torch.equal(labels, torch.from_numpy(want[k][1]))
        for k, (image, label) in views.items():
            assert torch.equal(image, torch.from_numpy(want[k][0][0, 1]))
            assert torch.equal(label, torch.from_numpy(want[k][1][:, 2:]))
        for k, array in arrays.items():
            assert np.array_equal(array, want[k][0])
    assert loader.buffers_allocated > loader.prefetch + 3  # the kept ones were replaced, not reused
    # Once dropped, the ring goes back to reusing: an epoch with nothing kept allocates nothing.
    del kept, views, arrays, images, labels, image, label, array
    before = loader.buffers_allocated
    for _ in loader:
        pass
    for _ in loader:
        pass
    assert loader.buffers_allocated == before


def test_ring_serves_two_live_iterators_over_one_loader(built):
    """An evaluation pass started inside a training pass, or zip(loader, loader): two producers
    share the ring, and each iterator gets its own epoch's batches, exact. The ring gave the
    second producer "min() arg is an empty sequence" once both had filled their queues."""
    ds = shardpack.open(built["onehot"])
    loader = spt.Loader(ds, batch_size=1, reuse_buffers=True, prefetch=2, threads=2, shuffle=False)
    want = [ds.read_batch([i]) for i in range(len(ds))]

    def check(k, batch):
        images, labels = batch
        assert torch.equal(images, torch.from_numpy(want[k][0])) and torch.equal(labels, torch.from_numpy(want[k][1]))

    first, second = iter(loader), iter(loader)
    check(0, next(first))
    time.sleep(0.5)  # its producer fills its queue and holds one slot more
    check(0, next(second))
    time.sleep(0.5)
    for k, batch in enumerate(second, start=1):
        check(k, batch)
    for k, batch in enumerate(first, start=1):
        check(k, batch)
    # prefetch + 3 places per live iterator: two at once allocate no more than that, each pass.
    assert loader.buffers_allocated <= 2 * (loader.prefetch + 3)
    before, n = loader.buffers_allocated, 0
    for a, b in zip(loader, loader):
        check(n, a)
        check(n, b)
        n += 1
    assert n == len(ds) > loader.prefetch + 3
    assert loader.buffers_allocated - before <= 2 * (loader.prefetch + 3)


class FakeEvent:
    """Stands for a CUDA event (no GPU here): synchronize() takes a while, then it is done."""
    log = []

    def __init__(self, *args, **kwargs):
        self.done = False

    def record(self, stream=None):
        pass

    def synchronize(self):
        time.sleep(0.005)
        self.done = True
        FakeEvent.log.append(("synchronized", self))


def test_ring_waits_for_the_copys_event_before_writing_a_buffer_again(built, monkeypatch):
    """A non_blocking copy to the GPU may still be reading a batch when the loop drops it: the
    ring records an event when the loop asks for the next batch (after the copy was enqueued)
    and waits for it before writing that buffer again. Here with stand-in events (no GPU)."""
    ds = shardpack.open(built["index"])
    log = FakeEvent.log
    log.clear()
    monkeypatch.setattr(spt, "_cuda_event_now", lambda: FakeEvent())
    release = spt._Ring.release_unreferenced

    def logged_release(ring, record_event):
        release(ring, record_event)
        for slot in ring._slots:
            if slot is not None and slot.state == "free":
                log.extend(("released", slot, e) for e in slot.events)
    monkeypatch.setattr(spt._Ring, "release_unreferenced", logged_release)

    class Checked(shardpack.Dataset):
        def read_batch(self, indices, **kw):
            if kw.get("out") is not None:
                log.append(("write", spt._slots_by_address[kw["out"][0].ctypes.data], None))
            return super().read_batch(indices, **kw)

    loader = spt.Loader(Checked(built["index"]), batch_size=1, reuse_buffers=True, prefetch=1, label="index")
    for epoch in (0, 1):
        want = read_back(ds, loader, epoch, label="index")
        for (images, labels), (x, y) in zip(loader, want):
            assert torch.equal(images, torch.from_numpy(x))
            time.sleep(0.002)
    # Every write into a slot comes after the synchronisation of every event the slot was
    # released with before it.
    synchronized, pending, writes, reuses = set(), {}, 0, 0
    for entry in log:
        if entry[0] == "synchronized":
            synchronized.add(id(entry[1]))
        elif entry[0] == "released":
            pending.setdefault(id(entry[1]), set()).add(id(entry[2]))
        else:
            writes += 1
            waiting = pending.pop(id(entry[1]), set())
            reuses += bool(waiting)
            assert waiting <= synchronized, "a buffer was written before the copy out of it was done"
    assert writes == 2 * len(ds) and reuses >= len(ds) and loader.buffers_allocated <= 4


def test_ring_slot_comes_back_only_when_unreferenced_and_its_event_is_done():
    # The waiting itself, on the ring: a released slot comes back only after its event is done.
    ring = spt._Ring(1, lambda: (np.zeros(4, np.uint8), np.zeros(2, np.int64)))
    slot = ring.acquire()
    ring.delivered(slot)
    held = torch.from_numpy(slot.images)[1:]  # the loop holds a view
    ring.release_unreferenced(FakeEvent)
    assert slot.state == "delivered"          # still referenced: not released
    del held
    ring.release_unreferenced(FakeEvent)
    event = slot.events[0]
    assert slot.state == "free" and not event.done
    assert ring.acquire() is slot and event.done and ring.allocations == 1


def test_to_device_records_its_copy_on_the_ring_slot(built, monkeypatch):
    """to_device's copies to a GPU make the ring slot they read from wait (an event on the copy's
    stream), even if the loop drops the batch at once. The CUDA calls are stood in for."""
    loader = spt.Loader(built["index"], batch_size=2, reuse_buffers=True, dtype="uint8", label="index")
    images, labels = next(iter(loader))
    slot = spt._slots_by_address[images.data_ptr()]
    monkeypatch.setattr(torch.cuda, "Event", FakeEvent)
    spt._after_copy((images, labels), stream=None)
    assert len(slot.events) == 1 and isinstance(slot.events[0], FakeEvent)
    spt._after_copy((torch.zeros(3),), stream=None)  # not from a ring: nothing to record
    assert len(slot.events) == 1


# ---------------------------------------------------------------------------------------------
# to_device: uint8 + index labels in, converted on the device (here the CPU device)

@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize("dataset", ["onehot", "index", "cls", "cls-raw"])
def test_to_device_equals_read_batchs_float32_one_hot(built, dataset, layout):
    ds = shardpack.open(built[dataset])
    k = len(ds.classes)
    for normalize in ("imagenet", None, ((0.5, 0.4, 0.3) if ds.image_shape[2] == 3 else 0.5, 0.25)):
        loader = spt.Loader(ds, batch_size=4, dtype="uint8", label="index", layout=layout, reuse_buffers=True)
        want = read_back(ds, loader, 0, layout=layout, normalize=normalize)
        for batch, (x, y) in zip(loader, want):
            images, labels = spt.to_device(batch, "cpu", normalize=normalize, onehot=k, layout=layout)
            assert images.dtype == torch.float32 and torch.equal(images, torch.from_numpy(x)), normalize
            assert labels.dtype == torch.float32 and torch.equal(labels, torch.from_numpy(y))
            # New tensors: nothing of the ring's buffer is kept.
            assert images.data_ptr() != batch[0].data_ptr() and labels.data_ptr() != batch[1].data_ptr()
    # Without onehot the labels are moved as they are.
    batch = next(iter(spt.Loader(ds, batch_size=3, dtype="uint8", label="index")))
    assert torch.equal(spt.to_device(batch, "cpu")[1], batch[1])


def test_to_device_ignored_pixels_and_errors():
    images = torch.zeros((1, 3, 2, 2), dtype=torch.uint8)
    labels = torch.tensor([[[0, 255], [2, 1]]], dtype=torch.uint8)
    _, onehot = spt.to_device((images, labels), "cpu", onehot=3)
    assert onehot.shape == (1, 3, 2, 2) and onehot[0, :, 0, 1].tolist() == [0.0, 0.0, 0.0]
    assert onehot.sum().item() == 3 and onehot[0, 2, 1, 0].item() == 1.0
    with pytest.raises(ValueError, match="uint8"):
        spt.to_device((images.float(), labels), "cpu")
    with pytest.raises(ValueError, match="index labels"):
        spt.to_device((images, labels.float()), "cpu", onehot=3)
    with pytest.raises(ValueError, match="normalize"):
        spt.to_device((images, labels), "cpu", normalize="mnist")
    with pytest.raises(ValueError, match="2 values"):
        spt.to_device((images, labels), "cpu", normalize=((0.1, 0.2), 0.5))
    with pytest.raises(TypeError, match="pair"):
        spt.to_device(images, "cpu")


def test_uint8_index_labels_through_loader_dataset_and_to_device(built):
    """The recommended delivery: uint8 images and uint8 class ids (label_dtype="uint8", the
    classes fit), 1 + 1/3 byte a pixel for RGB; to_device gives read_batch's float32 one-hot."""
    ds = shardpack.open(built["index"])
    k = len(ds.classes)
    loader = spt.Loader(ds, batch_size=4, dtype="uint8", label="index", label_dtype="uint8", reuse_buffers=True)
    want = read_back(ds, loader, 0)  # float32 NCHW ImageNet one-hot
    for batch, (x, y) in zip(loader, want):
        assert batch[0].dtype == torch.uint8 and batch[1].dtype == torch.uint8 and batch[1].shape == (len(x),) + x.shape[2:]
        images, labels = spt.to_device(batch, "cpu", onehot=k)
        assert torch.equal(images, torch.from_numpy(x)) and torch.equal(labels, torch.from_numpy(y))
    tds = spt.Dataset(ds, dtype="uint8", label="index", label_dtype="uint8")
    got = list(DataLoader(tds, batch_size=4, num_workers=2))
    _, ids = ds.read_batch(range(len(ds)), label="index")
    assert got[0][1].dtype == torch.uint8 and torch.equal(torch.cat([b[1] for b in got]).long(), torch.from_numpy(ids))
    with pytest.raises(ValueError):
        spt.Loader(ds, batch_size=4, dtype="uint8", normalize="imagenet")  # normalize is for float32


def test_loader_and_workers_batch_a_dataset_of_one_size_built_without_size(built, tmp_path):
    """A build without --size whose images all have one size (issue #35): the Loader, with new
    tensors and with reused buffers, and the torch Dataset in a worker (shared memory shaped by
    batch_spec) give the batches of the same list built with --size."""
    import os
    from conftest import run, tool
    src = os.path.dirname(built.class_dict)  # 40x30 images and masks
    for name, size in (("unsized", []), ("sized", ["--size", "40x30"])):
        run(tool("shardpack"), "-q", "build", "--csv", f"{src}/list.csv", "--classes", built.class_dict, "--out",
            tmp_path / name, *size)
    ds, sized = shardpack.open(tmp_path / "unsized"), shardpack.open(tmp_path / "sized")
    assert ds.image_shape is None and sized.image_shape == (30, 40, 3)
    for reuse in (False, True):
        got = [(x.clone(), y.clone()) for x, y in spt.Loader(ds, batch_size=4, seed=1, reuse_buffers=reuse)]
        want = list(spt.Loader(sized, batch_size=4, seed=1))
        assert len(got) == len(want) == 3
        for (x, y), (wx, wy) in zip(got, want):
            assert torch.equal(x, wx) and torch.equal(y, wy)
    loader = DataLoader(spt.Dataset(ds), batch_size=4, num_workers=1, collate_fn=spt.collate)
    first = next(iter(loader))
    assert torch.equal(first[0], torch.from_numpy(sized.read_batch(range(4))[0]))
