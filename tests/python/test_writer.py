"""shardpack.write: a dataset written from an iterable equals the CLI's build of the same pixels
(every shard byte for byte, the manifest apart from the input's digest), at any thread count;
bad samples are named by index and key; a writer killed mid-write publishes nothing."""
import csv
import json
import os
import pathlib
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import shardpack
from shardpack._cli import cli_path
from conftest import run, tool
from pngread import read_png

pytestmark = pytest.mark.skipif(cli_path() is None, reason="this shardpack installation has no CLI binary "
                                "(a reader-only wheel), which shardpack.write runs")


def rows_of(list_csv):
    with open(list_csv, newline="") as f:
        rows = list(csv.reader(f))
    return rows[1:] if rows and rows[0][0] in ("image", "path", "file") else rows


def manifest(path):
    m = json.loads((pathlib.Path(path) / "manifest.json").read_text())
    m.pop("input_digest")
    return m


def shard_bytes(path):
    p = pathlib.Path(path)
    return {f.name: f.read_bytes() for f in sorted(p.iterdir()) if f.suffix == ".shard" or f.name.startswith("shard")}


def assert_same_dataset(a, b):
    assert manifest(a) == manifest(b)
    sa, sb = shard_bytes(a), shard_bytes(b)
    assert sa and sa.keys() == sb.keys()
    for name in sa:
        assert sa[name] == sb[name], name
    da, db = shardpack.open(a), shardpack.open(b)
    assert len(da) == len(db)
    for i in range(len(da)):
        assert da.key(i) == db.key(i)
        (ia, la), (ib, lb) = da[i], db[i]
        assert np.array_equal(ia, ib)
        assert np.array_equal(np.asarray(la), np.asarray(lb))


@pytest.fixture(scope="module")
def seg_source(tmp_path_factory):
    src = tmp_path_factory.mktemp("seg-src")
    run(tool("make_sample_data"), "--out", src, "--count", 12, "--width", 40, "--height", 30)
    return src


@pytest.fixture(scope="module")
def cls_source(tmp_path_factory):
    src = tmp_path_factory.mktemp("cls-src")
    run(tool("make_sample_data"), "--out", src, "--task", "cls", "--count", 14, "--width", 36, "--height", 28)
    return src


def class_dict(path):
    with open(path, newline="") as f:
        r = list(csv.reader(f))
    head = [h.strip().lower() for h in r[0]]
    n, cr, cg, cb = (head.index(k) for k in ("name", "r", "g", "b"))
    return [(row[n].strip(), (int(row[cr]), int(row[cg]), int(row[cb]))) for row in r[1:]]


SEG_OPTIONS = [
    ([], {}),
    (["--size", "32x24", "--label-layout", "index", "--shard-size", "8KiB"],
     {"size": (32, 24), "label_layout": "index", "shard_size": "8KiB"}),
    (["--size", "20x20", "--resize", "fit", "--color", "gray", "--compression", "auto"],
     {"size": (20, 20), "resize": "fit", "color": "gray", "compression": "auto"}),
]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("options", range(len(SEG_OPTIONS)))
def test_seg_from_arrays_equals_cli_build(seg_source, tmp_path, threads, options):
    cli_args, kwargs = SEG_OPTIONS[options]
    cli_out = tmp_path / "cli"
    run(tool("shardpack"), "-q", "build", "--csv", seg_source / "list.csv", "--classes", seg_source / "class_dict.csv",
        "--out", cli_out, "--threads", threads, *cli_args)
    rows = rows_of(seg_source / "list.csv")

    def samples():  # a generator: no length, arrays made as they are asked for
        for image, mask in rows:
            yield {"key": image, "image": read_png(seg_source / image), "label": read_png(seg_source / mask)}

    out = tmp_path / "writer"
    report = shardpack.write(out, samples(), task="seg", classes=class_dict(seg_source / "class_dict.csv"),
                             threads=threads, quiet=True, **kwargs)
    assert report["records"] == len(rows) and report["rows"] == len(rows)
    assert_same_dataset(cli_out, out)


@pytest.mark.parametrize("threads", [1, 2])
def test_cls_from_arrays_equals_cli_build(cls_source, tmp_path, threads):
    rows = rows_of(cls_source / "list.csv")
    names = sorted({label for _, label in rows})
    (tmp_path / "names.txt").write_text("".join(n + "\n" for n in names))
    cli_out = tmp_path / "cli"
    run(tool("shardpack"), "-q", "build", "--csv", cls_source / "list.csv", "--classes", tmp_path / "names.txt",
        "--out", cli_out, "--threads", threads, "--size", "24x20", "--shard-size", "4KiB")
    out = tmp_path / "writer"
    samples = [(image, read_png(cls_source / image), label) for image, label in rows]  # (key, image, label)
    shardpack.write(out, samples, task="cls", classes=names, threads=threads, size=(24, 20), shard_size=4096, quiet=True)
    assert_same_dataset(cli_out, out)


def test_encoded_bytes_equal_arrays(seg_source, tmp_path):
    """PNG bytes go to the build's decoders: the same records as their pixels."""
    rows = rows_of(seg_source / "list.csv")
    classes = class_dict(seg_source / "class_dict.csv")
    a, b = tmp_path / "bytes", tmp_path / "arrays"
    shardpack.write(a, (((seg_source / i).read_bytes(), (seg_source / m).read_bytes()) for i, m in rows),
                    task="seg", classes=classes, quiet=True)
    shardpack.write(b, ((read_png(seg_source / i), read_png(seg_source / m)) for i, m in rows),
                    task="seg", classes=classes, quiet=True)
    assert_same_dataset(a, b)


def test_index_masks_uint8_and_uint16(tmp_path):
    rng = np.random.default_rng(1)
    masks = [rng.integers(0, 3, (9, 11)).astype(np.uint8) for _ in range(4)]
    images = [rng.integers(0, 256, (9, 11, 3)).astype(np.uint8) for _ in range(4)]
    classes = [("a", 0), ("b", 1), ("c", 2)]
    shardpack.write(tmp_path / "u8", zip(images, masks), task="seg", classes=classes, label_layout="index", quiet=True)
    shardpack.write(tmp_path / "u16", zip(images, [m.astype(np.uint16) for m in masks]), task="seg", classes=classes,
                    label_layout="index", quiet=True)
    ds = shardpack.open(tmp_path / "u8")
    for i in range(4):
        img, lab = ds[i]
        assert ds.key(i) == str(i)
        assert np.array_equal(img, images[i]) and np.array_equal(lab, masks[i])
    assert_same_dataset(tmp_path / "u8", tmp_path / "u16")


def test_bad_sample_named_by_index_and_key(tmp_path):
    classes = [("a", 0), ("b", 1)]
    good = (np.zeros((4, 4, 3), np.uint8), np.zeros((4, 4), np.uint8))
    samples = [good, good, {"key": "odd-one", "image": np.zeros((4, 4, 3), np.float32), "label": good[1]}, good]
    with pytest.raises(shardpack.Error, match=r"sample 2 'odd-one'.*float32"):
        shardpack.write(tmp_path / "fail", samples, task="seg", classes=classes, quiet=True)
    assert not (tmp_path / "fail" / "manifest.json").exists()
    # A mask of another size, and a value the table lacks: the build's own checks, same naming.
    samples = [good, ("k1", np.zeros((4, 4, 3), np.uint8), np.zeros((5, 4), np.uint8)),
               ("k2", np.zeros((4, 4, 3), np.uint8), np.full((4, 4), 7, np.uint8)), good]
    report = shardpack.write(tmp_path / "skip", samples, task="seg", classes=classes, on_error="skip", quiet=True)
    assert report["records"] == 2 and report["skipped"] == 2
    reasons = (tmp_path / "skip" / "rejected.csv").read_text()
    assert "k1" in reasons and "k2" in reasons and "mask is 4x5" in reasons and "7" in reasons
    with pytest.raises(shardpack.Error, match=r"sample 1 'k1'"):
        shardpack.write(tmp_path / "skip2", samples, task="seg", classes=classes, quiet=True)


def test_arguments_checked(tmp_path):
    s = [(np.zeros((2, 2, 3), np.uint8), 0)]
    with pytest.raises(TypeError):
        shardpack.write(tmp_path / "x", s, task="cls", classes="ab")
    with pytest.raises(ValueError):
        shardpack.write(tmp_path / "x", s, task="classification", classes=["a"])
    with pytest.raises(ValueError):
        shardpack.write(tmp_path / "x", s, task="cls", classes=["a"], level=99)
    with pytest.raises(TypeError):
        shardpack.write(tmp_path / "x", s, task="cls", classes=["a"], size=512)
    with pytest.raises(ValueError):  # the CLI's usage errors (exit 2) too
        shardpack.write(tmp_path / "x", s, task="cls", classes=["a"], shard_size="12 parsecs")
    with pytest.raises(TypeError):
        shardpack.write(tmp_path / "x", s, "cls", ["a"])  # keyword-only
    assert not (tmp_path / "x").exists() or not (tmp_path / "x" / "manifest.json").exists()


def test_generator_error_publishes_nothing(tmp_path):
    out = tmp_path / "d"
    shardpack.write(out, [(np.zeros((2, 2, 3), np.uint8), 0)] * 3, task="cls", classes=["a"], quiet=True)
    before = (out / "manifest.json").read_bytes()

    def broken():
        yield np.ones((2, 2, 3), np.uint8), 0
        raise RuntimeError("the source broke")

    with pytest.raises(RuntimeError, match="the source broke"):
        shardpack.write(out, broken(), task="cls", classes=["a"], quiet=True)
    assert (out / "manifest.json").read_bytes() == before
    assert len(shardpack.open(out)) == 3



def test_first_sample_error_publishes_nothing(tmp_path):
    """The first sample is taken before the build starts (it sizes the ring): an exception there
    is the iterable's, raised as it is, and the folder keeps its dataset."""
    out = tmp_path / "d"
    shardpack.write(out, [(np.zeros((2, 2, 3), np.uint8), 0)] * 3, task="cls", classes=["a"], quiet=True)
    before = (out / "manifest.json").read_bytes()

    def broken():
        raise RuntimeError("no first sample")
        yield  # a generator

    with pytest.raises(RuntimeError, match="no first sample"):
        shardpack.write(out, broken(), task="cls", classes=["a"], quiet=True)
    assert (out / "manifest.json").read_bytes() == before


@pytest.mark.parametrize("height, width", [(30, 40), (192, 256)])
def test_a_generator_that_refills_one_buffer(tmp_path, height, width):
    """A generator that yields the same arrays each time, refilled (as one that decodes into a
    buffer it keeps does): every sample is written as it was when yielded, in the pipe (40x30)
    and in the ring (256x192), for the image and the mask; the same dataset as from copies."""
    rng = np.random.default_rng(5)
    images = [rng.integers(0, 256, (height, width, 3), dtype=np.uint8) for _ in range(24)]
    masks = [rng.integers(0, 3, (height, width), dtype=np.uint8) for _ in range(24)]
    image, mask = np.empty_like(images[0]), np.empty_like(masks[0])

    def refilled():
        for i in range(len(images)):
            image[...] = images[i]
            mask[...] = masks[i]
            yield f"s{i}", image, mask

    classes = [("a", 0), ("b", 1), ("c", 2)]
    shardpack.write(tmp_path / "refilled", refilled(), task="seg", classes=classes, quiet=True)
    shardpack.write(tmp_path / "copies", [(f"s{i}", images[i], masks[i]) for i in range(len(images))], task="seg",
                    classes=classes, quiet=True)
    assert_same_dataset(tmp_path / "copies", tmp_path / "refilled")
    ds = shardpack.open(tmp_path / "refilled")
    for i in range(len(ds)):
        assert np.array_equal(ds[i][0], images[int(ds.key(i)[1:])])


KILLED_WRITER = textwrap.dedent("""
    import sys, time, numpy as np, shardpack
    def samples():
        for i in range(1000000):
            if i == 50:
                print("half", flush=True)
            if i >= 50:
                time.sleep(0.01)
            yield np.full((64, 64, 3), i % 251, np.uint8), i % 2
    shardpack.write(sys.argv[1], samples(), task="cls", classes=["a", "b"], shard_size=65536, quiet=True)
""")


def children(pid):
    try:
        return [int(c) for c in pathlib.Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def test_kill_9_mid_write_leaves_previous_dataset(tmp_path):
    out = tmp_path / "d"
    shardpack.write(out, [(np.full((8, 8, 3), 7, np.uint8), 1)] * 5, task="cls", classes=["a", "b"], quiet=True)
    published = lambda: {f.name: f.read_bytes() for f in out.iterdir() if f.is_file() and f.name != ".shardpack.lock"}
    before = published()
    script = tmp_path / "w.py"
    script.write_text(KILLED_WRITER)
    p = subprocess.Popen([sys.executable, str(script), str(out)], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "half"
    time.sleep(0.3)  # shards of the new dataset are being written
    build = children(p.pid)
    assert build, "the writer's build process"
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    deadline = time.time() + 30
    while any(pathlib.Path(f"/proc/{c}").exists() for c in build) and time.time() < deadline:
        time.sleep(0.05)
    assert not any(pathlib.Path(f"/proc/{c}").exists() for c in build), "the build outlived its writer"
    assert published() == before  # the published files as they were; nothing half-published beside them
    ds = shardpack.open(out)
    assert len(ds) == 5 and all(ds[i][1] == 1 for i in range(5))
    run(tool("shardpack"), "verify", out)
    # The folder's lock went with the build: the next write succeeds.
    shardpack.write(out, [(np.zeros((8, 8, 3), np.uint8), 0)] * 2, task="cls", classes=["a", "b"], quiet=True)
    assert len(shardpack.open(out)) == 2



def test_ctrl_c_mid_write_leaves_previous_dataset(tmp_path):
    """SIGINT (Ctrl-C) while the iterable is being written: KeyboardInterrupt reaches the caller,
    the build stops without publishing, and the folder keeps its dataset and can be written again."""
    out = tmp_path / "d"
    shardpack.write(out, [(np.full((8, 8, 3), 7, np.uint8), 1)] * 5, task="cls", classes=["a", "b"], quiet=True)
    before = (out / "manifest.json").read_bytes()
    script = tmp_path / "w.py"
    script.write_text(KILLED_WRITER)
    p = subprocess.Popen([sys.executable, str(script), str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    assert p.stdout.readline().strip() == "half"
    build = children(p.pid)
    assert build, "the writer's build process"
    os.kill(p.pid, signal.SIGINT)
    _, err = p.communicate(timeout=60)
    assert p.returncode != 0 and "KeyboardInterrupt" in err
    assert not any(pathlib.Path(f"/proc/{c}").exists() for c in build), "the build outlived the write"
    assert (out / "manifest.json").read_bytes() == before
    assert len(shardpack.open(out)) == 5
    shardpack.write(out, [(np.zeros((8, 8, 3), np.uint8), 0)] * 2, task="cls", classes=["a", "b"], quiet=True)
    assert len(shardpack.open(out)) == 2

def test_pil_images(tmp_path):
    Image = pytest.importorskip("PIL.Image", reason="PIL (Pillow) is not installed: PIL inputs are not tested")
    rng = np.random.default_rng(3)
    rgb = rng.integers(0, 256, (6, 7, 3)).astype(np.uint8)
    values = rng.integers(0, 2, (6, 7)).astype(np.uint8)
    pal = Image.fromarray(values, "P")
    pal.putpalette([10, 20, 30, 40, 50, 60] + [0] * 762)
    classes_color = [("a", (10, 20, 30)), ("b", (40, 50, 60))]
    shardpack.write(tmp_path / "c", [(Image.fromarray(rgb), pal)], task="seg", classes=classes_color,
                    label_layout="index", quiet=True)
    shardpack.write(tmp_path / "i", [(Image.fromarray(rgb), pal)], task="seg", classes=[("a", 0), ("b", 1)],
                    label_layout="index", quiet=True)
    for name in ("c", "i"):
        img, lab = shardpack.open(tmp_path / name)[0]
        assert np.array_equal(img, rgb) and np.array_equal(lab, values), name


def test_cli_sample_stream_refusals(tmp_path):
    """build --samples - (the writer's stream): list options refused (exit 2), a stream that is
    not one, or ends without its end mark, refused (exit 1), nothing published."""
    shardpack_bin = tool("shardpack")
    names = tmp_path / "names.txt"
    names.write_text("a\n")
    base = [shardpack_bin, "build", "--samples", "-", "--task", "cls", "--classes", str(names)]
    for extra, word in ((["--csv", "x.csv"], "--csv"), (["--shuffle"], "--shuffle"), (["--partition", "0/2"], "--partition")):
        r = subprocess.run(base + ["--out", str(tmp_path / "o")] + extra, input=b"", capture_output=True)
        assert r.returncode == 2 and word in r.stderr.decode(), r.stderr
    r = subprocess.run([shardpack_bin, "build", "--samples", "-", "--classes", str(names), "--out", str(tmp_path / "o")],
                       input=b"", capture_output=True)
    assert r.returncode == 2 and b"--task" in r.stderr
    r = subprocess.run(base + ["--out", str(tmp_path / "o")], input=b"not a stream at all", capture_output=True)
    assert r.returncode == 1 and b"not a shardpack sample stream" in r.stderr
    r = subprocess.run(base + ["--out", str(tmp_path / "o")], input=b"SPSAMPv2" + bytes(8), capture_output=True)
    assert r.returncode == 1 and b"without its end mark" in r.stderr
    assert not (tmp_path / "o" / "manifest.json").exists()


def test_unknown_entries_refused(tmp_path):
    """A mapping's entries besides image, label and key (boxes, before fields exist) fail the
    sample instead of being dropped."""
    s = [{"image": np.zeros((2, 2, 3), np.uint8), "label": 0, "boxes": [[0, 0, 1, 1]]}]
    with pytest.raises(shardpack.Error, match=r"sample 0 '0': unknown entries \['boxes'\]"):
        shardpack.write(tmp_path / "d", s, task="cls", classes=["a"], quiet=True)


def test_progress_and_log_relayed(tmp_path, capsys):
    """The build's progress line and log reach sys.stderr (a notebook's too), as the CLI shows them."""
    s = [(np.zeros((4, 4, 3), np.uint8), i % 2) for i in range(5)]
    shardpack.write(tmp_path / "d", s, task="cls", classes=["a", "b"], progress=True)
    err = capsys.readouterr().err
    assert "5/5 rows" in err and "samples/s" in err  # the progress line, with the list's length
    assert "5 records" in err  # the build's summary line
    shardpack.write(tmp_path / "q", iter(s), task="cls", classes=["a", "b"], quiet=True)
    assert capsys.readouterr().err == ""
