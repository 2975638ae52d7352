"""JAX: shardpack.jax.to_device, a uint8 batch moved to a device and converted there.

    import shardpack, shardpack.jax
    ds = shardpack.open("data/train")
    for indices in batches:
        batch = ds.read_batch(indices, dtype="uint8", layout="NHWC", label="index", label_dtype="uint8")
        images, labels = shardpack.jax.to_device(batch, onehot=len(ds.classes))   # float32 on the device

shardpack.torch.to_device is the PyTorch one, shardpack.tf.to_device TensorFlow's (tf.data, Keras).
"""
from __future__ import annotations

from typing import Any, Optional, Tuple

import jax as _jax
import jax.numpy as _jnp
import numpy as _np

import shardpack as _sp
from shardpack import _adapt, _on_device

__all__ = ["to_device"]


def to_device(batch: Tuple[Any, Any], device: Any = None, *, normalize: _adapt.Normalize = "imagenet",
              onehot: Optional[int] = None, layout: str = "NHWC") -> Tuple[Any, Any]:
    """Moves a uint8 batch to `device` (a jax.Device; None: JAX's default, the first GPU or TPU
    when there is one) and converts it there: (images, labels) -> (float32 images, labels), the
    values read_batch(dtype="float32", label="onehot") gives on the host, (x / 255 - mean) / std
    in float32, bit for bit (looked up in read_batch's table).

    batch: (images, labels) as read_batch (or a loader) delivers them with dtype="uint8" and
      label="index": images uint8 (N, H, W, C) or (N, C, H, W) (`layout`), labels class ids
      (N, H, W) or (N,); NumPy or JAX arrays.
    normalize: "imagenet" (the default, what read_batch's "auto" picks for float32), None
      (x / 255) or a (mean, std) pair on the 0..1 scale, as in read_batch.
    onehot: None (labels moved as they are) or the number of classes K: index labels become
      float32 one-hot, (N, H, W, K) for NHWC, (N, K, H, W) for NCHW, (N, K) for classification;
      ids >= K (the ignore value, 255 or 65535) give all-zero vectors, as read_batch's.

    The uint8 batch is a quarter of float32's bytes (and uint8 index labels 1/(4K) of float32
    one-hot's): that is what crosses to the device."""
    if not isinstance(batch, (tuple, list)) or len(batch) != 2:  # (an array would unpack along its first axis)
        raise _sp.ArgumentTypeError("to_device: batch must be a pair (images, labels)")
    images, labels = batch
    images = images if isinstance(images, _jax.Array) else _np.asarray(images)
    labels = labels if isinstance(labels, _jax.Array) else _np.asarray(labels)
    plan = _on_device.Plan("to_device", images.shape, images.dtype, labels.shape, labels.dtype,
                           normalize=normalize, onehot=onehot, layout=layout)
    images = _jax.device_put(images, device)
    labels = _jax.device_put(labels, device)
    # read_batch's table looked up on the device: XLA's division by a broadcast divisor gave
    # other values than NumPy's for some pixels (JAX's CPU device), a lookup cannot.
    f = _jax.device_put(_on_device.table(plan), device)[images.astype(_jnp.int32),
                                                        _jax.device_put(_on_device.channels(plan), device)]
    if plan.onehot is not None:
        axis = 1 if plan.layout == "NCHW" and labels.ndim == 3 else -1
        # ids outside [0, K) match no class: all-zero vectors, as read_batch gives.
        labels = _jax.nn.one_hot(labels.astype(_jnp.int32), plan.onehot, dtype=_jnp.float32, axis=axis)
    return f, labels
