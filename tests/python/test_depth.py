"""uint16 images and bands (format 1.4) through the Python reader and its adapters: a 12-bit CT set
in 16-bit PNGs and a 4-band uint16 TIFF set, packed by the CLI, read as stored and as float."""
import pathlib
import struct
import zlib

import numpy as np
import pytest

import shardpack
from conftest import run, tool


def png16(path, a):
    """A 16-bit PNG of `a` (H, W) or (H, W, C) of uint16, C in 1..4, written with zlib alone."""
    a = np.asarray(a, dtype=">u2")
    if a.ndim == 2:
        a = a[:, :, None]
    h, w, c = a.shape
    color = {1: 0, 2: 4, 3: 2, 4: 6}[c]
    raw = b"".join(b"\0" + a[y].tobytes() for y in range(h))

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    pathlib.Path(path).write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 16, color, 0, 0, 0))
                                   + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def tiff(path, a):
    """An uncompressed little-endian TIFF of `a` (H, W, C) of uint16, one strip, C samples a pixel."""
    a = np.ascontiguousarray(a, dtype="<u2")
    h, w, c = a.shape
    data = a.tobytes()
    entries = []
    bits_at = 8 + 2 + 12 * 10 + 4  # the bits-per-sample array, after the directory
    data_at = bits_at + 2 * c
    entries.append((256, 4, 1, w))
    entries.append((257, 4, 1, h))
    entries.append((258, 3, c, bits_at if c > 2 else 16 | (16 << 16) if c == 2 else 16))
    entries.append((259, 3, 1, 1))
    entries.append((262, 3, 1, 2 if c >= 3 else 1))
    entries.append((273, 4, 1, data_at))
    entries.append((277, 3, 1, c))
    entries.append((278, 4, 1, h))
    entries.append((279, 4, 1, len(data)))
    entries.append((338, 3, 1, 0) if c not in (1, 3) else (284, 3, 1, 1))
    entries.sort()
    ifd = struct.pack("<H", len(entries)) + b"".join(struct.pack("<HHII", *e) for e in entries) + b"\0\0\0\0"
    bits = struct.pack("<" + "H" * c, *([16] * c))
    pathlib.Path(path).write_bytes(b"II*\0" + struct.pack("<I", 8) + ifd + bits + data)


@pytest.fixture(scope="module")
def ct(tmp_path_factory):
    """Six 12-bit CT slices (37x29 grey 16-bit PNGs) with index masks; seg and cls datasets of them."""
    root = tmp_path_factory.mktemp("ct")
    rng = np.random.default_rng(5)
    slices = [rng.integers(0, 4096, (29, 37), dtype=np.uint16) for _ in range(6)]
    seg, cls = [], []
    for i, s in enumerate(slices):
        png16(root / f"ct{i}.png", s)
        mask = (np.arange(29 * 37).reshape(29, 37) + i) % 3
        pathlib.Path(root / f"m{i}.png").write_bytes(_png8(mask.astype(np.uint8)))
        seg.append(f"ct{i}.png,m{i}.png")
        cls.append(f"ct{i}.png,{'lesion' if i % 3 else 'clear'}")
    (root / "seg.csv").write_text("\n".join(seg) + "\n")
    (root / "cls.csv").write_text("\n".join(cls) + "\n")
    (root / "classes.csv").write_text("name,id\nair,0\nsoft,1\nbone,2\n")
    out = {}
    for color in ("gray", "rgb"):
        run(tool("shardpack"), "-q", "build", "--csv", root / "seg.csv", "--classes", root / "classes.csv", "--out",
            root / f"seg-{color}", "--color", color, "--label-layout", "index", "--task", "seg", "--size", "32x24",
            "--resize", "none")
        run(tool("shardpack"), "-q", "build", "--csv", root / "cls.csv", "--out", root / f"cls-{color}", "--color", color,
            "--task", "cls")
        out[color] = (str(root / f"seg-{color}"), str(root / f"cls-{color}"))
    return slices, out


def _png8(a):
    h, w = a.shape
    raw = b"".join(b"\0" + a[y].tobytes() for y in range(h))

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 0, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def test_ct_slices_read_back_exactly_as_uint16(ct):
    slices, out = ct
    for color, channels in (("gray", 1), ("rgb", 3)):
        seg, cls = out[color]
        for path, crop in ((cls, None), (seg, (slice(2, 26), slice(2, 34)))):
            ds = shardpack.open(path)
            assert ds.image_dtype == "uint16" and ds.channel_order == ("L" if channels == 1 else "RGB")
            for i, s in enumerate(slices):
                want = s if crop is None else s[crop]  # seg: --size 32x24 --resize none crops the centre
                image, _ = ds[i]
                assert image.dtype == np.uint16 and image.shape == want.shape + (channels,)
                for c in range(channels):
                    np.testing.assert_array_equal(image[:, :, c], want)


def test_read_batch_uint16_as_stored_and_float32_over_65535(ct):
    slices, out = ct
    seg, _ = out["rgb"]
    ds = shardpack.open(seg)
    idx = [3, 0, 5]
    images, labels = ds.read_batch(idx, dtype="uint16", layout="NHWC", label="index")
    assert images.dtype == np.uint16 and images.shape == (3, 24, 32, 3)
    for j, i in enumerate(idx):
        np.testing.assert_array_equal(images[j], ds[i][0])
    floats, _ = ds.read_batch(idx, dtype="float32", normalize=None, layout="NHWC")
    np.testing.assert_array_equal(floats, images.astype(np.float32) / np.float32(65535))
    assert floats.max() <= 4095 / 65535 + 1e-7
    # A crop moves uint16 pixels whole, flips included.
    crops, _, boxes = ds.read_batch(idx, dtype="uint16", layout="NHWC", crop=(8, 10), crop_position="random",
                                    hflip=1.0, return_boxes=True, epoch=2)
    for j, i in enumerate(idx):
        y, x, hf, _ = boxes[j]
        np.testing.assert_array_equal(crops[j], ds[i][0][y:y + 8, x:x + 10][:, ::-1])
    nchw, _ = ds.read_batch(idx, dtype="uint16", layout="NCHW")
    np.testing.assert_array_equal(nchw, images.transpose(0, 3, 1, 2))
    with pytest.raises(ValueError, match="stores uint16 images"):
        ds.read_batch(idx, dtype="uint8")
    assert ds.batch_spec(4, dtype="uint16")[0] == ((4, 3, 24, 32), np.dtype(np.uint16))


def test_uint8_datasets_read_as_uint16_give_their_values(built):
    ds = shardpack.open(built["index"])
    u8, _ = ds.read_batch([0, 1], dtype="uint8", layout="NHWC")
    u16, _ = ds.read_batch([0, 1], dtype="uint16", layout="NHWC")
    assert ds.image_dtype == "uint8" and ds.channel_order == "RGB"
    np.testing.assert_array_equal(u16, u8.astype(np.uint16))


def test_depth_8_says_what_it_lost(tmp_path):
    rng = np.random.default_rng(1)
    for i in range(3):
        png16(tmp_path / f"a{i}.png", rng.integers(0, 65536, (5, 6), dtype=np.uint16))
    (tmp_path / "list.csv").write_text("".join(f"a{i}.png,x\n" for i in range(3)))
    import subprocess
    r = subprocess.run([tool("shardpack"), "build", "--csv", str(tmp_path / "list.csv"), "--out", str(tmp_path / "ds"),
                        "--depth", "8", "--task", "cls"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "3 of the 3 images decoded in this build had 16 bits a sample and were stored with 8" in r.stderr
    import json
    assert json.loads((tmp_path / "ds" / "report.json").read_text())["images_reduced_to_8_bits"] == 3
    assert shardpack.open(str(tmp_path / "ds")).image_dtype == "uint8"


@pytest.fixture(scope="module")
def bands(tmp_path_factory):
    root = tmp_path_factory.mktemp("bands")
    rng = np.random.default_rng(9)
    tiles = [rng.integers(0, 65536, (20, 24, 4), dtype=np.uint16) for _ in range(5)]
    for i, t in enumerate(tiles):
        tiff(root / f"s{i}.tif", t)
    (root / "list.csv").write_text("".join(f"s{i}.tif,{'water' if i % 2 else 'land'}\n" for i in range(5)))
    run(tool("shardpack"), "-q", "build", "--csv", root / "list.csv", "--out", root / "ds", "--color", "bands",
        "--task", "cls", "--size", "24x20", "--resize", "none")  # the tiles' own size, fixed: batches need one
    return tiles, str(root / "ds")


def test_four_band_tiffs_read_exactly_and_imagenet_is_refused(bands):
    tiles, path = bands
    ds = shardpack.open(path)
    assert ds.channel_order == "bands" and ds.image_dtype == "uint16" and ds.image_shape == (20, 24, 4)
    for i, t in enumerate(tiles):
        np.testing.assert_array_equal(ds[i][0], t)
    images, labels = ds.read_batch([0, 1, 2], dtype="float32", layout="NHWC", label="index")
    np.testing.assert_array_equal(images, np.stack(tiles[:3]).astype(np.float32) / np.float32(65535))  # auto: no ImageNet
    with pytest.raises(ValueError, match="imagenet.*3 bands"):
        ds.read_batch([0], normalize="imagenet")
    mean = (0.1, 0.2, 0.3, 0.4)
    norm, _ = ds.read_batch([1], dtype="float32", layout="NHWC", normalize=(mean, 0.5))
    want = (tiles[1].astype(np.float32) / np.float32(65535) - np.float32(mean)) / np.float32(0.5)
    np.testing.assert_allclose(norm[0], want, rtol=0, atol=1e-6)


def test_torch_loader_delivers_uint16_images(bands):
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    import shardpack.torch as spt
    tiles, path = bands
    floats = next(iter(spt.Loader(path, batch_size=2, layout="NHWC", label="index", shuffle=False)))[0]
    np.testing.assert_array_equal(floats.numpy(), np.stack(tiles[:2]).astype(np.float32) / np.float32(65535))
    if not hasattr(torch, "uint16"):
        pytest.skip(f"PyTorch {torch.__version__} has no uint16 tensors (2.3 and later do): float32 checked only")
    loader = spt.Loader(path, batch_size=2, dtype="uint16", layout="NHWC", label="index", shuffle=False)
    images, labels = next(iter(loader))
    assert images.dtype == torch.uint16
    np.testing.assert_array_equal(images.numpy(), np.stack(tiles[:2]))


def test_grain_source_delivers_uint16(bands):
    pytest.importorskip("grain", reason="grain is not installed (scripts/python-env.sh --tf puts it into .venv-tf)")
    import shardpack.grain as spg
    tiles, path = bands
    source = spg.DataSource(path, dtype="uint16", label="index")
    image, label = source[3]
    assert image.dtype == np.uint16
    np.testing.assert_array_equal(image, tiles[3])
    floats = spg.DataSource(path, label="index")[3][0]  # float32, "auto": no ImageNet for 4 bands
    np.testing.assert_array_equal(floats, tiles[3].astype(np.float32) / np.float32(65535))


def test_tf_and_keras_deliver_uint16(bands):
    tf = pytest.importorskip("tensorflow", reason="TensorFlow is not installed (scripts/python-env.sh --tf: .venv-tf)")
    import shardpack.keras as spk
    import shardpack.tf as sptf
    tiles, path = bands
    images, labels = next(iter(sptf.dataset(path, 2, shuffle=False, dtype="uint16", label="index")))
    assert images.dtype == tf.uint16
    np.testing.assert_array_equal(images.numpy(), np.stack(tiles[:2]))
    images, _ = spk.PyDataset(path, 2, shuffle=False, label="index")[0]
    np.testing.assert_array_equal(images, np.stack(tiles[:2]).astype(np.float32) / np.float32(65535))


def test_image_folders_take_tiffs(tmp_path):
    """--images lists .tif and .tiff files (any case) beside PNGs, decoded as a CSV's TIFFs are;
    other files are still left out and counted."""
    rng = np.random.default_rng(21)
    pixels = {}
    for cls, names in (("ct", ["a.tif", "b.TIFF", "c.png"]), ("mr", ["d.tiff", "e.Tif"])):
        (tmp_path / "src" / cls).mkdir(parents=True)
        for name in names:
            a = rng.integers(0, 65536, (12, 10, 1), dtype=np.uint16)
            (png16 if name.endswith(".png") else tiff)(tmp_path / "src" / cls / name, a[:, :, 0] if name.endswith(".png") else a)
            pixels[f"{cls}/{name}"] = a[:, :, 0]
    (tmp_path / "src" / "ct" / "notes.txt").write_text("x")
    import subprocess
    r = subprocess.run([tool("shardpack"), "build", "--images", str(tmp_path / "src"), "--out", str(tmp_path / "ds"),
                        "--color", "gray"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "1 file left out: 1 x not a .png, .jpg, .jpeg, .tif or .tiff file" in r.stderr, r.stderr
    ds = shardpack.open(tmp_path / "ds")
    assert len(ds) == 5 and ds.image_dtype == "uint16"
    for i in range(len(ds)):
        assert np.array_equal(ds[i][0][:, :, 0], pixels[ds.key(i)]), ds.key(i)
