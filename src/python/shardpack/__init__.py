"""Read shardpack datasets from Python.

    import shardpack
    ds = shardpack.open("data/train")            # a shardpack.Dataset; errors are shardpack.Error
    img, label = ds[0]                           # uint8 (H, W, C); one-hot (H, W, K), index map (H, W) or class id
    images, labels = ds.read_batch([4, 1, 7])    # float32 NCHW, ImageNet-normalised, one-hot
    images, labels = ds.read_batch(idx, crop=(256, 256), crop_position="random", hflip=0.5, epoch=e)

The records are read by the C++ reader (include/shardpack/reader.hpp) through the extension
shardpack._shardpack: batches are filled outside the GIL by a pool of C++ threads, straight into
NumPy arrays or the caller's (out=, any buffer-protocol or DLPack array, torch tensors included).

Adapters, each importing its framework only when imported itself:
shardpack.torch (Dataset, Sampler, Loader), shardpack.keras (PyDataset), shardpack.tf (dataset).
"""
import os as _os

import numpy as _np

from ._shardpack import Error, Reader as _Reader, epoch_order as _epoch_order, order_blocks as _order_blocks

Error.__module__ = "shardpack"

__all__ = ["open", "Dataset", "Error", "IndexOutOfRange", "permutation", "epoch_order", "IMAGENET_MEAN", "IMAGENET_STD"]
__version__ = "0.1.0"

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


class IndexOutOfRange(Error, IndexError):
    """ds[i] with i outside [-len(ds), len(ds)): a shardpack.Error and an IndexError."""


def open(path, verify_checksums=True):
    """Opens the dataset folder `path` (the one holding manifest.json); see Dataset."""
    return Dataset(path, verify_checksums=verify_checksums)


def permutation(n, seed, epoch=0):
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


def _count(value, what):
    try:
        value = value.__index__()
    except AttributeError:
        raise TypeError(f"{what} must be an integer, not {type(value).__name__}") from None
    return value


def epoch_order(n, seed=0, epoch=0, shuffle=True, rank=0, world=1, drop_last=False, order="global", block=None,
                window=None, shard_starts=None):
    """The indices rank `rank` of `world` reads in epoch `epoch`: an int64 array.

    n: the number of records, or a shardpack.Dataset (then shard_starts and the default block
    come from it). shuffle=False: 0..n-1 in order (order does not matter then).

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
    the page cache and the dataset was written shuffled (shardpack build's default --order);
    keep "global" when the data fits in RAM or the records are stored sorted by label. README,
    "Cold storage", has the measurements. Defaults: block = about 4 MiB of records for a
    Dataset, else 64 records; window = 16 blocks.

    Both are functions of (n, seed, epoch) (and block, window, shard_starts) only: the same for
    any number of DataLoader workers and in C++ (include/shardpack/order.hpp, which computes
    them). drop_last=False pads by wrapping around to the epoch's start so that every rank gets
    ceil(n / world) indices; drop_last=True leaves out the tail (n // world each)."""
    n, block, window, starts = _block_parameters(n, block, window, shard_starts)
    seed, epoch = _count(seed, "seed"), _count(epoch, "epoch")
    rank, world = _count(rank, "rank"), _count(world, "world")
    if seed < 0 or epoch < 0:
        raise ValueError(f"seed and epoch must be at least 0, not {seed} and {epoch}")
    if world < 1 or not 0 <= rank < world:
        raise Error(f"rank {rank} is not in [0, world) for world {world}")
    if order not in ("global", "blocks"):
        raise ValueError(f'order must be "global" or "blocks", not {order!r}')
    return _epoch_order(n, seed, epoch, rank, world, bool(drop_last), bool(shuffle), order, block, window, starts)


def _block_parameters(n, block, window, shard_starts):
    """(n, block, window, shard_starts) of the blocks order, with the defaults filled in."""
    if isinstance(n, Dataset):
        ds = n
        n = len(ds)
        if shard_starts is None:
            shard_starts = ds.shard_starts
        if block is None and n:
            block = max(1, round(BLOCK_BYTES * n / max(1, ds.data_bytes)))
    n = _count(n, "n")
    if n < 0:
        raise ValueError(f"n must be at least 0, not {n}")
    block = BLOCK_RECORDS if block is None else _count(block, "block")
    window = WINDOW_BLOCKS if window is None else _count(window, "window")
    if block < 1 or window < 1:
        raise ValueError(f"block and window must be at least 1, not {block} and {window}")
    starts = [] if shard_starts is None else [int(s) for s in _np.asarray(shard_starts, dtype=_np.int64)]
    return n, block, window, starts


def _block_starts(n, block=None, window=None, shard_starts=None):
    """The first record of every block of the blocks order (then n), and the window: an int64 array
    and an int."""
    n, block, window, starts = _block_parameters(n, block, window, shard_starts)
    return _order_blocks(n, block, starts), window


def _normalization(norm, channels):
    """(mean, std) per channel on the 0..1 scale, from read_batch's `normalize`."""
    if norm is None:
        return [0.0] * channels, [1.0] * channels
    if isinstance(norm, str):
        if norm != "imagenet":
            raise Error(f'read_batch: normalize must be None, "imagenet" or a (mean, std) pair, not "{norm}"')
        if channels == 1:  # grey images: the mean of the three channels' statistics
            return [sum(IMAGENET_MEAN) / 3], [sum(IMAGENET_STD) / 3]
        mean, std = list(IMAGENET_MEAN), list(IMAGENET_STD)
        return mean + [0.0] * (channels - 3), std + [1.0] * (channels - 3)  # alpha: x / 255
    try:
        mean, std = norm
    except (TypeError, ValueError):
        raise Error("read_batch: normalize must be None, \"imagenet\" or a (mean, std) pair") from None

    def per_channel(v, what):
        v = _np.asarray(v, dtype=_np.float64).reshape(-1)
        if v.size == 1:
            v = _np.repeat(v, channels)
        if v.size != channels:
            raise Error(f"read_batch: normalize {what} has {v.size} values, the images have {channels} channels")
        return [float(x) for x in v]

    return per_channel(mean, "mean"), per_channel(std, "std")


def _crop_size(crop):
    """(height, width) of read_batch's `crop`, checked."""
    try:
        h, w = (int(v.__index__()) for v in crop)
    except (TypeError, ValueError, AttributeError):
        raise Error(f"read_batch: crop must be None or (height, width), not {crop!r}") from None
    if h < 1 or w < 1 or h > 65536 or w > 65536:
        raise Error(f"read_batch: crop ({h}, {w}) must be between 1 and 65536 pixels each way")
    return h, w


class Dataset:
    """A shardpack dataset, read through the C++ reader.

    len(ds); ds.task ("segmentation" | "classification"); ds.classes (names, id = position);
    ds.image_shape ((H, W, C) when every record has it, else None); ds[i]; ds.key(i);
    ds.read_batch(...).

    Pickles by path and options; the copy reopens the dataset when first used in the process that
    unpickled it (DataLoader workers under fork or spawn), and refuses a dataset whose content
    changed since. The record index stays in C++: no Python object per record.
    """

    def __init__(self, path, verify_checksums=True):
        self._path = _os.fspath(path)
        self._verify = bool(verify_checksums)
        self._content_hash = None
        self._reader_ = None
        self._reader  # open now, so that a missing or damaged dataset is reported here

    # -- opening and pickling
    @property
    def _reader(self):
        r = self._reader_
        if r is None:
            r = _Reader(self._path, self._verify)
            if self._content_hash is not None and r.content_hash != self._content_hash:
                raise Error(f"{self._path}: the dataset changed since it was opened in the parent process "
                            f"(content hash {r.content_hash}, was {self._content_hash})")
            self._content_hash = r.content_hash
            self._reader_ = r
        return r

    def __getstate__(self):
        return {"path": self._path, "verify_checksums": self._verify, "content_hash": self._content_hash}

    def __setstate__(self, state):
        self._path = state["path"]
        self._verify = state["verify_checksums"]
        self._content_hash = state["content_hash"]
        self._reader_ = None  # reopened lazily

    def __repr__(self):
        return (f"shardpack.Dataset({self._path!r}, {len(self)} records, {self.task}, "
                f"{len(self.classes)} classes, image_shape={self.image_shape})")

    # -- the schema
    @property
    def path(self):
        return self._path

    @property
    def verify_checksums(self):
        return self._verify

    def __len__(self):
        return len(self._reader)

    @property
    def task(self):
        return self._reader.task

    @property
    def classes(self):
        return self._reader.classes

    @property
    def image_shape(self):
        return self._reader.image_shape

    @property
    def label_layout(self):
        """How labels are stored: "onehot", "index" (segmentation) or "class_id" (classification)."""
        return self._reader.label_layout

    @property
    def ignore_value(self):
        """The index value of ignored pixels in index maps (255, or 65535 beyond 255 classes)."""
        return self._reader.ignore_value

    @property
    def content_hash(self):
        return self._reader.content_hash

    @property
    def shard_starts(self):
        """The first record of each shard (an int64 array): where order="blocks" cuts blocks."""
        return self._reader.shard_starts

    @property
    def data_bytes(self):
        """The bytes of all shards: the dataset's size on disk."""
        return self._reader.data_bytes

    # -- records
    def __getitem__(self, i):
        """(image, label) of record i. image: uint8 (H, W, C). label: one-hot uint8 (H, W, K),
        an index map (H, W) of uint8 or uint16, or an int class id. Records stored raw
        (--compression none) come as read-only views of the memory map (no copy); zstd records
        as writable arrays over the record's own decoded buffer."""
        r = self._reader
        try:
            i = i.__index__()
        except AttributeError:
            raise TypeError(f"shardpack.Dataset indices must be integers, not {type(i).__name__}") from None
        n = len(r)
        if not -n <= i < n:
            raise IndexOutOfRange(f"{self._path}: index {i} is out of range ({n} records)")
        return r.get(i)

    def __iter__(self):
        r = self._reader
        for i in range(len(r)):
            yield r.get(i)

    def key(self, i):
        """The image path of record i, as the CSV wrote it."""
        return self._reader.key(i.__index__())

    def batch_spec(self, batch_size, dtype="float32", layout="NCHW", label="onehot", crop=None):
        """((shape, dtype), (shape, dtype)) of the images and labels read_batch returns for
        `batch_size` records with these options (NumPy dtypes); crop=(height, width) as in
        read_batch."""
        if crop is not None:
            h, w = _crop_size(crop)
            c = self._reader.channels
        else:
            shape = self.image_shape
            if shape is None:
                raise Error(f"{self._path}: batches need a dataset with a fixed image size (built with --size) "
                            "or a crop size")
            h, w, c = shape
        n, k = int(batch_size), len(self.classes)
        dt = _np.dtype(_np.float32 if dtype in ("float32", _np.float32) else _np.uint8)
        images = ((n, c, h, w) if layout == "NCHW" else (n, h, w, c), dt)
        seg = self.task == "segmentation"
        if label == "stored":
            label = "onehot" if self.label_layout == "onehot" else "index"
        if label == "onehot":
            labels = ((n, k, h, w) if layout == "NCHW" else (n, h, w, k)) if seg else (n, k), dt
        else:
            labels = ((n, h, w) if seg else (n,)), _np.dtype(_np.int64)
        return images, labels

    def read_batch(self, indices, dtype="float32", layout="NCHW", normalize="imagenet", label="onehot",
                   out=None, threads=0, crop=None, crop_position="center", hflip=0.0, vflip=0.0, seed=0, epoch=0,
                   return_boxes=False):
        """Reads the records `indices` (any sequence or integer array) into one batch.

        dtype: "float32" or "uint8" (as stored). layout: "NCHW" or "NHWC".
        normalize (float32 only): None (x / 255), "imagenet" (mean 0.485 0.456 0.406, std 0.229
          0.224 0.225; grey images 0.449 / 0.226; alpha x / 255) or a (mean, std) pair on the
          0..1 scale, each a number or one value per channel.
        label: "onehot" (dtype; segmentation (N, K, H, W) or (N, H, W, K), classification (N, K)),
          "index" (int64 class ids: (N, H, W) with ignore_value where ignored, or (N,)), or
          "stored" (one-hot if the dataset stores one-hot masks, else "index").
        out: None, or (images, labels): writable C-contiguous CPU arrays of exactly the batch's
          shape and dtype (NumPy, buffer protocol or DLPack, such as torch tensors, pinned ones
          included), filled in place with no allocation and returned.
        threads: C++ threads to split the batch over (0: all cores). The GIL is released.

        Crops and flips at read time, the same for the image and the label, before any conversion
        (labels stay exact):
        crop: None (whole records; the dataset needs a fixed size) or (height, width): every
          output is that window of its record, so the batch's H and W are the crop's (records
          may then differ in size; each must be at least the crop).
        crop_position: "center" (offset (H - height) // 2, (W - width) // 2), "random" (uniform
          over every valid offset) or an integer array of shape (N, 2): (y, x) per sample.
        hflip, vflip: a probability of a random left-right / top-bottom flip (0.0: never, 1.0:
          always), or a boolean array of shape (N,): the flip per sample.
        seed, epoch: random boxes and flips are a function of (seed, epoch, record index) alone:
          the same for any `threads`, batch composition or order of reads; change `epoch` to get
          new ones.
        return_boxes: True returns (images, labels, boxes): boxes an int64 array (N, 4) of
          (y, x, hflip, vflip) per sample, the window's top-left corner in the record and its
          flips, so images[j] == flip(record[y:y + height, x:x + width]) (NHWC). Without crops or
          flips each row is (0, 0, 0, 0).

        Returns (images, labels), or (images, labels, boxes). Raises shardpack.Error on damage or
        bad arguments (a crop larger than a record, a box that runs past it)."""
        r = self._reader
        idx = _np.asarray(indices)
        if idx.ndim != 1:
            if idx.ndim == 0:
                raise Error("read_batch: indices must be a sequence or a 1-d array of integers")
            raise Error(f"read_batch: indices must be 1-d, not of shape {idx.shape}")
        if idx.size and idx.dtype.kind not in "iu":
            raise Error(f"read_batch: indices must be integers, not {idx.dtype}")
        idx = _np.ascontiguousarray(idx, dtype=_np.int64)
        if dtype in ("float32", _np.float32):
            as_float = True
        elif dtype in ("uint8", _np.uint8):
            as_float = False
        else:
            raise Error(f'read_batch: dtype must be "float32" or "uint8", not {dtype!r}')
        if layout not in ("NCHW", "NHWC"):
            raise Error(f'read_batch: layout must be "NCHW" or "NHWC", not {layout!r}')
        if not as_float and normalize is not None and normalize != "imagenet":
            raise Error("read_batch: normalize applies to float32 batches; uint8 batches are as stored")
        mean, std = _normalization(normalize if as_float else None, r.channels)
        if out is None:
            out_images = out_labels = None
        else:
            if not isinstance(out, (tuple, list)) or len(out) != 2:
                raise Error("read_batch: out must be a pair (images, labels)")
            out_images, out_labels = out
        if label not in ("onehot", "index", "stored"):
            raise Error(f'read_batch: label must be "onehot", "index" or "stored", not {label!r}')
        threads = int(threads)
        if threads < 0:
            raise Error("read_batch: threads must be 0 (all cores) or more")
        n = idx.shape[0]
        crop_height, crop_width = _crop_size(crop) if crop is not None else (0, 0)
        given = None
        if isinstance(crop_position, str):
            if crop_position not in ("center", "random"):
                raise Error(f'read_batch: crop_position must be "center", "random" or an (N, 2) array, '
                            f'not {crop_position!r}')
            position = crop_position
        else:
            if crop is None:
                raise Error("read_batch: crop boxes (crop_position as an array) need crop=(height, width)")
            yx = _np.asarray(crop_position)
            if yx.shape != (n, 2) or (yx.size and yx.dtype.kind not in "iu"):
                raise Error(f"read_batch: crop_position must be an integer array of shape ({n}, 2), "
                            f"not {yx.dtype} {yx.shape}")
            given = _np.zeros((n, 4), dtype=_np.int64)
            given[:, :2] = yx
            position = "given"
        flips = []
        for column, (what, flip) in enumerate((("hflip", hflip), ("vflip", vflip)), start=2):
            if _np.ndim(flip) == 0:
                try:
                    p = float(flip)
                except (TypeError, ValueError):
                    raise Error(f"read_batch: {what} must be a probability or a boolean array, not {flip!r}") from None
                if not 0.0 <= p <= 1.0:
                    raise Error(f"read_batch: {what} probability {p} is not in [0, 1]")
                flips.append(("random" if p > 0.0 else "none", p))
                continue
            f = _np.asarray(flip)
            if f.shape != (n,) or (f.size and f.dtype.kind != "b"):
                raise Error(f"read_batch: {what} must be a probability or a boolean array of shape ({n},), "
                            f"not {f.dtype} {f.shape}")
            if given is None:
                given = _np.zeros((n, 4), dtype=_np.int64)
            given[:, column] = f
            flips.append(("given", 0.0))
        seed, epoch = int(seed), int(epoch)
        if not 0 <= seed < 2**64 or not 0 <= epoch < 2**64:
            raise Error("read_batch: seed and epoch must be integers in [0, 2**64)")
        boxes = _np.empty((n, 4), dtype=_np.int64) if return_boxes else None
        images, labels, boxes = r.read_batch(idx, as_float, layout == "NCHW", mean, std, label, out_images, out_labels,
                                             threads, crop_height, crop_width, position, flips[0][0], flips[0][1],
                                             flips[1][0], flips[1][1], given, seed, epoch, boxes)
        return (images, labels, boxes) if return_boxes else (images, labels)
