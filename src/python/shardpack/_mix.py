"""Weighted mixing of several datasets (private: the API is shardpack.mix and shardpack.Mix).

shardpack.mix(datasets, weights=...) is a Mix, which reads like a shardpack.Dataset (read_batch,
batch_spec, ds[i], len) and goes wherever one goes: the torch Dataset, Sampler and Loader, the
Keras, tf.data and Grain adapters, shardpack.epoch_order.

    mixed = shardpack.mix(["data/web", "data/curated", "data/synthetic"], weights=[0.6, 0.3, 0.1])
    loader = shardpack.torch.Loader(mixed, batch_size=64, crop=(224, 224))

A mixed index is a position in the concatenation of the datasets (dataset k holds
[offsets[k], offsets[k + 1])). An epoch is epoch_size samples (default: the sum of the sizes), of
which dataset k gives counts[k]: the largest-remainder shares of the weights (sum = epoch_size,
each within 1 of epoch_size * w_k / sum(w)). Without replacement (the default) each dataset is
drawn through in passes, each pass its own order (global or blocks), so no record repeats before
its whole dataset was drawn; replacement=True draws uniformly. The datasets' samples are merged
in a random interleaving (each keeps its own order: the blocks order keeps its locality), then
split between ranks as any epoch is. The order is computed by include/shardpack/mix.hpp: a
function of (seed, epoch, rank, world) alone, the same in C++; formats/orders.md
defines it.

Classes are matched by name: the mix's classes are the first dataset's, then each new name of
the others in order (or `classes=` given); labels are renumbered to them (index maps, class ids
and one-hot planes alike; a dataset that lacks a class has zeros in its plane). Datasets of
different tasks, a dataset naming a class twice, or a class missing from `classes=` are refused.
Images must have one channel count; datasets of different image sizes read with a crop no larger
than the smallest (read_batch's crop=, which every adapter passes on), else read_batch refuses.
A batch whose records come from several datasets is read dataset by dataset and copied into
place (one copy of the batch); a batch from one dataset whose labels need no renumbering is read
straight into the output.
"""
from __future__ import annotations

import os as _os
from types import SimpleNamespace as _Namespace
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple, Union, cast

import numpy as _np
import numpy.typing as _npt

import shardpack as _sp
from . import _checks
from ._shardpack import mix_counts as _mix_counts, mix_full_order as _mix_full_order, resumed_order as _resumed_order

__all__ = ["Mix", "mix", "resumed_order"]

Source = Union[str, "_os.PathLike[str]", "_sp.Dataset"]


def mix(datasets: Sequence[Source], *, weights: Optional[Sequence[float]] = None, epoch_size: Optional[int] = None,
        replacement: bool = False, classes: Optional[Sequence[str]] = None, verify_checksums: bool = True) -> "Mix":
    """A weighted mix of `datasets` (folders or shardpack.Dataset objects); see the module.

    weights: one per dataset, finite, 0 or more (None: the datasets' sizes, so an epoch reads each
    record once). epoch_size: samples per epoch over all ranks (None: the sum of the sizes).
    replacement: draw each sample uniformly (global order only) instead of in passes. classes:
    the mix's class names (None: the union, in order of first appearance)."""
    return Mix(datasets, weights=weights, epoch_size=epoch_size, replacement=replacement, classes=classes,
               verify_checksums=verify_checksums)


def _index_map(part: "_sp.Dataset", ids: List[int], ignore: int) -> _npt.NDArray[_np.int64]:
    """Stored index value of `part` -> the mix's: class j -> ids[j], its ignore value -> `ignore`."""
    size = max(len(ids), part.ignore_value + 1 if part.task == "segmentation" else 0, 1)
    table = _np.full(size, ignore, dtype=_np.int64)
    table[:len(ids)] = ids
    return table


class Mix:
    """A weighted mix of datasets (see the module); made by shardpack.mix."""

    def __init__(self, datasets: Sequence[Source], *, weights: Optional[Sequence[float]] = None,
                 epoch_size: Optional[int] = None, replacement: bool = False,
                 classes: Optional[Sequence[str]] = None, verify_checksums: bool = True) -> None:
        if isinstance(datasets, (str, bytes, _os.PathLike, _sp.Dataset)):
            raise _sp.ArgumentTypeError("mix: datasets must be a list of datasets (folders or shardpack.Dataset)")
        parts = [d if isinstance(d, _sp.Dataset) else _sp.open(d, verify_checksums=verify_checksums)
                 for d in datasets]
        if not parts:
            raise _sp.ArgumentValueError("mix: no datasets")
        self.datasets: List[_sp.Dataset] = parts
        sizes = [len(d) for d in parts]
        self.offsets = _np.concatenate([[0], _np.cumsum(sizes, dtype=_np.int64)]).astype(_np.int64)
        if weights is None:
            weights = [float(s) for s in sizes]
        try:
            w = [float(x) for x in weights]
        except (TypeError, ValueError):
            raise _sp.ArgumentTypeError(f"mix: weights must be numbers, not {weights!r}") from None
        if len(w) != len(parts):
            raise _sp.ArgumentValueError(f"mix: {len(w)} weights for {len(parts)} datasets")
        self.weights = w
        size = int(self.offsets[-1]) if epoch_size is None else _checks.integer(epoch_size, "mix: epoch_size", 0)
        self.epoch_size = size
        self.replacement = bool(replacement)
        self.counts: List[int] = list(_mix_counts(w, size))  # checks the weights (ArgumentValueError)
        for d, c in zip(parts, self.counts):
            if c and not len(d):
                raise _sp.ArgumentValueError(f"mix: {d.path} has no records but its weight gives it {c} an epoch")
        self._path = "mix(" + ", ".join(d.path for d in parts) + ")"
        self._match_schemas(classes)

    def _match_schemas(self, classes: Optional[Sequence[str]]) -> None:
        parts = self.datasets
        tasks = {d.task for d in parts}
        if len(tasks) > 1:
            raise _sp.ArgumentValueError("mix: the datasets are of different tasks: " +
                                         ", ".join(f"{d.path} {d.task}" for d in parts))
        self._task = parts[0].task
        channels = [d._reader.channels for d in parts]
        if len(set(channels)) > 1:
            raise _sp.ArgumentValueError("mix: the datasets' images have different channel counts (" +
                                         ", ".join(f"{d.path}: {c}" for d, c in zip(parts, channels)) +
                                         "): a mix needs one")
        for d in parts:
            seen: Dict[str, int] = {}
            for j, name in enumerate(d.classes):
                if name in seen:
                    raise _sp.ArgumentValueError(f"mix: {d.path} names class {name!r} twice (ids {seen[name]} and {j}): "
                                                 "classes are matched by name")
                seen[name] = j
        if classes is None:
            names: List[str] = []
            for d in parts:
                names += [c for c in d.classes if c not in names]
        else:
            if isinstance(classes, (str, bytes)):
                raise _sp.ArgumentTypeError("mix: classes must be a list of class names")
            names = [str(c) for c in classes]
            if len(set(names)) != len(names):
                raise _sp.ArgumentValueError("mix: classes names a class twice")
            for d in parts:
                missing = [c for c in d.classes if c not in names]
                if missing:
                    raise _sp.ArgumentValueError(f"mix: {d.path} has classes that classes= lacks: {missing[:5]}")
        self._classes = names
        position = {c: j for j, c in enumerate(names)}
        k = len(names)
        seg = self._task == "segmentation"
        self._ignore = (255 if k <= 255 else 65535) if seg else 0
        self._ids = [_np.array([position[c] for c in d.classes], dtype=_np.int64) for d in parts]
        self._same = [d.classes == names and (not seg or d.ignore_value == self._ignore) for d in parts]
        self._tables = [_index_map(d, ids.tolist(), self._ignore) for d, ids in zip(parts, self._ids)]
        layouts = {d.label_layout for d in parts}
        shapes = {d.image_shape for d in parts}
        self._schema: Any = _Namespace(task=self._task, label_layout=layouts.pop() if len(layouts) == 1 else "index",
                                  class_count=k, ignore_value=self._ignore, channels=channels[0],
                                  image_shape=shapes.pop() if len(shapes) == 1 else None)

    # -- what a Dataset has
    def __repr__(self) -> str:
        return (f"shardpack.Mix({[d.path for d in self.datasets]}, weights={self.weights}, epoch_size={self.epoch_size}, "
                f"counts={self.counts})")

    def __len__(self) -> int:
        """The mixed indices: the sum of the datasets' sizes (an epoch is epoch_size samples)."""
        return int(self.offsets[-1])

    @property
    def path(self) -> str:
        return self._path

    @property
    def task(self) -> str:
        return self._task

    @property
    def classes(self) -> List[str]:
        return list(self._classes)

    @property
    def image_shape(self) -> Optional[Tuple[int, int, int]]:
        """(H, W, C) when every dataset's records have it, else None (then read with a crop)."""
        return cast(Optional[Tuple[int, int, int]], self._schema.image_shape)

    @property
    def label_layout(self) -> str:
        """The datasets' label layout when they share one; else "index" (label="stored" reads index labels)."""
        return cast(str, self._schema.label_layout)

    @property
    def ignore_value(self) -> int:
        return self._ignore

    @property
    def shard_starts(self) -> _npt.NDArray[_np.int64]:
        return _np.concatenate([d.shard_starts + o for d, o in zip(self.datasets, self.offsets[:-1])])

    @property
    def data_bytes(self) -> int:
        return sum(d.data_bytes for d in self.datasets)

    @property
    def field_info(self) -> List["_sp.Field"]:
        """[]: per-sample fields (format 1.5) are each dataset's own, and a mix reads none."""
        return []

    def _field_names(self, fields: Any, what: str) -> List[str]:
        if fields is None:
            return []
        raise _sp.ArgumentValueError(f"{what}: a mix reads no per-sample fields (each dataset declares its own); "
                                     "read them from mixed.datasets[k].fields(i)")

    @property
    def preferred_order(self) -> str:
        """"blocks" when any dataset prefers it (one read from cold storage), else "global"."""
        prefs = [getattr(d, "preferred_order", "global") for d in self.datasets]
        return "blocks" if "blocks" in prefs else "global"

    def locate(self, indices: _sp.Indices) -> Tuple[_npt.NDArray[_np.int64], _npt.NDArray[_np.int64]]:
        """(dataset, record) of each mixed index: two int64 arrays."""
        idx = _checks.indices(indices, len(self), self._path, "locate")
        part = _np.searchsorted(self.offsets, idx, side="right") - 1
        return part, idx - self.offsets[part]

    def key(self, i: int) -> str:
        k, r = self._one(i)
        return self.datasets[k].key(r)

    def _one(self, i: int) -> Tuple[int, int]:
        g = _checks.index(i, len(self), self._path)
        k = int(_np.searchsorted(self.offsets, g, side="right") - 1)
        return k, g - int(self.offsets[k])

    def __getitem__(self, i: int) -> Tuple[_npt.NDArray[_np.uint8], Any]:
        """(image, label) of mixed record i, its label in the mix's class ids (see Dataset.__getitem__)."""
        k, r = self._one(i)
        image, label = self.datasets[k][r]
        if self._same[k]:
            return image, label
        if isinstance(label, int):
            return image, int(self._ids[k][label])
        if self.datasets[k].label_layout == "onehot":
            planes = _np.zeros(label.shape[:-1] + (len(self._classes),), dtype=label.dtype)
            planes[..., self._ids[k]] = label
            return image, planes
        table = self._tables[k].astype(_np.uint8 if self._ignore == 255 else _np.uint16)
        return image, table[label]

    def __iter__(self) -> Iterator[Tuple[_npt.NDArray[_np.uint8], Any]]:
        for i in range(len(self)):
            yield self[i]

    def prefetch(self, indices: _sp.Indices) -> None:
        part, local = self.locate(indices)
        for k in _np.unique(part):
            self.datasets[int(k)].prefetch(local[part == k])

    # -- batches
    def _check(self, dtype: Any, layout: Any, label: Any, label_dtype: Any, crop: Any) -> Any:
        if crop is None and self._schema.image_shape is None:
            sizes = ", ".join(f"{d.path}: {'mixed sizes' if d.image_shape is None else 'x'.join(map(str, d.image_shape))}"
                              for d in self.datasets)
            raise _sp.ArgumentValueError(f"{self._path}: the mixed datasets' images are not all of one size ({sizes}); "
                                         "read them with crop=(height, width), no larger than the smallest")
        return _sp._BatchOptions.check(self._schema, self._path, dtype, layout, label, label_dtype, crop)

    def batch_spec(self, batch_size: int, *, dtype: _sp.DType = "float32", layout: _sp.Layout = "NCHW",
                   label: _sp.Label = "onehot", label_dtype: _sp.LabelDType = None,
                   crop: Optional[Tuple[int, int]] = None) -> _sp.Spec:
        """As Dataset.batch_spec, with the mix's classes."""
        n = _checks.integer(batch_size, "batch_spec: batch_size", 0)
        return _sp.Dataset._spec(self._schema, n, self._check(dtype, layout, label, label_dtype, crop))

    def read_batch(self, indices: _sp.Indices, *, dtype: _sp.DType = "float32", layout: _sp.Layout = "NCHW",
                   normalize: _sp.Normalize = "auto", label: _sp.Label = "onehot", label_dtype: _sp.LabelDType = None,
                   out: Optional[Tuple[Any, Any]] = None, threads: int = 0, crop: Optional[Tuple[int, int]] = None,
                   crop_position: _sp.CropPosition = "center", hflip: _sp.Flip = 0.0, vflip: _sp.Flip = 0.0,
                   seed: int = 0, epoch: int = 0, return_boxes: bool = False) -> Tuple[Any, ...]:
        """Dataset.read_batch over mixed indices, with the same options; labels in the mix's class
        ids. Dataset k draws its random crops and flips with seed + k (mod 2**64)."""
        idx = _checks.indices(indices, len(self), self._path, "read_batch")
        o = self._check(dtype, layout, label, label_dtype, crop)
        n = len(idx)
        (ishape, idtype), (lshape, ldtype) = _sp.Dataset._spec(self._schema, n, o)
        part = _np.searchsorted(self.offsets, idx, side="right") - 1
        present = _np.unique(part)
        seed, epoch = _checks.seed_and_epoch(seed, epoch, "read_batch")
        options: Dict[str, Any] = dict(dtype=dtype, layout=layout, normalize=normalize, threads=threads, crop=crop, epoch=epoch)
        label_words: Any = "onehot" if o.label == "onehot" else "index"

        def per_sample(value: Any, pos: Any) -> Any:
            return value if isinstance(value, (str, float, int)) or _np.ndim(value) == 0 else _np.asarray(value)[pos]

        if n == 0:  # the datasets check the other options (normalize, threads, flips) on no record
            for d in self.datasets:
                d.read_batch(idx, label=label_words, crop_position=crop_position, hflip=hflip, vflip=vflip, seed=seed,
                             **options)
        elif len(present) == 1 and self._same[int(present[0])]:  # one dataset, labels as stored: no copy
            k = int(present[0])
            return self.datasets[k].read_batch(idx - self.offsets[k], label=label_words, label_dtype=o.label_dtype,
                                               out=out, crop_position=crop_position, hflip=hflip, vflip=vflip,
                                               seed=(seed + k) % 2**64, return_boxes=return_boxes, **options)
        if out is None:
            images, labels = _np.empty(ishape, idtype), _np.empty(lshape, ldtype)
        else:
            images, labels = _out_arrays(out, (ishape, idtype), (lshape, ldtype))
        boxes = _np.empty((n, 4), dtype=_np.int64) if return_boxes else None
        for k in present.tolist():
            pos = _np.flatnonzero(part == k)
            d = self.datasets[k]
            words: Dict[str, Any]
            if self._same[k] or o.label == "onehot":
                words = dict(label=label_words, label_dtype=o.label_dtype)
            else:  # index values renumbered below, read as compactly as they are stored
                words = dict(label="index", label_dtype="uint8" if len(self._tables[k]) <= 256 else "uint16")
            got = d.read_batch(idx[pos] - self.offsets[k], crop_position=per_sample(crop_position, pos),
                               hflip=per_sample(hflip, pos), vflip=per_sample(vflip, pos), seed=(seed + k) % 2**64,
                               return_boxes=return_boxes, **words, **options)
            images[pos] = got[0]
            if self._same[k]:
                labels[pos] = got[1]
            elif o.label == "onehot":
                planes = _np.zeros((len(pos),) + lshape[1:], dtype=ldtype)
                if self._task == "segmentation" and not o.channels_first:
                    planes[..., self._ids[k]] = got[1]
                else:
                    planes[:, self._ids[k]] = got[1]
                labels[pos] = planes
            else:
                labels[pos] = self._tables[k][got[1]]
            if boxes is not None:
                boxes[pos] = got[2]
        if out is not None:
            images, labels = out
        return (images, labels, boxes) if return_boxes else (images, labels)

    # -- the order
    @staticmethod
    def _layout(d: "_sp.Dataset", block: Optional[int], window: Optional[int]) -> Tuple[int, int, int, List[int]]:
        """Dataset d's (n, block, window, shard starts) in the mix's blocks order: as given, else
        blocks of about 4 MiB of its bytes and windows of 16, whatever its reader's cache
        (Dataset.blocks_layout shrinks them to fit it): every rank and every resume of a mix must
        read one order, and a Sampler state of a mix records no layout."""
        n = len(d)
        if block is None and n:
            block = max(1, round(_sp.BLOCK_BYTES * n / max(1, d.data_bytes)))
        return _sp._block_parameters(n, block, window, d.shard_starts)

    def _parts(self, block: Optional[int], window: Optional[int]) -> Tuple[List[int], List[List[int]], int]:
        blocks, starts = [], []
        w = _sp.WINDOW_BLOCKS
        for d in self.datasets:
            _, b, w, s = self._layout(d, block, window)
            blocks.append(b)
            starts.append(s)
        return blocks, starts, w

    def full_order(self, seed: int = 0, epoch: int = 0, shuffle: bool = True, *, order: str = "global",
                   block: Optional[int] = None, window: Optional[int] = None) -> _npt.NDArray[_np.int64]:
        """The whole mixed order of an epoch (epoch_size mixed indices) before it is split between ranks."""
        seed, epoch = _checks.seed_and_epoch(seed, epoch, "epoch_order")
        if order == "auto":
            order = self.preferred_order
        order = _checks.choice(order, "epoch_order: order", _sp._ORDERS)
        blocks, starts, w = self._parts(block, window)
        return cast(_npt.NDArray[_np.int64],
                    _mix_full_order([len(d) for d in self.datasets], self.weights, blocks, starts, seed, epoch,
                                    bool(shuffle), order, w, self.epoch_size, self.replacement))

    def epoch_order(self, seed: int = 0, epoch: int = 0, shuffle: bool = True, rank: int = 0, world: int = 1,
                    drop_last: bool = False, order: str = "global", block: Optional[int] = None,
                    window: Optional[int] = None) -> _npt.NDArray[_np.int64]:
        """The mixed indices rank `rank` of `world` reads in epoch `epoch` (shardpack.epoch_order(mix, ...))."""
        return resumed_order(self, seed, epoch, shuffle, rank, world, drop_last, order=order, block=block,
                             window=window)

    def _block_starts(self, block: Optional[int], window: Optional[int]) -> Tuple[_npt.NDArray[_np.int64], int]:
        """Every dataset's blocks, as mixed indices, then len(self); and the window (for read-ahead)."""
        pieces, w = [], _sp.WINDOW_BLOCKS
        for d, offset in zip(self.datasets, self.offsets[:-1]):
            n, b, w, s = self._layout(d, block, window)
            starts, w = _sp._block_starts(n, b, w, s)
            pieces.append(starts[:-1] + offset)
        pieces.append(self.offsets[-1:])
        return _np.concatenate(pieces).astype(_np.int64), w

    def _state_key(self) -> List[Any]:
        """What a Sampler state of this mix must match: the sizes, weights, epoch and draws."""
        return [[len(d) for d in self.datasets], self.weights, self.epoch_size, self.replacement]


def _out_arrays(out: Any, *specs: Any) -> List[_npt.NDArray[Any]]:
    """read_batch's out= pair as writable NumPy views of the caller's memory, checked against the batch."""
    if not isinstance(out, (tuple, list)) or len(out) != 2 or out[0] is None or out[1] is None:
        raise _sp.ArgumentTypeError("read_batch: out must be a pair of arrays (images, labels)")
    arrays = []
    for a, (shape, dtype), what in zip(out, specs, ("images", "labels")):
        if not isinstance(a, _np.ndarray) and hasattr(a, "numpy") and hasattr(a, "__dlpack__"):
            a = a.numpy()  # a torch tensor on the CPU: a view of its memory
        v = _np.asarray(a)
        if v.shape != tuple(shape) or v.dtype != dtype or not v.flags.writeable or not v.flags.c_contiguous:
            raise _sp.ArgumentValueError(f"read_batch: out {what} must be a writable C-contiguous {dtype} array of "
                                         f"shape {tuple(shape)}, not {v.dtype} {v.shape}")
        arrays.append(v)
    return arrays


def epoch_size_of(source: Any) -> int:
    """The samples of an epoch of `source`: a Mix's epoch_size, else its length."""
    return source.epoch_size if isinstance(source, Mix) else len(source)


def resumed_order(source: Any, seed: int, epoch: int, shuffle: bool, rank: int, world: int, drop_last: bool, *,
                  order: str = "global", block: Optional[int] = None, window: Optional[int] = None,
                  stages: Sequence[Sequence[int]] = ()) -> _npt.NDArray[_np.int64]:
    """The indices rank `rank` of `world` reads of epoch `epoch` of `source` (a record count, a
    Dataset or a Mix) after the changes of world in `stages` (each: how many of its share every
    rank of that world read; include/shardpack/mix.hpp's remaining_order). No stages: the
    epoch's share, as shardpack.epoch_order gives it."""
    rank, world = _checks.rank_and_world(rank, world, "epoch_order: ")
    if isinstance(source, Mix):
        full = source.full_order(seed, epoch, shuffle, order=order, block=block, window=window)
    else:
        if not stages:
            return _sp.epoch_order(source, seed, epoch, shuffle, rank, world, drop_last, order=cast(_sp.Order, order),
                                   block=block, window=window)
        full = _sp.epoch_order(source, seed, epoch, shuffle, 0, 1, False, order=cast(_sp.Order, order), block=block,
                               window=window)
    contiguous = bool(shuffle) and order == "blocks"
    return cast(_npt.NDArray[_np.int64],
                _resumed_order(full, [[int(c) for c in s] for s in stages], rank, world, bool(drop_last), contiguous))
