"""tf.data adapter: shardpack.tf.dataset(path, batch_size, ...) is a tf.data.Dataset of batches.

    import shardpack.tf
    train = shardpack.tf.dataset("data/train", batch_size=32, shuffle=True, seed=0)
    model.fit(train, epochs=10)

One Python call per batch (read_batch, which releases the GIL and splits the batch over C++
threads), prefetched. Every iteration of the dataset is an epoch: the order is
shardpack.epoch_order(n, seed, epoch), with epoch counting up from `epoch`.
"""
import threading as _threading

import numpy as _np
import tensorflow as _tf

import shardpack as _sp

__all__ = ["dataset"]

_TF_DTYPES = {_np.dtype(_np.float32): _tf.float32, _np.dtype(_np.uint8): _tf.uint8, _np.dtype(_np.int64): _tf.int64}


def dataset(path, batch_size, shuffle=False, seed=0, drop_last=False, dtype="float32", layout="NHWC",
            normalize="auto", label="onehot", threads=0, rank=0, world=1, epoch=0, prefetch=2,
            verify_checksums=True):
    """A tf.data.Dataset of (images, labels) batches with its element_spec set: the batch
    dimension is batch_size with drop_last=True, else None (the last batch may be short).

    path: a dataset folder or a shardpack.Dataset. The options are read_batch's (channels last
    by default, as Keras expects). rank/world: this worker's share (shardpack.epoch_order).
    prefetch: batches prepared ahead (tf.data.AUTOTUNE allowed)."""
    ds = path if isinstance(path, _sp.Dataset) else _sp.open(path, verify_checksums)
    batch_size = int(batch_size)
    if batch_size < 1:
        raise _sp.Error("tf.dataset: batch_size must be at least 1")
    options = dict(dtype=dtype, layout=layout, normalize=normalize, label=label)
    (ishape, idtype), (lshape, ldtype) = ds.batch_spec(batch_size, dtype=dtype, layout=layout, label=label)
    first = batch_size if drop_last else None
    signature = (_tf.TensorSpec((first,) + tuple(ishape[1:]), _TF_DTYPES[idtype]),
                 _tf.TensorSpec((first,) + tuple(lshape[1:]), _TF_DTYPES[ldtype]))
    n = len(ds)
    epochs = {"next": int(epoch)}
    lock = _threading.Lock()

    def batches():
        with lock:
            e = epochs["next"]
            epochs["next"] += 1
        order = _sp.epoch_order(n, seed, e, shuffle, rank, world, drop_last)
        for start in range(0, len(order), batch_size):
            idx = order[start:start + batch_size]
            if len(idx) < batch_size and drop_last:
                return
            yield ds.read_batch(idx, threads=threads, **options)

    return _tf.data.Dataset.from_generator(batches, output_signature=signature).prefetch(prefetch)
