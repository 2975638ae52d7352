"""Read-ahead of whole blocks for the blocks order, for shardpack.torch.Loader and the cold-storage
benchmark (scripts/bench/cold_bench.py).

Dataset.prefetch(indices) asks the reader to start fetching records (posix_fadvise WILLNEED or
madvise WILLNEED of their byte ranges, neighbours merged; see dataset::prefetch). With the
blocks order (shardpack.epoch_order(order="blocks")) the records of a window come from a few
blocks in shuffled order: reading them one by one would seek between the blocks on every
record, so ReadAhead fetches every block the next window touches, whole, before its first
record is read: the disk then reads a block per seek. (The global order gets nothing from this:
read_batch already announces each batch's records, and a read-ahead per batch cost 70% of a
warm epoch of 8x8 records, measured.)
"""
from typing import Any

import numpy as _np


def records_ahead(dataset: Any, block_starts: Any, window: int) -> int:
    """How many positions ahead to fetch: one window of blocks, or less when the reader's cache
    (io "blocks") could not hold two windows' worth (what is fetched must still be there when
    it is read)."""
    per_window = int(block_starts[-1]) * window // max(1, len(block_starts) - 1)
    cache = getattr(dataset, "cache_bytes", 0)
    n = len(dataset)
    if cache and n:
        per_record = max(1, dataset.data_bytes // n)
        per_window = min(per_window, max(1, cache // (3 * per_record)))
    return per_window


class ReadAhead:
    """Calls dataset.prefetch so that, before position p of `order` is read, every block that
    positions [p, p + ahead) touch is on its way, whole, each block once. block_starts: the
    first record of each block, then n (shardpack._block_starts)."""

    def __init__(self, dataset: Any, order: Any, ahead: int, block_starts: Any) -> None:
        self.dataset = dataset
        self.ahead = max(1, int(ahead))
        self.block_starts = _np.asarray(block_starts, dtype=_np.int64)
        order = _np.asarray(order, dtype=_np.int64)
        n = len(order)
        blocks = _np.searchsorted(self.block_starts, order, side="right") - 1
        # The first position of every block in the order (repeated fancy-index assignment keeps
        # the last value: assigning in reverse keeps the first position).
        first = _np.full(len(self.block_starts) - 1, n, dtype=_np.int64)
        first[blocks[::-1]] = _np.arange(n - 1, -1, -1, dtype=_np.int64)
        present = _np.flatnonzero(first < n)
        by_position = _np.argsort(first[present], kind="stable")
        self.schedule = present[by_position]          # blocks, in the order they are first needed
        self.needed_at = first[present][by_position]  # and where
        self.next = 0                                 # schedule[:next] were asked for

    def before(self, position: int) -> None:
        k = int(_np.searchsorted(self.needed_at, int(position) + self.ahead, side="left"))
        if k <= self.next:
            return
        blocks = _np.sort(self.schedule[self.next:k])  # in disk order
        self.next = k
        wanted = _np.concatenate([_np.arange(self.block_starts[b], self.block_starts[b + 1]) for b in blocks])
        self.dataset.prefetch(wanted)
