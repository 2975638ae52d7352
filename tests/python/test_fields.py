"""Per-sample fields (format 1.5, issue 31): declared from CSV columns and a COCO JSON at build
time, read by ds.fields(i) and read_batch(fields=...), boxes moved with the build's geometry and
with each sample's read-time crop and flips, equal to a NumPy reference computed from the windows."""
import json
import re
import subprocess

import numpy as np
import pytest

import shardpack
from conftest import cpp_dump, run, tool

W, H = 48, 40  # make_sample_data's segmentation images are all this size


def box_cell(boxes):
    return "; ".join(f"{x0} {y0} {x1} {y1} {c}" for x0, y0, x1, y1, c in boxes)


def rows_for(n):
    """Per row: its source boxes (x0, y0, x1, y1, class name), tags, and the other values."""
    rng = np.random.default_rng(7)
    rows = []
    for i in range(n):
        boxes = []
        for _ in range(i % 4):  # 0 to 3 boxes: some images have none
            x0, y0 = float(rng.integers(0, W - 4)) + 0.25, float(rng.integers(0, H - 4)) + 0.5
            boxes.append((x0, y0, min(W, x0 + float(rng.integers(2, 30))), min(H, y0 + float(rng.integers(2, 30))),
                          ["car", "person", "tree"][int(rng.integers(0, 3))]))
        tags = [t for k, t in enumerate(["ant", "bee", "cat"]) if (i >> k) & 1]
        rows.append(dict(boxes=boxes, tags=tags, age=i * 1000 - 3, score=i / 7.0, caption=f"photo {i}, \"quoted\"",
                         kps=[float(k) / 3 for k in range(i % 3)]))
    return rows


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    root = tmp_path_factory.mktemp("fields-src")
    run(tool("make_sample_data"), "--out", root, "--count", 12, "--width", W, "--height", H)
    rows = rows_for(12)
    with open(root / "fields.csv", "w") as f:
        f.write("image,label,age,score,tags,boxes,caption,kps,split\n")
        for i, r in enumerate(rows):
            f.write(f"images/img_{i:04d}.png,{'even' if i % 2 == 0 else 'odd'},{r['age']},{r['score']!r},"
                    f"\"{';'.join(r['tags'])}\",\"{box_cell(r['boxes'])}\","
                    f"\"{r['caption'].replace(chr(34), chr(34) * 2)}\",\"{' '.join(repr(k) for k in r['kps'])}\",train\n")
    return root, rows


FIELD_OPTIONS = ["--field", "age:int", "--field", "score:float", "--field", "tags:tags", "--field", "boxes:boxes",
                 "--field", "caption:str", "--field", "kps:float-list"]


def build(root, out, *options):
    r = subprocess.run([tool("shardpack"), "build", "--out", str(out), *map(str, options)], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return r.stderr


@pytest.fixture(scope="module")
def packed(source, tmp_path_factory):
    root, rows = source
    out = tmp_path_factory.mktemp("fields-ds") / "ds"
    log = build(root, out, "--csv", root / "fields.csv", *FIELD_OPTIONS, "--size", "32x32", "--resize", "none")
    return str(out), rows, log


def build_geometry(boxes, names):
    """The build's rule (spec 10.4.2) for --size 32x32 --resize none --crop center of a 48x40
    image: a crop at x 8, y 4; boxes clipped to it, dropped when nothing is left."""
    out = []
    for x0, y0, x1, y1, c in boxes:
        a0, a1, b0, b1 = max(x0 - 8, 0), min(x1 - 8, 32), max(y0 - 4, 0), min(y1 - 4, 32)
        if a1 > a0 and b1 > b0:
            out.append(([a0, b0, a1, b1], names.index(c)))
    return out


def test_fields_round_trip_and_the_build_moves_boxes_with_the_pixels(packed):
    path, rows, log = packed
    ds = shardpack.open(path)
    info = {f.name: f for f in ds.field_info}
    assert [f.name for f in ds.field_info] == ["age", "score", "tags", "boxes", "caption", "kps"]
    assert info["tags"].names == ["ant", "bee", "cat"]
    assert info["boxes"].names == sorted({b[4] for r in rows for b in r["boxes"]})  # the names found, sorted
    assert json.load(open(f"{path}/manifest.json"))["format_version"] == "1.5"
    for i, r in enumerate(rows):
        f = ds.fields(i)
        assert f["age"] == r["age"] and f["score"] == r["score"] and f["caption"] == r["caption"]
        np.testing.assert_array_equal(f["kps"], np.array(r["kps"], dtype=np.float64))
        assert f["tags"].tolist() == [int(t in r["tags"]) for t in ("ant", "bee", "cat")]
        want = build_geometry(r["boxes"], info["boxes"].names)
        np.testing.assert_array_equal(f["boxes"].boxes, np.array([b for b, _ in want], dtype=np.float32).reshape(-1, 4))
        assert f["boxes"].labels.tolist() == [c for _, c in want]
    # The unused column is named in the log.
    assert "'split'" in log and "--field NAME:KIND=COLUMN" in log


def reference_window(boxes, labels, y, x, h, w, hflip, vflip, visibility):
    """Spec 10.4.1 in NumPy: float32 arithmetic, areas in float64."""
    b = boxes.astype(np.float32)
    f32 = np.float32
    a0, a1 = np.maximum(b[:, 0] - f32(x), f32(0)), np.minimum(b[:, 2] - f32(x), f32(w))
    c0, c1 = np.maximum(b[:, 1] - f32(y), f32(0)), np.minimum(b[:, 3] - f32(y), f32(h))
    keep = (a1 > a0) & (c1 > c0)
    visible = (a1.astype(np.float64) - a0.astype(np.float64)) * (c1.astype(np.float64) - c0.astype(np.float64))
    whole = (b[:, 2].astype(np.float64) - b[:, 0].astype(np.float64)) * \
        (b[:, 3].astype(np.float64) - b[:, 1].astype(np.float64))
    keep &= visible >= visibility * whole
    if hflip:
        a0, a1 = f32(w) - a1, f32(w) - a0
    if vflip:
        c0, c1 = f32(h) - c1, f32(h) - c0
    return np.stack([a0, c0, a1, c1], axis=1)[keep], labels[keep]


@pytest.mark.parametrize("visibility", [0.0, 0.4])
def test_read_batch_boxes_follow_random_crops_and_flips_bit_for_bit(packed, visibility):
    path, rows, _ = packed
    ds = shardpack.open(path)
    idx = np.arange(len(ds), dtype=np.int64)
    checked = 0
    for epoch in range(4):
        images, labels, windows, fields = ds.read_batch(idx, crop=(20, 24), crop_position="random", hflip=0.5,
                                                        vflip=0.5, epoch=epoch, seed=3, return_boxes=True,
                                                        fields=["boxes", "tags"], min_box_visibility=visibility)
        got = fields["boxes"]
        assert isinstance(got, shardpack.PaddedBoxes) and got.counts.shape == (len(ds),)
        for j, i in enumerate(idx):
            stored = ds.fields(int(i))["boxes"]
            y, x, hf, vf = windows[j]
            want_boxes, want_labels = reference_window(stored.boxes, stored.labels, y, x, 20, 24, hf, vf, visibility)
            c = int(got.counts[j])
            assert c == len(want_labels)
            assert got.boxes[j, :c].tobytes() == want_boxes.astype(np.float32).tobytes()  # bit for bit
            assert got.labels[j, :c].tolist() == want_labels.tolist()
            assert (got.labels[j, c:] == -1).all() and (got.boxes[j, c:] == 0).all()
            checked += c
        assert fields["tags"].shape == (len(ds), 3) and fields["tags"].dtype == np.uint8
    assert checked > 10  # the crops kept some boxes, so the comparison compared something


def test_flips_without_a_crop_mirror_boxes_in_the_whole_record(packed):
    path, _, _ = packed
    ds = shardpack.open(path)
    idx = np.arange(len(ds), dtype=np.int64)
    _, _, fields = ds.read_batch(idx, hflip=1.0, vflip=1.0, fields=["boxes"])
    for j in range(len(ds)):
        stored = ds.fields(j)["boxes"].boxes
        c = int(fields["boxes"].counts[j])
        want = np.stack([32 - stored[:, 2], 32 - stored[:, 3], 32 - stored[:, 0], 32 - stored[:, 1]], axis=1)
        np.testing.assert_array_equal(fields["boxes"].boxes[j, :c], want.astype(np.float32))


def test_cpp_reader_agrees_with_python(packed):
    path, _, _ = packed
    ds = shardpack.open(path)
    for i, line in enumerate(cpp_dump(path)):
        f = ds.fields(i)
        age, score, tags, boxes, caption, kps = line["fields"]
        assert age == f["age"] and caption == f["caption"]
        assert score == int(np.float64(f["score"]).view(np.uint64))
        assert tags == np.flatnonzero(f["tags"]).tolist()
        assert [b[4] for b in boxes] == f["boxes"].labels.tolist()
        assert np.array([b[:4] for b in boxes], dtype=np.uint32).reshape(-1, 4).tobytes() == f["boxes"].boxes.tobytes()


def test_torch_collate_pads_boxes_with_counts(packed):
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    import shardpack.torch as spt
    path, _, _ = packed
    ds = shardpack.open(path)
    tds = spt.Dataset(path, dtype="uint8", crop=(20, 24), crop_position="random", hflip=0.5, seed=5,
                      fields=["boxes", "age"], min_box_visibility=0.25)
    tds.set_epoch(2)
    loader = torch.utils.data.DataLoader(tds, batch_size=5, collate_fn=spt.collate)
    seen = 0
    for images, labels, fields in loader:
        n = images.shape[0]
        idx = np.arange(seen, seen + n, dtype=np.int64)
        _, _, want = ds.read_batch(idx, dtype="uint8", crop=(20, 24), crop_position="random", hflip=0.5, seed=5,
                                   epoch=2, fields=["boxes", "age"], min_box_visibility=0.25)
        b = fields["boxes"]
        assert isinstance(b.boxes, torch.Tensor) and b.boxes.dtype == torch.float32
        np.testing.assert_array_equal(b.boxes.numpy(), want["boxes"].boxes)
        np.testing.assert_array_equal(b.counts.numpy(), want["boxes"].counts)
        np.testing.assert_array_equal(fields["age"].numpy(), want["age"])
        seen += n
    assert seen == len(ds)
    # One sample: its boxes at their own length.
    image, label, f = tds[3]
    assert f["boxes"].boxes.shape[1] == 4 and f["boxes"].boxes.shape[0] == f["boxes"].labels.shape[0]


def test_coco_boxes_detection_set_with_images_without_boxes(source, tmp_path):
    root, _ = source
    images = [dict(id=10 + i, file_name=f"img_{i:04d}.png", width=W, height=H) for i in range(6)]
    annotations, k = [], 0
    for i in range(6):
        for j in range(i % 3):  # images 0 and 3 have none
            annotations.append(dict(id=k, image_id=10 + i, category_id=[5, 9][j % 2],
                                    bbox=[2.0 + i, 3.0 + j, 10.5, 7.25], iscrowd=0))
            k += 1
    coco = dict(images=images, annotations=annotations,
                categories=[dict(id=9, name="dog"), dict(id=5, name="cat")])
    (tmp_path / "coco.json").write_text(json.dumps(coco))
    with open(tmp_path / "list.csv", "w") as f:
        f.write("image,label\n")
        for i in range(6):
            f.write(f"{root}/images/img_{i:04d}.png,scene\n")
    out = tmp_path / "det"
    build(tmp_path, out, "--csv", tmp_path / "list.csv", "--field", f"objects:boxes=coco:{tmp_path / 'coco.json'}")
    ds = shardpack.open(str(out))
    assert ds.field_info[0].names == ["cat", "dog"]  # by category id
    for i in range(6):
        b = ds.fields(i)["objects"]
        want = [[2.0 + i, 3.0 + j, 12.5 + i, 10.25 + j] for j in range(i % 3)]
        np.testing.assert_array_equal(b.boxes, np.array(want, dtype=np.float32).reshape(-1, 4))
        assert b.labels.tolist() == [[0, 1][j % 2] for j in range(i % 3)]
    # A row whose image the JSON does not list is an error naming the line.
    with open(tmp_path / "list.csv", "a") as f:
        f.write(f"{root}/images/img_0007.png,scene\n")
    r = subprocess.run([tool("shardpack"), "build", "--out", str(tmp_path / "det2"), "--csv", str(tmp_path / "list.csv"),
                        "--field", f"objects:boxes=coco:{tmp_path / 'coco.json'}"], capture_output=True, text=True)
    assert r.returncode == 1 and "list.csv:8" in r.stderr and "img_0007.png" in r.stderr


def test_multi_label_tags_with_a_declared_list_and_the_unknown_policy(source, tmp_path):
    root, _ = source
    (tmp_path / "tags.txt").write_text("sky\nwater\nroad\n")
    with open(tmp_path / "list.csv", "w") as f:
        f.write("image,label,labels\n")
        for i, tags in enumerate(["sky|water", "road", "", "water;sky;road", "2|0", "sky,boat"]):
            f.write(f"{root}/images/img_{i:04d}.png,x,\"{tags}\"\n")
    args = ["--csv", tmp_path / "list.csv", "--field", "labels:tags", "--field-names", f"labels={tmp_path / 'tags.txt'}"]
    r = subprocess.run([tool("shardpack"), "build", "--out", str(tmp_path / "bad"), *map(str, args)],
                       capture_output=True, text=True)
    assert r.returncode == 1 and "list.csv:7" in r.stderr and "'boat'" in r.stderr and "--unknown-name ignore" in r.stderr
    log = build(tmp_path, tmp_path / "ml", *args, "--unknown-name", "ignore", "--size", "32x32")
    assert "1 names not in its list were ignored" in log
    ds = shardpack.open(str(tmp_path / "ml"))
    _, _, fields = ds.read_batch(np.arange(6), fields=["labels"])
    assert fields["labels"].tolist() == [[1, 1, 0], [0, 0, 1], [0, 0, 0], [1, 1, 1], [1, 0, 1], [1, 0, 0]]


def test_labels_that_look_like_tags_or_numbers_get_a_warning_naming_the_option(source, tmp_path):
    root, _ = source
    for name, labels, option in [("tags", ["ant;insect", "bee|insect", "cat"], "--field NAME:tags=label"),
                                 ("floats", ["0.75", "1.5", "2.25"], "--field NAME:float=label")]:
        with open(tmp_path / f"{name}.csv", "w") as f:
            f.write("image,label\n")
            for i, label in enumerate(labels):
                f.write(f"{root}/images/img_{i:04d}.png,{label}\n")
        log = build(tmp_path, tmp_path / name, "--csv", tmp_path / f"{name}.csv")
        assert option in log, log
    # Integers with about one row each: a target, not classes.
    with open(tmp_path / "ints.csv", "w") as f:
        f.write("image,label\n")
        for i in range(60):
            f.write(f"{root}/images/img_{i % 12:04d}.png,{1000 + i * 7}\n")
    assert "--field NAME:int=label" in build(tmp_path, tmp_path / "ints", "--csv", tmp_path / "ints.csv")


def test_fields_survive_an_incremental_rebuild_and_a_changed_row_is_redecoded(source, tmp_path):
    root, rows = source
    csv = (root / "fields.csv").read_text()
    (tmp_path / "list.csv").write_text(csv.replace(str("images/"), str(root / "images") + "/"))
    out = tmp_path / "ds"
    build(tmp_path, out, "--csv", tmp_path / "list.csv", *FIELD_OPTIONS, "--json")
    before = shardpack.open(str(out))
    first = [before.fields(i) for i in range(len(before))]
    # Row 5's age changes; its image does not.
    text = (tmp_path / "list.csv").read_text().splitlines()
    cells = text[6].split(",")
    cells[2] = "123456"
    text[6] = ",".join(cells)
    (tmp_path / "list.csv").write_text("\n".join(text) + "\n")
    r = subprocess.run([tool("shardpack"), "build", "--out", str(out), "--csv", str(tmp_path / "list.csv"), *FIELD_OPTIONS,
                        "--json"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert re.search(r"\((\d+) decoded, (\d+) unchanged\)", r.stderr).groups() == ("1", str(len(rows) - 1))
    after = shardpack.open(str(out))
    for i in range(len(after)):
        f = after.fields(i)
        assert f["age"] == (123456 if i == 5 else first[i]["age"])
        np.testing.assert_array_equal(f["boxes"].boxes, first[i]["boxes"].boxes)


def test_fields_survive_a_merge_of_parts(source, tmp_path):
    root, _ = source
    parts = []
    for k in range(2):
        part = tmp_path / f"part{k}"
        build(root, part, "--csv", root / "fields.csv", *FIELD_OPTIONS, "--partition", f"{k}/2")
        parts.append(str(part))
    run(tool("shardpack"), "-q", "merge", "--out", tmp_path / "merged", *parts)
    whole = tmp_path / "whole"
    build(root, whole, "--csv", root / "fields.csv", *FIELD_OPTIONS)
    a, b = shardpack.open(str(tmp_path / "merged")), shardpack.open(str(whole))
    assert len(a) == len(b)
    for i in range(len(a)):
        fa, fb = a.fields(i), b.fields(i)
        assert fa["age"] == fb["age"] and fa["caption"] == fb["caption"]
        assert fa["boxes"].boxes.tobytes() == fb["boxes"].boxes.tobytes()


def test_bad_field_values_name_the_line_and_the_field(source, tmp_path):
    root, _ = source
    (tmp_path / "list.csv").write_text(f"image,label,age\n{root}/images/img_0000.png,a,12\n"
                                       f"{root}/images/img_0001.png,b,1.5\n")
    r = subprocess.run([tool("shardpack"), "build", "--out", str(tmp_path / "o"), "--csv", str(tmp_path / "list.csv"),
                        "--field", "age:int"], capture_output=True, text=True)
    assert r.returncode == 1 and "list.csv:3" in r.stderr and "field 'age'" in r.stderr
    r = subprocess.run([tool("shardpack"), "build", "--out", str(tmp_path / "o"), "--csv", str(tmp_path / "list.csv"),
                        "--field", "age:integer"], capture_output=True, text=True)
    assert r.returncode == 2 and "unknown kind 'integer'" in r.stderr
    r = subprocess.run([tool("shardpack"), "build", "--out", str(tmp_path / "o"), "--csv", str(tmp_path / "list.csv"),
                        "--field", "height:int"], capture_output=True, text=True)
    assert r.returncode == 2 and "no column 'height'" in r.stderr


def test_datasets_without_fields_have_none(built):
    ds = shardpack.open(built["cls"])
    assert ds.field_info == []
    with pytest.raises(shardpack.Error, match="no fields"):
        ds.fields(0)


def test_tf_dataset_gives_ragged_boxes_equal_to_read_batch(packed):
    tf = pytest.importorskip("tensorflow", reason="TensorFlow is not installed (scripts/python-env.sh --tf)")
    import shardpack.tf as sptf
    path, _, _ = packed
    ds = shardpack.open(path)
    train = sptf.dataset(path, batch_size=5, shuffle=False, dtype="uint8", crop=(20, 24), crop_position="random",
                         hflip=0.5, seed=4, fields=["boxes", "kps", "caption"], min_box_visibility=0.2)
    start = 0
    for images, labels, fields in train:
        n = int(images.shape[0])
        _, _, want = ds.read_batch(np.arange(start, start + n), dtype="uint8", crop=(20, 24), crop_position="random",
                                   hflip=0.5, seed=4, epoch=0, fields=["boxes", "kps", "caption"],
                                   min_box_visibility=0.2)
        boxes = fields["boxes"]["boxes"]
        assert isinstance(boxes, tf.RaggedTensor)
        for j in range(n):
            c = int(want["boxes"].counts[j])
            np.testing.assert_array_equal(boxes[j].numpy(), want["boxes"].boxes[j, :c])
            np.testing.assert_array_equal(fields["kps"][j].numpy(), want["kps"].values[j, :int(want["kps"].counts[j])])
            assert fields["caption"][j].numpy().decode() == want["caption"][j]
        start += n
    assert start == len(ds)
