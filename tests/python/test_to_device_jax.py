"""shardpack.jax.to_device: a uint8 batch moved to a JAX device and converted there gives
read_batch's float32 images and one-hot labels. Skipped, with the reason, where JAX is not
installed (it is in no venv scripts/python-env.sh makes). Under a few seconds."""
import numpy as np
import pytest

jax = pytest.importorskip("jax", reason="JAX is not installed in this interpreter: shardpack.jax is not tested here")

import shardpack  # noqa: E402
import shardpack.jax  # noqa: E402


@pytest.mark.parametrize("layout", ["NHWC", "NCHW"])
def test_jax_to_device_gives_read_batch_float32_and_one_hot(built, layout):
    device = jax.devices()[0]
    for name in ("index", "cls", "cls-raw"):  # RGB segmentation, RGB and grey classification
        ds = shardpack.open(built[name])
        idx = [3, 0, 5]
        raw = ds.read_batch(idx, dtype="uint8", layout=layout, label="index", label_dtype="uint8")
        for normalize in ("imagenet", None, ((0.5,), (0.25,))):
            want = ds.read_batch(idx, dtype="float32", layout=layout, label="onehot", normalize=normalize)
            images, labels = shardpack.jax.to_device(raw, device, normalize=normalize, onehot=len(ds.classes),
                                                     layout=layout)
            assert images.dtype == np.float32 and labels.dtype == np.float32
            assert device in images.devices()
            assert np.array_equal(np.asarray(images), want[0]), (name, normalize)
            assert np.array_equal(np.asarray(labels), want[1])
        _, labels = shardpack.jax.to_device(raw, layout=layout)
        assert np.array_equal(np.asarray(labels), raw[1])
    images = np.zeros((1, 2, 2, 3), np.uint8)
    _, labels = shardpack.jax.to_device((images, np.array([[[0, 255], [1, 2]]], np.uint8)), onehot=3)
    assert np.asarray(labels)[0, 0, 1].tolist() == [0, 0, 0] and np.asarray(labels)[0, 1, 1].tolist() == [0, 0, 1]


def test_jax_to_device_refuses_what_it_cannot_convert():
    images = np.zeros((2, 4, 4, 3), np.uint8)
    with pytest.raises(shardpack.ArgumentValueError, match="images must be uint8"):
        shardpack.jax.to_device((images.astype(np.float32), np.zeros(2, np.int64)))
    with pytest.raises(shardpack.ArgumentValueError, match="onehot needs index labels"):
        shardpack.jax.to_device((images, np.zeros((2, 3), np.float32)), onehot=3)
