"""Read-ahead of the records an order needs next, for shardpack.torch.Loader and the cold-storage
benchmark (scripts/bench/cold_bench.py).

Dataset.prefetch(indices) asks the reader to start fetching records (posix_fadvise WILLNEED or
madvise WILLNEED of their byte ranges, neighbours merged; see the reader's prefetch). With the
blocks order (shardpack.epoch_order(order="blocks")) the records of a window come from a few
blocks in shuffled order: reading them one by one would seek between the blocks on every
record, so ReadAhead fetches every block the next window touches, whole, before its first
record is read: the disk then reads a block per seek. With the global order it fetches the
records of the next batches (a cold disk can then serve them in the order of their offsets).
"""
import numpy as _np


class ReadAhead:
    """Calls dataset.prefetch so that, before position p of `order` is read, the records that
    positions [p, p + ahead) need are on their way: whole blocks when block_starts (the first
    record of each block, then n) is given, each block once; else the records themselves."""

    def __init__(self, dataset, order, ahead, block_starts=None):
        self.dataset = dataset
        self.order = _np.asarray(order, dtype=_np.int64)
        self.ahead = max(1, int(ahead))
        self.block_starts = None if block_starts is None else _np.asarray(block_starts, dtype=_np.int64)
        self.fetched = None if block_starts is None else _np.zeros(len(self.block_starts) - 1, dtype=bool)
        self.done = 0  # positions whose records were asked for

    def before(self, position):
        end = min(len(self.order), int(position) + self.ahead)
        if end <= self.done:
            return
        idx = self.order[max(self.done, int(position)):end]
        self.done = end
        if self.block_starts is None:
            wanted = _np.unique(idx)
        else:
            blocks = _np.unique(_np.searchsorted(self.block_starts, idx, side="right") - 1)
            blocks = blocks[~self.fetched[blocks]]
            if len(blocks) == 0:
                return
            self.fetched[blocks] = True
            wanted = _np.concatenate([_np.arange(self.block_starts[b], self.block_starts[b + 1]) for b in blocks])
        self.dataset.prefetch(wanted)
