"""What the tf.data/Keras and JAX to_device share: the checks of a uint8 batch and its
conversion's constants (shardpack.torch.to_device is the PyTorch one).

Private: the functions are documented in shardpack.tf.to_device and shardpack.jax.to_device."""
from __future__ import annotations

from typing import Any, List, Optional, Sequence, Tuple

import numpy as np

import shardpack as _sp
from . import _checks


class Plan:
    """A checked batch's conversion: the channel axis, the per-channel mean and std (float32, on
    the 0..1 scale, read_batch's rule), the broadcast shape of both, and the number of classes
    (None: labels moved as they are)."""

    def __init__(self, what: str, images_shape: Sequence[int], images_dtype: Any, labels_shape: Sequence[int],
                 labels_dtype: Any, *, normalize: Any, onehot: Optional[int], layout: str) -> None:
        if np.dtype(images_dtype) != np.uint8:
            raise _sp.ArgumentValueError(f'{what}: images must be uint8 (dtype="uint8"), not {np.dtype(images_dtype)}; '
                                         "float32 batches are converted already")
        if len(images_shape) != 4:
            raise _sp.ArgumentValueError(f"{what}: images must be 4-d (N, H, W, C) or (N, C, H, W), "
                                         f"not {tuple(images_shape)}")
        layout = _checks.choice(layout, f"{what}: layout", _sp._LAYOUTS)
        self.channel_axis = 1 if layout == "NCHW" else 3
        channels = int(images_shape[self.channel_axis])
        if isinstance(normalize, str) and normalize == "auto":
            normalize = "imagenet"
        mean, std = _checks.normalization(normalize, channels, f"{what}: normalize")
        self.mean: List[float] = [float(np.float32(v)) for v in mean]
        self.std: List[float] = [float(np.float32(v)) for v in std]
        shape = [1, 1, 1, 1]
        shape[self.channel_axis] = channels
        self.shape: Tuple[int, ...] = tuple(shape)
        self.onehot: Optional[int] = None
        self.layout = layout
        if onehot is not None:
            k = _checks.integer(onehot, f"{what}: onehot (the number of classes)", 1)
            kind = np.dtype(labels_dtype).kind
            if kind not in "iu" or len(labels_shape) not in (1, 3) or (len(labels_shape) and
                                                                       labels_shape[0] != images_shape[0]):
                raise _sp.ArgumentValueError(f'{what}: onehot needs index labels (label="index"): integer (N,) or '
                                             f"(N, H, W), not {np.dtype(labels_dtype)} {tuple(labels_shape)}")
            self.onehot = k


def table(plan: Plan) -> "np.ndarray[Any, np.dtype[np.float32]]":
    """read_batch's conversion of every value v and channel c, (v / 255 - mean[c]) / std[c] in
    float32 (the C++ reader's order of operations): a (256, C) table."""
    values = np.arange(256, dtype=np.float32)[:, None] / np.float32(255.0)
    return ((values - np.asarray(plan.mean, np.float32)[None, :]) /
            np.asarray(plan.std, np.float32)[None, :]).astype(np.float32)


def channels(plan: Plan) -> "np.ndarray[Any, np.dtype[np.int32]]":
    """Each value's channel, shaped to broadcast against the images (the table's column)."""
    return np.arange(len(plan.mean), dtype=np.int32).reshape(plan.shape)
