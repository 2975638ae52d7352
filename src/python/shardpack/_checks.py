"""The package's argument checks, one place for each rule: open, read_batch, epoch_order, mix,
contact_sheet, write, the torch, Keras, tf.data and Grain adapters and the to_device functions
all call these (the extension trusts what they return).

`what` names the argument as the message should, with the function that took it where that
helps ("read_batch: crop", "write: level"). A value of a type that cannot be the argument is an
ArgumentTypeError (a TypeError); a value of the right type that cannot be used is an
ArgumentValueError (a ValueError); an index outside the dataset is IndexOutOfRange (an
IndexError). All three are shardpack.Error.

Private: the rules are documented where users meet them (shardpack.Dataset.read_batch and the
adapters' docstrings)."""
from __future__ import annotations

import operator
from typing import Any, List, Optional, Sequence, Tuple

import numpy as np
import numpy.typing as npt

from ._shardpack import ArgumentTypeError, ArgumentValueError, IndexOutOfRange

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


def integer(value: Any, what: str, low: Optional[int] = None, high: Optional[int] = None) -> int:
    """An integer (int, NumPy integer, anything with __index__; not a boolean), in [low, high]
    where those are given."""
    if isinstance(value, (bool, np.bool_)):
        raise ArgumentTypeError(f"{what} must be an integer, not a boolean")
    try:
        v = int(operator.index(value))
    except TypeError:
        raise ArgumentTypeError(f"{what} must be an integer, not {type(value).__name__}") from None
    if (low is not None and v < low) or (high is not None and v > high):
        if high is None:
            raise ArgumentValueError(f"{what} must be {low} or more, not {v}")
        if low is None:
            raise ArgumentValueError(f"{what} must be {high} or less, not {v}")
        raise ArgumentValueError(f"{what} must be in [{low}, {high}], not {v}")
    return v


def optional_count(value: Any, what: str, limit: int) -> int:
    """None (automatic: 0 for the extension) or a positive integer below limit."""
    if value is None:
        return 0
    count = integer(value, what)
    if not 0 < count < limit:
        raise ArgumentValueError(f"{what} must be None (automatic) or a positive integer below {limit}, not {count}")
    return count


def seed_and_epoch(seed: Any, epoch: Any, what: str) -> Tuple[int, int]:
    """A random stream's (seed, epoch), integers in [0, 2**64); `what` names the function."""
    if type(seed) is not int or type(epoch) is not int:  # plain ints, the usual case, skip the calls
        seed, epoch = integer(seed, f"{what}: seed"), integer(epoch, f"{what}: epoch")
    if not 0 <= seed < 2**64 or not 0 <= epoch < 2**64:
        raise ArgumentValueError(f"{what}: seed and epoch must be integers in [0, 2**64), not {seed} and {epoch}")
    return seed, epoch


def rank_and_world(rank: Any, world: Any, what: str) -> Tuple[int, int]:
    """A rank of `world` ranks: integers, 0 <= rank < world; `what` names the function ("" for none)."""
    rank, world = integer(rank, f"{what}rank"), integer(world, f"{what}world")
    if world < 1 or not 0 <= rank < world:
        raise ArgumentValueError(f"{what}rank {rank} is not in [0, world) for world {world}")
    return rank, world


def boolean(value: Any, what: str) -> bool:
    """True or False (Python's or NumPy's)."""
    if not isinstance(value, (bool, np.bool_)):
        raise ArgumentTypeError(f"{what} must be True or False, not {value!r}")
    return bool(value)


def probability(value: Any, what: str) -> float:
    """A number in [0, 1] (a boolean is 0 or 1): a flip's probability, an alpha, a visibility."""
    if isinstance(value, (str, bytes)):
        raise ArgumentTypeError(f"{what} must be a number in [0, 1], not {value!r}")
    try:
        p = float(value)
    except (TypeError, ValueError):
        raise ArgumentTypeError(f"{what} must be a number in [0, 1], not {value!r}") from None
    if not 0.0 <= p <= 1.0:  # (NaN too)
        raise ArgumentValueError(f"{what} must be a number in [0, 1], not {p}")
    return p


def choice(value: Any, what: str, allowed: Sequence[str]) -> str:
    """One of the words `allowed`."""
    if not isinstance(value, str):
        raise ArgumentTypeError(f"{what} must be one of {', '.join(map(repr, allowed))}, not {type(value).__name__}")
    if value not in allowed:
        raise ArgumentValueError(f"{what} must be one of {', '.join(map(repr, allowed))}, not {value!r}")
    return value


def dtype_name(value: Any, what: str, allowed: Sequence[str]) -> str:
    """A dtype given as a name, a NumPy type or a np.dtype, as one of the names `allowed`."""
    if isinstance(value, str):
        return choice(value, what, allowed)
    try:
        name = np.dtype(value).name
    except TypeError:
        raise ArgumentTypeError(f"{what} must be one of {', '.join(map(repr, allowed))}, not {value!r}") from None
    if name not in allowed:
        raise ArgumentValueError(f"{what} must be one of {', '.join(map(repr, allowed))}, not {name}")
    return name


def crop_size(crop: Any, what: str) -> Tuple[int, int]:
    """A crop's (height, width): two integers, each in [1, 65536]."""
    try:
        h, w = crop
    except (TypeError, ValueError):
        raise ArgumentTypeError(f"{what} must be None or (height, width), not {crop!r}") from None
    h, w = integer(h, f"{what} height"), integer(w, f"{what} width")
    if not (1 <= h <= 65536 and 1 <= w <= 65536):
        raise ArgumentValueError(f"{what} ({h}, {w}) must be between 1 and 65536 pixels each way")
    return h, w


def normalization(norm: Any, channels: int, what: str, order: str = "RGB",
                  words: Sequence[str] = ("auto", "imagenet")) -> Tuple[List[float], List[float]]:
    """(mean, std) per channel on the 0..1 scale from a `normalize` argument (`what` names it):
    None (x / 255), a word of `words` ("auto" here is "imagenet": callers resolve it first where
    it means more), or a (mean, std) pair of numbers or one per channel. ImageNet's statistics
    are for 3 channels (grey: their means; alpha x / 255), and not for `order` "bands" of
    another count; per-channel values are defined for up to 4 channels (the reader's)."""
    if norm is None:
        return [0.0] * channels, [1.0] * channels
    if isinstance(norm, str):
        choice(norm, what, words)
        if order == "bands" and channels != 3:
            raise ArgumentValueError(f'{what}="imagenet" is defined for 3 bands; these images have '
                                     f"{channels} (give None, or a (mean, std) pair)")
        if channels == 1:  # grey images: the mean of the three channels' statistics
            return [sum(IMAGENET_MEAN) / 3], [sum(IMAGENET_STD) / 3]
        mean, std = list(IMAGENET_MEAN), list(IMAGENET_STD)
        return mean + [0.0] * (channels - 3), std + [1.0] * (channels - 3)  # alpha: x / 255
    try:
        mean, std = norm
    except (TypeError, ValueError):
        raise ArgumentTypeError(f"{what} must be None, {', '.join(map(repr, words))} or a (mean, std) pair, "
                                f"not {norm!r}") from None

    def per_channel(v: Any, part: str) -> List[float]:
        try:
            v = np.asarray(v, dtype=np.float64).reshape(-1)
        except (TypeError, ValueError):
            raise ArgumentTypeError(f"{what} {part} must be numbers, not {v!r}") from None
        if v.size == 1:
            v = np.repeat(v, channels)
        if v.size != channels:
            raise ArgumentValueError(f"{what} {part} has {v.size} values, the images have {channels} channels")
        if not np.isfinite(v).all():
            raise ArgumentValueError(f"{what} {part} must be finite numbers")
        return [float(x) for x in v]

    mean, std = per_channel(mean, "mean"), per_channel(std, "std")
    if channels > 4 and (len(set(mean)) > 1 or len(set(std)) > 1):
        raise ArgumentValueError(f"{what} per channel is defined for up to 4 channels; these images "
                                 f"have {channels}: give one mean and one std for all")
    if 0.0 in std:
        raise ArgumentValueError(f"{what}: a standard deviation is 0")
    return mean, std


def index(i: Any, n: int, path: str) -> int:
    """Record index i in [-n, n) as a position in [0, n)."""
    k = integer(i, "a record index")
    if not -n <= k < n:
        raise IndexOutOfRange(f"{path}: index {k} is out of range ({n} records)")
    return k + n if k < 0 else k


def indices(values: Any, n: int, path: str, what: str) -> npt.NDArray[np.int64]:
    """Indices as NumPy would take them, each in [-n, n) whatever its integer type (no wrapping:
    np.uint64(2**64 - 1) is out of range, not -1), as a contiguous int64 array in [0, n)."""
    idx = np.asarray(values)
    if idx.ndim != 1:
        if idx.ndim == 0:
            raise ArgumentTypeError(f"{what}: indices must be a 1-d sequence of integers, not {type(values).__name__}")
        raise ArgumentValueError(f"{what}: indices must be a 1-d sequence of integers, not of shape {idx.shape}")
    if idx.size == 0:
        return np.empty(0, dtype=np.int64)
    if idx.dtype.kind == "O":  # Python integers beyond 64 bits, or other objects
        ints = [integer(v, f"{what}: indices") for v in idx.tolist()]
        for v in ints:
            if not -n <= v < n:
                raise IndexOutOfRange(f"{path}: index {v} is out of range ({n} records)")
        idx = np.array(ints, dtype=np.int64)
    elif idx.dtype.kind not in "iu":
        raise ArgumentTypeError(f"{what}: indices must be integers, not {idx.dtype}")
    else:
        lo, hi = idx.min(), idx.max()  # compared as Python ints: exact for any integer dtype
        if int(hi) >= n or int(lo) < -n:
            bad = int(hi) if int(hi) >= n else int(lo)
            raise IndexOutOfRange(f"{path}: index {bad} is out of range ({n} records)")
    idx = idx.astype(np.int64, copy=False)  # exact: every value is in [-n, n) now
    if (idx < 0).any():
        idx = idx + n * (idx < 0)
    return np.ascontiguousarray(idx)
