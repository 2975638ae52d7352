"""Grain adapter (the JAX side's data loading library, `pip install grain`): a random-access data
source of records, and a grain.MapDataset of whole batches.

    import grain
    import shardpack.grain

    # Records, through Grain's own shuffle and batch (a batch is one read_batch call):
    source = shardpack.grain.DataSource("data/train", label="index")
    train = grain.MapDataset.source(source).shuffle(seed=0).batch(32)

    # Batches, in shardpack's order (shardpack.epoch_order, as the torch, Keras and tf.data
    # adapters), each one read_batch call:
    train = shardpack.grain.dataset("data/train", batch_size=32, seed=0, crop=(256, 256),
                                    crop_position="random", hflip=0.5)
    for images, labels in train: ...                  # epoch 0; train.repeat(E) goes on with 1, 2, ...
    model.fit(train.repeat(E).to_iter_dataset(shardpack.grain.read_options()),
              epochs=E, steps_per_epoch=len(train))    # Keras 3 fit, a new order each epoch

DataSource follows grain.sources.RandomAccessDataSource (__len__, __getitem__, and _getitems for
Grain's batched reads), pickles by path for Grain's worker processes, and has a stable __repr__
for Grain's checkpoints. Both give NumPy arrays, channels last by default.

Epochs: `dataset`'s element k is batch k % len(train) of epoch epoch + k // len(train), which is
Grain's own convention for indices past the end (repeat() passes them on), so train.repeat(E)
reads epochs epoch .. epoch + E - 1, each in its own order with its own random crops and flips
(drawn from (seed, epoch, record index)). A MapDataset has no state: iterating `train` again, or a
Keras epoch that starts a new iterator over it, reads the same epoch again; repeat() is the way
to new ones. DataSource is map-style (the order is Grain's): its random crops and flips are drawn
for its `epoch` attribute (set_epoch).

Grain reads a MapDataset with 16 threads and 500 elements ahead unless told otherwise; for
batches of images that is too much memory and too many threads on one read_batch's cores, so
iterating a `dataset` uses read_options() (1 thread, `prefetch` batches ahead), and a dataset
derived from it (repeat, map, and what Keras makes of it) should be given the same options
through to_iter_dataset(read_options()).
"""
from __future__ import annotations

from typing import Any, List, Optional, Sequence, Tuple

import grain as _grain
import numpy as _np

import shardpack as _sp
from shardpack import _adapt, _checks

__all__ = ["DataSource", "dataset", "read_options"]


def read_options(prefetch: int = 2) -> _grain.ReadOptions:
    """grain.ReadOptions for batches that are one read_batch each: one thread (read_batch spreads
    each batch over every core already) and `prefetch` batches read ahead."""
    return _grain.ReadOptions(num_threads=1, prefetch_buffer_size=_checks.integer(prefetch, "prefetch", 0))


_read_options = read_options  # the name, for _Batches.to_iter_dataset, whose argument hides it


class DataSource:
    """DataSource(source, *, dtype="float32", layout="NHWC", normalize="auto", label="onehot",
    label_dtype=None, crop=None, crop_position="center", hflip=0.0, vflip=0.0, seed=0, epoch=0,
    threads=0, verify_checksums=True, crop_background=None, fields=None, min_box_visibility=0.0)

    A Grain random-access data source of the records of a shardpack dataset. source[i] is
    (image, label) of record i with read_batch's options (a batch of one): image (H, W, C) (or
    (C, H, W) with layout="NCHW"), label one-hot, an index map or a class id. Grain's batched read
    (_getitems, used by MapDataset.batch) reads a whole batch in one read_batch call. Random crops
    and flips are drawn from (seed, epoch, record index); set_epoch(e) for new ones.

    fields, min_box_visibility: per-sample fields (format 1.5) as read_batch reads them (names,
    or "all"): a record is then (image, label, fields), fields a dict by name, each value at its
    own length: int and float NumPy scalars, str a str, tags (T,) uint8, lists 1-D arrays, boxes
    {"boxes": (M, 4) float32, "labels": (M,) int64}, moved with the record's crop and flips.
    Grain's batch() stacks records, so lists and boxes (of varying length) need a batch_fn of
    yours, or shardpack.grain.dataset, which pads them."""

    def __init__(self, source: _adapt.Source, *, dtype: _adapt.DType = "float32", layout: str = "NHWC",
                 normalize: _adapt.Normalize = "auto", label: str = "onehot", label_dtype: Optional[str] = None,
                 crop: Optional[Tuple[int, int]] = None, crop_position: str = "center", hflip: float = 0.0,
                 vflip: float = 0.0, seed: int = 0, epoch: int = 0, threads: int = 0,
                 verify_checksums: bool = True, crop_background: Optional[Any] = None,
                 fields: Optional[Sequence[str]] = None, min_box_visibility: float = 0.0) -> None:
        self.dataset = _adapt.open_source(source, verify_checksums)
        self._options = _adapt.Options(self.dataset, dtype=dtype, layout=layout, normalize=normalize, label=label,
                                       crop=crop, crop_position=crop_position, hflip=hflip, vflip=vflip, seed=seed,
                                       threads=threads, label_dtype=label_dtype, crop_background=crop_background,
                                       fields=fields, min_box_visibility=min_box_visibility,
                                       who="shardpack.grain.DataSource")
        self.epoch = 0
        self.set_epoch(epoch)

    def set_epoch(self, epoch: int) -> None:
        """The epoch random crops and flips are drawn for."""
        self.epoch = _checks.integer(epoch, "epoch", 0)

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, record_key: int) -> Tuple[Any, ...]:
        n = len(self.dataset)
        i = _checks.integer(record_key, "record key")
        if not 0 <= i < n:
            raise IndexError(f"{self.dataset.path}: record key {i} is out of range ({n} records)")
        return self._records(_np.array([i], dtype=_np.int64))[0]

    def _getitems(self, record_keys: Sequence[int]) -> List[Tuple[Any, ...]]:
        """The records `record_keys`, read as one batch (Grain's batched read)."""
        return self._records(_np.asarray(record_keys, dtype=_np.int64))

    def _records(self, idx: _np.ndarray) -> List[Tuple[Any, ...]]:
        got = self.dataset.read_batch(idx, epoch=self.epoch, **self._options.read)
        images, labels = got[0], got[1]
        if "fields" in self._options.read:
            return [(images[j], labels[j], _adapt.record_fields(got[2], j)) for j in range(len(images))]
        return [(images[j], labels[j]) for j in range(len(images))]

    def __repr__(self) -> str:
        read = ", ".join(f"{k}={v!r}" for k, v in self._options.read.items() if k != "threads")
        return f"shardpack.grain.DataSource({self.dataset.path!r}, {read}, epoch={self.epoch})"


class _Batches(_grain.MapDataset):  # type: ignore[misc]  # grain has no type information
    """The batches of one rank in shardpack's order (see the module and dataset())."""

    def __init__(self, ds: Any, order: _adapt.Order, options: _adapt.Options, first_epoch: int,
                 prefetch: int) -> None:
        super().__init__()
        self._dataset = ds
        self._order = order
        self._options = options
        self._first_epoch = first_epoch
        self._prefetch = prefetch

    def __len__(self) -> int:
        return self._order.batches

    def __str__(self) -> str:
        return f"shardpack.grain.dataset({self._dataset.path!r}, batch_size={self._order.batch_size})"

    def epoch_and_batch(self, index: int) -> Tuple[int, int]:
        """(epoch, batch number in it) of element `index` (indices past the end: later epochs)."""
        index = _checks.integer(index, "index", 0)
        epoch, batch = divmod(index, self._order.batches)
        return self._first_epoch + epoch, batch

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return self.slice(index)
        epoch, batch = self.epoch_and_batch(index)
        got = self._dataset.read_batch(self._order.batch(epoch, batch), epoch=epoch, **self._options.read)
        if "fields" in self._options.read:
            return got[0], got[1], _adapt.batch_fields(got[2])
        return got

    def to_iter_dataset(self, read_options: Optional[_grain.ReadOptions] = None, *,
                        allow_nones: bool = False) -> _grain.IterDataset:
        return super().to_iter_dataset(read_options or _read_options(self._prefetch), allow_nones=allow_nones)

    def __iter__(self) -> Any:
        return self.to_iter_dataset().__iter__()



def dataset(source: _adapt.Source, batch_size: int, *, shuffle: bool = True, seed: int = 0, epoch: int = 0,
            drop_last: bool = False, rank: int = 0, world: int = 1, order: str = "auto",
            block: Optional[int] = None, window: Optional[int] = None, dtype: _adapt.DType = "float32",
            layout: str = "NHWC", normalize: _adapt.Normalize = "auto", label: str = "onehot",
            label_dtype: Optional[str] = None, crop: Optional[Tuple[int, int]] = None,
            crop_position: str = "center", hflip: float = 0.0, vflip: float = 0.0, threads: int = 0,
            prefetch: int = 2, verify_checksums: bool = True, crop_background: Optional[Any] = None,
            fields: Optional[Sequence[str]] = None, min_box_visibility: float = 0.0) -> _grain.MapDataset:
    """A grain.MapDataset of (images, labels) batches, one read_batch call each.

    The options are shardpack.tf.dataset's: shuffle, seed, epoch, drop_last, rank, world, order,
    block, window give the order (shardpack.epoch_order; order="blocks": the locality-aware
    shuffle); dtype, layout, normalize ("auto": "imagenet" for float32, None for uint8), label,
    label_dtype, crop, crop_position, crop_background, hflip, vflip, threads are read_batch's. len() is the number
    of batches per epoch; element k is batch k % len of epoch `epoch` + k // len (see the
    module). prefetch: batches read ahead when it is iterated (read_options(prefetch)).

    fields, min_box_visibility: per-sample fields (format 1.5) as read_batch reads them: elements
    are then (images, labels, fields), fields a dict by name: int and float (N,) int64 / float64,
    str a (N,) str array, tags (N, T) uint8, lists {"values": (N, L) padded with 0, "counts":
    (N,)}, boxes {"boxes": (N, M, 4) float32 padded with 0, "labels": (N, M) int64 padded with
    -1, "counts": (N,)}, moved with each sample's crop and flips."""
    ds = _adapt.open_source(source, verify_checksums)
    plan = _adapt.Order(ds, batch_size=batch_size, shuffle=shuffle, seed=seed, drop_last=drop_last, rank=rank,
                        world=world, order=order, block=block, window=window)
    options = _adapt.Options(ds, dtype=dtype, layout=layout, normalize=normalize, label=label, crop=crop,
                             crop_position=crop_position, hflip=hflip, vflip=vflip, seed=seed, threads=threads,
                             label_dtype=label_dtype, crop_background=crop_background, fields=fields,
                             min_box_visibility=min_box_visibility, who="shardpack.grain.dataset")
    return _Batches(ds, plan, options, _checks.integer(epoch, "epoch", 0), _checks.integer(prefetch, "prefetch", 0))
