"""Keras adapter: shardpack.keras.PyDataset, a keras.utils.PyDataset of whole batches.

    import shardpack.keras
    train = shardpack.keras.PyDataset("data/train", batch_size=32, shuffle=True, seed=0)
    model.fit(train, epochs=10)

Each batch is one read_batch call (the GIL released, the batch split over C++ threads), channels
last as Keras expects. The order is shardpack.epoch_order: a new permutation every epoch
(on_epoch_end), the same for a given seed and epoch wherever it runs.
"""
import keras as _keras
import numpy as _np

import shardpack as _sp

__all__ = ["PyDataset"]


class PyDataset(_keras.utils.PyDataset):
    """PyDataset(source, batch_size, shuffle=True, seed=0, drop_last=False, dtype="float32",
    layout="NHWC", normalize="auto", label="onehot", threads=0, rank=0, world=1, epoch=0,
    verify_checksums=True, **kwargs)

    source: a path or a shardpack.Dataset. The options are read_batch's; rank/world read one
    share as shardpack.epoch_order gives it. kwargs go to keras.utils.PyDataset (workers,
    use_multiprocessing, max_queue_size): one worker thread already keeps the C++ threads busy."""

    def __init__(self, source, batch_size, shuffle=True, seed=0, drop_last=False, dtype="float32", layout="NHWC",
                 normalize="auto", label="onehot", threads=0, rank=0, world=1, epoch=0, verify_checksums=True,
                 **kwargs):
        super().__init__(**kwargs)
        self.dataset = source if isinstance(source, _sp.Dataset) else _sp.open(source, verify_checksums)
        self.batch_size = int(batch_size)
        if self.batch_size < 1:
            raise _sp.Error("PyDataset: batch_size must be at least 1")
        self.shuffle, self.seed, self.drop_last = bool(shuffle), int(seed), bool(drop_last)
        self.rank, self.world = int(rank), int(world)
        self.options = dict(dtype=dtype, layout=layout, normalize=normalize, label=label)
        self.threads = int(threads)
        self.dataset.batch_spec(1, dtype=dtype, layout=layout, label=label)  # checks the options now
        self.set_epoch(epoch)

    def set_epoch(self, epoch):
        self.epoch = int(epoch)
        self._order = _sp.epoch_order(len(self.dataset), self.seed, self.epoch, self.shuffle, self.rank, self.world,
                                      self.drop_last)

    def __len__(self):
        n = len(self._order)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def batch_indices(self, index):
        """The record indices of batch `index` of the current epoch."""
        if not 0 <= index < len(self):
            raise IndexError(f"batch {index} is out of range ({len(self)} batches)")
        return self._order[index * self.batch_size:(index + 1) * self.batch_size]

    def __getitem__(self, index):
        return self.dataset.read_batch(self.batch_indices(index), threads=self.threads, **self.options)

    def on_epoch_end(self):
        self.set_epoch(self.epoch + 1)
