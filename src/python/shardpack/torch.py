"""PyTorch adapters: a map-style Dataset for torch's DataLoader, a distributed Sampler that
resumes mid-epoch, Loader, which fills batches on C++ threads without worker processes, and
to_device, which moves a uint8 batch to the GPU and converts it there.

With PyTorch's own DataLoader and its defaults (default collate, any number of workers):

    import shardpack.torch as spt
    dl = DataLoader(spt.Dataset("data/train"), batch_size=64, shuffle=True, num_workers=2)

Each batch is still one read_batch call (Dataset.__getitems__); the default collate then
stacks per-sample views of it into a new batch. collate_fn=spt.collate skips that copy and
hands the batch on as it was read (in a worker: straight into the shared memory that carries
it to the main process):

    dl = DataLoader(spt.Dataset(path), batch_size=64, sampler=spt.Sampler(ds, seed=0),
                    collate_fn=spt.collate, num_workers=2)

Loader reads in this process on the C++ reader's threads, no workers, nothing pickled:

    loader = spt.Loader("data/train", batch_size=64, rank=rank, world=world)   # shuffled
    for epoch in range(epochs):
        loader.set_epoch(epoch)
        for images, labels in loader:      # float32 NCHW, ImageNet-normalised; one-hot labels
            ...

The recommended delivery for a GPU is uint8 as stored, converted on the device (a quarter of the
image bytes, and index labels instead of one-hot planes; see to_device):

    loader = spt.Loader(path, batch_size=64, dtype="uint8", label="index", pin_memory=True,
                        reuse_buffers=True)
    for batch in loader:
        images, labels = spt.to_device(batch, "cuda", normalize="imagenet", onehot=len(ds.classes))
"""
from __future__ import annotations

import atexit as _atexit
import collections.abc as _abc
import queue as _queue
import sys as _sys
import threading as _threading
import warnings as _warnings
import weakref as _weakref
from typing import Any, Dict, Iterator, Optional, Sequence, Tuple, Union

import numpy as _np
import torch as _torch
import torch.utils.data as _data

import shardpack as _sp
from shardpack import _checks, _mix
from shardpack._readahead import ReadAhead as _ReadAhead, records_ahead as _records_ahead

__all__ = ["Dataset", "Samples", "Sampler", "Loader", "collate", "Batch", "to_device"]

_TORCH_DTYPES = {_np.dtype(_np.float32): _torch.float32, _np.dtype(_np.uint8): _torch.uint8,
                 _np.dtype(_np.int64): _torch.int64}
if hasattr(_torch, "uint16"):  # PyTorch 2.3 and later: uint16 images (and index labels) as stored
    _TORCH_DTYPES[_np.dtype(_np.uint16)] = _torch.uint16

# Argument errors: shardpack.Error and ValueError or TypeError, as read_batch raises them.
_ValueError, _TypeError = _sp.ArgumentValueError, _sp.ArgumentTypeError


def _normalize_for(dtype: Any, normalize: Any) -> Any:
    """read_batch's normalize for these options: "auto" (the default) is ImageNet's for float32
    batches and nothing for uint8 ones (which are as stored)."""
    if isinstance(normalize, str) and normalize == "auto":
        # float32: read_batch resolves "auto" (ImageNet's, None for bands other than 3)
        return None if dtype in ("uint8", _np.uint8, "uint16", _np.uint16) else "auto"
    return normalize


def _label_options(label: str, label_dtype: Any) -> dict:
    """label and, when given, label_dtype (read_batch's: "uint8" index labels where the classes
    fit, "int64" as PyTorch's losses take them; None: read_batch's default)."""
    return dict(label=label) if label_dtype is None else dict(label=label, label_dtype=label_dtype)


def _check_torch_dtypes(spec: Any, what: str) -> None:
    for shape, dtype in spec:
        if _np.dtype(dtype) not in _TORCH_DTYPES:
            raise _ValueError(f"{what}: {_np.dtype(dtype)} batches cannot be torch tensors in PyTorch "
                              f"{_torch.__version__}; ask for uint8 or int64 labels (label_dtype)")


def _open(source: Any, verify_checksums: bool = True) -> "_sp.Dataset":
    if isinstance(source, (_sp.Dataset, _sp.Mix)):
        return source
    if isinstance(source, Dataset):
        return source.dataset
    return _sp.open(source, verify_checksums=verify_checksums)


def _shared_empty(shape: Sequence[int], dtype: Any) -> _torch.Tensor:
    """An uninitialised tensor in shared memory, as default_collate makes them in workers."""
    empty = _torch.empty(0, dtype=_TORCH_DTYPES[_np.dtype(dtype)])
    numel = int(_np.prod(shape))
    if hasattr(empty, "_typed_storage"):  # PyTorch 2
        storage = empty._typed_storage()._new_shared(numel, device="cpu")
    else:  # PyTorch 1.13
        storage = empty.storage()._new_shared(numel)
    return empty.new(storage).resize_(*shape)


class Batch(tuple):
    """(images, labels) of a whole batch, as dataset[[i, j, ...]] returns it; collate passes it
    through unchanged (as a plain tuple)."""
    __slots__ = ()


def _fields_to_torch(fields: dict) -> dict:
    """read_batch's fields as tensors (Padded / PaddedBoxes keep their form; str lists stay lists)."""
    out = {}
    for name, v in fields.items():
        if isinstance(v, tuple):  # Padded, PaddedBoxes
            out[name] = type(v)(*(_torch.from_numpy(a) for a in v))
        elif isinstance(v, _np.ndarray):
            out[name] = _torch.from_numpy(v)
        else:
            out[name] = v
    return out


def _sample_fields(fields: dict, j: int) -> dict:
    """Sample j's fields of a batch: lists and boxes cut to their counts (no padding)."""
    out = {}
    for name, v in fields.items():
        if isinstance(v, _sp.PaddedBoxes):
            c = int(v.counts[j])
            out[name] = _sp.Boxes(v.boxes[j, :c], v.labels[j, :c])
        elif isinstance(v, _sp.Padded):
            out[name] = v.values[j, :int(v.counts[j])]
        else:
            out[name] = v[j]
    return out


def _default_collate(data: Any) -> Any:
    return _data.default_collate(data) if hasattr(_data, "default_collate") else \
        _data.dataloader.default_collate(data)


def collate(data: Any) -> Any:
    """A DataLoader collate_fn for Dataset that keeps the batch as read_batch wrote it.

    Samples (what Dataset.__getitems__ returns) become the (images, labels) of their one
    read_batch call, with no copy: in a DataLoader worker that batch was read straight into
    shared memory, which is how it travels to the main process. A Batch passes through as a
    plain tuple; anything else goes to torch's default collate."""
    if isinstance(data, Samples):
        return tuple(data.batch())
    if isinstance(data, Batch):
        return tuple(data)
    return _default_collate(data)


class Samples(_abc.Sequence):
    """The samples of one DataLoader batch, as Dataset.__getitems__ returns them.

    A sequence of (image, label) pairs, which torch's default collate stacks like any other
    dataset's samples (PyTorch 1.13 and 2.x both hand __getitems__'s result to collate_fn). The
    records are read by one read_batch call when first needed: collate (collate_fn=spt.collate)
    takes the whole batch with batch(), straight into shared memory in a DataLoader worker; the
    default collate indexes it, and then the batch is read into ordinary memory and each sample
    is a view of it."""

    __slots__ = ("_dataset", "_indices", "_epoch", "_batch")

    def __init__(self, dataset: "Dataset", indices: Any, epoch: int):
        self._dataset = dataset
        self._indices = _np.asarray(indices, dtype=_np.int64).reshape(-1)
        self._epoch = epoch
        self._batch: Optional[Batch] = None

    @property
    def indices(self) -> _np.ndarray:
        """The record indices of these samples (int64)."""
        return self._indices

    def batch(self) -> Batch:
        """(images, labels): the whole batch as two tensors, read now if it was not yet."""
        if self._batch is None:
            self._batch = self._dataset._read(self._indices, self._epoch,
                                              shared=_data.get_worker_info() is not None)
        return self._batch

    def __len__(self) -> int:
        return len(self._indices)

    def __iter__(self) -> Iterator[Tuple[_torch.Tensor, _torch.Tensor]]:
        for j in range(len(self)):
            yield self[j]

    def __getitem__(self, j: Any) -> Any:
        if self._batch is None:
            self._batch = self._dataset._read(self._indices, self._epoch, shared=False)
        images, labels = self._batch[0], self._batch[1]
        if len(self._batch) == 3:  # with fields
            fields = self._batch[2]
            if isinstance(j, slice):
                return [(images[k], labels[k], _sample_fields(fields, k)) for k in range(len(self))[j]]
            return images[j], labels[j], _sample_fields(fields, j)
        if isinstance(j, slice):
            return [(images[k], labels[k]) for k in range(len(self))[j]]
        return images[j], labels[j]

    def __repr__(self) -> str:
        return f"shardpack.torch.Samples({len(self)} records of {self._dataset.dataset.path!r})"


class Dataset(_data.Dataset):
    """A map-style dataset of (image, label) tensors, with the options of read_batch.

    dataset[i] is one sample (image, label); dataset[[i, j, ...]] a whole Batch (two tensors),
    read by one read_batch call. In a DataLoader with automatic batching, __getitems__ returns
    the batch's Samples, read by one read_batch call as well: torch's default collate stacks
    them (PyTorch's defaults work), collate_fn=spt.collate takes the batch as it was read (no
    copy). threads=None: all cores in the main process, 1 inside a DataLoader worker (the workers
    are the parallelism there). Pickles by path: workers reopen the dataset (fork or spawn).

    dtype, layout, normalize, label, label_dtype: as read_batch.
    normalize="auto" (the default) gives float32 images as (x / 255 - mean) / std with ImageNet's
    mean 0.485 0.456 0.406 and std 0.229 0.224 0.225 (grey: 0.449, 0.226), and says so once on the
    "shardpack" logger; normalize=None gives x / 255; uint8 batches are as stored.
    crop, crop_position ("center", "random" or
    "foreground"), crop_background, hflip, vflip (probabilities) and seed: crops and flips at read time, as in
    shardpack.Dataset.read_batch, drawn from (seed, epoch, record index). set_epoch(e) before
    each epoch for new ones; DataLoader workers copy the dataset when an epoch's iteration
    starts, so with persistent_workers=True they keep the epoch they started with.

    fields, min_box_visibility: per-sample fields (format 1.5) as read_batch reads them: samples
    are then (image, label, fields) with each sample's lists and boxes at their own length
    (shardpack.Boxes for boxes), and a batch (collate_fn=spt.collate, or dataset[[i, j]]) is
    (images, labels, fields) with lists Padded and boxes PaddedBoxes (padded, with counts), every
    array a tensor; boxes follow each sample's crop and flips."""

    def __init__(self, source: Any, *, dtype: str = "float32", layout: str = "NCHW",
                 normalize: Any = "auto", label: str = "onehot", label_dtype: Any = None,
                 threads: Optional[int] = None, verify_checksums: bool = True, crop: Optional[Tuple[int, int]] = None, crop_position: str = "center",
                 hflip: float = 0.0, vflip: float = 0.0, seed: int = 0, fields: Optional[Sequence[str]] = None,
                 min_box_visibility: float = 0.0, crop_background: Any = None):
        self.dataset = _open(source, verify_checksums)
        self.options = dict(dtype=dtype, layout=layout, normalize=_normalize_for(dtype, normalize),
                            **_label_options(label, label_dtype), crop=crop, crop_position=_position(crop_position),
                            hflip=_checks.probability(hflip, "hflip"), vflip=_checks.probability(vflip, "vflip"),
                            seed=_checks.integer(seed, "seed", 0), **_background(crop_background))
        if threads is not None:
            threads = _checks.integer(threads, "threads", 0)
        self.threads = threads
        self.epoch = 0
        self._spec_options = dict(dtype=dtype, layout=layout, **_label_options(label, label_dtype), crop=crop)
        self._field_options = {} if fields is None else dict(  # (a mix refuses fields here, by name)
            fields=self.dataset._field_names(fields, "shardpack.torch.Dataset"), min_box_visibility=min_box_visibility)
        # checks the options now (an empty read checks every option)
        _check_torch_dtypes(self.dataset.batch_spec(1, **self._spec_options), "shardpack.torch.Dataset")
        self.dataset.read_batch(_np.empty(0, _np.int64), **self.options, **self._field_options)

    def set_epoch(self, epoch: int) -> None:
        """The epoch random crops and flips are drawn for."""
        self.epoch = _checks.integer(epoch, "epoch", 0)

    def __len__(self) -> int:
        return len(self.dataset)

    def _threads(self) -> int:
        if self.threads is not None:
            return self.threads
        return 1 if _data.get_worker_info() is not None else 0

    def _read(self, indices: _np.ndarray, epoch: int, shared: bool) -> Batch:
        """One read_batch call: into new arrays, or (shared) into shared-memory tensors, which is
        how a DataLoader worker's batch travels to the main process (anything else would be
        copied there once more)."""
        if not shared:
            got = self.dataset.read_batch(indices, threads=self._threads(), epoch=epoch, **self.options,
                                          **self._field_options)
            tensors = (_torch.from_numpy(got[0]), _torch.from_numpy(got[1]))
            return Batch(tensors + (_fields_to_torch(got[2]),) if self._field_options else tensors)
        (ishape, idtype), (lshape, ldtype) = self.dataset.batch_spec(len(indices), **self._spec_options)
        images, labels = _shared_empty(ishape, idtype), _shared_empty(lshape, ldtype)
        got = self.dataset.read_batch(indices, out=(images, labels), threads=self._threads(), epoch=epoch, **self.options,
                                      **self._field_options)
        return Batch((images, labels, _fields_to_torch(got[2])) if self._field_options else (images, labels))

    def __getitems__(self, indices: Sequence[int]) -> Samples:
        """The Samples of a batch (what torch's DataLoader asks for with automatic batching)."""
        return Samples(self, _checked_indices(self.dataset, indices), self.epoch)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, (list, tuple, range, _np.ndarray, _torch.Tensor)) and getattr(i, "ndim", 1) == 1:
            return self._read(_checked_indices(self.dataset, i), self.epoch,
                              shared=_data.get_worker_info() is not None)
        i = _checks.index(i, len(self.dataset), self.dataset.path)
        batch = self._read(_np.array([i], dtype=_np.int64), self.epoch, shared=False)
        if len(batch) == 3:
            return batch[0][0], batch[1][0], _sample_fields(batch[2], 0)
        return batch[0][0], batch[1][0]


def _checked_indices(dataset: "_sp.Dataset", indices: Any) -> _np.ndarray:
    if isinstance(indices, _torch.Tensor):
        indices = indices.cpu().numpy()
    return _checks.indices(indices, len(dataset), dataset.path, "shardpack.torch.Dataset")


def _background(crop_background: Any) -> Dict[str, Any]:
    """read_batch's crop_background when given (crop_position="foreground"; it checks the classes)."""
    return {} if crop_background is None else {"crop_background": crop_background}


def _position(crop_position: Any) -> str:
    """A word of read_batch's (a Loader or Dataset crops by position, not by boxes)."""
    return _checks.choice(crop_position, "crop_position", _sp._CROP_POSITIONS)


def _rank_and_world(rank: Optional[int], world: Optional[int]) -> Tuple[int, int]:
    if rank is None or world is None:
        dist = getattr(_torch, "distributed", None)
        ready = dist is not None and dist.is_available() and dist.is_initialized()
        if world is None:
            world = dist.get_world_size() if ready else 1
        if rank is None:
            rank = dist.get_rank() if ready else 0
    return _checks.rank_and_world(rank, world, "")


def _order_source(data_source: Any) -> Any:
    if isinstance(data_source, (_sp.Dataset, _sp.Mix)):
        return data_source
    if isinstance(data_source, Dataset):
        return data_source.dataset
    return None


def _agreed_order(order: str, layout: Tuple[Optional[int], Optional[int]],
                  world: int) -> Tuple[str, Tuple[Optional[int], Optional[int]]]:
    """order="auto" on the ranks of a torch.distributed job: the ranks' readers may choose apart
    (one finds the data in its page cache, another has less memory), and ranks that read
    different orders read some samples twice and others never. Every rank takes "blocks" when one
    prefers it, and the smallest block and window any rank's cache calls for (one all_reduce)."""
    dist = getattr(_torch, "distributed", None)
    if world < 2 or dist is None or not dist.is_available() or not dist.is_initialized() or dist.get_world_size() != world:
        return order, layout
    block, window = layout
    device = _torch.device("cuda", _torch.cuda.current_device()) if dist.get_backend() == "nccl" else _torch.device("cpu")
    big = 1 << 62
    mine = _torch.tensor([int(order == "blocks"), -(block or big), -(window or big)], dtype=_torch.int64, device=device)
    dist.all_reduce(mine, op=dist.ReduceOp.MAX)
    blocks, block_, window_ = (int(v) for v in mine.tolist())
    if not blocks:
        return "global", layout
    return "blocks", (None if -block_ == big else -block_, None if -window_ == big else -window_)


# What a state saved before Sampler had the blocks order means.
_STATE_DEFAULTS = {"order": "global", "block": None, "window": None, "mix": None}


class Sampler(_data.Sampler):
    """The indices of one rank for one epoch.

    Defaults as every shardpack training iterator: shuffle=True, seed=0, drop_last=False,
    starting at epoch 0. The order is shardpack.epoch_order(data_source, seed, epoch,
    order=order, block=block, window=window): order="auto" (the default) is "blocks" when the
    dataset's reader reads blocks (data_source.preferred_order: larger than its cache and not in
    memory), else "global"; order="global" a permutation of all
    records (0..n-1 without shuffle), rank r taking positions r, r + world, ... of it;
    order="blocks" the locality-aware shuffle for cold disks (see shardpack.epoch_order: blocks
    of consecutive records, shuffled within windows of `window` blocks; rank r takes the r-th
    contiguous share; shard-aligned blocks of about 4 MiB when data_source is a shardpack
    Dataset). The same in every process, whatever the number of DataLoader workers.
    drop_last=False pads (the order wraps around to its start) so that every rank gets
    ceil(n / world) indices; drop_last=True drops the tail so that every rank gets n // world.
    Equal counts keep DDP ranks in step.

    set_epoch(e) before each epoch (as with DistributedSampler). state_dict() records the epoch
    and how far this rank got; load_state_dict() makes the next iteration yield exactly the rest
    of that epoch. A DataLoader draws indices ahead of the training loop (prefetching), so pass
    the number of samples the loop consumed this epoch: state_dict(consumed=k); without it the
    position is what the iterator has yielded."""

    def __init__(self, data_source: Any, *, shuffle: bool = True, seed: int = 0, rank: Optional[int] = None,
                 world: Optional[int] = None, drop_last: bool = False, order: str = "auto",
                 block: Optional[int] = None, window: Optional[int] = None):
        self.n = data_source if isinstance(data_source, int) else len(data_source)
        if isinstance(_order_source(data_source), _sp.Mix):
            self.n = _order_source(data_source).epoch_size  # an epoch of a mix
        self.block, self.window = block, window
        # A shardpack Dataset gives the blocks order its shards and record size, and "auto" its choice.
        self._order_source = _order_source(data_source)
        self._order_asked = _checks.choice(order, "order", _sp._LOADER_ORDERS)
        self.order = _sp._resolve_order(order, self._order_source)
        _sp.epoch_order(0, order=self.order, block=block, window=window)  # checks the arguments now
        self.shuffle = bool(shuffle)
        self.seed = _checks.integer(seed, "seed", 0)
        self.rank, self.world = _rank_and_world(rank, world)
        self._agreed: Tuple[Optional[int], Optional[int]] = (None, None)  # the ranks' blocks layout
        if self._order_asked == "auto" and isinstance(self._order_source, _sp.Dataset):
            # The order and the blocks layout every rank reads (the layout as the blocks order's).
            _, layout_block, layout_window, _ = _sp._block_parameters(self._order_source, block, window, None)
            self.order, self._agreed = _agreed_order(self.order, (layout_block, layout_window), self.world)
            if self._agreed == (layout_block, layout_window):
                self._agreed = (None, None)  # this rank's own defaults
        elif self._order_asked == "auto" and isinstance(self._order_source, _sp.Mix):
            # A mix's blocks layout is the same on every rank (it ignores the readers' caches): only the order.
            self.order, _ = _agreed_order(self.order, (None, None), self.world)
        self.drop_last = bool(drop_last)
        self.epoch = 0
        self._stages: list = []  # earlier worlds of this epoch (load_state_dict of another world's state)
        self._resumed: Any = None  # (key, this rank's order) after such a change
        self._start = 0          # where the next iteration begins (after load_state_dict)
        self._iter_start = 0     # where the current iteration began
        self._yielded = 0        # indices the current iteration has yielded

    def set_epoch(self, epoch: int) -> None:
        epoch = _checks.integer(epoch, "epoch", 0)
        if epoch != self.epoch:
            self._start = self._iter_start = self._yielded = 0
            self._stages = []
        self.epoch = epoch

    @property
    def num_samples(self) -> int:
        """The indices this rank reads this epoch (after a change of world: of the epoch's rest)."""
        if self._stages:
            return len(self.epoch_order())
        return self.n // self.world if self.drop_last else -(-self.n // self.world)

    def epoch_order(self) -> _np.ndarray:
        """All of this rank's indices for the current epoch (an int64 array); after a change of
        world, its share of what the earlier worlds left of the epoch."""
        if self._stages:
            key = (self.seed, self.epoch, repr(self._stages))
            if self._resumed is None or self._resumed[0] != key:
                source = self._order_source if self._order_source is not None else self.n
                block, window = self._layout()
                self._resumed = (key, _mix.resumed_order(source, self.seed, self.epoch, self.shuffle, self.rank,
                                                         self.world, self.drop_last, order=self.order, block=block,
                                                         window=window, stages=self._stages))
            return self._resumed[1]
        block, window = self._layout()
        return _sp.epoch_order(self._order_source if self._order_source is not None else self.n, self.seed,
                               self.epoch, self.shuffle, self.rank, self.world, self.drop_last, order=self.order,
                               block=block, window=window)

    def read_ahead(self, dataset, order, batch_size):
        """With the blocks order, a shardpack._readahead.ReadAhead that fetches `order`'s blocks
        (this sampler's) whole, one window ahead; else None (read_batch announces each batch)."""
        if not (self.shuffle and self.order == "blocks"):
            return None
        source = self.n if self._order_source is None else self._order_source
        block, window = self._layout()
        starts, window = _sp._block_starts(source, block, window)
        return _ReadAhead(dataset, order, _records_ahead(dataset, starts, window), starts)

    def take(self) -> _np.ndarray:
        """The indices the next iteration yields (the rest of the epoch after load_state_dict),
        as an int64 array; starts that iteration (for state_dict)."""
        start, self._start = self._start, 0
        self._iter_start, self._yielded = start, 0
        return self.epoch_order()[start:]

    def __iter__(self) -> Iterator[int]:
        for i in self.take().tolist():
            self._yielded += 1
            yield i

    def __len__(self) -> int:
        return self.num_samples - self._start

    def _layout(self) -> Tuple[Optional[int], Optional[int]]:
        """(block, window) as the order uses them: as given, or for the blocks order of a
        Dataset, the reader's defaults (Dataset.blocks_layout), which a state records so that a
        resume reads the same order whatever the reader's cache is then."""
        if self.order != "blocks" or not isinstance(self._order_source, _sp.Dataset):
            return self.block, self.window
        block = self.block if self.block is not None else self._agreed[0]
        window = self.window if self.window is not None else self._agreed[1]
        _, block, window, _ = _sp._block_parameters(self._order_source, block, window, None)
        return block, window

    def state_dict(self, consumed: Optional[int] = None) -> dict:
        position = self._iter_start + (self._yielded if consumed is None else int(consumed))
        block, window = self._layout()
        return {"n": self.n, "seed": self.seed, "shuffle": self.shuffle, "world": self.world, "rank": self.rank,
                "drop_last": self.drop_last, "epoch": self.epoch, "position": position, "order": self.order,
                "block": block, "window": window, "mix": self._mix_key(),
                "resumed": [list(c) for c in self._stages]}

    def _mix_key(self) -> Any:
        return self._order_source._state_key() if isinstance(self._order_source, _sp.Mix) else None

    def load_state_dict(self, state: Any) -> None:
        """Resumes the epoch of `state` (one rank's state_dict, or a list of every rank's). On
        the world it was saved on, this rank goes on where it was. On another world, the rest of
        the epoch (what no rank of the old world read) is split between the new ranks, each
        remaining sample read once (formats/orders.md); one state stands for
        every old rank having read as far (as DDP ranks do), a list gives each rank's own."""
        states = list(state) if isinstance(state, (list, tuple)) else [state]
        if not states:
            raise _ValueError("Sampler.load_state_dict: an empty list of states")
        first = states[0]
        if self._order_asked == "auto" and first.get("order") in _sp._ORDERS:
            # "auto" resumes in the order the state was saved in (the data may be warmer or
            # colder now than when the epoch began; the rest of the epoch must not change).
            self.order = first["order"]
        # Block and window not given: those the state was read with (the reader's defaults
        # depend on its cache, which may differ now).
        if self.order == "blocks" and isinstance(self._order_source, _sp.Dataset):
            if self.block is None and first.get("block") is not None:
                self.block = int(first["block"])
            if self.window is None and first.get("window") is not None:
                self.window = int(first["window"])
        mine = dict(self.state_dict(), mix=self._mix_key())
        for k in ("n", "drop_last", "shuffle", "order", "block", "window", "mix"):
            if k in ("block", "window") and first.get(k) is None:
                continue  # a state of the global order, or saved before blocks had defaults of the reader's
            if first.get(k, _STATE_DEFAULTS.get(k)) != mine[k]:
                raise _ValueError(f"Sampler.load_state_dict: the state has {k}={first.get(k)}, this sampler {mine[k]}")
        for s in states[1:]:
            for k in ("n", "seed", "epoch", "world", "order", "resumed"):
                if s.get(k) != first.get(k):
                    raise _ValueError(f"Sampler.load_state_dict: the ranks' states differ in {k}")
        old_world = int(first["world"])
        if len(states) > 1 and len(states) != old_world:
            raise _ValueError(f"Sampler.load_state_dict: {len(states)} states for a world of {old_world}: give one "
                              "or one per rank")
        positions = [int(first["position"])] * old_world
        if len(states) > 1:
            by_rank = {int(s["rank"]): int(s["position"]) for s in states}
            if sorted(by_rank) != list(range(old_world)):
                raise _ValueError(f"Sampler.load_state_dict: the states are not of ranks 0..{old_world - 1}")
            positions = [by_rank[r] for r in range(old_world)]
        self.seed = int(first["seed"])
        self.epoch = int(first["epoch"])
        self._stages = [list(map(int, c)) for c in first.get("resumed", [])]
        if old_world == self.world and len(set(positions)) == 1:
            position = positions[0]
            if not 0 <= position <= self.num_samples:
                raise _ValueError(f"Sampler.load_state_dict: position {position} is not in [0, {self.num_samples}]")
        else:  # another world (or ranks that stopped apart): re-striped from the rest of the epoch
            self._stages.append(positions)
            position = 0
            self.num_samples  # checks the positions (ArgumentValueError)
        self._start = position
        self._iter_start, self._yielded = position, 0


_END = object()

# Producer threads of Loader iterators still running. They are daemon threads (an abandoned
# iterator must not keep the process alive), but Python 3.11 kills daemon threads at exit in
# the middle of what they do, and a thread killed inside a C++ call (read_batch) aborts the
# process. So they are stopped and joined at exit, before that happens.
_producers = set()


@_atexit.register
def _stop_producers() -> None:
    for stop, thread in list(_producers):
        stop.set()
        thread.join()


# ---------------------------------------------------------------------------------------------
# The ring of reused batch buffers (Loader(reuse_buffers=True))

class _Slot:
    """One batch's buffers in the ring: two NumPy arrays that own (or, pinned, view) the memory.

    Every tensor handed out over a slot is torch.from_numpy(array)[...]: its storage holds a
    reference to the array until the last tensor sharing that storage (views, slices, .numpy()
    arrays of it included) is freed. So the array's reference count says whether anything
    outside the ring can still see the memory. (Tensors made with torch.empty would not tell:
    a view holds the storage, not the tensor object one could count.)"""
    __slots__ = ("images", "labels", "state", "events", "seq", "__weakref__")

    # state: "free" (may be written: new, or released by the consumer), "producer" (being
    # filled or queued: not handed out yet), "delivered" (handed out, maybe still in use).

    def __init__(self, images: _np.ndarray, labels: _np.ndarray):
        self.images, self.labels = images, labels
        self.state = "producer"
        self.seq = 0  # when it was handed out (the ring's count of deliveries)
        self.events: list = []  # CUDA events to wait for before the slot is written again

    def referenced(self) -> bool:
        # 2 = the attribute + getrefcount's own argument
        return _sys.getrefcount(self.images) > 2 or _sys.getrefcount(self.labels) > 2


# data_ptr of a slot's images / labels -> the slot, so that to_device can find the ring slot of
# the tensors it copies from and make the slot wait for the copy's event.
_slots_by_address: "_weakref.WeakValueDictionary[int, _Slot]" = _weakref.WeakValueDictionary()
_slots_lock = _threading.Lock()


class _Ring:
    """prefetch + 3 slots for each live iterator: the one being filled, `prefetch` queued, and
    two handed out (the loop's current batch, and the previous one, which `for images, labels in
    loader` still holds when it asks for the next). The producer takes the first free slot, so a
    plain loop reuses the same few slots forever; when none is free and the ring is full, the
    slot handed out longest ago (still referenced) is left to whoever holds it and replaced by a
    new one.

    Several live iterators over one Loader (zip(loader, loader), an evaluation pass started
    inside a training pass) share the ring, which serves any number of them, as the Loader
    without reuse_buffers does: refusing the second would make reuse_buffers=True break loops
    that work without it. Each live iterator (attach/detach) adds prefetch + 3 places; when
    every slot is held by producers all the same (none free, none handed out), a slot is added
    rather than taking one a producer is filling. Free slots beyond the places of the iterators
    still alive are dropped when one ends."""

    def __init__(self, per_iterator: int, allocate):
        self._per_iterator = per_iterator
        self._allocate = allocate  # () -> (images, labels) NumPy arrays of a full batch
        self._slots: list = []
        self._live = 0  # iterators between attach() and detach()
        self._deliveries = 0
        self._lock = _threading.Lock()
        self.allocations = 0

    def _places(self) -> int:
        return self._per_iterator * max(1, self._live)

    def attach(self) -> None:
        with self._lock:
            self._live += 1

    def detach(self) -> None:
        with self._lock:
            self._live -= 1
            excess = len(self._slots) - self._places()
            for s in [s for s in self._slots if s.state == "free"][:max(0, excess)]:
                self._slots.remove(s)

    def acquire(self) -> _Slot:
        """A slot the producer may write (waits for its CUDA events first): the first free one,
        so that a loop reuses as few buffers as it needs (their memory stays faulted in and
        warm); a new one only when none is free."""
        with self._lock:
            slots = self._slots
            k = next((j for j, s in enumerate(slots) if s.state == "free"), None)
            if k is not None:
                slot = slots[k]
                slot.state = "producer"
                events, slot.events = slot.events, []
            else:
                # None free: a new place while there are fewer than the iterators' places, else
                # the place of the batch handed out longest ago that is still in use outside the
                # ring (the consumer keeps it); the old memory stays with whoever holds it.
                k = None
                if len(slots) >= self._places():
                    k = min((j for j, s in enumerate(slots) if s.state == "delivered"), key=lambda j: slots[j].seq,
                            default=None)
                if k is None:
                    k = len(slots)
                    slots.append(None)
                slot = _Slot(*self._allocate())
                slots[k] = slot
                self.allocations += 1
                with _slots_lock:
                    _slots_by_address[slot.images.ctypes.data] = slot
                    _slots_by_address[slot.labels.ctypes.data] = slot
                events = []
        for e in events:
            e.synchronize()  # the copies out of this memory (to the GPU) are done
        return slot

    def release_unused(self, slot: _Slot) -> None:
        """A slot the producer filled but never handed out (the iteration stopped)."""
        with self._lock:
            if slot.state == "producer":
                slot.state = "free"

    def delivered(self, slot: _Slot) -> None:
        with self._lock:  # iterators in several threads deliver from one ring
            self._deliveries += 1
            slot.seq = self._deliveries
            slot.state = "delivered"

    def release_unreferenced(self, record_event) -> None:
        """Consumer side, before it takes the next batch: every handed-out slot that nothing
        references any more becomes free, after the CUDA work enqueued so far (an event recorded
        now on the current stream: a non_blocking copy out of it was enqueued before its last
        reference went away)."""
        with self._lock:
            done = [s for s in self._slots if s.state == "delivered" and not s.referenced()]
            if not done:
                return
            event = record_event()
            for s in done:
                if event is not None:
                    s.events.append(event)
                s.state = "free"


def _cuda_event_now() -> Any:
    """A CUDA event recorded on the current stream, or None when CUDA is not in use (nothing
    can be copying to a GPU then)."""
    if not (_torch.cuda.is_available() and _torch.cuda.is_initialized()):
        return None
    event = _torch.cuda.Event()
    event.record()
    return event


class Loader:
    """Batches of torch tensors filled by the C++ reader's thread pool, `prefetch` batches ahead,
    in a background thread of this process (no worker processes, nothing pickled).

    Loader(ds, batch_size, *, shuffle=True, seed=0, drop_last=False, rank=None, world=None,
           threads=0, pin_memory=False, prefetch=2, reuse_buffers=False, dtype="float32",
           layout="NCHW", normalize="auto", label="onehot", label_dtype=None, crop=None,
           crop_position="center", hflip=0.0, vflip=0.0, order="auto", block=None, window=None,
           io=None, cache_bytes=None, keep_decoded=True, crop_background=None, fields=None,
           min_box_visibility=0.0)

    ds: a path, a shardpack.Dataset or a shardpack.torch.Dataset. The order and the rank's share
    are those of Sampler (shuffle, seed, rank, world, drop_last: drop_last also drops a short
    last batch; order, block, window: see Sampler; order="auto" (the default) takes the blocks
    order only when the dataset's reader reads blocks, see shardpack.open). io, cache_bytes: reopen
    `ds` with these (shardpack.open's io and cache_bytes); None keeps how it was opened.
    keep_decoded=True (the default) asks the dataset for its decoded copy where its records decode
    to more than the shards hold (zstd; Dataset.keep_decoded: kept only where the reader streams
    and the stored and decoded bytes fit cache_bytes), as a
    .npy preload holds the decoded images in RAM: a cold first epoch decodes while the disk
    reads, later ones copy out of memory; False reads every epoch from the stream's bytes (the
    copy is this process's memory, the decoded dataset's size). threads: C++ threads per batch
    (0: all cores). pin_memory: batches in pinned
    memory (page-locked, for fast non_blocking copies to the GPU), when CUDA is available.
    dtype, layout, normalize, label, label_dtype: as read_batch.
    normalize="auto" (the default) gives float32 images as (x / 255 - mean) / std with ImageNet's
    mean 0.485 0.456 0.406 and std 0.229 0.224 0.225 (grey: 0.449, 0.226), and says so once on the
    "shardpack" logger; normalize=None gives x / 255; uint8 batches are as stored. For a GPU,
    deliver dtype="uint8", label="index" (label_dtype="uint8" where the classes fit) and convert
    on the device with to_device.

    Buffers. reuse_buffers=False (the default): each batch is a new pair of tensors, yours to
    keep. reuse_buffers=True: batches are written into a ring of prefetch + 3 batch buffers
    allocated once (FFCV-style), which saves allocating and faulting in fresh memory for every
    batch (for 512x512 float32 one-hot segmentation, most of a batch's cost). Reuse is safe:
    a buffer is written again only when nothing references its memory any more (no tensor, view,
    slice or .numpy() array of the batch is alive) and, when CUDA is in use, after the CUDA work
    enqueued on the current stream before its last reference went away (an event recorded when
    the loop asks for the next batch; to_device also records one on the stream it copies on).
    This prevents the failure of rings that recycle by position alone: a batch the loop kept
    (appended to a list, held by a metric, or still being copied to the GPU by a non_blocking
    copy when the loop moved on) being overwritten with a later batch's pixels, silently. A
    batch you keep is simply left to you and its buffer replaced by a new one, so keeping
    batches costs allocations, never correctness; `buffers_allocated` counts them. Copies made
    on a stream other than the current one by your own code must be synchronised before the
    batch is dropped (to_device does that for you).

    crop=(height, width), crop_position ("center", "random" or "foreground"), crop_background, hflip and vflip (probabilities):
    crops and flips at read time, as in shardpack.Dataset.read_batch, drawn from (seed, the
    sampler's epoch, record index): new ones every epoch, the same for any `threads`, and the
    same again when an epoch is resumed.

    fields, min_box_visibility: per-sample fields (format 1.5) as read_batch reads them: batches
    are then (images, labels, fields) as spt.collate gives them (lists Padded, boxes PaddedBoxes,
    padded with counts, every array a tensor, str fields lists), boxes moved with each sample's
    crop and flips. The fields are new tensors each batch (not pinned, not in the ring).

    set_epoch(e) before each epoch; without it each complete pass moves to the next epoch.
    state_dict() / load_state_dict() resume mid-epoch exactly: the state counts the batches
    this loader has handed out, not the ones prepared ahead."""

    def __init__(self, ds: Any, batch_size: int, *, shuffle: bool = True, seed: int = 0, drop_last: bool = False,
                 rank: Optional[int] = None, world: Optional[int] = None, threads: int = 0, pin_memory: bool = False,
                 prefetch: int = 2, reuse_buffers: bool = False, dtype: str = "float32", layout: str = "NCHW",
                 normalize: Any = "auto", label: str = "onehot", label_dtype: Any = None,
                 crop: Optional[Tuple[int, int]] = None,
                 crop_position: str = "center", hflip: float = 0.0, vflip: float = 0.0, order: str = "auto",
                 block: Optional[int] = None, window: Optional[int] = None, io: Optional[str] = None,
                 cache_bytes: Optional[int] = None, keep_decoded: bool = True, crop_background: Any = None,
                 fields: Optional[Sequence[str]] = None, min_box_visibility: float = 0.0):
        self.dataset = _open(ds)
        if io is not None or cache_bytes is not None:
            d = self.dataset
            self.dataset = _sp.open(d.path, verify_checksums=d.verify_checksums, io=d._io if io is None else io,
                                    cache_bytes=d._cache_bytes or None if cache_bytes is None else cache_bytes)
        keep_decoded = _checks.boolean(keep_decoded, "Loader: keep_decoded")
        # Only where the records need decoding: a raw record is already a copy in the page cache
        # (or the engine's memory), and keeping another would double the memory for nothing.
        if keep_decoded and isinstance(self.dataset, _sp.Dataset) and self.dataset.decoded_bytes > self.dataset.data_bytes:
            self.dataset.keep_decoded()  # a no-op unless the reader streams and the copy fits
        self.batch_size = _checks.integer(batch_size, "Loader: batch_size", 1)
        self.drop_last = bool(drop_last)
        self.sampler = Sampler(self.dataset, shuffle=shuffle, seed=seed, rank=rank, world=world,
                               drop_last=drop_last, order=order, block=block, window=window)
        self.threads = _checks.integer(threads, "Loader: threads", 0)
        self.prefetch = _checks.integer(prefetch, "Loader: prefetch", 1)
        self.options = dict(dtype=dtype, layout=layout, normalize=_normalize_for(dtype, normalize),
                            **_label_options(label, label_dtype), crop=crop, crop_position=_position(crop_position),
                            hflip=_checks.probability(hflip, "hflip"), vflip=_checks.probability(vflip, "vflip"),
                            **_background(crop_background))
        self.pin_memory = bool(pin_memory)
        if self.pin_memory and not _torch.cuda.is_available():
            _warnings.warn("Loader: pin_memory=True but CUDA is not available; batches are not pinned")
            self.pin_memory = False
        self._spec = self.dataset.batch_spec(self.batch_size, dtype=dtype, layout=layout,
                                             **_label_options(label, label_dtype), crop=crop)
        _check_torch_dtypes(self._spec, "Loader")
        self._field_options = {} if fields is None else dict(  # (a mix refuses fields here, by name)
            fields=self.dataset._field_names(fields, "Loader"), min_box_visibility=min_box_visibility)
        self.dataset.read_batch(_np.empty(0, _np.int64), threads=1, **self.options,
                                **self._field_options)  # checks every option now
        self.reuse_buffers = bool(reuse_buffers)
        self._ring = _Ring(self.prefetch + 3, self._allocate) if self.reuse_buffers else None
        self._epoch_set = False
        self._delivered = 0

    @property
    def buffers_allocated(self) -> int:
        """With reuse_buffers: how many batch buffers (image and label pairs) the ring has
        allocated so far (prefetch + 3 when no batch was kept beyond its turn). 0 without."""
        return self._ring.allocations if self._ring is not None else 0

    def __len__(self) -> int:
        n = len(self.sampler)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def set_epoch(self, epoch: int) -> None:
        if _checks.integer(epoch, "epoch", 0) != self.sampler.epoch:
            self._delivered = 0
        self.sampler.set_epoch(epoch)
        self._epoch_set = True

    def state_dict(self) -> dict:
        return {"sampler": self.sampler.state_dict(consumed=self._delivered)}

    def load_state_dict(self, state: Any) -> None:
        """A state_dict of this loader, or a list of every rank's (see Sampler.load_state_dict:
        a state saved on another number of ranks resumes the rest of its epoch here)."""
        if isinstance(state, (list, tuple)):
            self.sampler.load_state_dict([s["sampler"] for s in state])
        else:
            self.sampler.load_state_dict(state["sampler"])
        self._epoch_set = True

    def _allocate(self) -> Tuple[_np.ndarray, _np.ndarray]:
        """A full batch's (images, labels) for the ring, as NumPy arrays (see _Slot)."""
        (ishape, idtype), (lshape, ldtype) = self._spec
        if self.pin_memory:  # page-locked by torch; the array views it (and keeps it alive)
            return (_torch.empty(ishape, dtype=_TORCH_DTYPES[idtype], pin_memory=True).numpy(),
                    _torch.empty(lshape, dtype=_TORCH_DTYPES[ldtype], pin_memory=True).numpy())
        return _np.empty(ishape, idtype), _np.empty(lshape, ldtype)

    def _fields(self, got: Any) -> Any:
        """The fields of a read_batch result as collate gives them, or None without fields."""
        return _fields_to_torch(got[2]) if self._field_options else None

    def _fresh(self, idx: _np.ndarray, seed: int, epoch: int) -> Tuple[_torch.Tensor, _torch.Tensor, Any]:
        if self.pin_memory:
            (ishape, idtype), (lshape, ldtype) = self._spec
            n = len(idx)
            images = _torch.empty((n,) + tuple(ishape[1:]), dtype=_TORCH_DTYPES[idtype], pin_memory=True)
            labels = _torch.empty((n,) + tuple(lshape[1:]), dtype=_TORCH_DTYPES[ldtype], pin_memory=True)
            got = self.dataset.read_batch(idx, out=(images, labels), threads=self.threads, seed=seed, epoch=epoch,
                                          **self.options, **self._field_options)
            return images, labels, self._fields(got)
        got = self.dataset.read_batch(idx, threads=self.threads, seed=seed, epoch=epoch, **self.options,
                                      **self._field_options)
        return _torch.from_numpy(got[0]), _torch.from_numpy(got[1]), self._fields(got)

    def _into_slot(self, slot: _Slot, idx: _np.ndarray, seed: int,
                   epoch: int) -> Tuple[_torch.Tensor, _torch.Tensor, Any]:
        n = len(idx)
        got = self.dataset.read_batch(idx, out=(slot.images[:n], slot.labels[:n]), threads=self.threads, seed=seed,
                                      epoch=epoch, **self.options, **self._field_options)
        fields = self._fields(got)
        del got  # the ring counts references to the slot's arrays
        return _torch.from_numpy(slot.images)[:n], _torch.from_numpy(slot.labels)[:n], fields

    def _produce(self, order: _np.ndarray, seed: int, epoch: int, q: _queue.Queue, stop: _threading.Event) -> None:
        slot = None
        try:
            b = self.batch_size
            ahead = self.sampler.read_ahead(self.dataset, order, b)
            for start in range(0, len(order), b):
                idx = order[start:start + b]
                if len(idx) < b and self.drop_last:
                    break
                if ahead is not None:
                    ahead.before(start)
                if self._ring is not None:
                    slot = self._ring.acquire()
                    images, labels, fields = self._into_slot(slot, idx, seed, epoch)
                    item = (images, labels, len(idx), slot, fields)
                else:
                    images, labels, fields = self._fresh(idx, seed, epoch)
                    item = (images, labels, len(idx), None, fields)
                del images, labels
                queued = False
                while not stop.is_set():
                    try:
                        q.put(item, timeout=0.1)
                        queued = True
                        break
                    except _queue.Full:
                        pass
                # Nothing of the batch may stay referenced here: the ring counts references.
                del item
                if queued:
                    slot = None  # the consumer's now (or, if it stops, its drain releases it)
                if stop.is_set():
                    return
            item = _END
        except BaseException as e:  # raised in the training loop's thread
            item = e
        finally:
            if slot is not None and self._ring is not None:
                self._ring.release_unused(slot)
        while not stop.is_set():
            try:
                q.put(item, timeout=0.1)
                return
            except _queue.Full:
                pass

    def __iter__(self) -> Iterator[Tuple[_torch.Tensor, _torch.Tensor]]:
        order = self.sampler.take()
        self._delivered = 0
        q = _queue.Queue(maxsize=self.prefetch)
        stop = _threading.Event()
        ring = self._ring
        if ring is not None:  # batches of the last pass the loop has dropped, before the producer starts
            ring.release_unreferenced(_cuda_event_now)
            ring.attach()
        producer = _threading.Thread(target=self._produce, args=(order, self.sampler.seed, self.sampler.epoch, q, stop),
                                     daemon=True,
                                     name="shardpack.Loader")
        producer.start()
        _producers.add((stop, producer))
        complete = False
        try:
            while True:
                if ring is not None:
                    ring.release_unreferenced(_cuda_event_now)
                item = q.get()
                if item is _END:
                    complete = True
                    return
                if isinstance(item, BaseException):
                    raise item
                images, labels, count, slot, fields = item
                del item
                if slot is not None:
                    ring.delivered(slot)
                    del slot
                self._delivered += count
                yield (images, labels) if fields is None else (images, labels, fields)
                del images, labels, fields  # the ring counts references: the loop's are its own
        finally:
            stop.set()
            producer.join()
            _producers.discard((stop, producer))
            if ring is not None:
                while True:  # batches prepared ahead and never handed out
                    try:
                        left = q.get_nowait()
                    except _queue.Empty:
                        break
                    if isinstance(left, tuple):
                        ring.release_unused(left[3])
                    del left
                ring.detach()
            if complete:
                # The epoch is over: the state says so (position at its end), or, when nobody
                # called set_epoch for it, the next pass starts the next epoch.
                self._delivered = 0
                if self._epoch_set:
                    self.sampler._iter_start = self.sampler.num_samples
                else:
                    self.sampler.set_epoch(self.sampler.epoch + 1)
                self._epoch_set = False


# ---------------------------------------------------------------------------------------------
# to_device: uint8 in, converted on the device

def to_device(batch: Sequence[_torch.Tensor], device: Union[str, _torch.device], *,
              normalize: Any = "imagenet", onehot: Optional[int] = None, layout: str = "NCHW",
              stream: Any = None) -> Tuple[_torch.Tensor, _torch.Tensor]:
    """Moves a uint8 batch to `device` and converts it there: (images, labels) -> (float32
    images, labels), the same values read_batch(dtype="float32", label="onehot") gives on the
    host, bit for bit.

    batch: (images, labels) as Loader or Dataset deliver them with dtype="uint8": images uint8
      (N, C, H, W) or (N, H, W, C) (`layout`); labels class ids (label="index": segmentation
      (N, H, W), classification (N,), any integer dtype) or anything else to move as it is.
    normalize: None (x / 255), "imagenet" (grey images 0.449 / 0.226; alpha x / 255) or a
      (mean, std) pair on the 0..1 scale, as in read_batch.
    onehot: None (labels moved as they are) or the number of classes K: index labels become
      float32 one-hot, (N, K, H, W) for NCHW, (N, H, W, K) for NHWC, (N, K) for classification;
      ids >= K (the ignore value, 255 or 65535) give all-zero vectors, as read_batch's.
    stream: the CUDA stream for the copies and the conversion (default: the current one).

    For CUDA: host tensors that are not in pinned memory are first copied into it (use
    Loader(pin_memory=True) to skip that copy), the copies are non_blocking, and when the batch
    comes from a Loader ring (reuse_buffers=True) the ring waits for them (an event recorded on
    `stream` after the copies) before it writes that buffer again.

    Bytes per sample each way, 512x512 RGB segmentation with 32 classes: float32 one-hot
    delivered by the host is 3.1 MB of image + 33.6 MB of label = 36.7 MB across PCIe (and
    written by the CPU); uint8 image + uint8 index labels are 0.79 + 0.26 = 1.05 MB (int64 index
    labels: 0.79 + 2.1 = 2.9 MB), 35x (13x) fewer, with the 36.7 MB written by the GPU instead.
    112x112 grey classification with 1,000 classes: 50 KB + 4 KB float32 vs 12.5 KB + 8 B."""
    try:
        images, labels = batch
    except (TypeError, ValueError):
        raise _TypeError("to_device: batch must be a pair (images, labels)") from None
    if not isinstance(images, _torch.Tensor) or not isinstance(labels, _torch.Tensor):
        raise _TypeError("to_device: images and labels must be torch tensors")
    if images.dtype != _torch.uint8:
        raise _ValueError(f"to_device: images must be uint8 (Loader(dtype=\"uint8\")), not {images.dtype}; "
                          "float32 batches are converted already: move them with .to(device)")
    if images.dim() != 4:
        raise _ValueError(f"to_device: images must be 4-d (N, C, H, W) or (N, H, W, C), not {tuple(images.shape)}")
    _checks.choice(layout, "to_device: layout", _sp._LAYOUTS)
    device = _torch.device(device)
    cuda = device.type == "cuda"
    channel_dim = 1 if layout == "NCHW" else 3
    # read_batch's rule, but "imagenet" is the default here (to_device has no "auto")
    mean, std = _checks.normalization(normalize, images.shape[channel_dim], "to_device: normalize", words=("imagenet",))
    if onehot is not None:
        onehot = _checks.integer(onehot, "to_device: onehot (the number of classes)", 1)
        if labels.dtype.is_floating_point or labels.dtype == _torch.bool or labels.dim() not in (1, 3) or \
                labels.shape[0] != images.shape[0]:
            raise _ValueError(f"to_device: onehot needs index labels (Loader(label=\"index\")): integer (N,) or "
                              f"(N, H, W), not {labels.dtype} {tuple(labels.shape)}")
    sources = (images, labels)
    if cuda:
        if stream is None:
            stream = _torch.cuda.current_stream(device)
        if images.device.type == "cpu" and not images.is_pinned():
            images = images.pin_memory()
        if labels.device.type == "cpu" and not labels.is_pinned():
            labels = labels.pin_memory()
        context = _torch.cuda.stream(stream)
    else:
        context = _nullcontext()
    with context:
        images = images.to(device, non_blocking=True)
        labels = labels.to(device, non_blocking=True)
        if cuda:
            _after_copy(sources, stream)
        # The same float32 operations as read_batch's table, (v / 255 - mean) / std, with device
        # tensors as divisors (a Python-number divisor may become a multiplication by its
        # reciprocal on the GPU, which rounds differently).
        shape = [1, 1, 1, 1]
        shape[channel_dim] = len(mean)
        f = images.to(_torch.float32)
        f.div_(_torch.full((1,), 255.0, dtype=_torch.float32, device=device))
        f.sub_(_torch.tensor(mean, dtype=_torch.float32, device=device).view(shape))
        f.div_(_torch.tensor(std, dtype=_torch.float32, device=device).view(shape))
        if onehot is not None:
            ids = labels.to(_torch.int64)
            valid = (ids >= 0) & (ids < onehot)
            ids = ids.masked_fill(~valid, 0)
            if labels.dim() == 1:
                out = _torch.zeros((labels.shape[0], onehot), dtype=_torch.float32, device=device)
                out.scatter_(1, ids.unsqueeze(1), valid.unsqueeze(1).to(_torch.float32))
            elif layout == "NCHW":
                out = _torch.zeros((labels.shape[0], onehot) + tuple(labels.shape[1:]), dtype=_torch.float32,
                                   device=device)
                out.scatter_(1, ids.unsqueeze(1), valid.unsqueeze(1).to(_torch.float32))
            else:
                out = _torch.zeros(tuple(labels.shape) + (onehot,), dtype=_torch.float32, device=device)
                out.scatter_(3, ids.unsqueeze(3), valid.unsqueeze(3).to(_torch.float32))
            labels = out
    return f, labels


class _nullcontext:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> bool:
        return False


def _after_copy(sources: Sequence[_torch.Tensor], stream: Any) -> None:
    """Makes a ring slot the copied tensors came from wait for the copies (an event on `stream`)."""
    with _slots_lock:
        slots = {id(s): s for s in (_slots_by_address.get(t.data_ptr()) for t in sources) if s is not None}
    if not slots:
        return
    event = _torch.cuda.Event()
    event.record(stream)
    for s in slots.values():
        s.events.append(event)
