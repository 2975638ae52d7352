"""shardpack.write beyond 8-bit images and one label (issue #31 through the writer of #32): uint16
images (grey, RGB, RGBA, N bands) stored as the CLI stores 16-bit PNGs and TIFFs."""
import json
import pathlib

import numpy as np
import pytest

import shardpack
from shardpack._cli import cli_path
from conftest import run, tool
from test_depth import png16, tiff
from test_writer import assert_same_dataset

pytestmark = pytest.mark.skipif(cli_path() is None, reason="this shardpack installation has no CLI binary "
                                "(a reader-only wheel), which shardpack.write runs")


def wide_images(channels, count=5, h=29, w=37, seed=3):
    """12-bit-ish uint16 images with the full range too (0 and 65535 appear)."""
    rng = np.random.default_rng(seed + channels)
    out = []
    for i in range(count):
        a = rng.integers(0, 65536, (h, w, channels), dtype=np.uint16)
        a[0, 0] = 0
        a[0, 1] = 65535
        out.append(a[:, :, 0] if channels == 1 else a)
    return out


def cli_build(root, images, out, *args, ext="png"):
    lines = []
    for i, a in enumerate(images):
        name = f"im{i}.{ext}"
        (png16 if ext == "png" else tiff)(root / name, a if ext == "png" or a.ndim == 3 else a[:, :, None])
        lines.append(f"{name},{'ab'[i % 2]}")
    (root / "list.csv").write_text("\n".join(lines) + "\n")
    (root / "names.txt").write_text("a\nb\n")
    run(tool("shardpack"), "-q", "build", "--csv", root / "list.csv", "--classes", root / "names.txt", "--task", "cls",
        "--out", out, *args)
    return [f"im{i}.{ext}" for i in range(len(images))]


# (source channels, CLI options, write's keywords, stored exactly as given)
CASES = [
    (1, ["--color", "gray"], {"color": "gray"}, True),
    (3, [], {}, True),
    (4, ["--color", "rgba"], {"color": "rgba"}, True),
    (1, [], {}, False),                                   # grey to rgb at 16 bits
    (3, ["--color", "gray"], {"color": "gray"}, False),   # PIL's luma at 16 bits
    (4, ["--color", "gray", "--size", "24x20"], {"color": "gray", "size": (24, 20)}, False),
    (3, ["--size", "24x20", "--filter", "lanczos"], {"size": (24, 20), "filter": "lanczos"}, False),
    (3, ["--depth", "8"], {"depth": 8}, False),           # the high byte, counted as lost bits
]


@pytest.mark.parametrize("case", range(len(CASES)))
def test_uint16_arrays_equal_cli_build_of_16bit_pngs(tmp_path, case):
    channels, cli_args, kwargs, exact = CASES[case]
    images = wide_images(channels)
    cli_out = tmp_path / "cli"
    keys = cli_build(tmp_path, images, cli_out, *cli_args)
    out = tmp_path / "writer"
    report = shardpack.write(out, ((k, a, i % 2) for i, (k, a) in enumerate(zip(keys, images))), task="cls",
                             classes=["a", "b"], quiet=True, **kwargs)
    assert_same_dataset(cli_out, out)
    cli_report = json.loads((cli_out / "report.json").read_text())
    assert report["images_reduced_to_8_bits"] == cli_report["images_reduced_to_8_bits"]
    ds = shardpack.open(out)
    if kwargs.get("depth") == 8:
        assert ds.image_dtype == "uint8" and report["images_reduced_to_8_bits"] == len(images)
        return
    assert ds.image_dtype == "uint16"
    batch = ds.read_batch(list(range(len(ds))), dtype="uint16", layout="NHWC")
    images_read = batch[0] if isinstance(batch, tuple) else batch
    for i, a in enumerate(images):
        img, label = ds[i]
        assert img.dtype == np.uint16 and label == i % 2
        assert np.array_equal(np.asarray(images_read[i]), img)
        if exact:
            assert np.array_equal(img, a if a.ndim == 3 else a[:, :, None])


@pytest.mark.parametrize("bands", [2, 5])
def test_band_arrays_equal_cli_build_of_tiffs(tmp_path, bands):
    """color="bands": every band as given, as the CLI stores a TIFF's (uint16, and uint8 arrays
    widened in a 16-bit build as an 8-bit TIFF would be)."""
    images = wide_images(bands, count=4)
    cli_out = tmp_path / "cli"
    keys = cli_build(tmp_path, images, cli_out, "--color", "bands", ext="tif")
    out = tmp_path / "writer"
    shardpack.write(out, ((k, a, i % 2) for i, (k, a) in enumerate(zip(keys, images))), task="cls",
                    classes=["a", "b"], color="bands", quiet=True)
    assert_same_dataset(cli_out, out)
    ds = shardpack.open(out)
    assert ds.channel_order == "bands" and ds.image_dtype == "uint16"
    for i, a in enumerate(images):
        assert np.array_equal(ds[i][0], a)


def test_uint16_seg_and_depth_auto_from_the_first_sample(tmp_path):
    """depth="auto" takes the first sample's depth, as the CLI takes the first row's: uint16 first,
    then an 8-bit sample widened (v * 257); 8-bit first, then a uint16 sample cut and counted."""
    rng = np.random.default_rng(9)
    wide = rng.integers(0, 4096, (16, 20), dtype=np.uint16)
    narrow = rng.integers(0, 256, (16, 20), dtype=np.uint8)
    mask = (np.arange(320).reshape(16, 20) % 3).astype(np.uint8)
    classes = [("air", 0), ("soft", 1), ("bone", 2)]
    shardpack.write(tmp_path / "w", [(wide, mask), (narrow, mask)], task="seg", classes=classes, color="gray",
                    label_layout="index", quiet=True)
    ds = shardpack.open(tmp_path / "w")
    assert ds.image_dtype == "uint16"
    assert np.array_equal(ds[0][0][:, :, 0], wide) and np.array_equal(ds[0][1], mask)
    assert np.array_equal(ds[1][0][:, :, 0], narrow.astype(np.uint16) * 257)
    report = shardpack.write(tmp_path / "n", [(narrow, mask), (wide, mask)], task="seg", classes=classes,
                             color="gray", label_layout="index", quiet=True)
    ds = shardpack.open(tmp_path / "n")
    assert ds.image_dtype == "uint8"
    assert np.array_equal(ds[1][0][:, :, 0], (wide >> 8).astype(np.uint8))
    assert report["images_reduced_to_8_bits"] == 1


def test_wide_arguments_checked(tmp_path):
    img = np.zeros((4, 4), np.uint16)
    with pytest.raises(shardpack.ArgumentValueError, match="depth"):
        shardpack.write(tmp_path / "d", [(img, 0)], task="cls", classes=["a"], depth=12)
    with pytest.raises(shardpack.ArgumentTypeError, match="depth"):
        shardpack.write(tmp_path / "d", [(img, 0)], task="cls", classes=["a"], depth=8.0)
    with pytest.raises(shardpack.Error, match=r"sample 0 '0'.*int32"):
        shardpack.write(tmp_path / "d", [(img.astype(np.int32), 0)], task="cls", classes=["a"], quiet=True)
    with pytest.raises(shardpack.Error, match=r"sample 0 '0'.*shape"):
        shardpack.write(tmp_path / "d", [(np.zeros((2, 2, 256), np.uint8), 0)], task="cls", classes=["a"],
                        color="bands", quiet=True)
