"""tf.data adapter: shardpack.tf.dataset(path, batch_size, ...) is a tf.data.Dataset of batches.

    import shardpack.tf
    train = shardpack.tf.dataset("data/train", batch_size=32, seed=0)   # shuffled, a new order each epoch
    model.fit(train, epochs=10)                                          # "3/3" steps: the cardinality is known

The pipeline is a dataset of batch numbers mapped through tf.numpy_function: each element is one
read_batch call (the GIL released, the batch split over C++ threads). Its arrays come from
read_batch's allocator, recycled huge-page blocks, 64-byte aligned, which TensorFlow wraps
without copying (a block is reused only once no tensor refers to it any more). Batches are
prefetched (prefetch=2 by default).

Epochs: the order of epoch e is shardpack.epoch_order(n, seed, e, shuffle, rank, world,
drop_last), and random crops and flips are drawn from (seed, e, record index). The first pass over
the dataset is epoch `epoch` (default 0); every further pass (a new iterator: the next
`for x in train`, the next Keras epoch, or the next round of train.repeat()) is the next epoch.
The count lives in the Dataset object, so a new call of shardpack.tf.dataset starts again at
`epoch`: pass epoch= to resume (for example epoch=initial_epoch with model.fit(initial_epoch=)).

cardinality() is the number of batches per epoch (len(train)), and train.repeat(k) has k times
that: Keras shows the steps and never runs out of data.
"""
from __future__ import annotations

import contextlib as _contextlib
import threading as _threading
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as _np
import tensorflow as _tf

import shardpack as _sp
from shardpack import _adapt, _checks, _on_device

__all__ = ["dataset", "to_device"]

_TF_DTYPES = {_np.dtype(_np.float32): _tf.float32, _np.dtype(_np.uint8): _tf.uint8, _np.dtype(_np.uint16): _tf.uint16,
              _np.dtype(_np.int64): _tf.int64}


# Per field kind, the flat arrays tf.numpy_function hands over (variable-length values with counts).
_FLAT_TYPES = {"int": [_tf.int64], "float": [_tf.float64], "str": [_tf.string], "tags": [_tf.uint8],
               "int-list": [_tf.int64, _tf.int64], "float-list": [_tf.float64, _tf.int64],
               "boxes": [_tf.float32, _tf.int64, _tf.int64]}


def _flat_fields(fields: Dict[str, Any], names: Sequence[str], kinds: Dict[str, str]) -> Tuple[Any, ...]:
    """read_batch's fields as the flat NumPy arrays of _FLAT_TYPES (padded values without their padding)."""
    out: List[Any] = []
    for name in names:
        v = fields[name]
        kind = kinds[name]
        if kind in ("int-list", "float-list"):
            keep = _np.arange(v.values.shape[1]) < v.counts[:, None]
            out += [v.values[keep], v.counts]
        elif kind == "boxes":
            keep = _np.arange(v.boxes.shape[1]) < v.counts[:, None]
            out += [v.boxes[keep].reshape(-1, 4), v.labels[keep], v.counts]
        elif kind == "str":
            out.append(_np.array([t.encode() for t in v], dtype=object))
        else:
            out.append(v)
    return tuple(out)


def _ragged_fields(flat: Sequence[Any], names: Sequence[str], kinds: Dict[str, str]) -> Dict[str, Any]:
    """The tensors of _flat_fields as the fields' dict: variable-length values as RaggedTensors."""
    out: Dict[str, Any] = {}
    at = 0
    for name in names:
        kind = kinds[name]
        if kind in ("int-list", "float-list"):
            out[name] = _tf.RaggedTensor.from_row_lengths(flat[at], flat[at + 1])
            at += 2
        elif kind == "boxes":
            boxes = _tf.reshape(flat[at], (-1, 4))
            out[name] = {"boxes": _tf.RaggedTensor.from_row_lengths(boxes, flat[at + 2]),
                         "labels": _tf.RaggedTensor.from_row_lengths(flat[at + 1], flat[at + 2])}
            at += 3
        else:
            out[name] = flat[at]
            at += 1
    return out


def dataset(source: _adapt.Source, batch_size: int, *, shuffle: bool = True, seed: int = 0, epoch: int = 0,
            drop_last: bool = False, rank: int = 0, world: int = 1, order: str = "auto",
            block: Optional[int] = None, window: Optional[int] = None, dtype: _adapt.DType = "float32",
            layout: str = "NHWC", normalize: _adapt.Normalize = "auto", label: str = "onehot",
            label_dtype: Optional[str] = None, crop: Optional[Tuple[int, int]] = None,
            crop_position: str = "center", hflip: float = 0.0, vflip: float = 0.0, threads: int = 0,
            prefetch: int = 2, verify_checksums: bool = True, fields: Optional[Sequence[str]] = None,
            min_box_visibility: float = 0.0, crop_background: Optional[Any] = None) -> _tf.data.Dataset:
    """A tf.data.Dataset of (images, labels) batches, one read_batch call each.

    source: a dataset folder or a shardpack.Dataset. batch_size: records per batch.
    shuffle, seed, epoch, drop_last, rank, world, order, block, window: the order,
      shardpack.epoch_order's (this rank's share; drop_last=False pads every rank to the same
      count and keeps a short last batch; order="blocks" is the locality-aware shuffle for data
      on a cold disk, with its block and window). The first pass over the dataset is `epoch`,
      each further pass the next (see the module).
    dtype, layout (channels last by default, as Keras expects), normalize, label, label_dtype,
      crop, crop_position ("center", "random" or "foreground"), crop_background, hflip, vflip,
      threads: read_batch's options; random crops and flips are drawn from (seed, epoch, record
      index).
    normalize="auto" (the default) gives float32 images as (x / 255 - mean) / std with
      ImageNet's mean 0.485 0.456 0.406 and std 0.229 0.224 0.225 (grey: 0.449, 0.226), and says so
      once on the "shardpack" logger; normalize=None gives x / 255; uint8 batches are as stored. A
      model trained on x / 255 takes normalize=None.
    prefetch: batches prepared ahead of the consumer (tf.data.AUTOTUNE allowed; 0: none).

    fields, min_box_visibility: per-sample fields (format 1.5) as read_batch reads them: elements
      are then (images, labels, fields), fields a dict by name: int and float fields (N,) int64 /
      float64, str (N,) tf.string, tags (N, T) uint8, lists tf.RaggedTensor (N, None), boxes a dict
      {"boxes": RaggedTensor float32 (N, None, 4), "labels": RaggedTensor int64 (N, None)}, boxes
      moved with each sample's crop and flips. (Keras' fit takes a third element as sample
      weights: map the element to what the model takes.) fields=[] reads none and gives an empty
      dict, as the torch Loader and Grain do.
    element_spec: the batch dimension is batch_size with drop_last=True, else None (the last
    batch may be short). cardinality(): batches per epoch. Errors while reading (a damaged
    shard) are raised by the iterator as TensorFlow errors carrying the shardpack message."""
    ds = _adapt.open_source(source, verify_checksums)
    plan = _adapt.Order(ds, batch_size=batch_size, shuffle=shuffle, seed=seed, drop_last=drop_last, rank=rank,
                        world=world, order=order, block=block, window=window)
    options = _adapt.Options(ds, dtype=dtype, layout=layout, normalize=normalize, label=label, crop=crop,
                             crop_position=crop_position, hflip=hflip, vflip=vflip, seed=seed, threads=threads,
                             label_dtype=label_dtype, crop_background=crop_background, fields=fields,
                             min_box_visibility=min_box_visibility, who="shardpack.tf.dataset")
    first_epoch = _checks.integer(epoch, "epoch", 0)
    if prefetch != _tf.data.AUTOTUNE:
        prefetch = _checks.integer(prefetch, "prefetch", 0)
    batch_size = plan.batch_size
    (ishape, idtype), (lshape, ldtype) = ds.batch_spec(batch_size, **options.spec)
    first = batch_size if plan.drop_last else None
    image_spec = _tf.TensorSpec((first,) + tuple(ishape[1:]), _TF_DTYPES[idtype])
    label_spec = _tf.TensorSpec((first,) + tuple(lshape[1:]), _TF_DTYPES[ldtype])
    read = options.read
    names = options.fields
    # fields=[] reads no field but keeps the (images, labels, fields) form, as the torch Loader
    # and Grain adapters do: the fields' dict is then empty.
    with_fields = "fields" in read
    kinds = {f.name: f.kind for f in ds.field_info}
    counter = {"next": first_epoch}
    lock = _threading.Lock()

    def next_epoch() -> _np.int64:
        with lock:
            e = counter["next"]
            counter["next"] += 1
        return _np.int64(e)

    def read_batch(epoch_number: _np.int64, batch_number: _np.int64) -> Tuple[Any, ...]:
        e = int(epoch_number)
        got = ds.read_batch(plan.batch(e, int(batch_number)), epoch=e, **read)
        if not names:
            return got[0], got[1]
        return (got[0], got[1]) + _flat_fields(got[2], names, kinds)

    def batch(e: _tf.Tensor, b: _tf.Tensor) -> Tuple[Any, ...]:  # (images, labels), then the fields' dict
        # stateful=True keeps tf.data from running reads concurrently (its map_parallelization
        # rewrites stateless maps): one read_batch already spreads over every core, and two at
        # once ran slower (0.75x on 2 cores).
        types = [image_spec.dtype, label_spec.dtype] + [t for name in names for t in _FLAT_TYPES[kinds[name]]]
        got = _tf.numpy_function(read_batch, [e, b], types, stateful=True, name="shardpack_read_batch")
        images, labels = got[0], got[1]
        images.set_shape(image_spec.shape)
        labels.set_shape(label_spec.shape)
        if not with_fields:
            return images, labels
        return images, labels, _ragged_fields(got[2:], names, kinds)

    batches = plan.batches
    # One element per pass: the pass's epoch number, drawn when the pass starts (a new iterator,
    # or .repeat()'s next round), then that epoch's batch numbers.
    epochs = _tf.data.Dataset.range(1).map(
        lambda _: _tf.numpy_function(next_epoch, [], _tf.int64, stateful=True, name="shardpack_next_epoch"))
    numbers = epochs.flat_map(lambda e: _tf.data.Dataset.range(batches).map(lambda b: (e, b)))
    data = numbers.apply(_tf.data.experimental.assert_cardinality(batches)).map(batch)
    if prefetch:
        data = data.prefetch(prefetch)
    return data


def to_device(batch: Tuple[Any, Any], *, normalize: _adapt.Normalize = "imagenet", onehot: Optional[int] = None,
              layout: str = "NHWC", device: Optional[str] = None) -> Tuple[_tf.Tensor, _tf.Tensor]:
    """A uint8 batch converted by TensorFlow where its ops run: (images, labels) -> (float32
    images, labels), the values read_batch(dtype="float32", label="onehot") gives on the host,
    (x / 255 - mean) / std in float32, bit for bit (looked up in read_batch's table).

    batch: (images, labels) as shardpack.tf.dataset or shardpack.keras.PyDataset deliver them with
      dtype="uint8" and label="index": images uint8 (N, H, W, C) or (N, C, H, W) (`layout`),
      labels class ids (N, H, W) or (N,); NumPy arrays or tensors.
    normalize: "imagenet" (the default, what read_batch's "auto" picks for float32), None
      (x / 255) or a (mean, std) pair on the 0..1 scale, as in read_batch.
    onehot: None (labels as they are) or the number of classes K: index labels become float32
      one-hot, (N, H, W, K) for NHWC, (N, K, H, W) for NCHW, (N, K) for classification; ids >= K
      (the ignore value, 255 or 65535) give all-zero vectors, as read_batch's.
    device: run the conversion under tf.device(device) ("/GPU:0"); None: where TensorFlow places
      it (the GPU when there is one, inside a tf.function training step too).

    The uint8 batch is a quarter of float32's bytes (and index labels 1/K of one-hot's), so it is
    what crosses to the GPU. In a tf.data pipeline, dataset.map(lambda x, y: to_device((x, y),
    onehot=K)) runs on the CPU (tf.data places its ops there); call it in the training step to
    convert on the GPU. With Keras' fit, a loss on index labels
    (SparseCategoricalCrossentropy) needs no one-hot."""
    if not isinstance(batch, (tuple, list)) or len(batch) != 2:  # (an array would unpack along its first axis)
        raise _sp.ArgumentTypeError("to_device: batch must be a pair (images, labels)")
    images, labels = batch
    with _tf.device(device) if device is not None else _contextlib.nullcontext():
        images = _tf.convert_to_tensor(images)
        labels = _tf.convert_to_tensor(labels)
        plan = _on_device.Plan("to_device", images.shape.as_list(), images.dtype.as_numpy_dtype,
                               labels.shape.as_list(), labels.dtype.as_numpy_dtype, normalize=normalize,
                               onehot=onehot, layout=layout)
        # read_batch's table, (v / 255 - mean) / std for every value v and channel in float32,
        # made on the host (256 x C) and looked up where the ops run: exact on any device,
        # where a division there may round differently.
        f = _tf.gather(_tf.constant(_on_device.table(plan).reshape(-1)),
                       _tf.cast(images, _tf.int32) * len(plan.mean) + _tf.constant(_on_device.channels(plan)))
        if plan.onehot is not None:
            ids = _tf.cast(labels, _tf.int64)
            axis = 1 if plan.layout == "NCHW" and len(labels.shape) == 3 else -1
            # tf.one_hot gives all-zero vectors for ids outside [0, K), as read_batch does.
            labels = _tf.one_hot(ids, plan.onehot, dtype=_tf.float32, axis=axis)
    return f, labels
