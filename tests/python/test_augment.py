"""Crops and flips at read time from Python (read_batch's crop, crop_position, hflip, vflip, seed,
epoch, return_boxes) and through shardpack.torch: every output is the NumPy slice (and flip) of
its full record at the reported box, random boxes are a function of (seed, epoch, record) alone,
and bad arguments raise shardpack.Error."""
import numpy as np
import pytest

import shardpack
from conftest import run, tool

ALL = ["onehot", "index", "raw", "raw-index", "cls", "cls-raw"]
SEG = ["onehot", "index", "raw", "raw-index"]


def crop_for(ds):
    h, w, _ = ds.image_shape
    return h - 7, w - 11  # seg 24x32 -> (17, 21); cls 20x24 -> (13, 13)


def window(a, box, crop):
    """The window of an (H, W, ...) array at box (y, x, hflip, vflip), flipped."""
    y, x, hf, vf = (int(v) for v in box)
    out = a[y:y + crop[0], x:x + crop[1]]
    if hf:
        out = out[:, ::-1]
    if vf:
        out = out[::-1]
    return out


def nhwc(a, layout):
    """A sample (C, H, W) or (H, W, C) of a batch, as (H, W, C)."""
    return np.moveaxis(a, 0, -1) if layout == "NCHW" else a


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize("dtype", ["uint8", "float32"])
@pytest.mark.parametrize("label", ["onehot", "index"])
def test_crops_equal_the_slice_of_the_full_record(built, name, layout, dtype, label):
    ds = shardpack.open(built[name])
    crop = crop_for(ds)
    idx = np.array([3, 0, len(ds) - 1, 5, 3, 1])
    norm = "imagenet" if dtype == "float32" else None
    images, labels, boxes = ds.read_batch(idx, dtype=dtype, layout=layout, normalize=norm, label=label, crop=crop,
                                          crop_position="random", hflip=0.5, vflip=0.5, seed=11, epoch=2,
                                          return_boxes=True)
    n = len(idx)
    c = ds.image_shape[2]
    assert images.shape == ((n, c) + crop if layout == "NCHW" else (n,) + crop + (c,))
    assert images.dtype == np.dtype(dtype) and boxes.dtype == np.int64 and boxes.shape == (n, 4)
    # The full records as read_batch converts them, to compare float32 and one-hot outputs exactly.
    full_images, full_labels = ds.read_batch(idx, dtype=dtype, layout="NHWC", normalize=norm, label=label)
    seg = ds.task == "segmentation"
    for j, i in enumerate(idx):
        img, stored_label = ds[int(i)]
        got = nhwc(images[j], layout)
        assert np.array_equal(got, window(full_images[j], boxes[j], crop)), f"sample {j}: image"
        if dtype == "uint8":
            assert np.array_equal(got, window(img, boxes[j], crop)), f"sample {j}: image differs from ds[{i}]"
        if not seg:
            assert np.array_equal(labels[j], full_labels[j])  # class labels do not crop
            continue
        got_label = nhwc(labels[j], layout) if label == "onehot" else labels[j]
        assert np.array_equal(got_label, window(full_labels[j], boxes[j], crop)), f"sample {j}: label"
        # ...and against the stored label of ds[i] itself.
        if label == "onehot" and ds.label_layout == "onehot":
            assert np.array_equal(got_label, window(stored_label, boxes[j], crop).astype(dtype))
        if label == "index" and ds.label_layout == "index":
            assert np.array_equal(got_label, window(stored_label, boxes[j], crop).astype(np.int64))
    # The batch really was augmented: not every sample at the same corner, some flips, some not.
    assert len({(int(b[0]), int(b[1])) for b in boxes}) > 1
    assert 0 < boxes[:, 2].sum() + boxes[:, 3].sum() < 2 * n


@pytest.mark.parametrize("name", ["onehot", "raw-index", "cls"])
def test_same_seed_and_epoch_same_boxes_whatever_the_threads_and_order(built, name):
    ds = shardpack.open(built[name])
    crop = crop_for(ds)
    n = len(ds)
    opts = dict(dtype="uint8", layout="NHWC", normalize=None, crop=crop, crop_position="random", hflip=0.5,
                vflip=0.5, seed=5, epoch=3, return_boxes=True)
    ref_images, ref_labels, ref_boxes = ds.read_batch(np.arange(n), threads=1, **opts)
    order = np.random.default_rng(0).permutation(n)
    for threads in (1, 2, 4, 0):
        images, labels, boxes = ds.read_batch(order, threads=threads, **opts)
        assert np.array_equal(boxes, ref_boxes[order]), f"threads={threads}"
        assert np.array_equal(images, ref_images[order])
        assert np.array_equal(labels, ref_labels[order])
    # Record by record, in batches of one, the same again.
    for i in range(n):
        _, _, b = ds.read_batch([i], **opts)
        assert np.array_equal(b[0], ref_boxes[i])
    # Another epoch or seed: other boxes (deterministic: these are fixed draws, not luck).
    _, _, other_epoch = ds.read_batch(np.arange(n), **dict(opts, epoch=4))
    _, _, other_seed = ds.read_batch(np.arange(n), **dict(opts, seed=6))
    assert not np.array_equal(other_epoch, ref_boxes)
    assert not np.array_equal(other_seed, ref_boxes)


def test_random_boxes_cover_the_valid_range_and_flip_probabilities_hold(built):
    ds = shardpack.open(built["raw"])
    h, w, _ = ds.image_shape
    crop = (h - 5, w - 9)
    idx = np.arange(len(ds))
    boxes = np.concatenate([ds.read_batch(idx, crop=crop, crop_position="random", hflip=0.5, vflip=0.25, seed=1,
                                          epoch=e, return_boxes=True)[2] for e in range(40)])
    assert boxes[:, 0].min() == 0 and boxes[:, 0].max() == h - crop[0]
    assert boxes[:, 1].min() == 0 and boxes[:, 1].max() == w - crop[1]
    assert set(np.unique(boxes[:, 0])) == set(range(h - crop[0] + 1))
    assert set(np.unique(boxes[:, 1])) == set(range(w - crop[1] + 1))
    hf, vf = boxes[:, 2].mean(), boxes[:, 3].mean()
    assert 0.4 < hf < 0.6 and 0.15 < vf < 0.35, (hf, vf)
    # Probability 0: never; 1: always.
    _, _, b = ds.read_batch(idx, crop=crop, crop_position="random", hflip=1.0, vflip=0.0, return_boxes=True)
    assert (b[:, 2] == 1).all() and (b[:, 3] == 0).all()


@pytest.mark.parametrize("name", ["onehot", "cls-raw"])
def test_center_crop_and_flips_only(built, name):
    ds = shardpack.open(built[name])
    h, w, _ = ds.image_shape
    crop = crop_for(ds)
    idx = np.arange(len(ds))
    images, _, boxes = ds.read_batch(idx, dtype="uint8", layout="NHWC", crop=crop, return_boxes=True)
    assert (boxes == [(h - crop[0]) // 2, (w - crop[1]) // 2, 0, 0]).all()
    for j in idx:
        assert np.array_equal(images[j], window(ds[int(j)][0], boxes[j], crop))
    # Flips alone: the whole record, mirrored.
    images, _, boxes = ds.read_batch(idx, dtype="uint8", layout="NHWC", hflip=0.5, vflip=0.5, seed=2,
                                     return_boxes=True)
    assert images.shape[1:3] == (h, w) and (boxes[:, :2] == 0).all() and boxes[:, 2:].any()
    for j in idx:
        assert np.array_equal(images[j], window(ds[int(j)][0], boxes[j], (h, w)))
    # Nothing asked: every row (0, 0, 0, 0).
    _, _, boxes = ds.read_batch(idx, return_boxes=True)
    assert (boxes == 0).all()


@pytest.mark.parametrize("name", ["index", "raw"])
def test_explicit_boxes_and_flips(built, name):
    ds = shardpack.open(built[name])
    h, w, _ = ds.image_shape
    crop = (8, 10)
    idx = np.array([0, 1, 2, 7])
    yx = np.array([[0, 0], [h - 8, w - 10], [3, 5], [1, 2]])
    hflip = np.array([False, True, False, True])
    vflip = np.array([True, True, False, False])
    images, labels, boxes = ds.read_batch(idx, dtype="uint8", layout="NHWC", label="index", crop=crop,
                                          crop_position=yx, hflip=hflip, vflip=vflip, return_boxes=True,
                                          threads=3)  # parts of the batch index the given rows from their start
    assert np.array_equal(boxes, np.column_stack([yx, hflip, vflip]))
    for j, i in enumerate(idx):
        img, _ = ds[int(i)]
        full_label = ds.read_batch([i], label="index")[1][0]
        assert np.array_equal(images[j], window(img, boxes[j], crop))
        assert np.array_equal(labels[j], window(full_label, boxes[j], crop))
    # Explicit flips with a random position, and a random flip with explicit boxes, mix.
    _, _, b = ds.read_batch(idx, crop=crop, crop_position="random", hflip=hflip, vflip=1.0, return_boxes=True)
    assert np.array_equal(b[:, 2], hflip) and (b[:, 3] == 1).all()
    _, _, b = ds.read_batch(idx, crop=crop, crop_position=yx, return_boxes=True)
    assert np.array_equal(b[:, :2], yx)


def test_out_arrays_take_the_crop_shape(built):
    ds = shardpack.open(built["onehot"])
    crop = (16, 16)
    (ishape, idtype), (lshape, ldtype) = ds.batch_spec(4, crop=crop)
    assert ishape == (4, 3, 16, 16) and lshape[2:] == (16, 16)
    out = (np.full(ishape, -1, idtype), np.full(lshape, -1, ldtype))
    images, labels, boxes = ds.read_batch([0, 1, 2, 3], out=out, crop=crop, crop_position="random",
                                          return_boxes=True)
    assert images is out[0] and labels is out[1]
    want, want_labels = ds.read_batch([0, 1, 2, 3], crop=crop, crop_position=boxes[:, :2])
    assert np.array_equal(images, want) and np.array_equal(labels, want_labels)
    with pytest.raises(shardpack.Error, match="this batch needs"):
        ds.read_batch([0, 1, 2, 3], out=(np.empty((4, 3, 24, 32), np.float32), np.empty(lshape, np.float32)),
                      crop=crop)


def test_bad_arguments_raise_shardpack_error(built):
    ds = shardpack.open(built["onehot"])
    h, w, _ = ds.image_shape
    idx = [0, 1]
    bad = [
        dict(crop=(h + 1, w)),                                  # larger than the record
        dict(crop=(h, w + 1), crop_position="random"),
        dict(crop=(8, 8), crop_position=np.array([[0, 0], [h - 7, 0]])),  # runs past the record
        dict(crop=(8, 8), crop_position=np.array([[0, 0], [-1, 0]])),
        dict(crop=(8, 8), crop_position=np.array([[0, 0]])),     # wrong shape
        dict(crop=(8, 8), crop_position=np.array([[0.5, 0], [0, 0]])),
        dict(crop=(8, 8), crop_position="top"),
        dict(crop_position=np.array([[0, 0], [0, 0]])),         # boxes without a crop size
        dict(crop=(0, 8)),
        dict(crop=(8,)),
        dict(crop="8x8"),
        dict(hflip=1.5),
        dict(vflip=-0.1),
        dict(hflip="yes"),
        dict(hflip=np.array([True])),                           # one flag for two samples
        dict(vflip=np.array([1, 0])),                           # not booleans
        dict(seed=-1),
        dict(epoch=2**64),
    ]
    for kwargs in bad:
        with pytest.raises(shardpack.Error):
            ds.read_batch(idx, **kwargs)
    with pytest.raises(shardpack.Error, match="larger than record"):
        ds.read_batch(idx, crop=(h + 1, w))
    with pytest.raises(shardpack.Error, match="runs past record"):
        ds.read_batch(idx, crop=(8, 8), crop_position=np.array([[0, 0], [h - 7, 0]]))
    # The largest valid crop works: the whole record.
    images, _ = ds.read_batch(idx, crop=(h, w), crop_position="random")
    assert np.array_equal(images, ds.read_batch(idx)[0])


def test_crops_batch_records_of_different_sizes(tmp_path):
    """Without --size records keep their own sizes: a whole-record batch of two sizes is an
    error naming the odd record, one of a single size batches, crops batch them all, each window
    within its own record."""
    rows = ["image,mask"]
    for name, (w, h) in (("a", (40, 30)), ("b", (36, 28))):
        run(tool("make_sample_data"), "--out", tmp_path / name, "--count", 3, "--width", w, "--height", h,
            "--palette-masks")
        for line in (tmp_path / name / "list.csv").read_text().splitlines()[1:]:
            image, mask = (f.strip('"') for f in line.split(","))
            rows.append(f"{name}/{image},{name}/{mask}")
    (tmp_path / "list.csv").write_text("\n".join(rows) + "\n")
    out = tmp_path / "ds"
    run(tool("shardpack"), "-q", "build", "--csv", tmp_path / "list.csv", "--classes", tmp_path / "a" / "class_dict.csv",
        "--out", out)
    ds = shardpack.open(out)
    assert ds.image_shape is None and len(ds) == 6
    idx = np.arange(6)
    with pytest.raises(shardpack.Error, match=r"record 3 \(dataset index 3\): the record is 36x28 but its batch "
                       r"holds 40x30 samples .*records of one batch must share a size"):
        ds.read_batch(idx)
    for part in (idx[:3], idx[3:]):  # one size each
        images, labels = ds.read_batch(part, dtype="uint8", layout="NHWC")
        for j, i in enumerate(part):
            assert np.array_equal(images[j], ds[int(i)][0]) and np.array_equal(labels[j], ds[int(i)][1])
    crop = (28, 36)
    images, labels, boxes = ds.read_batch(idx, dtype="uint8", layout="NHWC", crop=crop, crop_position="random",
                                          hflip=0.5, seed=4, return_boxes=True)
    assert images.shape == (6, 28, 36, 3) and labels.shape[:3] == (6, 28, 36)
    for j in idx:
        img, label = ds[int(j)]
        assert boxes[j, 0] <= img.shape[0] - crop[0] and boxes[j, 1] <= img.shape[1] - crop[1]
        assert np.array_equal(images[j], window(img, boxes[j], crop))
        assert np.array_equal(labels[j], window(label, boxes[j], crop))
    assert boxes[:3, :2].any()  # the larger records got windows away from the corner
    with pytest.raises(shardpack.Error, match="larger than record"):
        ds.read_batch(idx, crop=(30, 36))


torch = pytest.importorskip("torch")


def test_loader_passes_crops_through_and_changes_them_per_epoch(built):
    import shardpack.torch as spt
    ds = shardpack.open(built["onehot"])
    crop = (16, 20)
    opts = dict(crop=crop, crop_position="random", hflip=0.5, vflip=0.5)
    loader = spt.Loader(ds, batch_size=4, shuffle=True, seed=9, threads=2, **opts)
    seen = []
    for epoch in (0, 1):
        loader.set_epoch(epoch)
        order = shardpack.epoch_order(len(ds), seed=9, epoch=epoch)
        got = list(loader)
        images = torch.cat([b[0] for b in got]).numpy()
        labels = torch.cat([b[1] for b in got]).numpy()
        assert images.shape == (len(ds), 3) + crop
        want_images, want_labels = ds.read_batch(order, seed=9, epoch=epoch, **opts)
        assert np.array_equal(images, want_images) and np.array_equal(labels, want_labels)
        seen.append(ds.read_batch(np.arange(len(ds)), seed=9, epoch=epoch, return_boxes=True, **opts)[2])
    assert not np.array_equal(seen[0], seen[1])
    # Resumed mid-epoch: the rest of the epoch with the same windows.
    it = iter(loader)
    first = next(it)
    state = loader.state_dict()
    it.close()
    resumed = spt.Loader(ds, batch_size=4, shuffle=True, seed=9, **opts)
    resumed.load_state_dict(state)
    rest = torch.cat([b[0] for b in resumed]).numpy()
    order = shardpack.epoch_order(len(ds), seed=9, epoch=loader.sampler.epoch)
    assert np.array_equal(np.concatenate([first[0].numpy(), rest]), ds.read_batch(order, seed=9,
                                                                                  epoch=loader.sampler.epoch, **opts)[0])
    # The torch Dataset: the same crops for its epoch.
    tds = spt.Dataset(ds, seed=9, **opts)
    tds.set_epoch(1)
    images, labels = tds[[2, 5]]
    want_images, want_labels = ds.read_batch([2, 5], seed=9, epoch=1, **opts)
    assert np.array_equal(images.numpy(), want_images) and np.array_equal(labels.numpy(), want_labels)
    with pytest.raises(shardpack.Error):
        spt.Loader(ds, batch_size=4, crop=crop, crop_position=np.zeros((4, 2), np.int64))
    too_large = spt.Loader(ds, batch_size=4, crop=(100, 100))  # checked when the first batch is read
    with pytest.raises(shardpack.Error, match="larger than record"):
        next(iter(too_large))


def test_dataloader_workers_read_the_crops_of_the_datasets_epoch(built):
    """In DataLoader workers the torch Dataset reads into shared memory of the crop's shape, with
    the epoch set before the iteration started."""
    import shardpack.torch as spt
    from torch.utils.data import DataLoader
    ds = shardpack.open(built["index"])
    opts = dict(crop=(12, 20), crop_position="random", hflip=0.5, vflip=0.5)
    tds = spt.Dataset(ds, label="index", seed=3, **opts)
    sampler = spt.Sampler(tds, shuffle=True, seed=1)
    for epoch in (0, 1):
        sampler.set_epoch(epoch)
        tds.set_epoch(epoch)
        dl = DataLoader(tds, batch_size=4, sampler=sampler, collate_fn=spt.collate, num_workers=1)
        got = list(dl)
        images = torch.cat([b[0] for b in got]).numpy()
        labels = torch.cat([b[1] for b in got]).numpy()
        want_images, want_labels = ds.read_batch(sampler.epoch_order(), label="index", seed=3, epoch=epoch, **opts)
        assert images.shape == want_images.shape == (len(ds), 3, 12, 20)
        assert np.array_equal(images, want_images) and np.array_equal(labels, want_labels)
