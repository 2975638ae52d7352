"""Keras adapter: shardpack.keras.PyDataset, a keras.utils.PyDataset of whole batches.

    import shardpack.keras
    train = shardpack.keras.PyDataset("data/train", batch_size=32, seed=0, crop=(256, 256),
                                      crop_position="random", hflip=0.5)
    model.fit(train, epochs=10)

Each batch is one read_batch call (the GIL released, the batch split over C++ threads), channels
last as Keras expects. The order of epoch e is shardpack.epoch_order(n, seed, e, shuffle, rank,
world, drop_last), and random crops and flips are drawn from (seed, e, record index): the same
wherever it runs. Keras calls on_epoch_begin at the start of every epoch of fit: the first keeps
`epoch` (default 0), each later one (the next epoch, or a later fit) moves to the next. set_epoch(e)
sets it; to resume, pass epoch=initial_epoch. (on_epoch_end does not count: Keras also calls it
once before the first epoch, after reading two batches to learn their shapes.)
"""
from __future__ import annotations

from typing import Any, Dict, Optional, Sequence, Tuple, Union

import keras as _keras
import numpy as _np

import shardpack as _sp
from shardpack import _adapt, _checks

__all__ = ["PyDataset"]


class PyDataset(_keras.utils.PyDataset):  # type: ignore[misc]  # keras has no type information
    """PyDataset(source, batch_size, *, shuffle=True, seed=0, epoch=0, drop_last=False, rank=0,
    world=1, order="auto", block=None, window=None, dtype="float32", layout="NHWC",
    normalize="auto", label="onehot", label_dtype=None, crop=None, crop_position="center", hflip=0.0,
    vflip=0.0, threads=0, verify_checksums=True, workers=1, use_multiprocessing=False,
    max_queue_size=10, crop_background=None, fields=None, min_box_visibility=0.0)

    source: a dataset folder or a shardpack.Dataset. shuffle, seed, epoch, drop_last, rank,
    world, order, block, window: the order (shardpack.epoch_order; rank/world read one share;
    order="blocks" is the locality-aware shuffle for data on a cold disk). dtype, layout,
    normalize, label, label_dtype, crop, crop_position ("center", "random" or "foreground"),
    crop_background, hflip, vflip, threads: read_batch's options. workers, use_multiprocessing,
    max_queue_size: keras.utils.PyDataset's (one worker thread already keeps the C++ threads busy).

    Normalisation: normalize="auto" (the default) gives float32 images as (x / 255 - mean) / std
    with ImageNet's mean 0.485 0.456 0.406 and std 0.229 0.224 0.225 (grey: 0.449, 0.226), and says
    so once on the "shardpack" logger; normalize=None gives x / 255; uint8 batches are as stored. A
    model trained on x / 255 (a generator that divided by 255) takes normalize=None.

    fields, min_box_visibility: per-sample fields (format 1.5) as read_batch reads them (names, or
    "all"): a batch is then (x, labels) with x a dict, the inputs of a model with named inputs:
    {"images": images, NAME: value, ...}. int and float fields (N,) int64 / float64, str a (N,)
    str array, tags (N, T) uint8, lists {"values": (N, L) padded with 0, "counts": (N,)}, boxes
    {"boxes": (N, M, 4) float32 padded with 0, "labels": (N, M) int64 padded with -1, "counts":
    (N,)}, moved with each sample's crop and flips. Keras' fit passes the
    whole dict to the model (a Functional model's inputs must match it: ask for the fields the
    model takes; Keras carries no strings, so str fields are for reading the batches yourself)."""

    def __init__(self, source: _adapt.Source, batch_size: int, *, shuffle: bool = True, seed: int = 0,
                 epoch: int = 0, drop_last: bool = False, rank: int = 0, world: int = 1, order: str = "auto",
                 block: Optional[int] = None, window: Optional[int] = None, dtype: _adapt.DType = "float32",
                 layout: str = "NHWC", normalize: _adapt.Normalize = "auto", label: str = "onehot",
                 label_dtype: Optional[str] = None, crop: Optional[Tuple[int, int]] = None,
                 crop_position: str = "center", hflip: float = 0.0, vflip: float = 0.0, threads: int = 0,
                 verify_checksums: bool = True, workers: int = 1, use_multiprocessing: bool = False,
                 max_queue_size: int = 10, crop_background: Optional[Any] = None,
                 fields: Optional[Sequence[str]] = None, min_box_visibility: float = 0.0) -> None:
        super().__init__(workers=workers, use_multiprocessing=use_multiprocessing, max_queue_size=max_queue_size)
        self.dataset = _adapt.open_source(source, verify_checksums)
        self._order = _adapt.Order(self.dataset, batch_size=batch_size, shuffle=shuffle, seed=seed,
                                   drop_last=drop_last, rank=rank, world=world, order=order, block=block,
                                   window=window)
        self._options = _adapt.Options(self.dataset, dtype=dtype, layout=layout, normalize=normalize, label=label,
                                       crop=crop, crop_position=crop_position, hflip=hflip, vflip=vflip, seed=seed,
                                       threads=threads, label_dtype=label_dtype, crop_background=crop_background,
                                       fields=fields, min_box_visibility=min_box_visibility,
                                       who="shardpack.keras.PyDataset")
        if "images" in self._options.fields:
            raise _sp.ArgumentValueError('shardpack.keras.PyDataset: a field named "images" would replace the images '
                                     'in the batch\'s x dict; read it with read_batch')
        self.set_epoch(epoch)

    @property
    def batch_size(self) -> int:
        return self._order.batch_size

    @property
    def shuffle(self) -> bool:
        return self._order.shuffle

    @property
    def seed(self) -> int:
        return self._order.seed

    @property
    def drop_last(self) -> bool:
        return self._order.drop_last

    def set_epoch(self, epoch: int) -> None:
        """The epoch whose order and random crops and flips the batches come from."""
        self.epoch = _checks.integer(epoch, "epoch", 0)
        self._begun = False  # whether an epoch has begun (on_epoch_begin) since

    def __len__(self) -> int:
        return self._order.batches

    def batch_indices(self, index: int) -> _np.ndarray:
        """The record indices of batch `index` of the current epoch."""
        index = _checks.integer(index, "batch index")
        if not 0 <= index < len(self):
            raise IndexError(f"batch {index} is out of range ({len(self)} batches)")
        return self._order.batch(self.epoch, index)

    def __getitem__(self, index: int) -> Tuple[Union[_np.ndarray, Dict[str, Any]], _np.ndarray]:
        """(images, labels), or with fields ({"images": images, NAME: value, ...}, labels)."""
        got = self.dataset.read_batch(self.batch_indices(index), epoch=self.epoch, **self._options.read)
        if not self._options.fields:
            return got[0], got[1]
        return {"images": got[0], **_adapt.batch_fields(got[2])}, got[1]

    def on_epoch_begin(self) -> None:
        """Keras calls it at the start of every epoch: the first reads `epoch`, each later one
        the next."""
        if self._begun:
            self.epoch += 1
        self._begun = True
