"""Per-sample fields (issue 31) through the torch adapters: boxes delivered by shardpack.torch.Loader
and by a DataLoader over shardpack.torch.Dataset with random crops and flips equal a NumPy
reference computed from each sample's crop window (read_batch(return_boxes=True)), and int, float,
str and tags fields pass through unchanged. The Keras, Grain and tf.data ones are in
test_fields_keras_tf.py (.venv-tf); both use the checks below."""
import numpy as np
import pytest

import shardpack
from test_fields import packed, reference_window, source  # noqa: F401 (fixtures)

CROP = (20, 24)
VISIBILITY = 0.25
FIELDS = ["boxes", "age", "score", "caption", "tags"]
# The adapters' options: random crops and flips, drawn from (seed, epoch, record index).
READ = dict(crop=CROP, crop_position="random", hflip=0.5, vflip=0.5, seed=5)


class Reference:
    """What every adapter must deliver for record i in an epoch: its stored fields, and its boxes
    moved by the NumPy reference (test_fields.reference_window) with the window read_batch draws."""

    def __init__(self, path):
        self.ds = shardpack.open(path)
        self.stored = [self.ds.fields(i) for i in range(len(self.ds))]
        self._windows = {}
        self.boxes_checked = 0
        self.flipped = 0

    def record_of(self, age):
        """The record a sample came from: age is i * 1000 - 3 (test_fields.rows_for)."""
        i, rest = divmod(int(age) + 3, 1000)
        assert rest == 0 and 0 <= i < len(self.ds)
        return i

    def window(self, i, epoch):
        if epoch not in self._windows:
            idx = np.arange(len(self.ds), dtype=np.int64)
            self._windows[epoch] = self.ds.read_batch(idx, dtype="uint8", epoch=epoch, return_boxes=True, **READ)[2]
        return self._windows[epoch][i]

    def check(self, epoch, age, score, caption, tags, boxes, labels):
        """One delivered sample: boxes (M, 4) and labels (M,) at the sample's own length."""
        i = self.record_of(age)
        stored = self.stored[i]
        assert float(score) == stored["score"]
        assert caption == stored["caption"]
        np.testing.assert_array_equal(np.asarray(tags), stored["tags"])
        y, x, hf, vf = self.window(i, epoch)
        want_boxes, want_labels = reference_window(stored["boxes"].boxes, stored["boxes"].labels, y, x, CROP[0],
                                                   CROP[1], hf, vf, VISIBILITY)
        boxes, labels = np.asarray(boxes), np.asarray(labels)
        assert boxes.dtype == np.float32 and boxes.shape == (len(want_labels), 4)
        assert boxes.tobytes() == want_boxes.astype(np.float32).tobytes()  # bit for bit
        assert labels.tolist() == want_labels.tolist()
        self.boxes_checked += len(want_labels)
        self.flipped += int(hf or vf) * len(want_labels)
        return i

    def done(self, seen):
        """Every record delivered once, and the comparison compared moved boxes."""
        assert sorted(seen) == list(range(len(self.ds)))
        assert self.boxes_checked > 4 and self.flipped > 0  # (12 records with 18 boxes)


def check_padded_batch(ref, epoch, f, count_of):
    """A batch of fields in collate's form (torch) or batch_fields' (Keras, Grain), as NumPy:
    f[name] per field, boxes (N, M, 4) / labels (N, M) padded (0, -1) with counts."""
    seen = []
    boxes, labels, counts = (np.asarray(a) for a in count_of(f["boxes"]))
    for j in range(len(counts)):
        c = int(counts[j])
        assert (labels[j, c:] == -1).all() and (boxes[j, c:] == 0).all()
        seen.append(ref.check(epoch, np.asarray(f["age"])[j], np.asarray(f["score"])[j], str(f["caption"][j]),
                              np.asarray(f["tags"])[j], boxes[j, :c], labels[j, :c]))
    return seen


@pytest.mark.parametrize("reuse_buffers", [False, True])
def test_loader_boxes_follow_random_crops_and_flips(packed, reuse_buffers):  # noqa: F811
    torch = pytest.importorskip("torch", reason="PyTorch is not installed (scripts/python-env.sh)")
    import shardpack.torch as spt
    path, _, _ = packed
    ref = Reference(path)
    loader = spt.Loader(path, batch_size=5, threads=2, reuse_buffers=reuse_buffers, dtype="uint8",
                        fields=FIELDS, min_box_visibility=VISIBILITY, **READ)
    for epoch in range(2):  # each complete pass is the next epoch: new windows, same reference
        seen = []
        ref.boxes_checked = ref.flipped = 0
        for images, labels, f in loader:
            b = f["boxes"]
            assert isinstance(b, shardpack.PaddedBoxes) and isinstance(b.boxes, torch.Tensor)
            assert f["age"].dtype == torch.int64 and f["tags"].dtype == torch.uint8 and isinstance(f["caption"], list)
            assert images.shape[0] == len(f["caption"])
            seen += check_padded_batch(ref, epoch, f, lambda b: (b.boxes, b.labels, b.counts))
        ref.done(seen)


def test_loader_without_fields_gives_pairs_and_a_mix_refuses_fields(packed, tmp_path):  # noqa: F811
    pytest.importorskip("torch", reason="PyTorch is not installed (scripts/python-env.sh)")
    import shardpack.torch as spt
    path, _, _ = packed
    assert all(len(batch) == 2 for batch in spt.Loader(path, batch_size=5, dtype="uint8"))
    with pytest.raises(ValueError, match="no field named 'nope'"):
        spt.Loader(path, batch_size=5, fields=["nope"])
    mixed = shardpack.mix([path, path], weights=[0.5, 0.5], epoch_size=8)
    with pytest.raises(ValueError, match="a mix reads no per-sample fields"):
        spt.Loader(mixed, batch_size=4, fields=["boxes"])
    with pytest.raises(ValueError, match="a mix reads no per-sample fields"):
        spt.Dataset(mixed, fields=["boxes"])


def test_dataloader_collate_boxes_follow_random_crops_and_flips(packed):  # noqa: F811
    torch = pytest.importorskip("torch", reason="PyTorch is not installed (scripts/python-env.sh)")
    import shardpack.torch as spt
    path, _, _ = packed
    ref = Reference(path)
    train = spt.Dataset(path, dtype="uint8", fields=FIELDS, min_box_visibility=VISIBILITY, **READ)
    train.set_epoch(1)
    seen = []
    for images, labels, f in torch.utils.data.DataLoader(train, batch_size=5, shuffle=True, collate_fn=spt.collate):
        seen += check_padded_batch(ref, 1, f, lambda b: (b.boxes, b.labels, b.counts))
    ref.done(seen)
