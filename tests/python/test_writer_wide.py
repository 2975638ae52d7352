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


# --- per-sample fields (format 1.5) ---------------------------------------------------------

TAGS = ["ant", "bee", "insect", "wasp"]
BOX_CLASSES = ["car", "person", "dog"]
FIELDS = {"n": "int", "score": "float", "name": "str", "ids": "int-list", "vals": "float-list",
          "tags": ("tags", TAGS), "boxes": ("boxes", BOX_CLASSES)}


def field_samples(count=7, h=30, w=40):
    """Images with fields of every kind, as Python values; boxes partly outside the crop of a
    resize to 24x20 (clipped or dropped as the CLI does), a sample without boxes, one without tags."""
    rng = np.random.default_rng(11)
    out = []
    for i in range(count):
        boxes = [(float(rng.uniform(0, w - 8)), float(rng.uniform(0, h - 8)), 0.0, 0.0, BOX_CLASSES[j % 3] if j % 2
                  else j % 3) for j in range(i % 4)]
        boxes = [(x0, y0, x0 + 7.25 + j, y0 + 5.5, lab) for j, (x0, y0, _, _, lab) in enumerate(boxes)]
        if i == 3:
            boxes.append((-4.0, -3.0, 2.5, 41.0, "dog"))  # over the edge: clipped
            boxes.append((0.0, 0.0, 0.2, 0.2, 1))         # tiny: may vanish in the resize
        fields = {"n": (-1) ** i * (2 ** 40 + i), "score": float(rng.normal()) / 3, "name": f"sample {i} é",
                  "ids": list(range(i)), "vals": np.linspace(0, 1, i % 3 + 1),
                  "tags": [TAGS[j] for j in range(4) if (i >> j) & 1] if i != 5 else [],
                  "boxes": boxes}
        out.append((f"im{i}.png", rng.integers(0, 256, (h, w, 3), dtype=np.uint8), i % 2, fields))
    return out


def png8(a):
    """An 8-bit RGB PNG of `a` (H, W, 3), written with zlib alone."""
    import struct
    import zlib
    h, w, _ = a.shape
    raw = b"".join(b"\0" + a[y].tobytes() for y in range(h))

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def cell(kind, v):
    """The CSV cell a person would write for a value (independent of the writer's own formatting)."""
    if kind in ("int-list", "float-list"):
        return ",".join(str(x) for x in np.asarray(v).tolist())
    if kind == "tags":
        return "|".join(v)
    if kind == "boxes":
        return "; ".join(f"[{x0}, {y0}, {x1}, {y1}, {lab}]" for x0, y0, x1, y1, lab in v)
    return str(v)


def assert_same_fields_dataset(a, b):
    def man(p):
        m = json.loads((pathlib.Path(p) / "manifest.json").read_text())
        m.pop("input_digest")
        for f in m.get("build", {}).get("fields", []):
            f.pop("names", None)  # the CSV's column and --field-names files: a stream has neither
            f.pop("column", None)
        return m

    assert man(a) == man(b)
    from test_writer import shard_bytes
    sa, sb = shard_bytes(a), shard_bytes(b)
    assert sa and sa.keys() == sb.keys()
    for name in sa:
        assert sa[name] == sb[name], name


@pytest.mark.parametrize("size", [None, (24, 20)])
def test_fields_equal_cli_build_from_csv_columns(tmp_path, size):
    import csv
    samples = field_samples()
    rows = [["image", "label", *FIELDS]]
    for key, img, label, fields in samples:
        (tmp_path / key).write_bytes(png8(img))
        rows.append([key, "ab"[label]] + [cell(spec if isinstance(spec, str) else spec[0], fields[name])
                                         for name, spec in FIELDS.items()])
    with open(tmp_path / "list.csv", "w", newline="") as f:
        csv.writer(f).writerows(rows)
    (tmp_path / "names.txt").write_text("a\nb\n")
    (tmp_path / "tags.txt").write_text("name\n" + "".join(t + "\n" for t in TAGS))
    (tmp_path / "boxes.txt").write_text("name\n" + "".join(t + "\n" for t in BOX_CLASSES))
    field_args = []
    for name, spec in FIELDS.items():
        field_args += ["--field", f"{name}:{spec if isinstance(spec, str) else spec[0]}"]
    cli_out = tmp_path / "cli"
    size_args = ["--size", f"{size[0]}x{size[1]}"] if size else []
    run(tool("shardpack"), "-q", "build", "--csv", tmp_path / "list.csv", "--classes", tmp_path / "names.txt",
        "--task", "cls", "--out", cli_out, *field_args, "--field-names", f"tags={tmp_path / 'tags.txt'}",
        "--field-names", f"boxes={tmp_path / 'boxes.txt'}", *size_args)
    out = tmp_path / "writer"
    shardpack.write(out, ({"key": k, "image": img, "label": lab, "fields": f} for k, img, lab, f in samples),
                    task="cls", classes=["a", "b"], fields=FIELDS, size=size, quiet=True)
    assert_same_fields_dataset(cli_out, out)
    # The same samples give the same manifest: no temporary path of the writer's in it.
    again = tmp_path / "again"
    shardpack.write(again, ({"key": k, "image": img, "label": lab, "fields": f} for k, img, lab, f in samples),
                    task="cls", classes=["a", "b"], fields=FIELDS, size=size, quiet=True)
    assert (again / "manifest.json").read_bytes() == (out / "manifest.json").read_bytes()
    ds, cli = shardpack.open(out), shardpack.open(cli_out)
    for i, (key, img, label, fields) in enumerate(samples):
        got, want = ds.fields(i), cli.fields(i)
        assert got.keys() == want.keys() == FIELDS.keys()
        for name in FIELDS:
            if name == "boxes":
                assert np.array_equal(got[name].boxes, want[name].boxes)
                assert np.array_equal(got[name].labels, want[name].labels)
            else:
                assert np.array_equal(np.asarray(got[name]), np.asarray(want[name])), name
        assert got["n"] == fields["n"] and got["score"] == fields["score"] and got["name"] == fields["name"]
        assert np.array_equal(got["vals"], fields["vals"]) and list(got["ids"]) == fields["ids"]
        assert [TAGS[j] for j in np.flatnonzero(got["tags"])] == fields["tags"]
        if size is None:  # no geometry: the boxes as given (float32), clipped to the image
            assert len(got["boxes"].labels) == len(fields["boxes"])
    assert sum(len(ds.fields(i)["boxes"].labels) for i in range(len(ds))) > 0


def test_field_errors_name_the_sample(tmp_path):
    img = np.zeros((4, 4, 3), np.uint8)
    ok = {"n": 1, "tags": ["bee"]}
    spec = {"n": "int", "tags": ("tags", TAGS)}

    def write(samples, **kw):
        shardpack.write(tmp_path / "d", samples, task="cls", classes=["a"], fields=spec, quiet=True, **kw)

    with pytest.raises(shardpack.Error, match=r"sample 1 'k1': field 'n' \(int\): 'x1' is not a 64-bit integer"):
        write([{"key": "k0", "image": img, "label": 0, "fields": ok},
               {"key": "k1", "image": img, "label": 0, "fields": {"n": "x1", "tags": []}}])
    with pytest.raises(shardpack.Error, match=r"sample 0 'k0': field 'n' \(int\): the value is a list"):
        write([{"key": "k0", "image": img, "label": 0, "fields": {"n": [1], "tags": []}}])
    with pytest.raises(shardpack.Error, match=r"sample 0 'k0': field 'tags': 'fly' is not one of its 4 names"):
        write([{"key": "k0", "image": img, "label": 0, "fields": {"n": 1, "tags": ["fly"]}}])
    with pytest.raises(shardpack.Error, match=r"sample 0 '0': fields \['tags'\] missing"):
        write([{"image": img, "label": 0, "fields": {"n": 1}}])
    with pytest.raises(shardpack.Error, match=r"sample 0 '0': the sample needs 'fields'"):
        write([(img, 0)])
    report = write([{"image": img, "label": 0, "fields": {"n": 1, "tags": ["fly", "bee"]}}], unknown_name="ignore")
    assert shardpack.open(tmp_path / "d").fields(0)["tags"].tolist() == [0, 1, 0, 0]
    with pytest.raises(shardpack.ArgumentValueError, match="needs its names"):
        shardpack.write(tmp_path / "d", [], task="cls", classes=["a"], fields={"t": "tags"})
    with pytest.raises(shardpack.ArgumentValueError, match="unknown kind"):
        shardpack.write(tmp_path / "d", [], task="cls", classes=["a"], fields={"t": "double"})
    with pytest.raises(shardpack.ArgumentTypeError, match="fields must be a mapping"):
        shardpack.write(tmp_path / "d", [], task="cls", classes=["a"], fields=["n"])
    with pytest.raises(shardpack.ArgumentValueError, match="only tags and boxes"):
        shardpack.write(tmp_path / "d", [], task="cls", classes=["a"], fields={"n": ("int", ["a"])})
    with pytest.raises(shardpack.ArgumentValueError, match="unknown_name"):
        shardpack.write(tmp_path / "d", [], task="cls", classes=["a"], fields=spec, unknown_name="drop")
    del report


def test_cli_stream_field_refusals(tmp_path):
    """build --samples - with --field: tags and boxes need --field-names, a COCO source or a
    column is refused (exit 2, nothing read)."""
    import subprocess
    names = tmp_path / "names.txt"
    names.write_text("a\n")
    base = [tool("shardpack"), "build", "--samples", "-", "--task", "cls", "--classes", str(names), "--out",
            str(tmp_path / "o")]
    for extra, words in ((["--field", "t:tags"], [b"--field-names t=FILE", b"not come yet"]),
                         (["--field", "b:boxes=coco:x.json", "--field-names", f"b={names}"], [b"coco"]),
                         (["--field", "n:int=count"], [b"NAME:KIND"])):
        r = subprocess.run(base + extra, input=b"", capture_output=True)
        assert r.returncode == 2, r.stderr
        for w in words:
            assert w in r.stderr, r.stderr
