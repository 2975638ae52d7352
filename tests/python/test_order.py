"""shardpack.epoch_order and permutation: the global and the locality-aware ("blocks") shuffles,
computed by include/shardpack/order.hpp (the values pinned here are those of tests/test_order.cpp),
through the torch Sampler and Loader: every index once per epoch, equal shares per rank, resume,
a new order per epoch, blocks within shards, and statistics that show the order is shuffled.
A few seconds."""
import numpy as np
import pytest

import shardpack

torch = pytest.importorskip("torch", reason="PyTorch is not importable (apt-get install python3-torch)")
import shardpack.torch as spt  # noqa: E402
from torch.utils.data import DataLoader  # noqa: E402


def test_the_orders_are_those_of_the_cpp_header():
    # The same values as tests/test_order.cpp: one implementation for C++ and Python.
    assert shardpack.permutation(10, 1, 2).tolist() == [2, 0, 9, 3, 4, 1, 5, 6, 8, 7]
    assert shardpack.epoch_order(12, 1, 2, order="blocks", block=3, window=2).tolist() == \
        [5, 9, 4, 11, 10, 3, 0, 2, 1, 8, 6, 7]
    assert shardpack.epoch_order(10, 1, 2, rank=1, world=2).tolist() == [0, 3, 1, 6, 7]
    o = shardpack.epoch_order(12, 1, 2, rank=1, world=2, order="blocks", block=3, window=2)
    assert o.dtype == np.int64 and o.tolist() == [0, 2, 1, 8, 6, 7]  # the second contiguous half
    assert shardpack.epoch_order(5, shuffle=False, order="blocks").tolist() == [0, 1, 2, 3, 4]
    assert np.array_equal(shardpack.permutation(1000, 3, 4), shardpack.epoch_order(1000, 3, 4))


@pytest.mark.parametrize("order", ["global", "blocks"])
@pytest.mark.parametrize("drop_last", [False, True])
def test_every_index_once_and_equal_shares(order, drop_last):
    n = 1003
    full = shardpack.epoch_order(n, 5, 2, order=order, block=16, window=4)
    assert sorted(full.tolist()) == list(range(n))
    for world in (1, 2, 3, 8):
        shares = [shardpack.epoch_order(n, 5, 2, rank=r, world=world, drop_last=drop_last, order=order, block=16,
                                        window=4) for r in range(world)]
        per_rank = n // world if drop_last else -(-n // world)
        assert all(len(s) == per_rank for s in shares)
        together = np.concatenate(shares)
        if drop_last:
            assert len(set(together.tolist())) == len(together)  # disjoint
        else:
            assert set(together.tolist()) == set(range(n))  # everything, padded from the start
            assert len(together) - n == per_rank * world - n


@pytest.mark.parametrize("order", ["global", "blocks"])
def test_same_for_same_seed_and_epoch_new_for_a_new_one(order):
    a = shardpack.epoch_order(5000, 7, 3, order=order)
    assert np.array_equal(a, shardpack.epoch_order(5000, 7, 3, order=order))
    assert (a != shardpack.epoch_order(5000, 7, 4, order=order)).mean() > 0.99
    assert (a != shardpack.epoch_order(5000, 8, 3, order=order)).mean() > 0.99


def test_the_blocks_order_is_shuffled():
    n, block, window = 20000, 50, 8
    o = shardpack.epoch_order(n, 1, 0, order="blocks", block=block, window=window)
    # Position and index uncorrelated; neighbours in the epoch rarely neighbours in the data.
    assert abs(np.corrcoef(np.arange(n), o)[0, 1]) < 0.15
    assert (np.abs(np.diff(o)) == 1).mean() < 0.02
    # Each window of block * window positions holds the records of `window` whole blocks.
    starts, _ = shardpack._block_starts(n, block, window)
    blocks = np.searchsorted(starts, o, side="right") - 1
    for w in range(0, n, block * window):
        assert len(np.unique(blocks[w:w + block * window])) == window
    # Where record 0 lands is uniform across seeds (chi-square, 10 bins, 0.1% point 27.9).
    where = [int(np.flatnonzero(shardpack.epoch_order(200, s, 0, order="blocks", block=4, window=2) == 0)[0])
             for s in range(2000)]
    counts = np.bincount(np.asarray(where) * 10 // 200, minlength=10)
    assert ((counts - 200) ** 2 / 200).sum() < 27.9


def test_a_dataset_gives_the_blocks_its_shards(built):
    ds = shardpack.open(built["onehot"])  # several shards of a few records each
    starts = ds.shard_starts
    assert starts.dtype == np.int64 and starts[0] == 0 and len(starts) > 1 and ds.data_bytes > 0
    blocks, window = shardpack._block_starts(ds)
    assert set(starts.tolist()) <= set(blocks.tolist())  # no block spans two shards
    assert window == shardpack.WINDOW_BLOCKS
    o = shardpack.epoch_order(ds, 3, 1, order="blocks", block=2)
    assert sorted(o.tolist()) == list(range(len(ds)))
    assert np.array_equal(o, shardpack.epoch_order(len(ds), 3, 1, order="blocks", block=2, shard_starts=starts))


def test_bad_arguments_are_value_errors():
    with pytest.raises(ValueError, match="order"):
        shardpack.epoch_order(10, order="local")
    with pytest.raises(ValueError, match="block"):
        shardpack.epoch_order(10, order="blocks", block=0)
    with pytest.raises(ValueError, match="window"):
        shardpack.epoch_order(10, order="blocks", window=0)
    with pytest.raises(ValueError, match="seed"):
        shardpack.epoch_order(10, seed=-1)
    with pytest.raises(ValueError, match="shard_starts"):
        shardpack.epoch_order(10, order="blocks", shard_starts=[0, 10])
    with pytest.raises(TypeError):
        shardpack.epoch_order(10, order="blocks", block=2.5)
    with pytest.raises(shardpack.Error, match="world"):
        shardpack.epoch_order(10, rank=2, world=2, order="blocks")
    with pytest.raises(ValueError, match="order"):
        spt.Sampler(10, order="nearby")


def test_sampler_blocks_order_resumes_mid_epoch(built):
    ds = shardpack.open(built["onehot"])
    s = spt.Sampler(ds, shuffle=True, seed=4, rank=1, world=2, order="blocks", block=2, window=2)
    s.set_epoch(3)
    everything = list(s)
    assert everything == shardpack.epoch_order(ds, 4, 3, rank=1, world=2, order="blocks", block=2,
                                               window=2).tolist()
    s.set_epoch(4)
    assert list(s) != everything or len(everything) < 3  # a new order per epoch
    s.set_epoch(3)
    it = iter(s)
    head = [next(it) for _ in range(2)]
    state = s.state_dict()
    assert state["order"] == "blocks" and state["block"] == 2 and state["window"] == 2
    resumed = spt.Sampler(ds, shuffle=True, seed=0, rank=1, world=2, order="blocks", block=2, window=2)
    resumed.load_state_dict(state)
    resumed.set_epoch(3)
    assert head + list(resumed) == everything
    with pytest.raises(shardpack.Error, match="order"):
        spt.Sampler(ds, shuffle=True, rank=1, world=2, order="global").load_state_dict(state)
    with pytest.raises(shardpack.Error, match="window"):
        spt.Sampler(ds, shuffle=True, rank=1, world=2, order="blocks", block=2, window=3).load_state_dict(state)
    # order="auto" with no block or window given resumes the state's order, block and window.
    auto = spt.Sampler(ds, shuffle=True, rank=1, world=2)
    auto.load_state_dict(state)
    auto.set_epoch(3)
    assert head + list(auto) == everything
    # A state saved before the blocks order existed means the global order.
    old = spt.Sampler(ds, shuffle=True, seed=4).state_dict()
    for k in ("order", "block", "window"):
        del old[k]
    spt.Sampler(ds, shuffle=True).load_state_dict(old)


def test_the_dataloader_with_workers_reads_the_blocks_order(built):
    tds = spt.Dataset(built["onehot"], label="index")
    sampler = spt.Sampler(tds, shuffle=True, seed=6, order="blocks", block=2, window=2)
    want = shardpack.epoch_order(tds.dataset, 6, 0, order="blocks", block=2, window=2)
    for workers in (0, 2):
        got = [labels for _, labels in DataLoader(tds, batch_size=3, sampler=sampler, collate_fn=spt.collate,
                                                  num_workers=workers)]
        assert torch.equal(torch.cat(got), torch.from_numpy(tds.dataset.read_batch(want, label="index")[1]))


def test_loader_reads_the_blocks_order_and_resumes(built):
    ds = shardpack.open(built["onehot"])
    loader = spt.Loader(ds, batch_size=3, shuffle=True, seed=2, order="blocks", block=2, window=2, label="index")
    for epoch in (0, 1):
        got = [labels.clone() for _, labels in loader]
        order = shardpack.epoch_order(ds, 2, epoch, order="blocks", block=2, window=2)
        assert torch.equal(torch.cat(got), torch.from_numpy(ds.read_batch(order, label="index")[1]))
    loader.set_epoch(5)
    it = iter(loader)
    first = next(it)[1].clone()
    state = loader.state_dict()
    del it
    again = spt.Loader(ds, batch_size=3, shuffle=True, order="blocks", block=2, window=2, label="index")
    again.load_state_dict(state)
    rest = [labels.clone() for _, labels in again]
    order = shardpack.epoch_order(ds, 2, 5, order="blocks", block=2, window=2)
    assert torch.equal(torch.cat([first] + rest), torch.from_numpy(ds.read_batch(order, label="index")[1]))


class Recorder:
    """Stands in for a Dataset: records what is prefetched."""

    def __init__(self):
        self.calls = []

    def prefetch(self, indices):
        self.calls.append(np.asarray(indices).tolist())


def test_read_ahead_fetches_whole_blocks_once_a_window_ahead():
    from shardpack._readahead import ReadAhead

    n, block, window = 120, 10, 3
    order = shardpack.epoch_order(n, 4, 0, order="blocks", block=block, window=window)
    starts, _ = shardpack._block_starts(n, block, window)
    rec = Recorder()
    ahead = ReadAhead(rec, order, block * window, starts)
    fetched = []
    for position in range(0, n, 8):
        ahead.before(position)
        fetched += [i for call in rec.calls for i in call]
        rec.calls.clear()
        # Everything positions [position, position + 8) read was asked for before it is read.
        assert set(order[position:position + 8].tolist()) <= set(fetched)
    assert sorted(fetched) == list(range(n))  # every record once, as parts of whole blocks
    # The first call fetched exactly the first window's blocks, whole, in disk order.
    rec = Recorder()
    ReadAhead(rec, order, block * window, starts).before(0)
    first = rec.calls[0]
    assert first == sorted(first) and len(first) == block * window
    assert set(first) == set(order[:block * window].tolist())
    # Nothing is asked twice.
    again = ReadAhead(rec, order, block * window, starts)
    rec.calls.clear()
    again.before(0)
    again.before(0)
    assert len(rec.calls) == 1


def test_dataset_prefetch_checks_its_indices(built):
    ds = shardpack.open(built["onehot"])
    ds.prefetch(np.arange(len(ds)))  # a hint: returns, reads stay right
    ds.prefetch([])
    with pytest.raises(shardpack.Error, match="out of range"):
        ds.prefetch([len(ds)])
