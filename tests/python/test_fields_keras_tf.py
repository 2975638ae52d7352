"""Per-sample fields (issue 31) through the Keras, Grain and tf.data adapters (run in .venv-tf): boxes
delivered with random crops and flips equal a NumPy reference computed from each sample's crop
window, and int, float, str and tags fields pass through unchanged (the checks are
test_fields_adapters.py's)."""
import os

import numpy as np
import pytest

import shardpack
from test_fields import packed, source  # noqa: F401 (fixtures)
from test_fields_adapters import FIELDS, READ, VISIBILITY, Reference, check_padded_batch

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def padded(b):  # batch_fields' boxes
    return b["boxes"], b["labels"], b["counts"]


def test_keras_pydataset_gives_fields_in_x_and_boxes_follow_crops_and_flips(packed):  # noqa: F811
    pytest.importorskip("keras", reason="Keras is not installed (scripts/python-env.sh --tf)")
    import shardpack.keras as spk
    path, _, _ = packed
    ref = Reference(path)
    train = spk.PyDataset(path, batch_size=5, dtype="uint8", fields=FIELDS, min_box_visibility=VISIBILITY, **READ)
    for epoch in range(2):
        train.on_epoch_begin()  # as fit does: the first keeps epoch 0, the next moves on
        seen = []
        ref.boxes_checked = ref.flipped = 0
        for b in range(len(train)):
            x, labels = train[b]
            assert sorted(x) == sorted(["images"] + FIELDS) and x["images"].shape[0] == labels.shape[0]
            assert x["caption"].dtype.kind == "U" and x["age"].dtype == np.int64 and x["score"].dtype == np.float64
            assert [ref.record_of(a) for a in x["age"]] == train.batch_indices(b).tolist()
            seen += check_padded_batch(ref, epoch, x, padded)
        ref.done(seen)


def test_keras_fit_takes_the_fields_as_named_inputs(packed):  # noqa: F811
    keras = pytest.importorskip("keras", reason="Keras is not installed (scripts/python-env.sh --tf)")
    import shardpack.keras as spk
    path, _, _ = packed
    train = spk.PyDataset(path, batch_size=4, label="index", normalize=None, fields=["tags", "score"], **READ)
    images = keras.Input((20, 24, 3), name="images")
    tags, score = keras.Input((3,), name="tags"), keras.Input((), name="score")
    features = keras.layers.Concatenate()([keras.layers.Flatten()(images), keras.ops.cast(tags, "float32"),
                                           keras.ops.expand_dims(keras.ops.cast(score, "float32"), -1)])
    model = keras.Model({"images": images, "tags": tags, "score": score}, keras.layers.Dense(2)(features))
    model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    history = model.fit(train, epochs=1, verbose=0)
    assert len(history.history["loss"]) == 1 and np.isfinite(history.history["loss"][0])


def test_keras_refuses_unknown_fields_and_gives_pairs_without_fields(packed):  # noqa: F811
    pytest.importorskip("keras", reason="Keras is not installed (scripts/python-env.sh --tf)")
    import shardpack.keras as spk
    path, _, _ = packed
    with pytest.raises(ValueError, match="no field named 'nope'"):
        spk.PyDataset(path, batch_size=4, fields=["nope"])
    assert len(spk.PyDataset(path, batch_size=4)[0]) == 2 and isinstance(spk.PyDataset(path, batch_size=4)[0][0],
                                                                           np.ndarray)


def test_grain_records_carry_their_fields_and_boxes_follow_crops_and_flips(packed):  # noqa: F811
    pytest.importorskip("grain", reason="Grain is not installed (scripts/python-env.sh --tf)")
    import shardpack.grain as spg
    path, _, _ = packed
    ref = Reference(path)
    source_ = spg.DataSource(path, dtype="uint8", fields=FIELDS, min_box_visibility=VISIBILITY, epoch=3, **READ)
    one = [source_[i] for i in range(len(source_))]
    many = source_._getitems(list(range(len(source_))))  # Grain's batched read: the same records
    seen = []
    for (image, label, f), (image2, _, f2) in zip(one, many):
        assert isinstance(f["age"], np.integer) and isinstance(f["caption"], str) and f["tags"].shape == (3,)
        assert set(f["boxes"]) == {"boxes", "labels"}
        np.testing.assert_array_equal(image, image2)
        np.testing.assert_array_equal(f["boxes"]["boxes"], f2["boxes"]["boxes"])
        seen.append(ref.check(3, f["age"], f["score"], f["caption"], f["tags"], f["boxes"]["boxes"],
                              f["boxes"]["labels"]))
    ref.done(seen)


def test_grain_dataset_batches_boxes_follow_crops_and_flips(packed):  # noqa: F811
    pytest.importorskip("grain", reason="Grain is not installed (scripts/python-env.sh --tf)")
    import shardpack.grain as spg
    path, _, _ = packed
    ref = Reference(path)
    train = spg.dataset(path, batch_size=5, dtype="uint8", fields=FIELDS, min_box_visibility=VISIBILITY, **READ)
    for epoch in range(2):  # element k of repeat(): batch k % len of epoch k // len
        seen = []
        ref.boxes_checked = ref.flipped = 0
        for b in range(len(train)):
            images, labels, f = train[epoch * len(train) + b]
            assert images.shape[0] == len(f["caption"]) and f["caption"].dtype.kind == "U"
            seen += check_padded_batch(ref, epoch, f, padded)
        ref.done(seen)


def test_tf_dataset_ragged_boxes_follow_crops_and_flips(packed):  # noqa: F811
    tf = pytest.importorskip("tensorflow", reason="TensorFlow is not installed (scripts/python-env.sh --tf)")
    import shardpack.tf as sptf
    path, _, _ = packed
    ref = Reference(path)
    train = sptf.dataset(path, batch_size=5, dtype="uint8", fields=FIELDS, min_box_visibility=VISIBILITY, **READ)
    for epoch in range(2):  # each pass is the next epoch
        seen = []
        ref.boxes_checked = ref.flipped = 0
        for images, labels, f in train:
            boxes, box_labels = f["boxes"]["boxes"], f["boxes"]["labels"]
            assert isinstance(boxes, tf.RaggedTensor) and f["caption"].dtype == tf.string
            for j in range(int(images.shape[0])):
                seen.append(ref.check(epoch, f["age"][j].numpy(), f["score"][j].numpy(),
                                      f["caption"][j].numpy().decode(), f["tags"][j].numpy(),
                                      boxes[j].numpy().reshape(-1, 4), box_labels[j].numpy()))
        ref.done(seen)


def test_tf_dataset_empty_field_list_gives_an_empty_dict_as_torch_and_grain_do(packed):  # noqa: F811
    """fields=[]: no field is read, and elements keep the (images, labels, fields) form with an
    empty dict, as shardpack.torch.Loader and shardpack.grain give (image, label, {})."""
    tf = pytest.importorskip("tensorflow", reason="TensorFlow is not installed (scripts/python-env.sh --tf)")
    import shardpack.tf as sptf
    path, _, _ = packed
    plain = sptf.dataset(path, batch_size=4, dtype="uint8", label="index")
    empty = sptf.dataset(path, batch_size=4, dtype="uint8", label="index", fields=[])
    assert len(empty.element_spec) == 3 and empty.element_spec[2] == {}
    for (i0, l0), (i1, l1, f) in zip(plain, empty):
        assert f == {} and np.array_equal(i0.numpy(), i1.numpy()) and np.array_equal(l0.numpy(), l1.numpy())
    grain = pytest.importorskip("grain", reason="Grain is not installed (scripts/python-env.sh --tf)")
    del grain
    import shardpack.grain as spg
    assert spg.DataSource(path, label="index", fields=[])[0][2] == {}
    del tf
