"""Issue 33: contact sheets (shardpack.contact_sheet, the same pixels as `shardpack export --grid`),
ds.class_colors, and crop_position="foreground" through read_batch and the adapters."""
import json

import numpy as np
import pytest

import shardpack
from conftest import class_colors, run, tool
from pngread import read_png


def blend(v, c, a):
    """The documented overlay of one channel: (v (256 - a) + c a + 128) >> 8."""
    return ((v.astype(np.int64) * (256 - a) + np.asarray(c, np.int64) * a + 128) >> 8).astype(np.uint8)


def expected_tile(image, ids, t, colors, alpha, hidden=(), ignore=255):
    """A tile as documented: nearest-pixel shrink of (image, ids), labelled pixels blended."""
    sh, sw = ids.shape if ids is not None else image.shape[:2]
    ys = (2 * np.arange(t["height"]) + 1) * sh // (2 * t["height"])
    xs = (2 * np.arange(t["width"]) + 1) * sw // (2 * t["width"])
    img = image[ys][:, xs, :3].copy()
    if ids is None:
        return img
    lab = ids[ys][:, xs].astype(np.int64)
    k = len(colors)
    for ty, tx in zip(*np.nonzero(np.isin(lab, list(hidden)))):
        # a hidden class: the footprint's first class neither hidden nor ignored, if any
        foot = ids[ty * sh // t["height"]:(ty + 1) * sh // t["height"], tx * sw // t["width"]:(tx + 1) * sw // t["width"]]
        drawn = foot[(foot < k) & ~np.isin(foot, list(hidden))]
        if drawn.size:
            lab[ty, tx] = drawn[0]
    a = int(round(alpha * 256))
    palette = np.vstack([np.asarray(colors, np.uint8), [[255, 0, 255]]])
    cls = np.minimum(lab, k)
    shown = ~np.isin(lab, list(hidden))
    out = img.copy()
    out[shown] = blend(img[shown], palette[cls[shown]], a)
    return out


def test_class_colors_are_the_dictionarys(built):
    ds = shardpack.open(built["index"])
    want = class_colors(built.class_dict)
    assert ds.class_colors == [tuple(int(v) for v in c) for c in want]
    cls = shardpack.open(built["cls"])
    colors = cls.class_colors
    assert len(colors) == len(cls.classes) and len(set(colors)) == len(colors)  # the palette: distinct


@pytest.mark.parametrize("name", ["index", "onehot"])
def test_contact_sheet_tiles_are_the_records_and_the_png_is_the_clis(built, name, tmp_path):
    ds = shardpack.open(built[name])
    path = tmp_path / "sheet.png"
    pixels, layout = shardpack.contact_sheet(ds, records=[3, 0, 7], alpha=0.6, hide=["sky"], path=path,
                                             return_layout=True)
    assert pixels.dtype == np.uint8 and pixels.ndim == 3 and pixels.shape[2] == 3
    assert np.array_equal(read_png(path)[..., :3], pixels)
    images, labels = ds.read_batch([3, 0, 7], dtype="uint8", layout="NHWC", label="index", label_dtype="uint16")
    for j, t in enumerate(layout["tiles"]):
        assert t["index"] == [3, 0, 7][j]
        tile = pixels[t["y"]:t["y"] + t["height"], t["x"]:t["x"] + t["width"]]
        assert np.array_equal(tile, expected_tile(images[j], labels[j], t, ds.class_colors, 0.6, hidden=[0]))
    for e in layout["legend"]:
        swatch = pixels[e["y"]:e["y"] + e["size"], e["x"]:e["x"] + e["size"]]
        want = (255, 0, 255) if e["class_id"] < 0 else ds.class_colors[e["class_id"]]
        assert (swatch == np.array(want, np.uint8)).all()
        assert e["hidden"] == (e["class_id"] == 0)
    # The CLI draws the same pixels from the same options.
    cli_png = tmp_path / "cli.png"
    out = run(tool("shardpack"), "export", built[name], "--grid", "--index", "3,0,7", "--alpha", "0.6", "--hide", "sky",
              "--out", cli_png)
    assert json.loads(out)["grid"] == str(cli_png)
    assert np.array_equal(read_png(cli_png)[..., :3], pixels)


def test_contact_sheet_as_the_loader_delivers(built, tmp_path):
    ds = shardpack.open(built["index"])
    opts = dict(crop=(16, 20), crop_position="foreground", crop_background=["road"], hflip=0.5, vflip=0.5, seed=4,
                epoch=2)
    pixels, layout = shardpack.contact_sheet(ds, count=6, sample_seed=5, return_layout=True, **opts)
    chosen = [t["index"] for t in layout["tiles"]]
    assert len(set(chosen)) == 6
    images, labels, boxes = ds.read_batch(chosen, dtype="uint8", layout="NHWC", label="index", return_boxes=True,
                                          **opts)
    for j, t in enumerate(layout["tiles"]):
        assert tuple(t["box"]) == tuple(int(v) for v in boxes[j])
        tile = pixels[t["y"]:t["y"] + t["height"], t["x"]:t["x"] + t["width"]]
        assert np.array_equal(tile, expected_tile(images[j], labels[j], t, ds.class_colors, 0.5))
    cli_png = tmp_path / "cli.png"
    run(tool("shardpack"), "export", built["index"], "--grid", "--count", "6", "--sample-seed", "5", "--crop", "16x20",
        "--crop-position", "foreground", "--background", "road", "--hflip", "0.5", "--vflip", "0.5", "--seed", "4",
        "--epoch", "2", "--out", cli_png)
    assert np.array_equal(read_png(cli_png)[..., :3], pixels)


def test_contact_sheet_of_classification_captions_classes(built):
    ds = shardpack.open(built["cls"])
    pixels, layout = shardpack.contact_sheet(ds, records=[0, 1], return_layout=True)
    assert layout["legend"] == []
    for t in layout["tiles"]:
        image, _ = ds[t["index"]]
        tile = pixels[t["y"]:t["y"] + t["height"], t["x"]:t["x"] + t["width"]]
        assert np.array_equal(tile, expected_tile(image, None, t, ds.class_colors, 0.5))


def test_contact_sheet_bad_arguments(built):
    ds = shardpack.open(built["index"])
    with pytest.raises(shardpack.ArgumentValueError, match="no class named"):
        shardpack.contact_sheet(ds, hide=["nosuch"])
    with pytest.raises(shardpack.ArgumentValueError, match="needs crop"):
        shardpack.contact_sheet(ds, crop_position="random")
    with pytest.raises(shardpack.ArgumentValueError, match="alpha"):
        shardpack.contact_sheet(ds, alpha=2)
    with pytest.raises(shardpack.ArgumentValueError, match="tile"):
        shardpack.contact_sheet(ds, tile=2)
    with pytest.raises(shardpack.IndexOutOfRange):
        shardpack.contact_sheet(ds, records=[100])
    with pytest.raises(shardpack.ArgumentValueError, match="segmentation"):
        shardpack.contact_sheet(shardpack.open(built["cls"]), crop=(8, 8), crop_position="foreground")
    with pytest.raises(shardpack.ArgumentTypeError):
        shardpack.contact_sheet(built["index"])


def sparse_dataset(tmp_path):
    """make_sample_data --scene parts: under 1% of the pixels labelled, clustered."""
    src = tmp_path / "parts"
    run(tool("make_sample_data"), "--out", src, "--scene", "parts", "--count", 12, "--width", 480, "--height", 270)
    out = tmp_path / "parts-ds"
    run(tool("shardpack"), "-q", "build", "--csv", src / "list.csv", "--classes", src / "class_dict.csv", "--out", out,
        "--label-layout", "index")
    return shardpack.open(str(out))


def test_foreground_crops_hold_labels_through_read_batch_and_the_adapters(tmp_path):
    ds = sparse_dataset(tmp_path)
    idx = np.arange(len(ds))
    crop = (128, 128)
    shares = {}
    for position in ("random", "foreground"):
        near_empty = 0
        for epoch in range(6):
            _, labels, boxes = ds.read_batch(idx, crop=crop, crop_position=position, label="index", seed=1,
                                             epoch=epoch, return_boxes=True)
            fg = ((labels != 0) & (labels != 255)).mean(axis=(1, 2))
            near_empty += int((fg < 0.01).sum())
            if position == "foreground":
                # Deterministic: the same windows again, and in another order.
                again = ds.read_batch(idx[::-1], crop=crop, crop_position=position, seed=1, epoch=epoch,
                                      return_boxes=True)[2]
                assert np.array_equal(again[::-1], boxes)
        shares[position] = near_empty / (6 * len(ds))
    assert shares["random"] > 0.2 and shares["foreground"] < 0.05, shares
    assert ds.foreground_fallbacks == 0
    # Background classes named: with every class but "stain" background, the crops centre on stains
    # where a record has one, and the records without one fall back and are counted.
    before = ds.foreground_fallbacks
    _, labels, boxes = ds.read_batch(idx, crop=crop, crop_position="foreground", label="index",
                                     crop_background=["background", "scratch", "dent"], return_boxes=True)
    has_stain = np.array([(ds[int(i)][1] == 3).any() for i in idx])  # records as stored (sizes may vary)
    assert ds.foreground_fallbacks - before == int((~has_stain).sum())
    assert ((labels == 3).any(axis=(1, 2)) >= has_stain).all()
    with pytest.raises(shardpack.ArgumentValueError, match="no class named"):
        ds.read_batch(idx, crop=crop, crop_position="foreground", crop_background=["nosuch"])
    with pytest.raises(shardpack.ArgumentValueError, match="applies to"):
        ds.read_batch(idx, crop=crop, crop_position="random", crop_background=[0])


def test_foreground_crops_in_the_torch_adapters(tmp_path):
    torch = pytest.importorskip("torch")
    import shardpack.torch as spt
    ds = sparse_dataset(tmp_path)
    opts = dict(crop=(128, 128), crop_position="foreground", crop_background=["background"], label="index")
    loader = spt.Loader(ds, batch_size=4, shuffle=True, seed=3, threads=2, **opts)
    loader.set_epoch(1)
    got = list(loader)
    labels = torch.cat([b[1] for b in got]).numpy()
    order = shardpack.epoch_order(len(ds), seed=3, epoch=1)
    assert np.array_equal(labels, ds.read_batch(order, seed=3, epoch=1, **opts)[1])
    tds = spt.Dataset(ds, seed=3, **opts)
    tds.set_epoch(1)
    assert np.array_equal(tds[[2, 5]][1].numpy(), ds.read_batch([2, 5], seed=3, epoch=1, **opts)[1])
    with pytest.raises(shardpack.ArgumentValueError):
        spt.Loader(ds, batch_size=4, crop=(128, 128), crop_position="foreground", crop_background=["nosuch"])
