"""The converters (python -m shardpack.convert): each turns a small source made here, as its own
tools would write it, into a dataset whose records equal the source's decoded samples, and
names what it leaves out."""
import gzip
import io
import json
import struct
import subprocess
import sys
import tarfile
import zlib

import numpy as np
import pytest

import shardpack
from shardpack import convert
from shardpack._cli import cli_path
from pngread import read_png

pytestmark = pytest.mark.skipif(cli_path() is None, reason="this shardpack installation has no CLI binary "
                                "(a reader-only wheel), which the converters' shardpack.write runs")


def png_bytes(a):
    """A PNG of a uint8 HxW or HxWx3 array (8-bit gray or RGB, one IDAT)."""
    a = np.ascontiguousarray(a)
    h, w = a.shape[:2]
    color = 0 if a.ndim == 2 else 2
    raw = b"".join(b"\0" + a[y].tobytes() for y in range(h))

    def chunk(kind, body):
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, color, 0, 0, 0)) +
            chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def decode(data, tmp_path):
    p = tmp_path / "decode.png"
    p.write_bytes(data)
    return read_png(p)


def images(n, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 256, (10 + i % 3, 12, 3)).astype(np.uint8) for i in range(n)]


def test_png_helper_round_trip(tmp_path):
    a = images(1)[0]
    assert np.array_equal(decode(png_bytes(a), tmp_path), a)


def add(tar, name, data):
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


def test_webdataset(tmp_path):
    names = ["cat", "dog", "emu"]
    (tmp_path / "names.txt").write_text("\n".join(names) + "\n")
    imgs = images(7)
    expected = []
    for t in range(2):  # two shards, as webdataset.ShardWriter writes them
        with tarfile.open(tmp_path / f"train-{t:04d}.tar", "w") as tar:
            for i in range(t * 4, min(7, t * 4 + 4)):
                key = f"sample{i:04d}"
                add(tar, key + ".png", png_bytes(imgs[i]))
                if i % 2:
                    add(tar, key + ".cls", str(i % 3).encode())
                else:
                    add(tar, key + ".json", json.dumps({"label": names[i % 3], "source": "x"}).encode())
                add(tar, key + ".txt", b"a caption")
                expected.append((key, imgs[i], i % 3))
    out = tmp_path / "ds"
    r = subprocess.run([sys.executable, "-m", "shardpack.convert", "webdataset", str(tmp_path / "train-0000.tar"),
                        str(tmp_path / "train-0001.tar"), "--classes", str(tmp_path / "names.txt"), "--out", str(out)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "left out: 4 x .json field 'source'; 7 x .txt member" in r.stderr
    ds = shardpack.open(out)
    assert ds.classes == names and len(ds) == 7
    for i, (key, img, label) in enumerate(expected):
        got_img, got_label = ds[i]
        assert ds.key(i) == key and np.array_equal(got_img, img) and got_label == label


def test_webdataset_needs_classes(tmp_path):
    with pytest.raises(ValueError, match="class names"):
        convert.webdataset([tmp_path / "x.tar"])
    r = subprocess.run([sys.executable, "-m", "shardpack.convert", "webdataset", "x.tar", "--out", str(tmp_path / "o")],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "class names" in r.stderr


def coco_source(tmp_path, mask_utils):
    """Three images and an instances json: image 0 with a polygon and an RLE (crowd) annotation,
    image 1 with a polygon whose box crosses the edge, image 2 with none; a category whose name
    has a space. Returns the images, the json and the masks as COCO's own API paints them."""
    (tmp_path / "images").mkdir()
    imgs = images(3, seed=5)
    doc = {"info": {}, "images": [], "annotations": [],
           "categories": [{"id": 3, "name": "traffic light"}, {"id": 1, "name": "person"}]}
    for i, img in enumerate(imgs):
        (tmp_path / "images" / f"{i:03d}.png").write_bytes(png_bytes(img))
        h, w = img.shape[:2]
        doc["images"].append({"id": 100 + i, "file_name": f"{i:03d}.png", "height": h, "width": w})
    h0, w0 = imgs[0].shape[:2]
    doc["annotations"].append({"id": 1, "image_id": 100, "category_id": 1, "iscrowd": 0, "bbox": [1, 1, 6, 5],
                               "segmentation": [[1.0, 1.0, 7.0, 1.0, 7.0, 6.0, 1.0, 6.0]]})
    blob = np.zeros((h0, w0), np.uint8, order="F")
    blob[4:9, 5:11] = 1
    rle = mask_utils.encode(blob)
    rle["counts"] = rle["counts"].decode()
    doc["annotations"].append({"id": 2, "image_id": 100, "category_id": 3, "iscrowd": 1, "bbox": [5.25, 4, 6, 5.5],
                               "segmentation": rle})
    doc["annotations"].append({"id": 3, "image_id": 101, "category_id": 3, "iscrowd": 0, "bbox": [0.5, 0, 3, 13.0],
                               "segmentation": [[0.0, 0.0, 4.0, 0.0, 0.0, 4.0]]})
    (tmp_path / "instances.json").write_text(json.dumps(doc))
    expected = [np.zeros(img.shape[:2], np.uint8) for img in imgs]
    for a in doc["annotations"]:
        i = a["image_id"] - 100
        h, w = expected[i].shape
        s = a["segmentation"]
        m = mask_utils.decode(mask_utils.merge(mask_utils.frPyObjects(s, h, w)) if isinstance(s, list) else s)
        expected[i][m.astype(bool)] = a["category_id"]
    assert (expected[0] == 3).any() and (expected[0] == 1).any()
    return imgs, doc, expected


def coco_boxes(doc, i, image_size, size=None):
    """Image i's bboxes as the record holds them: [x, y, w, h] -> (x, y, x + w, y + h), the box
    classes the categories by id (0 person, 1 traffic light); with size=(W, H), a stretch resize
    of them as src/transform/field_geometry.cpp computes it (clipped to the image, binary64, then
    binary32)."""
    label = {1: 0, 3: 1}
    h, w = image_size
    W, H = size or (w, h)
    boxes, labels = [], []
    for a in doc["annotations"]:
        if a["image_id"] != 100 + i:
            continue
        x, y, bw, bh = a["bbox"]
        x0, x1 = max(x, 0.0), min(x + bw, w)
        y0, y1 = max(y, 0.0), min(y + bh, h)
        boxes.append([x0 * (W / w), y0 * (H / h), x1 * (W / w), y1 * (H / h)])
        labels.append(label[a["category_id"]])
    return np.array(boxes, np.float32).reshape(-1, 4), np.array(labels, np.int64)


def test_coco(tmp_path):
    mask_utils = pytest.importorskip("pycocotools.mask", reason="pycocotools is not installed (pip install "
                                     "'shardpack[coco]'): the COCO converter is not tested")
    imgs, doc, expected = coco_source(tmp_path, mask_utils)
    out = tmp_path / "ds"
    report = convert.convert(convert.coco(tmp_path / "instances.json", images=tmp_path / "images"), out,
                             label_layout="index", quiet=True)
    assert report["left_out"] == {"crowd annotations painted as their category": 1,
                                  "box class name 'traffic light' written as 'traffic_light'": 1, "info": 1}
    ds = shardpack.open(out)
    assert ds.classes == ["background", "person", "traffic light"]
    ids = np.array([0, 1, 3])  # class index -> category id
    for i, img in enumerate(imgs):
        got_img, got_label = ds[i]
        assert ds.key(i) == f"{i:03d}.png"
        assert np.array_equal(got_img, img)
        assert np.array_equal(ids[got_label], expected[i])
        want_boxes, want_labels = coco_boxes(doc, i, img.shape[:2])
        got = ds.fields(i)["boxes"]
        assert np.array_equal(got.boxes, want_boxes) and np.array_equal(got.labels, want_labels), i
    assert len(ds.fields(2)["boxes"].labels) == 0 and len(ds.fields(0)["boxes"].labels) == 2


def test_coco_boxes_resized_and_off(tmp_path):
    mask_utils = pytest.importorskip("pycocotools.mask", reason="pycocotools is not installed (pip install "
                                     "'shardpack[coco]'): the COCO converter is not tested")
    imgs, doc, _ = coco_source(tmp_path, mask_utils)
    out = tmp_path / "ds"
    r = subprocess.run([sys.executable, "-m", "shardpack.convert", "coco", str(tmp_path / "instances.json"), "--images",
                        str(tmp_path / "images"), "--boxes-field", "objects", "--size", "24x20", "--resize", "stretch",
                        "--label-layout", "index", "--out", str(out)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    ds = shardpack.open(out)
    for i, img in enumerate(imgs):
        want_boxes, want_labels = coco_boxes(doc, i, img.shape[:2], size=(24, 20))
        got = ds.fields(i)["objects"]
        assert np.array_equal(got.boxes, want_boxes) and np.array_equal(got.labels, want_labels), i
    assert ds.fields(1)["objects"].boxes[0, 3] == 20.0  # the bbox over the bottom edge, clipped

    off = tmp_path / "off"
    r = subprocess.run([sys.executable, "-m", "shardpack.convert", "coco", str(tmp_path / "instances.json"), "--images",
                        str(tmp_path / "images"), "--no-boxes", "--label-layout", "index", "--out", str(off)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "3 x annotation boxes (bbox)" in r.stderr
    assert shardpack.open(off).field_info == []
    r = subprocess.run([sys.executable, "-m", "shardpack.convert", "coco", "x.json", "--images", "i", "--no-boxes",
                        "--boxes-field", "b", "--out", str(tmp_path / "o")], capture_output=True, text=True)
    assert r.returncode == 2 and "not allowed with argument" in r.stderr


def test_hf(tmp_path):
    datasets = pytest.importorskip("datasets", reason="datasets is not installed (pip install 'shardpack[hf]'; "
                                   "scripts/python-env.sh leaves it out, 74 s and 371 MB to install): the Hugging Face "
                                   "converter is not tested")
    imgs = images(5, seed=9)
    names = ["bean", "leaf"]
    features = datasets.Features({"image": datasets.Image(), "labels": datasets.ClassLabel(names=names),
                                  "note": datasets.Value("string")})
    d = datasets.Dataset.from_dict({"image": [{"bytes": png_bytes(a), "path": f"img{i}.png"} for i, a in enumerate(imgs)],
                                    "labels": [i % 2 for i in range(5)], "note": ["n"] * 5}, features=features)
    datasets.DatasetDict({"train": d}).save_to_disk(str(tmp_path / "saved"))
    out = tmp_path / "ds"
    r = subprocess.run([sys.executable, "-m", "shardpack.convert", "hf", str(tmp_path / "saved"), "--split", "train",
                        "--out", str(out)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "5 x column 'note'" in r.stderr
    ds = shardpack.open(out)
    assert ds.classes == names and len(ds) == 5
    for i, a in enumerate(imgs):
        img, label = ds[i]
        assert ds.key(i) == f"img{i}.png" and np.array_equal(img, a) and label == i % 2


# tf.train.Example in the protobuf wire format, and TFRecord framing with masked CRC-32C, as
# tf.io.TFRecordWriter writes them.
def varint(n):
    out = b""
    while True:
        b = n & 0x7F
        n >>= 7
        out += bytes([b | (0x80 if n else 0)])
        if not n:
            return out


def field(num, body):
    return varint(num << 3 | 2) + varint(len(body)) + body


def example(features):
    entries = b""
    for name, value in features.items():
        if isinstance(value, bytes):
            feature = field(1, field(1, value))  # bytes_list
        elif isinstance(value, float):
            feature = field(2, field(1, struct.pack("<f", value)))  # float_list, packed
        else:
            feature = field(3, field(1, varint(value)))  # int64_list, packed
        entries += field(1, field(1, name.encode()) + field(2, feature))
    return field(1, entries)


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def masked(crc):
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def tfrecord_bytes(records):
    out = b""
    for r in records:
        n = struct.pack("<Q", len(r))
        out += n + struct.pack("<I", masked(crc32c(n))) + r + struct.pack("<I", masked(crc32c(r)))
    return out


@pytest.mark.parametrize("compressed", [False, True])
def test_tfrecord(tmp_path, compressed):
    imgs = images(6, seed=2)
    records = [example({"image/encoded": png_bytes(a), "image/class/label": i % 4, "image/filename": f"f{i}.png".encode(),
                        "image/height": a.shape[0], "score": 0.5}) for i, a in enumerate(imgs)]
    data = tfrecord_bytes(records)
    path = tmp_path / "train.tfrecord"
    path.write_bytes(gzip.compress(data) if compressed else data)
    out = tmp_path / "ds"
    report = convert.convert(convert.tfrecord([path], num_classes=4, key_key="image/filename"), out, quiet=True)
    assert report["left_out"] == {"feature 'image/height'": 6, "feature 'score'": 6}
    ds = shardpack.open(out)
    for i, a in enumerate(imgs):
        img, label = ds[i]
        assert ds.key(i) == f"f{i}.png" and np.array_equal(img, a) and label == i % 4


def test_tfrecord_from_tensorflow(tmp_path):
    tf = pytest.importorskip("tensorflow", reason="TensorFlow is not installed: TFRecords written by "
                             "tf.io.TFRecordWriter are not tested (the hand-written ones are)")
    imgs = images(3, seed=4)
    path = tmp_path / "tf.tfrecord"
    with tf.io.TFRecordWriter(str(path)) as w:
        for i, a in enumerate(imgs):
            ex = tf.train.Example(features=tf.train.Features(feature={
                "image/encoded": tf.train.Feature(bytes_list=tf.train.BytesList(value=[png_bytes(a)])),
                "image/class/label": tf.train.Feature(int64_list=tf.train.Int64List(value=[i]))}))
            w.write(ex.SerializeToString())
    out = tmp_path / "ds"
    convert.convert(convert.tfrecord([path], num_classes=3), out, quiet=True)
    ds = shardpack.open(out)
    for i, a in enumerate(imgs):
        img, label = ds[i]
        assert np.array_equal(img, a) and label == i
