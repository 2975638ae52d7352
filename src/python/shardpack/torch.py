"""PyTorch adapters: a map-style Dataset that reads whole batches, a distributed Sampler that
resumes mid-epoch, and Loader, which fills batches on C++ threads without worker processes.

    import shardpack.torch as spt
    loader = spt.Loader("data/train", batch_size=64, shuffle=True, seed=0, rank=rank, world=world)
    for epoch in range(epochs):
        loader.set_epoch(epoch)
        for images, labels in loader:      # float32 NCHW tensors, ImageNet-normalised; one-hot labels
            ...

With torch.utils.data.DataLoader, give it the batches: either through __getitems__

    dl = DataLoader(spt.Dataset(path), batch_size=64, sampler=spt.Sampler(...),
                    collate_fn=spt.collate, num_workers=2)

or, for a DataLoader that calls __getitem__ per index (PyTorch before 2.0 releases that lack
__getitems__), with a batch sampler and batch_size=None, so each index is a whole batch:

    dl = DataLoader(spt.Dataset(path), sampler=BatchSampler(spt.Sampler(...), 64, drop_last=True),
                    batch_size=None, num_workers=2)
"""
import atexit as _atexit
import queue as _queue
import threading as _threading
import warnings as _warnings

import numpy as _np
import torch as _torch
import torch.utils.data as _data

import shardpack as _sp

__all__ = ["Dataset", "Sampler", "Loader", "collate", "Batch"]

_TORCH_DTYPES = {_np.dtype(_np.float32): _torch.float32, _np.dtype(_np.uint8): _torch.uint8,
                 _np.dtype(_np.int64): _torch.int64}


def _open(source, verify_checksums=True):
    if isinstance(source, _sp.Dataset):
        return source
    if isinstance(source, Dataset):
        return source.dataset
    return _sp.open(source, verify_checksums=verify_checksums)


def _shared_empty(shape, dtype):
    """An uninitialised tensor in shared memory, as default_collate makes them in workers."""
    empty = _torch.empty(0, dtype=_TORCH_DTYPES[_np.dtype(dtype)])
    numel = int(_np.prod(shape))
    if hasattr(empty, "_typed_storage"):  # PyTorch 2
        storage = empty._typed_storage()._new_shared(numel, device="cpu")
    else:  # PyTorch 1.13
        storage = empty.storage()._new_shared(numel)
    return empty.new(storage).resize_(*shape)


class Batch(tuple):
    """(images, labels) of a whole batch, as Dataset.__getitems__ returns it; collate passes it
    through unchanged."""
    __slots__ = ()


def collate(data):
    """A DataLoader collate_fn for Dataset: a Batch from __getitems__ is already collated (it
    becomes a plain (images, labels) tuple); anything else goes to the default collate."""
    if isinstance(data, Batch):
        return tuple(data)
    return _data.default_collate(data) if hasattr(_data, "default_collate") else \
        _data.dataloader.default_collate(data)


class Dataset(_data.Dataset):
    """A map-style dataset of (image, label) tensors, with the options of read_batch.

    dataset[i] is one sample; dataset[[i, j, ...]] and dataset.__getitems__([...]) one whole batch
    (a Batch of two tensors), read by one read_batch call. threads=None: all cores in the main
    process, 1 inside a DataLoader worker (the workers are the parallelism there). Pickles by
    path: workers reopen the dataset (fork or spawn).

    crop, crop_position ("center" or "random"), hflip, vflip (probabilities) and seed: crops and
    flips at read time, as in shardpack.Dataset.read_batch, drawn from (seed, epoch, record
    index). set_epoch(e) before each epoch for new ones; DataLoader workers copy the dataset when
    an epoch's iteration starts, so with persistent_workers=True they keep the epoch they started
    with."""

    def __init__(self, source, dtype="float32", layout="NCHW", normalize="imagenet", label="onehot", threads=None,
                 verify_checksums=True, crop=None, crop_position="center", hflip=0.0, vflip=0.0, seed=0):
        self.dataset = _open(source, verify_checksums)
        self.options = dict(dtype=dtype, layout=layout, normalize=normalize, label=label, crop=crop,
                            crop_position=_position(crop_position), hflip=_probability(hflip, "hflip"),
                            vflip=_probability(vflip, "vflip"), seed=int(seed))
        self.threads = threads
        self.epoch = 0
        self._spec_options = dict(dtype=dtype, layout=layout, label=label, crop=crop)
        self.dataset.batch_spec(1, **self._spec_options)  # checks the options and the fixed size now

    def set_epoch(self, epoch):
        """The epoch random crops and flips are drawn for."""
        self.epoch = int(epoch)

    def __len__(self):
        return len(self.dataset)

    def _threads(self):
        if self.threads is not None:
            return self.threads
        return 1 if _data.get_worker_info() is not None else 0

    def __getitems__(self, indices):
        if _data.get_worker_info() is None:
            images, labels = self.dataset.read_batch(indices, threads=self._threads(), epoch=self.epoch,
                                                     **self.options)
            return Batch((_torch.from_numpy(images), _torch.from_numpy(labels)))
        # In a DataLoader worker: straight into shared memory, which is how the batch travels to
        # the main process (anything else would be copied there once more).
        indices = _np.asarray(indices)
        (ishape, idtype), (lshape, ldtype) = self.dataset.batch_spec(len(indices), **self._spec_options)
        images, labels = _shared_empty(ishape, idtype), _shared_empty(lshape, ldtype)
        self.dataset.read_batch(indices, out=(images, labels), threads=self._threads(), epoch=self.epoch,
                                **self.options)
        return Batch((images, labels))

    def __getitem__(self, i):
        if isinstance(i, (list, tuple, range, _np.ndarray, _torch.Tensor)) and getattr(i, "ndim", 1) == 1:
            return self.__getitems__(i)
        n = len(self.dataset)
        i = i.__index__()
        if not -n <= i < n:
            raise _sp.IndexOutOfRange(f"{self.dataset.path}: index {i} is out of range ({n} records)")
        images, labels = self.__getitems__([i])
        return images[0], labels[0]


def _position(crop_position):
    if not isinstance(crop_position, str) or crop_position not in ("center", "random"):
        raise _sp.Error(f'crop_position must be "center" or "random", not {crop_position!r}')
    return crop_position


def _probability(p, what):
    try:
        p = float(p)
    except (TypeError, ValueError):
        raise _sp.Error(f"{what} must be a probability, not {p!r}") from None
    if not 0.0 <= p <= 1.0:
        raise _sp.Error(f"{what} probability {p} is not in [0, 1]")
    return p


def _rank_and_world(rank, world):
    if rank is None or world is None:
        dist = getattr(_torch, "distributed", None)
        ready = dist is not None and dist.is_available() and dist.is_initialized()
        if world is None:
            world = dist.get_world_size() if ready else 1
        if rank is None:
            rank = dist.get_rank() if ready else 0
    rank, world = int(rank), int(world)
    if world < 1 or not 0 <= rank < world:
        raise _sp.Error(f"rank {rank} is not in [0, world) for world {world}")
    return rank, world


def _order_source(data_source):
    if isinstance(data_source, _sp.Dataset):
        return data_source
    if isinstance(data_source, Dataset):
        return data_source.dataset
    return None


# What a state saved before Sampler had the blocks order means.
_STATE_DEFAULTS = {"order": "global", "block": None, "window": None}


class Sampler(_data.Sampler):
    """The indices of one rank for one epoch.

    The order is shardpack.epoch_order(data_source, seed, epoch, order=order, block=block,
    window=window): order="global" (the default) a permutation of all records, rank r taking
    positions r, r + world, ... of it; order="blocks" the locality-aware shuffle for cold disks
    (see shardpack.epoch_order: blocks of consecutive records, shuffled within windows of
    `window` blocks; rank r takes the r-th contiguous share; shard-aligned blocks of about 4 MiB
    when data_source is a shardpack Dataset). The same in every process, whatever the number of
    DataLoader workers. drop_last=False pads (the order wraps around to its start) so that every rank gets
    ceil(n / world) indices; drop_last=True drops the tail so that every rank gets n // world. Equal
    counts keep DDP ranks in step.

    set_epoch(e) before each epoch (as with DistributedSampler). state_dict() records the epoch
    and how far this rank got; load_state_dict() makes the next iteration yield exactly the rest
    of that epoch. A DataLoader draws indices ahead of the training loop (prefetching), so pass
    the number of samples the loop consumed this epoch: state_dict(consumed=k); without it the
    position is what the iterator has yielded."""

    def __init__(self, data_source, shuffle=True, seed=0, rank=None, world=None, drop_last=False, order="global",
                 block=None, window=None):
        self.n = data_source if isinstance(data_source, int) else len(data_source)
        self.order = order
        self.block, self.window = block, window
        # A shardpack Dataset gives the blocks order its shards and record size.
        self._order_source = _order_source(data_source)
        _sp.epoch_order(0, order=order, block=block, window=window)  # checks the arguments now
        self.shuffle = bool(shuffle)
        self.seed = int(seed)
        self.rank, self.world = _rank_and_world(rank, world)
        self.drop_last = bool(drop_last)
        self.epoch = 0
        self.num_samples = self.n // self.world if self.drop_last else -(-self.n // self.world)
        self._start = 0          # where the next iteration begins (after load_state_dict)
        self._iter_start = 0     # where the current iteration began
        self._yielded = 0        # indices the current iteration has yielded

    def set_epoch(self, epoch):
        epoch = int(epoch)
        if epoch != self.epoch:
            self._start = self._iter_start = self._yielded = 0
        self.epoch = epoch

    def epoch_order(self):
        """All of this rank's indices for the current epoch (an int64 array)."""
        return _sp.epoch_order(self._order_source if self._order_source is not None else self.n, self.seed,
                               self.epoch, self.shuffle, self.rank, self.world, self.drop_last, order=self.order,
                               block=self.block, window=self.window)

    def take(self):
        """The indices the next iteration yields (the rest of the epoch after load_state_dict),
        as an int64 array; starts that iteration (for state_dict)."""
        start, self._start = self._start, 0
        self._iter_start, self._yielded = start, 0
        return self.epoch_order()[start:]

    def __iter__(self):
        for i in self.take().tolist():
            self._yielded += 1
            yield i

    def __len__(self):
        return self.num_samples - self._start

    def state_dict(self, consumed=None):
        position = self._iter_start + (self._yielded if consumed is None else int(consumed))
        return {"n": self.n, "seed": self.seed, "shuffle": self.shuffle, "world": self.world, "rank": self.rank,
                "drop_last": self.drop_last, "epoch": self.epoch, "position": position, "order": self.order,
                "block": self.block, "window": self.window}

    def load_state_dict(self, state):
        for k in ("n", "world", "drop_last", "shuffle", "order", "block", "window"):
            if state.get(k, _STATE_DEFAULTS.get(k)) != getattr(self, k):
                raise _sp.Error(f"Sampler.load_state_dict: the state has {k}={state[k]}, this sampler {getattr(self, k)}")
        self.seed = int(state["seed"])
        self.epoch = int(state["epoch"])
        position = int(state["position"])
        if not 0 <= position <= self.num_samples:
            raise _sp.Error(f"Sampler.load_state_dict: position {position} is not in [0, {self.num_samples}]")
        self._start = position
        self._iter_start, self._yielded = position, 0


_END = object()

# Producer threads of Loader iterators still running. They are daemon threads (an abandoned
# iterator must not keep the process alive), but Python 3.11 kills daemon threads at exit in
# the middle of what they do, and a thread killed inside a C++ call (read_batch) aborts the
# process. So they are stopped and joined at exit, before that happens.
_producers = set()


@_atexit.register
def _stop_producers():
    for stop, thread in list(_producers):
        stop.set()
        thread.join()


class Loader:
    """Batches of torch tensors filled by the C++ reader's thread pool, `prefetch` batches ahead,
    in a background thread of this process (no worker processes, nothing pickled).

    Loader(ds, batch_size, shuffle=False, seed=0, drop_last=False, rank=None, world=None,
           threads=0, pin_memory=False, prefetch=2, dtype="float32", layout="NCHW",
           normalize="imagenet", label="onehot", crop=None, crop_position="center", hflip=0.0,
           vflip=0.0, order="global", block=None, window=None)

    ds: a path, a shardpack.Dataset or a shardpack.torch.Dataset. The order and the rank's share
    are those of Sampler (shuffle, seed, rank, world, drop_last: drop_last also drops a short
    last batch; order, block, window: order="blocks" is the locality-aware shuffle for data on
    a cold disk, see shardpack.epoch_order). threads: C++ threads per batch (0: all cores). pin_memory: batches in pinned
    memory (page-locked, for fast non_blocking copies to the GPU), when CUDA is available.
    Each batch is a new pair of tensors, yours to keep.

    crop=(height, width), crop_position ("center" or "random"), hflip and vflip (probabilities):
    crops and flips at read time, as in shardpack.Dataset.read_batch, drawn from (seed, the
    sampler's epoch, record index): new ones every epoch, the same for any `threads`, and the
    same again when an epoch is resumed.

    set_epoch(e) before each epoch; without it each complete pass moves to the next epoch.
    state_dict() / load_state_dict() resume mid-epoch exactly: the state counts the batches
    this loader has handed out, not the ones prepared ahead."""

    def __init__(self, ds, batch_size, shuffle=False, seed=0, drop_last=False, rank=None, world=None, threads=0,
                 pin_memory=False, prefetch=2, dtype="float32", layout="NCHW", normalize="imagenet", label="onehot",
                 crop=None, crop_position="center", hflip=0.0, vflip=0.0, order="global", block=None, window=None):
        self.dataset = _open(ds)
        self.batch_size = int(batch_size)
        if self.batch_size < 1:
            raise _sp.Error("Loader: batch_size must be at least 1")
        self.drop_last = bool(drop_last)
        self.sampler = Sampler(self.dataset, shuffle=shuffle, seed=seed, rank=rank, world=world,
                               drop_last=drop_last, order=order, block=block, window=window)
        self.threads = int(threads)
        self.prefetch = max(1, int(prefetch))
        self.options = dict(dtype=dtype, layout=layout, normalize=normalize, label=label, crop=crop,
                            crop_position=_position(crop_position), hflip=_probability(hflip, "hflip"),
                            vflip=_probability(vflip, "vflip"))
        self.pin_memory = bool(pin_memory)
        if self.pin_memory and not _torch.cuda.is_available():
            _warnings.warn("Loader: pin_memory=True but CUDA is not available; batches are not pinned")
            self.pin_memory = False
        self._spec = self.dataset.batch_spec(self.batch_size, dtype, layout, label, crop)
        self._epoch_set = False
        self._delivered = 0

    def __len__(self):
        n = len(self.sampler)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def set_epoch(self, epoch):
        if int(epoch) != self.sampler.epoch:
            self._delivered = 0
        self.sampler.set_epoch(epoch)
        self._epoch_set = True

    def state_dict(self):
        return {"sampler": self.sampler.state_dict(consumed=self._delivered)}

    def load_state_dict(self, state):
        self.sampler.load_state_dict(state["sampler"])
        self._epoch_set = True

    def _empty(self, shape, dtype, n):
        return _torch.empty((n,) + tuple(shape[1:]), dtype=_TORCH_DTYPES[dtype], pin_memory=self.pin_memory)

    def _produce(self, order, seed, epoch, q, stop):
        try:
            (ishape, idtype), (lshape, ldtype) = self._spec
            b = self.batch_size
            for start in range(0, len(order), b):
                idx = order[start:start + b]
                if len(idx) < b and self.drop_last:
                    break
                images, labels = self._empty(ishape, idtype, len(idx)), self._empty(lshape, ldtype, len(idx))
                self.dataset.read_batch(idx, out=(images, labels), threads=self.threads, seed=seed, epoch=epoch,
                                        **self.options)
                while not stop.is_set():
                    try:
                        q.put((images, labels, len(idx)), timeout=0.1)
                        break
                    except _queue.Full:
                        pass
                if stop.is_set():
                    return
            item = _END
        except BaseException as e:  # raised in the training loop's thread
            item = e
        while not stop.is_set():
            try:
                q.put(item, timeout=0.1)
                return
            except _queue.Full:
                pass

    def __iter__(self):
        order = self.sampler.take()
        self._delivered = 0
        q = _queue.Queue(maxsize=self.prefetch)
        stop = _threading.Event()
        producer = _threading.Thread(target=self._produce, args=(order, self.sampler.seed, self.sampler.epoch, q, stop),
                                     daemon=True,
                                     name="shardpack.Loader")
        producer.start()
        _producers.add((stop, producer))
        complete = False
        try:
            while True:
                item = q.get()
                if item is _END:
                    complete = True
                    return
                if isinstance(item, BaseException):
                    raise item
                images, labels, count = item
                self._delivered += count
                yield images, labels
        finally:
            stop.set()
            producer.join()
            _producers.discard((stop, producer))
            if complete:
                # The epoch is over: the state says so (position at its end), or, when nobody
                # called set_epoch for it, the next pass starts the next epoch.
                self._delivered = 0
                if self._epoch_set:
                    self.sampler._iter_start = self.sampler.num_samples
                else:
                    self.sampler.set_epoch(self.sampler.epoch + 1)
                self._epoch_set = False
