"""What the Keras, tf.data and Grain adapters share: their options (checked by shardpack._checks,
read_batch's checks) and the epoch order.

Private: the adapters' documentation is in their own modules and src/python/README.md."""
from __future__ import annotations

import os
import threading
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union, cast

import numpy as np

import shardpack as _sp
from shardpack import _checks
from shardpack._readahead import ReadAhead, records_ahead

Source = Union[str, "os.PathLike[str]", _sp.Dataset, _sp.Mix]
Normalize = Union[None, str, Tuple[object, object]]  # None, "auto", "imagenet" or (mean, std)
DType = Union[str, type, np.dtype]  # "float32" / "uint8" / "uint16", or the NumPy type or dtype


def open_source(source: Source, verify_checksums: bool) -> Union[_sp.Dataset, _sp.Mix]:
    if isinstance(source, (_sp.Dataset, _sp.Mix)):
        return source
    if not isinstance(source, (str, bytes, os.PathLike)):
        raise _sp.ArgumentTypeError(f"source must be a dataset folder (a path) or a shardpack.Dataset, "
                                    f"not {type(source).__name__}")
    return _sp.open(source, verify_checksums=verify_checksums)


class Options:
    """The read_batch options of an adapter, checked once: `read` goes to every read_batch call
    (with the epoch added), `spec` to batch_spec.

    normalize="auto" (the adapters' default) is "imagenet" for float32 batches (read_batch says
    so once on the "shardpack" logger) and None for uint8 ones; any other normalize with dtype="uint8" is an error. label_dtype (the dtype of
    index labels, read_batch's) is passed on only when given. fields and min_box_visibility
    (per-sample fields, format 1.5) too: `fields` is then the names read (checked against the
    dataset's, "all" for every one; `who` names the adapter in the error), else []."""

    def __init__(self, dataset: Union[_sp.Dataset, _sp.Mix], *, dtype: DType, layout: str, normalize: Normalize, label: str,
                 crop: Optional[Tuple[int, int]], crop_position: str, hflip: float, vflip: float, seed: int,
                 threads: int, label_dtype: Optional[str] = None, crop_background: Optional[Any] = None,
                 fields: Optional[Sequence[str]] = None, min_box_visibility: float = 0.0,
                 who: str = "shardpack") -> None:
        # The words are read_batch's, checked by its checkers against its tables (shardpack._DTYPES
        # and so on): "float32", numpy.float32 or numpy.dtype("float32") alike.
        dtype = _checks.dtype_name(dtype, "dtype", _sp._DTYPES)
        layout = _checks.choice(layout, "layout", _sp._LAYOUTS)
        label = _checks.choice(label, "label", _sp._LABELS)
        if isinstance(normalize, str) and normalize == "auto":
            # read_batch resolves it: ImageNet's for float32 (None for bands other than 3)
            normalize = "auto" if dtype == "float32" else None
        elif dtype != "float32" and normalize is not None:
            raise _sp.ArgumentValueError(f'normalize applies to float32 batches: with dtype="{dtype}" pass '
                                         f'normalize=None or "auto" ({dtype} batches are as stored)')
        crop_position = _checks.choice(crop_position, "crop_position", _sp._CROP_POSITIONS)
        if crop is not None:
            crop = _checks.crop_size(crop, "crop")
        self.seed = _checks.integer(seed, "seed", 0)
        self.threads = _checks.integer(threads, "threads", 0)
        self.spec: Dict[str, Any] = dict(dtype=dtype, layout=layout, label=label, crop=crop)
        self.read: Dict[str, Any] = dict(dtype=dtype, layout=layout, normalize=normalize, label=label, crop=crop,
                         crop_position=crop_position, hflip=_checks.probability(hflip, "hflip"),
                         vflip=_checks.probability(vflip, "vflip"), seed=self.seed, threads=self.threads)
        if label_dtype is not None:  # read_batch's own check says what it takes
            self.spec["label_dtype"] = self.read["label_dtype"] = label_dtype
        if crop_background is not None:  # crop_position="foreground": read_batch checks the classes
            self.read["crop_background"] = crop_background
        self.fields: List[str] = [] if fields is None else dataset._field_names(fields, who)
        if fields is not None:
            self.read.update(fields=self.fields, min_box_visibility=min_box_visibility)
        dataset.batch_spec(1, **self.spec)  # the spec's options are checked now
        if normalize is not None or label_dtype is not None or crop_background is not None or fields is not None:
            dataset.read_batch(np.empty(0, dtype=np.int64),
                               **{k: v for k, v in self.read.items() if k not in ("threads", "seed")})


def batch_fields(fields: Dict[str, Any]) -> Dict[str, Any]:
    """read_batch's fields of a batch as plain NumPy arrays and dicts of them (what Keras and
    Grain take): int, float (N,), tags (N, T) as read; str a (N,) str array; lists
    {"values": (N, L) padded with 0, "counts": (N,)}; boxes {"boxes": (N, M, 4) float32 padded
    with 0, "labels": (N, M) int64 padded with -1, "counts": (N,)}."""
    out: Dict[str, Any] = {}
    for name, v in fields.items():
        if isinstance(v, _sp.PaddedBoxes):
            out[name] = {"boxes": v.boxes, "labels": v.labels, "counts": v.counts}
        elif isinstance(v, _sp.Padded):
            out[name] = {"values": v.values, "counts": v.counts}
        elif isinstance(v, list):  # str
            out[name] = np.array(v, dtype=str)
        else:
            out[name] = v
    return out


def record_fields(fields: Dict[str, Any], j: int) -> Dict[str, Any]:
    """Sample j's fields of a batch (read_batch's), each at its own length: int and float NumPy
    scalars, str a str, tags (T,) uint8, lists 1-D arrays, boxes {"boxes": (M, 4) float32,
    "labels": (M,) int64}."""
    out: Dict[str, Any] = {}
    for name, v in fields.items():
        if isinstance(v, _sp.PaddedBoxes):
            c = int(v.counts[j])
            out[name] = {"boxes": v.boxes[j, :c], "labels": v.labels[j, :c]}
        elif isinstance(v, _sp.Padded):
            out[name] = v.values[j, :int(v.counts[j])]
        else:
            out[name] = v[j]
    return out


class Order:
    """The record order of one rank, epoch by epoch: shardpack.epoch_order over the dataset
    (order="auto": what the reader prefers; "global"; or the locality-aware "blocks" with its block and window; the dataset gives
    the blocks its shards and record size), the last two epochs kept (a pipeline that reads ahead
    is in at most two at once)."""

    def __init__(self, dataset: Union[_sp.Dataset, _sp.Mix], *, batch_size: int, shuffle: bool, seed: int, drop_last: bool,
                 rank: int, world: int, order: str = "auto", block: Optional[int] = None,
                 window: Optional[int] = None) -> None:
        self.dataset = dataset
        n = self.n = _sp._mix.epoch_size_of(dataset)  # a Mix's epoch_size
        self.batch_size = _checks.integer(batch_size, "batch_size", 1)
        self.shuffle = _checks.boolean(shuffle, "shuffle")
        self.drop_last = _checks.boolean(drop_last, "drop_last")
        self.seed = _checks.integer(seed, "seed", 0)
        self.rank, self.world = _checks.rank_and_world(rank, world, "")
        self.order = _sp._resolve_order(order, dataset)
        self.block = None if block is None else _checks.integer(block, "block", 1)
        self.window = None if window is None else _checks.integer(window, "window", 1)
        per_rank = n // self.world if self.drop_last else -(-n // self.world)
        self.per_rank = per_rank
        self.batches = per_rank // self.batch_size if self.drop_last else -(-per_rank // self.batch_size)
        self._cache: Dict[int, np.ndarray] = {}
        self._ahead: Dict[int, ReadAhead] = {}  # the blocks order's read-ahead, per epoch
        self._lock = threading.Lock()

    def __getstate__(self) -> Dict[str, Any]:  # pickles (Grain's worker processes) without the lock and cache
        state = self.__dict__.copy()
        del state["_lock"], state["_cache"], state["_ahead"]
        return state

    def __setstate__(self, state: Dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._cache = {}
        self._ahead = {}
        self._lock = threading.Lock()

    def epoch(self, epoch: int) -> np.ndarray:
        with self._lock:
            order = self._cache.get(epoch)
            if order is None:
                order = _sp.epoch_order(self.dataset, self.seed, epoch, self.shuffle, self.rank, self.world,
                                        self.drop_last, order=self.order, block=self.block, window=self.window)
                if len(self._cache) >= 2:
                    oldest = min(self._cache)
                    self._cache.pop(oldest)
                    self._ahead.pop(oldest, None)
                self._cache[epoch] = order
                if self.shuffle and self.order == "blocks":
                    # Every block a window touches is fetched whole before its first record is
                    # read (as the torch Loader does): the disk then serves a block per seek.
                    starts, window = _sp._block_starts(self.dataset, self.block, self.window)
                    self._ahead[epoch] = ReadAhead(self.dataset, order, records_ahead(self.dataset, starts, window), starts)
            return order

    def batch(self, epoch: int, index: int) -> np.ndarray:
        """The record indices of batch `index` (0 <= index < self.batches) of `epoch`."""
        order = self.epoch(epoch)
        ahead = self._ahead.get(epoch)
        if ahead is not None:
            with self._lock:
                ahead.before(index * self.batch_size)
        return order[index * self.batch_size:(index + 1) * self.batch_size]
