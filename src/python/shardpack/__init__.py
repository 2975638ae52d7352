"""Read shardpack datasets from Python.

    import shardpack
    ds = shardpack.open("data/train")            # a shardpack.Dataset; errors are shardpack.Error
    img, label = ds[0]                           # uint8 (H, W, C); one-hot (H, W, K), index map (H, W) or class id
    images, labels = ds.read_batch([4, 1, 7])    # float32 NCHW, ImageNet-normalised, one-hot
    images, labels = ds.read_batch(idx, crop=(256, 256), crop_position="random", hflip=0.5, epoch=e)
    images, labels = ds.read_batch(idx, dtype="uint8", label="index", label_dtype="uint8")  # as stored: 1 byte a value

The records are read by the C++ reader (include/shardpack/reader.hpp) through the extension
shardpack._shardpack: batches are filled outside the GIL by a pool of C++ threads, straight into
NumPy arrays or the caller's (out=, any buffer-protocol or DLPack array, torch tensors included).
Fresh arrays come from huge-page blocks that are recycled when freed, so a new batch costs no
page faults once a loop is warm.

Arguments are checked once, as NumPy checks its own: every argument error is a shardpack.Error
that is also a ValueError (ArgumentValueError), a TypeError (ArgumentTypeError) or an IndexError
(IndexOutOfRange). The checks are shardpack._checks, the one set of them, which the adapters
share; this module checks the options (_BatchOptions, remembered per set of arguments) and
indices of other types (_checks.indices) with them; the extension checks an int64 index
array as it copies it, and the memory of out= arrays, which only it can see.

Adapters, each importing its framework only when imported itself:
shardpack.torch (Dataset, Sampler, Loader), shardpack.keras (PyDataset), shardpack.tf (dataset),
shardpack.grain (a Grain data source).
"""
from __future__ import annotations

import atexit as _atexit
import logging as _logging
import os as _os
import warnings as _warnings
import weakref as _weakref
from typing import Any, Dict, Iterator, List, Literal, NamedTuple, Optional, Sequence, Tuple, Union, cast

import numpy as _np
import numpy.typing as _npt

from ._shardpack import (ArgumentTypeError, ArgumentValueError, CropPosition as _CropPosition, Error,
                         FlipMode as _FlipMode, ImageType as _ImageType, IndexOutOfRange, LabelMode as _LabelMode,
                         LabelType as _LabelType, ReadOptions as _ReadOptions, Reader as _Reader,
                         epoch_order as _epoch_order, interpreter_exiting as _interpreter_exiting,
                         order_blocks as _order_blocks, version as __version__)

__all__ = ["open", "Dataset", "contact_sheet", "Error", "ArgumentValueError", "ArgumentTypeError", "IndexOutOfRange",
           "permutation", "epoch_order", "mix", "Mix", "IMAGENET_MEAN", "IMAGENET_STD", "Field", "Boxes", "Padded",
           "PaddedBoxes", "__version__", "write"]

from . import _checks  # noqa: E402  (the argument checks: one place, shared with the adapters)
from ._checks import IMAGENET_MEAN, IMAGENET_STD  # noqa: E402  (public here; _checks' normalization uses them)

# The words each option takes: one table per option, which checks it (_checks.choice, _checks.dtype_name) and
# names it in the error message, here and in the adapters (shardpack.torch, shardpack._adapt).
# The Literal aliases below repeat them for type checkers (a Literal cannot be made from a
# tuple); tests/python/test_api.py checks that the two agree.
_DTYPES = ("float32", "uint8", "uint16")                 # DType
_LAYOUTS = ("NCHW", "NHWC")                              # Layout
_LABELS = ("onehot", "index", "stored")                  # Label
_ONEHOT_LABEL_DTYPES = ("float32", "uint8")              # LabelDType with label="onehot"
_INDEX_LABEL_DTYPES = ("uint8", "uint16", "int64")       # LabelDType with label="index"
_NORMALIZE_WORDS = ("auto", "imagenet")                  # Normalize
_CROP_POSITIONS = ("center", "random", "foreground")     # CropPosition
_IOS = ("auto", "mmap", "pread", "stream", "blocks")     # IO
_ORDERS = ("global", "blocks")                           # Order
_LOADER_ORDERS = ("auto", "global", "blocks")            # LoaderOrder

# Argument types (for annotations; see Dataset.read_batch).
PathLike = Union[str, bytes, "_os.PathLike[str]", "_os.PathLike[bytes]"]
Indices = Union[Sequence[int], _npt.NDArray[_np.integer[Any]]]
DType = Union[Literal["float32", "uint8", "uint16"], type, "_np.dtype[Any]"]
Layout = Literal["NCHW", "NHWC"]
Label = Literal["onehot", "index", "stored"]
LabelDType = Union[None, Literal["uint8", "uint16", "int64", "float32"], type, "_np.dtype[Any]"]
Normalize = Union[None, Literal["auto", "imagenet"],
                  Tuple[Union[float, Sequence[float]], Union[float, Sequence[float]]]]
CropPosition = Union[Literal["center", "random", "foreground"], _npt.NDArray[_np.integer[Any]]]
Flip = Union[float, _npt.NDArray[_np.bool_]]
IO = Literal["auto", "mmap", "pread", "stream", "blocks"]
Order = Literal["global", "blocks"]
LoaderOrder = Literal["auto", "global", "blocks"]
Spec = Tuple[Tuple[Tuple[int, ...], "_np.dtype[Any]"], Tuple[Tuple[int, ...], "_np.dtype[Any]"]]

for _cls in (Error, ArgumentValueError, ArgumentTypeError, IndexOutOfRange):
    _cls.__module__ = "shardpack"

from ._writer import write  # noqa: E402  (shardpack.write: a dataset from any iterable; README "Writing a dataset")


def open(path: PathLike, *, verify_checksums: bool = True, io: IO = "auto", max_open_shards: int = 0,
         cache_bytes: Optional[int] = None, io_threads: Optional[int] = None) -> "Dataset":
    """Opens the dataset folder (or s3:// URL) `path` (the one holding manifest.json); see Dataset.

    io: how shards are read. "auto" (the default) chooses at open from what it sees: "mmap"
    when the shards are in the page cache already; else "stream" when the dataset fits
    cache_bytes; else "blocks" (and the loaders then use the blocks order; a log line says so).
    "mmap": memory-mapped, raw records are zero-copy views. "pread": one read per record.
    "stream": the reader reads every shard whole, in file order, in the background, into its own
    cache, and serves any order from what has arrived (later epochs read from memory).
    "blocks": the reader reads the byte ranges that batches and read-ahead ask for (whole
    blocks of ~4 MiB with the blocks order) in disk order, into a cache of cache_bytes.
    ds.io says what was chosen; include/shardpack/README.md, "Cold storage", says why.
    cache_bytes: the reader's cache for "stream" and "blocks" (None: half the available memory).
    io_threads: its I/O threads (None: 1 for a local folder, 4 for object storage).
    max_open_shards: at most this many shards open at once (0: automatic, 4096, or without mmap half
    the open-file limit if lower); a dataset of more shards opens each when first read."""
    return Dataset(path, verify_checksums=verify_checksums, io=io, max_open_shards=max_open_shards,
                   cache_bytes=cache_bytes, io_threads=io_threads)


# What the reader said at open about its choice of I/O, logged once a process.
_io_notes_said: set[str] = set()
# Whether normalize="auto" choosing ImageNet's statistics was logged (once a process): a model
# trained on x / 255 would otherwise get other inputs without a word.
_imagenet_default_said = False


def _say_imagenet_default(mean: Sequence[float], std: Sequence[float]) -> None:
    global _imagenet_default_said
    if _imagenet_default_said:
        return
    _imagenet_default_said = True
    numbers = " ".join(f"{v:g}" for v in mean), " ".join(f"{v:g}" for v in std)
    _logging.getLogger("shardpack").warning(
        "float32 images are normalised with ImageNet's statistics, (x / 255 - mean) / std with mean %s and std %s: "
        'normalize="auto", the default of read_batch and of the torch, Keras and tf.data adapters. '
        "Pass normalize=None for x / 255 or normalize=(mean, std) for your own (logged once)", *numbers)


def _cores() -> int:
    """The cores this process may use (its CPU affinity), as the CLI counts them."""
    try:
        return max(1, len(_os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, _os.cpu_count() or 1)


def _threads(threads: Any) -> int:
    """read_batch's threads: 0 is every core; more than 4 x the cores is capped there with a
    warning, as `shardpack build --threads` does."""
    t = _checks.integer(threads, "read_batch: threads", 0)
    cores = _cores()
    if t == 0:
        return cores
    if t > 4 * cores:
        _warnings.warn(f"read_batch: threads={t}: using {4 * cores} (4 x the {cores} cores this process may use)",
                       RuntimeWarning, stacklevel=3)
        return 4 * cores
    return t


class _BatchOptions(NamedTuple):
    """read_batch's options, checked and resolved for the extension."""
    as_float: bool
    channels_first: bool
    label: str          # "onehot", "index" (resolved from "stored")
    label_dtype: str    # "float32", "uint8", "uint16" or "int64"
    crop_height: int
    crop_width: int
    as_uint16: bool = False  # images as uint16 (stored so, or uint8 values widened)

    @staticmethod
    def check(r: "_Reader", path: str, dtype: Any, layout: Any, label: Any, label_dtype: Any,
              crop: Any) -> "_BatchOptions":
        image_dtype = _checks.dtype_name(dtype, "read_batch: dtype", _DTYPES)
        as_float = image_dtype == "float32"
        if image_dtype == "uint8" and getattr(r, "image_dtype", "uint8") == "uint16":  # (a Mix's schema has none)
            raise ArgumentValueError(f'read_batch: {path} stores uint16 images; read them as dtype="uint16" '
                                     '(as stored) or "float32" (x / 65535 before normalize)')
        channels_first = _checks.choice(layout, "read_batch: layout", _LAYOUTS) == "NCHW"
        label = _checks.choice(label, "read_batch: label", _LABELS)
        seg = r.task == "segmentation"
        if label == "stored":
            label = "onehot" if seg and r.label_layout == "onehot" else "index"
        k = r.class_count
        if label == "onehot":
            if label_dtype is None:
                label_dtype = "float32" if as_float else "uint8"
            label_dtype = _checks.dtype_name(label_dtype, "read_batch: label_dtype of one-hot labels",
                                      _ONEHOT_LABEL_DTYPES)
        else:
            label_dtype = _checks.dtype_name("int64" if label_dtype is None else label_dtype,
                                      "read_batch: label_dtype of index labels", _INDEX_LABEL_DTYPES)
            # Every value must fit: class ids 0..K-1, and for segmentation the ignore value.
            largest = max(k - 1, r.ignore_value if seg else 0, 0)
            limit = {"uint8": 255, "uint16": 65535, "int64": 2**63 - 1}[label_dtype]
            if largest > limit:
                what = f"{k} classes" + (f" and ignore value {r.ignore_value}" if seg else "")
                raise ArgumentValueError(f"read_batch: label_dtype {label_dtype} cannot hold the {what} of {path}; "
                                         'use "uint16" or "int64"')
        if crop is None:  # the dataset's fixed size, or, when its records vary, each batch's own
            crop_height = crop_width = 0
        else:
            crop_height, crop_width = _checks.crop_size(crop, "read_batch: crop")
        return _BatchOptions(as_float, channels_first, label, label_dtype, crop_height, crop_width,
                             image_dtype == "uint16")


# -- orders

def permutation(n: int, seed: int, epoch: int = 0) -> _npt.NDArray[_np.int64]:
    """The shuffled order of range(n) for (seed, epoch): a uniformly random permutation, an int64
    array, the same on every platform and in every process, C++ included
    (shardpack::permutation in include/shardpack/order.hpp computes it)."""
    return epoch_order(n, seed, epoch)


# The blocks order's block when the records' size is unknown, and its window.
BLOCK_RECORDS = 64
WINDOW_BLOCKS = 16
# With a Dataset, a block is about this many bytes: on a disk that seeks in 8 ms and reads
# 150 MB/s, 4 MiB take 28 ms, so a seek per block costs 22% of the sequential rate.
BLOCK_BYTES = 4 << 20


def _resolve_order(order: Any, source: Any, what: str = "order") -> Order:
    """"global" or "blocks" for an order argument: "auto" is what the dataset's reader prefers
    (Dataset.preferred_order: "blocks" when it reads blocks because the dataset is larger than its
    cache and not in memory), "global" without a Dataset."""
    choice = _checks.choice(order, what, _LOADER_ORDERS)
    if choice == "auto":
        choice = source.preferred_order if isinstance(source, (Dataset, Mix)) else "global"
    return "blocks" if choice == "blocks" else "global"


def epoch_order(n: Union[int, "Dataset", "Mix"], seed: int = 0, epoch: int = 0, shuffle: bool = True, rank: int = 0,
                world: int = 1, drop_last: bool = False, order: LoaderOrder = "global",
                block: Optional[int] = None, window: Optional[int] = None,
                shard_starts: Optional[Indices] = None) -> _npt.NDArray[_np.int64]:
    """The indices rank `rank` of `world` reads in epoch `epoch`: an int64 array.

    n: the number of records, or a shardpack.Dataset (then shard_starts and the default block
    come from it), or a shardpack.Mix (its mixed order: see shardpack.mix). shuffle=False: 0..n-1
    in order (order does not matter then).

    order="auto": "blocks" when n is a Dataset whose reader reads blocks (Dataset.preferred_order),
    else "global"; the loaders' default.

    order="global" (the default): a uniformly random permutation of range(n) for (seed, epoch);
    rank r reads its positions r, r + world, ... The best shuffle; on a cold disk every record is
    a seek.

    order="blocks": the locality-aware shuffle. The records are cut into blocks of about `block`
    consecutive records (never across a shard of shard_starts, the first record of each shard);
    the blocks are permuted, and the records of each run of `window` consecutive blocks of that
    permutation are permuted among themselves. Rank r reads the r-th contiguous share, so each
    rank reads whole blocks. Read cold through a reader that prefetches the blocks ahead (the
    torch Loader does), the disk serves a block per seek instead of a record per seek. What it
    gives up: a batch draws from at most `window` blocks, so records that are neighbours in the
    dataset stay near each other in the epoch; on a dataset stored sorted by class a batch sees
    few classes. Use it when the data is read from a disk or network file system colder than
    the page cache and the dataset was written shuffled (shardpack build --shuffle);
    keep "global" when the data fits in RAM or the records are stored sorted by label.
    scripts/bench/README.md, "Cold storage", has the measurements. Defaults: block = about
    4 MiB of records for a Dataset, else 64 records; window = 16 blocks.

    Both are functions of (n, seed, epoch) (and block, window, shard_starts) only: the same for
    any number of DataLoader workers and in C++ (include/shardpack/order.hpp, which computes
    them). drop_last=False pads by wrapping around to the epoch's start so that every rank gets
    ceil(n / world) indices; drop_last=True leaves out the tail (n // world each)."""
    if isinstance(n, Mix):  # the mixed order (shardpack.mix)
        return n.epoch_order(seed, epoch, shuffle, rank, world, drop_last, order=order, block=block, window=window)
    count, block, window, starts = _block_parameters(n, block, window, shard_starts)
    seed, epoch = _checks.seed_and_epoch(seed, epoch, "epoch_order")
    rank, world = _checks.rank_and_world(rank, world, "epoch_order: ")
    order = _resolve_order(order, n, "epoch_order: order")
    if isinstance(n, Dataset):
        n.begin_epoch()  # an epoch begins: a streamed dataset the page cache dropped is read again, whole
    return _epoch_order(count, seed, epoch, rank, world, bool(drop_last), bool(shuffle), order, block, window, starts)


def _block_parameters(n: Union[int, "Dataset"], block: Optional[int], window: Optional[int],
                      shard_starts: Optional[Indices]) -> Tuple[int, int, int, List[int]]:
    """(n, block, window, shard_starts) of the blocks order, with the defaults filled in."""
    if isinstance(n, Dataset):
        ds = n
        n = len(ds)
        if shard_starts is None:
            shard_starts = ds.shard_starts
        if n and (block is None or window is None):
            # The reader's: ~4 MiB blocks, windows that fit its cache three times (dataset::blocks_layout).
            layout_block, layout_window = ds.blocks_layout
            block = layout_block if block is None else block
            window = layout_window if window is None else window
    count = _checks.integer(n, "epoch_order: n", 0)
    block = BLOCK_RECORDS if block is None else _checks.integer(block, "epoch_order: block", 1)
    window = WINDOW_BLOCKS if window is None else _checks.integer(window, "epoch_order: window", 1)
    starts = [] if shard_starts is None else [int(s) for s in _np.asarray(shard_starts, dtype=_np.int64)]
    return count, block, window, starts


def _block_starts(n: Union[int, "Dataset", "Mix"], block: Optional[int] = None, window: Optional[int] = None,
                  shard_starts: Optional[Indices] = None) -> Tuple[_npt.NDArray[_np.int64], int]:
    """The first record of every block of the blocks order (then n), and the window: an int64 array
    and an int."""
    if isinstance(n, Mix):
        return n._block_starts(block, window)
    count, block, window, starts = _block_parameters(n, block, window, shard_starts)
    return _order_blocks(count, block, starts), window



# Open datasets, so that their readers close before the interpreter's last collection: objects
# still referenced at exit (a DataLoader worker's dataset, held by torch) would otherwise
# outlive the extension and be reported by nanobind as leaked.
_open_datasets: "_weakref.WeakSet[Dataset]" = _weakref.WeakSet()


@_atexit.register
def _close_all() -> None:
    _interpreter_exiting()  # before CPython marks itself finalizing: see the extension's gil_released
    for ds in list(_open_datasets):
        ds._reader_ = None


class Field(NamedTuple):
    """A per-sample field as declared at build time (`shardpack build --field NAME:KIND`): kind is
    "int", "float", "str", "int-list", "float-list", "tags" or "boxes"; names are the tag names
    (tags) or box classes (boxes), by id, else empty."""
    name: str
    kind: str
    names: List[str]


class Boxes(NamedTuple):
    """One record's boxes: float32 (M, 4) of x0, y0, x1, y1 in pixels (columns [x0, x1), rows
    [y0, y1)), and their class ids, int64 (M,)."""
    boxes: _npt.NDArray[_np.float32]
    labels: _npt.NDArray[_np.int64]


class Padded(NamedTuple):
    """A batch of variable-length lists: values (N, L) padded with 0 to the longest, counts (N,)."""
    values: _npt.NDArray[Any]
    counts: _npt.NDArray[_np.int64]


class PaddedBoxes(NamedTuple):
    """A batch's boxes: boxes float32 (N, M, 4) padded with 0 to the most in a sample, labels int64
    (N, M) padded with -1, counts int64 (N,) (a sample's boxes are boxes[j, :counts[j]])."""
    boxes: _npt.NDArray[_np.float32]
    labels: _npt.NDArray[_np.int64]
    counts: _npt.NDArray[_np.int64]


def _padded(flat: _npt.NDArray[Any], counts: _npt.NDArray[_np.int64], fill: Any, tail: Tuple[int, ...] = ()
            ) -> _npt.NDArray[Any]:
    """Rows of `flat` (counts[j] for sample j, one after the other) as (N, max count, *tail)."""
    n = counts.shape[0]
    width = int(counts.max()) if n else 0
    out = _np.full((n, width) + tail, fill, dtype=flat.dtype)
    if flat.shape[0]:
        rows = _np.repeat(_np.arange(n), counts)
        starts = _np.cumsum(counts) - counts
        out[rows, _np.arange(flat.shape[0]) - _np.repeat(starts, counts)] = flat
    return out


def _field_batch(kinds: Dict[str, str], columns: Dict[str, Any]) -> Dict[str, Any]:
    """The extension's columns (shardpack_ext: fields_ext::column) as a batch: int and float (N,),
    str a list, tags (N, T) uint8 multi-hot, lists Padded, boxes PaddedBoxes."""
    out: Dict[str, Any] = {}
    for name, col in columns.items():
        kind = kinds[name]
        if kind in ("int-list", "float-list"):
            out[name] = Padded(_padded(col[0], col[1], 0), col[1])
        elif kind == "boxes":
            out[name] = PaddedBoxes(_padded(col[0], col[2], 0, (4,)), _padded(col[1], col[2], -1), col[2])
        else:
            out[name] = col
    return out


class Dataset:
    """A shardpack dataset, read through the C++ reader.

    len(ds); ds.task ("segmentation" | "classification"); ds.classes (names, id = position);
    ds.image_shape ((H, W, C) when every record has it, else None); ds[i]; ds.key(i);
    ds.read_batch(...).

    Pickles by path and options; the copy reopens the dataset when first used in the process that
    unpickled it (DataLoader workers under fork or spawn), and refuses a dataset whose content
    changed since. The record index stays in C++: no Python object per record.
    """

    def __init__(self, path: PathLike, *, verify_checksums: bool = True, io: IO = "auto",
                 max_open_shards: int = 0, cache_bytes: Optional[int] = None,
                 io_threads: Optional[int] = None) -> None:
        path = _os.fspath(path)
        self._path: str = _os.fsdecode(path) if isinstance(path, bytes) else path
        self._verify = bool(verify_checksums)
        self._io = _checks.choice(io, "io", _IOS)
        self._max_open = _checks.integer(max_open_shards, "max_open_shards", 0)
        self._cache_bytes = _checks.optional_count(cache_bytes, "cache_bytes", 2**63)
        self._io_threads = _checks.optional_count(io_threads, "io_threads", 256)
        self._content_hash: Optional[str] = None
        self._reader_: Optional[_Reader] = None
        self._resolved: Dict[Any, Tuple[_BatchOptions, List[float], List[float]]] = {}
        self._reader  # open now, so that a missing or damaged dataset is reported here

    # -- opening and pickling
    @property
    def _reader(self) -> _Reader:
        r = self._reader_
        if r is None:
            r = _Reader(_os.fsencode(self._path), self._verify, self._io, self._max_open, self._cache_bytes,
                        self._io_threads)
            if r.io_note and r.io_note not in _io_notes_said:  # once a process (DataLoader workers reopen)
                _io_notes_said.add(r.io_note)
                _logging.getLogger("shardpack").warning("%s", r.io_note)
            if self._content_hash is not None and r.content_hash != self._content_hash:
                raise Error(f"{self._path}: the dataset changed since it was opened in the parent process "
                            f"(content hash {r.content_hash}, was {self._content_hash})")
            self._content_hash = r.content_hash
            self._reader_ = r
            _open_datasets.add(self)
        return r

    def __getstate__(self) -> Dict[str, Any]:
        return {"path": self._path, "verify_checksums": self._verify, "io": self._io,
                "max_open_shards": self._max_open, "cache_bytes": self._cache_bytes,
                "io_threads": self._io_threads, "content_hash": self._content_hash}

    def __setstate__(self, state: Dict[str, Any]) -> None:
        self._path = state["path"]
        self._verify = state["verify_checksums"]
        self._io = state.get("io", "auto")
        self._max_open = state.get("max_open_shards", 0)
        self._cache_bytes = state.get("cache_bytes", 0)
        self._io_threads = state.get("io_threads", 0)
        self._content_hash = state["content_hash"]
        self._reader_ = None  # reopened lazily
        self._resolved = {}

    def __repr__(self) -> str:
        return (f"shardpack.Dataset({self._path!r}, {len(self)} records, {self.task}, "
                f"{len(self.classes)} classes, image_shape={self.image_shape})")

    # -- the schema
    @property
    def path(self) -> str:
        return self._path

    @property
    def verify_checksums(self) -> bool:
        return self._verify

    @property
    def io(self) -> str:
        """How shards are read: "mmap", "pread", "stream" or "blocks"; with io="auto" (the
        default), what the reader chose at open (see shardpack.open). A copy unpickled in
        another process (a DataLoader worker) chooses again for itself."""
        return self._reader.io

    @property
    def preferred_order(self) -> Order:
        """The epoch order that suits how the shards are read: "blocks" when io is "blocks" (the
        dataset is larger than the reader's cache and not in memory), else "global". The
        loaders' order="auto" (their default) takes it."""
        return self._reader.preferred_order  # type: ignore[return-value]

    @property
    def blocks_layout(self) -> Tuple[int, int]:
        """The blocks order's defaults for this dataset, (block, window): records per block
        (about 4 MiB) and blocks per window (16), fewer blocks a window (and, below 2, smaller
        blocks) where three windows would not fit the reader's cache (io "blocks" with a small
        cache_bytes), so that what is read ahead stays cached until it is read. Ranks of one job
        must then open with the same cache_bytes, or their orders differ."""
        block, window = self._reader.blocks_layout
        return int(block), int(window)

    @property
    def cache_bytes(self) -> int:
        """The reader's cache for io "stream" and "blocks", in bytes (0 for mmap and pread)."""
        return int(self._reader.cache_bytes)

    def begin_epoch(self) -> bool:
        """Called by shardpack.epoch_order (so by every adapter) as each epoch begins: with io
        "stream" over a local folder, where the page cache no longer holds the dataset (under
        90% of a sample of up to 64 shards), the reader streams it again, whole, in file order,
        ahead of the epoch's reads; True then. With io "blocks", the blocks read for the last
        epoch are read again, whole, when the new one wants them (False). Else nothing (False)."""
        return bool(self._reader.begin_epoch())

    def keep_decoded(self) -> bool:
        """Asks the reader to keep every record decoded in this process's memory, for a reader
        that reads every record each epoch (call it before the first; no adapter does by
        itself): with io "stream", one C++ thread decodes the records as the stream brings them in, so a cold
        epoch's decoding happens while the disk reads, and read_batch copies out of the copy (no
        read, no zstd); later epochs read from it. It costs the records' decoded size in memory;
        kept only where the dataset is streamed with every shard open and its stored and decoded
        bytes together fit cache_bytes. Returns whether it is kept; decoded_count says how far
        it is."""
        return bool(self._reader.keep_decoded())

    @property
    def decoded_count(self) -> int:
        """Records in the decoded copy so far (0 without it, see keep_decoded)."""
        return int(self._reader.decoded_count)

    @property
    def decoded_bytes(self) -> int:
        """The records' decoded bytes, summed: what keep_decoded's copy takes (raw records decode
        to their stored size; data_bytes is the shards' size). 0 where shards are opened lazily."""
        return int(self._reader.decoded_bytes)

    def io_counters(self) -> Dict[str, int]:
        """The reader's I/O engine's counters (all 0 for mmap and pread): extent_reads and
        extent_bytes (read by its I/O threads), direct_reads/direct_bytes (reads no extent held),
        hits, waits (reads that waited for an extent), jumps (extents that did not start where the
        last one ended: a seek on a disk), evicted_bytes, dropped_hints,
        cached_bytes and peak_cached_bytes (what the engine counts as cached: for a local
        folder the page cache holds it), held_bytes and peak_held_bytes (of them, in the
        reader's own memory: object storage's extents; 0 for a local folder)."""
        return dict(self._reader.io_counters)

    @property
    def open_shards(self) -> int:
        """How many shards are open now (at most max_open_shards)."""
        return int(self._reader.open_shards)

    @property
    def max_open_shards(self) -> int:
        return int(self._reader.max_open_shards)

    def __len__(self) -> int:
        return len(self._reader)

    @property
    def task(self) -> Literal["segmentation", "classification"]:
        return self._reader.task  # type: ignore[return-value]

    @property
    def classes(self) -> List[str]:
        """Class names, the id of each its position. Bytes that are not UTF-8 come back as lone
        surrogates (surrogateescape), as os.fsdecode gives them: os.fsencode(name) is the bytes."""
        return self._reader.classes

    @property
    def image_shape(self) -> Optional[Tuple[int, int, int]]:
        return self._reader.image_shape

    @property
    def image_dtype(self) -> Literal["uint8", "uint16"]:
        """The stored images' dtype: "uint8", or "uint16" (16-bit sources, format 1.4)."""
        return self._reader.image_dtype  # type: ignore[return-value]

    @property
    def channel_order(self) -> Literal["L", "RGB", "RGBA", "bands"]:
        """The stored channels: "L", "RGB", "RGBA", or "bands" (the source's samples as stored, format 1.4)."""
        return self._reader.channel_order  # type: ignore[return-value]

    @property
    def label_layout(self) -> Literal["onehot", "index", "class_id"]:
        """How labels are stored: "onehot", "index" (segmentation) or "class_id" (classification)."""
        return self._reader.label_layout  # type: ignore[return-value]

    @property
    def ignore_value(self) -> int:
        """The index value of ignored pixels in index maps (255, or 65535 beyond 255 classes)."""
        return self._reader.ignore_value

    @property
    def content_hash(self) -> str:
        return self._reader.content_hash

    @property
    def class_colors(self) -> List[Tuple[int, int, int]]:
        """(r, g, b) per class, as contact sheets and `shardpack export` draw them: the class
        dictionary's color, or for a class without one a color of a fixed palette."""
        return self._reader.class_colors

    @property
    def foreground_fallbacks(self) -> int:
        """How many reads with crop_position="foreground" (by this process's handle) found no
        foreground pixel in their record and took a uniform window instead."""
        return int(self._reader.foreground_fallbacks)

    def _class_ids(self, classes: Any, what: str) -> List[int]:
        """Class names or ids as ids (ArgumentValueError / ArgumentTypeError naming `what`)."""
        if isinstance(classes, (str, bytes, int, _np.integer)):
            classes = [classes]
        try:
            items = list(classes)
        except TypeError:
            raise ArgumentTypeError(f"{what} must be a sequence of class names or ids, not {type(classes).__name__}") \
                from None
        names = self.classes
        ids = []
        for c in items:
            if isinstance(c, str):
                if c not in names:
                    raise ArgumentValueError(f"{what}: no class named {c!r} (the classes: {', '.join(names)})")
                ids.append(names.index(c))
            else:
                i = _checks.integer(c, what)
                if not 0 <= i < len(names):
                    raise ArgumentValueError(f"{what}: class id {i} is not in [0, {len(names)})")
                ids.append(i)
        return ids

    @property
    def shard_starts(self) -> _npt.NDArray[_np.int64]:
        """The first record of each shard (an int64 array): where order="blocks" cuts blocks."""
        return self._reader.shard_starts

    @property
    def data_bytes(self) -> int:
        """The bytes of all shards: the dataset's size on disk."""
        return self._reader.data_bytes

    # -- records
    def __getitem__(self, i: int) -> Tuple[_npt.NDArray[Any], Union[_npt.NDArray[Any], int]]:
        """(image, label) of record i. image: (H, W, C), uint8, or uint16 where stored so (image_dtype). label: one-hot uint8 (H, W, K),
        an index map (H, W) of uint8 or uint16, or an int class id. Records stored raw
        (--compression none) come as read-only views of the memory map (no copy); zstd records
        as writable arrays of their own."""
        r = self._reader
        return r.get(_checks.index(i, len(r), self._path))

    def __iter__(self) -> Iterator[Tuple[_npt.NDArray[Any], Union[_npt.NDArray[Any], int]]]:
        r = self._reader
        for i in range(len(r)):
            yield r.get(i)

    def key(self, i: int) -> str:
        """The image path of record i, as the CSV wrote it (surrogateescape where not UTF-8)."""
        r = self._reader
        return r.key(_checks.index(i, len(r), self._path))

    @property
    def field_info(self) -> List[Field]:
        """The per-sample fields the dataset declares (format 1.5), in order; [] when it has none."""
        return [Field(name, kind, list(names)) for name, kind, names in self._reader.fields]

    def _field_names(self, fields: Any, what: str) -> List[str]:
        known = [f[0] for f in self._reader.fields]
        if fields is None or fields == "all":
            return known
        if isinstance(fields, str) or not all(isinstance(f, str) for f in fields):
            raise ArgumentTypeError(f"{what}: fields must be a sequence of field names or \"all\", not {fields!r}")
        for f in fields:
            if f not in known:
                raise ArgumentValueError(f"{what}: no field named {f!r}; the dataset's fields are {known}")
        return list(fields)

    def fields(self, i: int, *, fields: Optional[Sequence[str]] = None) -> Dict[str, Any]:
        """Record i's per-sample fields (format 1.5) by name, as stored (boxes in the record's
        pixels): int -> int, float -> float, str -> str, int-list / float-list -> 1-D int64 /
        float64 array, tags -> (T,) uint8 multi-hot over field_info's names, boxes -> Boxes.
        fields: the names to read (default: all)."""
        r = self._reader
        idx = _np.array([_checks.index(i, len(r), self._path)], dtype=_np.int64)
        names = self._field_names(fields, "fields")
        cols = r.read_fields(idx, names, None, 0, 0, 0.0)
        kinds = {f[0]: f[1] for f in r.fields}
        out: Dict[str, Any] = {}
        for name, col in cols.items():
            kind = kinds[name]
            if kind == "int":
                out[name] = int(col[0])
            elif kind == "float":
                out[name] = float(col[0])
            elif kind == "str":
                out[name] = col[0]
            elif kind in ("int-list", "float-list"):
                out[name] = col[0]
            elif kind == "tags":
                out[name] = col[0]
            else:
                out[name] = Boxes(col[0], col[1])
        return out

    def prefetch(self, indices: Indices) -> None:
        """Starts reading records `indices` from storage so that reading them later does not wait
        for the disk: their byte ranges, merged where they touch, are announced to the kernel
        (WILLNEED). A hint: it returns at once and changes nothing else. shardpack.torch.Loader
        calls it ahead of its batches (whole blocks with order="blocks"). Indices are checked as
        read_batch's."""
        r = self._reader
        r.prefetch(_checks.indices(indices, len(r), self._path, "prefetch"))

    def batch_spec(self, batch_size: int, *, dtype: DType = "float32", layout: Layout = "NCHW",
                   label: Label = "onehot", label_dtype: LabelDType = None, crop: Optional[Tuple[int, int]] = None
                   ) -> Spec:
        """((shape, dtype), (shape, dtype)) of the images and labels read_batch returns for
        `batch_size` records with these options (NumPy dtypes); the options are read_batch's.
        Without a crop, a dataset whose records vary in size (built without --size) gives record
        0's size: that of every batch when all its records share one."""
        r = self._reader
        n = _checks.integer(batch_size, "batch_spec: batch_size", 0)
        o = _BatchOptions.check(r, self._path, dtype, layout, label, label_dtype, crop)
        return self._spec(r, n, o)

    @staticmethod
    def _spec(r: _Reader, n: int, o: _BatchOptions) -> Spec:
        fixed = r.image_shape
        if o.crop_height:
            h, w, c = o.crop_height, o.crop_width, r.channels
        elif fixed is None:  # records of varying size (no --size): record 0's, as read_batch says
            h, w = r.record_size(0) if len(r) else (0, 0)
            c = r.channels
        else:
            h, w, c = fixed
        k = r.class_count
        images = ((n, c, h, w) if o.channels_first else (n, h, w, c),
                  _np.dtype(_np.float32 if o.as_float else _np.uint16 if o.as_uint16 else _np.uint8))
        seg = r.task == "segmentation"
        shape: Tuple[int, ...]
        if o.label == "onehot":
            shape = ((n, k, h, w) if o.channels_first else (n, h, w, k)) if seg else (n, k)
        else:
            shape = (n, h, w) if seg else (n,)
        return images, (shape, _np.dtype(o.label_dtype))

    def _resolve(self, dtype: Any, layout: Any, normalize: Any, label: Any, label_dtype: Any,
                 crop: Any) -> Tuple[_BatchOptions, List[float], List[float]]:
        """read_batch's options checked and resolved: (options, mean, std). Remembered per set of
        arguments (a loop passes the same ones for every batch: 2-3 us of checks each time);
        the key holds each argument's type too, so that crop=(224.0, 224.0) is refused like
        the first time, never taken for (224, 224). Unhashable arguments are checked each call."""
        try:
            key: Any = tuple((type(a), a) for a in (dtype, layout, normalize, label, label_dtype)) + \
                (None if crop is None else tuple((type(v), v) for v in crop),)
            resolved = self._resolved.get(key)
        except TypeError:  # an unhashable or non-iterable argument: checked below, not remembered
            key = resolved = None
        if resolved is not None:
            return resolved
        r = self._reader
        o = _BatchOptions.check(r, self._path, dtype, layout, label, label_dtype, crop)
        implicit = isinstance(normalize, str) and normalize == "auto"
        if implicit:  # ImageNet's statistics where they mean something: not for bands other than 3
            normalize = "imagenet" if o.as_float and (r.channel_order != "bands" or r.channels == 3) else None
        elif not o.as_float and normalize is not None:
            raise ArgumentValueError("read_batch: normalize applies to float32 batches; uint8 and uint16 batches are "
                                     f"as stored (dtype=\"uint8\" or \"uint16\" takes normalize=None, not {normalize!r})")
        mean, std = _checks.normalization(normalize, r.channels, "read_batch: normalize", r.channel_order)
        if implicit and normalize == "imagenet":
            _say_imagenet_default(mean, std)
        resolved = (o, mean, std)
        if key is not None:
            if len(self._resolved) >= 64:
                self._resolved.clear()
            self._resolved[key] = resolved
        return resolved

    def read_batch(self, indices: Indices, *, dtype: DType = "float32", layout: Layout = "NCHW",
                   normalize: Normalize = "auto", label: Label = "onehot", label_dtype: LabelDType = None,
                   out: Optional[Tuple[Any, Any]] = None, threads: int = 0, crop: Optional[Tuple[int, int]] = None,
                   crop_position: CropPosition = "center", hflip: Flip = 0.0, vflip: Flip = 0.0, seed: int = 0,
                   epoch: int = 0, return_boxes: bool = False, fields: Optional[Sequence[str]] = None,
                   min_box_visibility: float = 0.0,
                   crop_background: Optional[Sequence[Union[int, str]]] = None) -> Tuple[Any, ...]:
        """Reads the records `indices` (any sequence or integer array, each in [-len, len)) into
        one batch. Options are keyword-only.

        dtype: "float32", "uint8" (as stored; refused for uint16 images) or "uint16" (uint16 images as
          stored; uint8 images' values widened). layout: "NCHW" or "NHWC".
        normalize (float32 only): "auto" (the default: "imagenet" for float32, None for uint8 and
          uint16, and for images of bands other than 3; the first time it picks "imagenet" the
          "shardpack" logger says so, once a process), None (x / 255, or x / 65535 for uint16
          images), "imagenet" (mean 0.485 0.456 0.406, std 0.229 0.224 0.225; grey images 0.449 /
          0.226; alpha x / 255; an ArgumentValueError for bands other than 3) or a (mean, std) pair
          on the 0..1 scale, each a number or one value per channel (one for all beyond 4 channels). uint8 batches are as stored: a normalize other than None or
          "auto" with dtype="uint8" is an ArgumentValueError, not ignored.
        label: "onehot" (segmentation (N, K, H, W) or (N, H, W, K), classification (N, K)),
          "index" (class ids: (N, H, W) with ignore_value where ignored, or (N,)), or "stored"
          (one-hot if the dataset stores one-hot masks, else "index").
        label_dtype: one-hot labels: None (the images' dtype), "float32" or "uint8". Index labels:
          None or "int64" (PyTorch's losses take int64 class targets), "uint16", or "uint8" (1/8
          of the bytes: the recommended delivery, converted on the GPU; needs at most 255
          classes, ignored pixels are 255). A dtype that cannot hold the classes is an error.
        out: None, or (images, labels): writable C-contiguous CPU arrays of exactly the batch's
          shape and dtype that do not overlap (NumPy, buffer protocol or DLPack, such as torch
          tensors, pinned ones included), filled in place with no allocation and returned. A
          tensor that requires grad is refused (ArgumentValueError): autograd would not see the write.
        threads: C++ threads to split the batch over (0: all cores this process may use; more
          than 4 x the cores: that many, with a RuntimeWarning, as the CLI). The GIL is released.

        Crops and flips at read time, the same for the image and the label, before any conversion
        (labels stay exact):
        crop: None (whole records, all of one size: the dataset's fixed size (built with
          --size), or, when its records vary, the size of the batch's first record; a record of
          another size in the batch is an error naming it) or (height, width): every
          output is that window of its record, so the batch's H and W are the crop's (records
          may then differ in size; each must be at least the crop).
        crop_position: "center" (offset (H - height) // 2, (W - width) // 2), "random" (uniform
          over every valid offset), "foreground" (segmentation: centred on one labelled pixel,
          drawn uniformly among the record's pixels of a class not in crop_background, ignored
          pixels never; a record with none gets a uniform window and is counted in
          foreground_fallbacks) or an integer array of shape (N, 2): (y, x) per sample.
        crop_background: with "foreground", the classes (names or ids) that are not foreground
          (None: class 0).
        hflip, vflip: a probability of a random left-right / top-bottom flip (0.0: never, 1.0:
          always), or a boolean array of shape (N,): the flip per sample.
        seed, epoch: random boxes and flips are a function of (seed, epoch, record index) alone:
          the same for any `threads`, batch composition or order of reads; change `epoch` to get
          new ones.
        return_boxes: True returns (images, labels, boxes): boxes an int64 array (N, 4) of
          (y, x, hflip, vflip) per sample, the window's top-left corner in the record and its
          flips, so images[j] == flip(record[y:y + height, x:x + width]) (NHWC). Without crops or
          flips each row is (0, 0, 0, 0).
        fields: per-sample fields to read too (format 1.5; names, or "all"): a dict by name, int
          and float fields (N,) int64 / float64, str a list, tags (N, T) uint8 multi-hot, lists
          Padded, boxes PaddedBoxes in the output's pixels: moved, clipped and flipped with each
          sample's window, the same bits as the C++ reader (spec 10.4.1).
        min_box_visibility: with crops or flips, a box is kept when at least this fraction of its
          area lies inside the window (0.0: any part; boxes with nothing inside always go).

        Returns (images, labels), or (images, labels, boxes), then the fields' dict when fields
        are asked for. Raises IndexOutOfRange for an index
        outside the dataset, ArgumentValueError / ArgumentTypeError for other bad arguments, and
        shardpack.Error on damaged data or a crop larger than a record (naming it)."""
        r = self._reader
        if type(indices) is _np.ndarray and indices.dtype == _np.int64 and indices.ndim == 1 \
                and indices.flags.c_contiguous:
            # the extension checks each index (IndexOutOfRange) as it copies them
            idx = cast(_npt.NDArray[_np.int64], indices)
        else:
            idx = _checks.indices(indices, len(r), self._path, "read_batch")
        o, mean, std = self._resolve(dtype, layout, normalize, label, label_dtype, crop)
        if out is None:
            out_images = out_labels = None
        else:
            if not isinstance(out, (tuple, list)) or len(out) != 2:
                raise ArgumentTypeError("read_batch: out must be a pair (images, labels)")
            out_images, out_labels = out
            if out_images is None or out_labels is None:
                raise ArgumentTypeError("read_batch: out must be a pair of arrays (images, labels), not None")
        threads = _threads(threads)
        n = idx.shape[0]
        given = None
        if isinstance(crop_position, str):
            position = _checks.choice(crop_position, "read_batch: crop_position", _CROP_POSITIONS)
        else:
            if crop is None:
                raise ArgumentValueError("read_batch: crop boxes (crop_position as an array) need crop=(height, width)")
            yx = _np.asarray(crop_position)
            if yx.size and yx.dtype.kind not in "iu":
                raise ArgumentTypeError(f"read_batch: crop_position must be an integer array, not {yx.dtype}")
            if yx.shape != (n, 2):
                raise ArgumentValueError(f"read_batch: crop_position must be of shape ({n}, 2), not {yx.shape}")
            if yx.size and (int(yx.min()) < 0 or int(yx.max()) > 65535):
                raise ArgumentValueError("read_batch: crop_position (y, x) values must be in [0, 65535]")
            given = _np.zeros((n, 4), dtype=_np.int64)
            given[:, :2] = yx
            position = "given"
        flips = []
        for column, (what, flip) in enumerate((("hflip", hflip), ("vflip", vflip)), start=2):
            if type(flip) is float and 0.0 <= flip <= 1.0:  # the usual case, without NumPy's calls
                flips.append(("random" if flip > 0.0 else "none", flip))
                continue
            if _np.ndim(flip) == 0:
                p = _checks.probability(flip, f"read_batch: {what}")
                flips.append(("random" if p > 0.0 else "none", p))
                continue
            f = _np.asarray(flip)
            if f.size and f.dtype.kind != "b":
                raise ArgumentTypeError(f"read_batch: {what} must be a probability or a boolean array, not {f.dtype}")
            if f.shape != (n,):
                raise ArgumentValueError(f"read_batch: {what} must be of shape ({n},), not {f.shape}")
            if given is None:
                given = _np.zeros((n, 4), dtype=_np.int64)
            given[:, column] = f
            flips.append(("given", 0.0))
        seed, epoch = _checks.seed_and_epoch(seed, epoch, "read_batch")
        if position == "foreground" and r.task != "segmentation":
            raise ArgumentValueError('read_batch: crop_position="foreground" needs a segmentation dataset')
        if crop_background is not None and position != "foreground":
            raise ArgumentValueError('read_batch: crop_background applies to crop_position="foreground"')
        background = {} if crop_background is None else \
            {"background": self._class_ids(crop_background, "read_batch: crop_background")}
        names = None if fields is None else self._field_names(fields, "read_batch")
        if names is not None:
            min_box_visibility = _checks.probability(min_box_visibility, "read_batch: min_box_visibility")
        windows = names is not None and (o.crop_height != 0 or flips[0][0] != "none" or flips[1][0] != "none")
        boxes = _np.empty((n, 4), dtype=_np.int64) if return_boxes or windows else None
        options = _ReadOptions(images=_ImageType.float32 if o.as_float else _ImageType.uint16 if o.as_uint16
                               else _ImageType.uint8, channels_first=o.channels_first, mean=mean, stddev=std,
                               label=_LabelMode[o.label], label_dtype=_LabelType[o.label_dtype],
                               crop_height=o.crop_height, crop_width=o.crop_width,
                               crop_position=_CropPosition[position], hflip=_FlipMode[flips[0][0]],
                               hflip_probability=flips[0][1], vflip=_FlipMode[flips[1][0]],
                               vflip_probability=flips[1][1], threads=threads, **background)
        images, labels, boxes = r.read_batch(idx, options, seed, epoch, out_images, out_labels, given, boxes)
        if names is None:
            return (images, labels, boxes) if return_boxes else (images, labels)
        cols = r.read_fields(_np.where(idx < 0, idx + len(r), idx), names, boxes if windows else None, o.crop_height,
                             o.crop_width, float(min_box_visibility))
        got = _field_batch({f[0]: f[1] for f in r.fields}, cols)
        return (images, labels, boxes, got) if return_boxes else (images, labels, got)


from ._mix import Mix, mix  # noqa: E402  (_mix.py reads like a Dataset: after it)
from ._sheet import contact_sheet  # noqa: E402  (uses Dataset above)
