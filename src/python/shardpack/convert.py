"""Converters: datasets in the forms users already have, packed by shardpack.write without a
copy on disk.

    python -m shardpack.convert webdataset SHARD.tar [SHARD.tar ...] --classes names.txt --out DIR [build options]
    python -m shardpack.convert coco instances.json --images DIR [--boxes-field NAME | --no-boxes] --out DIR [build options]
    python -m shardpack.convert hf SAVED_FOLDER [--split train] --out DIR [build options]
    python -m shardpack.convert tfrecord FILE.tfrecord [...] --num-classes 1000 --out DIR [build options]

Each source streams its samples (a tar member, an image file, a row or a record at a time) and
hands images over as the encoded PNG/JPEG bytes it holds, which the build decodes. What a source
holds that shardpack does not store (other tar members, other columns or features) is
counted and named at the end ("left out: ..."), and in Source.left_out.

The libraries: COCO needs pycocotools (pip install shardpack[coco]), Hugging Face folders need
datasets (shardpack[hf]); WebDataset tars and TFRecords are read with the standard library.
"""
from __future__ import annotations

import argparse
import collections
import gzip
import io
import json
import os
import struct
import sys
import tarfile
from typing import Any, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np

from ._writer import _FIELD_NAME_BREAKS, write

__all__ = ["Source", "webdataset", "coco", "hf", "tfrecord", "convert", "main"]

PathLike = Union[str, "os.PathLike[str]"]
_IMAGE_EXTENSIONS = ("jpg", "jpeg", "png")


class Source:
    """A converter's output: what shardpack.write takes (task, classes, samples), and a count of
    what the source held that the samples leave out (filled as the samples are read)."""

    def __init__(self, task: str, classes: Sequence[Any], samples: Iterable[Any],
                 fields: Optional[Dict[str, Any]] = None):
        self.task = task
        self.classes = list(classes)
        self.samples = samples
        self.fields = fields  # shardpack.write's fields= (each sample's values under "fields")
        self.left_out: "collections.Counter[str]" = collections.Counter()

    def left_out_text(self) -> str:
        return "; ".join(f"{n} x {what}" for what, n in sorted(self.left_out.items())) or "nothing"


def _names_file(path: PathLike) -> List[str]:
    with open(path, encoding="utf-8") as f:
        names = [line.strip() for line in f if line.strip()]
    if not names:
        raise ValueError(f"{os.fspath(path)}: no class names")
    return names


def _class_names(classes: Optional[PathLike], num_classes: Optional[int], what: str) -> List[str]:
    if classes is not None:
        return _names_file(classes)
    if num_classes is not None:
        if num_classes < 1:
            raise ValueError(f"{what}: num_classes must be at least 1")
        return [str(i) for i in range(num_classes)]
    raise ValueError(f"{what}: give the class names (a file, one per line) or their number: the labels are read as "
                     "they stream, so the table must be known before the first sample")


# ---------------------------------------------------------------------------------------------
# WebDataset: tar files whose members are grouped into samples by key (the path up to the first
# dot of the file name); a sample's image is its .jpg/.jpeg/.png, its label its .cls (a class
# id or name as text) or a field of its .json.

def webdataset(tars: Sequence[PathLike], *, classes: Optional[PathLike] = None, num_classes: Optional[int] = None,
               json_field: str = "label") -> Source:
    names = _class_names(classes, num_classes, "webdataset")
    src = Source("cls", names, ())
    src.samples = _webdataset_samples(list(tars), names, json_field, src.left_out)
    return src


def _label_value(value: Any, names: List[str], where: str) -> Union[int, str]:
    if isinstance(value, (bytes, bytearray)):
        value = value.decode("utf-8").strip()
    if isinstance(value, str):
        value = value.strip()
        text: str = value
        return int(text) if text.lstrip("-").isdigit() else text
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return int(value)
    raise ValueError(f"{where}: the label {value!r} is neither a class id nor a name")


def _webdataset_samples(tars: List[PathLike], names: List[str], json_field: str,
                        left_out: "collections.Counter[str]") -> Iterator[Dict[str, Any]]:
    def finish(key: str, members: Dict[str, bytes], where: str) -> Optional[Dict[str, Any]]:
        image_ext = next((e for e in _IMAGE_EXTENSIONS if e in members), None)
        label: Any = None
        if "cls" in members:
            label = _label_value(members.pop("cls"), names, where)
        elif "json" in members:
            meta = json.loads(members.pop("json"))
            if not isinstance(meta, dict) or json_field not in meta:
                left_out["samples whose .json has no '" + json_field + "' field"] += 1
                return None
            label = _label_value(meta[json_field], names, where)
            left_out.update(f".json field '{k}'" for k in meta if k != json_field)
        if image_ext is None or label is None:
            left_out["samples without " + ("an image (.jpg/.jpeg/.png)" if image_ext is None else "a .cls or .json label")] += 1
            return None
        image = members.pop(image_ext)
        left_out.update(f".{e} member" for e in members)
        return {"key": key, "image": image, "label": label}

    for tar_path in tars:
        path = os.fspath(tar_path)
        key: Optional[str] = None
        members: Dict[str, bytes] = {}
        with tarfile.open(path, mode="r|*") as tar:  # a stream: members in order, none kept
            for member in tar:
                if not member.isfile():
                    continue
                base = os.path.basename(member.name)
                if "." not in base:
                    left_out["tar members without an extension"] += 1
                    continue
                dot = base.index(".")
                member_key = os.path.join(os.path.dirname(member.name), base[:dot])
                ext = base[dot + 1:].lower()
                if member_key != key:
                    if key is not None:
                        sample = finish(key, members, f"{path}: {key}")
                        if sample:
                            yield sample
                    key, members = member_key, {}
                f = tar.extractfile(member)
                members[ext] = f.read() if f else b""
        if key is not None:
            sample = finish(key, members, f"{path}: {key}")
            if sample:
                yield sample


# ---------------------------------------------------------------------------------------------
# COCO: an instances json and its images folder. Each image's annotations (polygons or RLE) are
# painted in file order (a later one wins where they overlap) into an index mask of category
# ids, 0 where none lies; the classes are "background" (0) and the categories by id. Each
# image's bboxes [x, y, w, h] go, unless boxes=None, into a boxes field as (x, y, x + w, y + h)
# in source pixels, as `shardpack build --field NAME:boxes=coco:FILE` reads them: the build
# carries them through its geometry. The box classes are the categories by id (no background).

def coco(annotations: PathLike, *, images: PathLike, boxes: Optional[str] = "boxes") -> Source:
    """boxes: the name of the boxes field, or None to leave the bboxes out (counted)."""
    try:
        from pycocotools import mask as mask_utils  # type: ignore[import-untyped,import-not-found,unused-ignore]
    except ImportError as e:
        raise ImportError("the COCO converter needs pycocotools: pip install 'shardpack[coco]'") from e
    with open(annotations, encoding="utf-8") as f:
        doc = json.load(f)
    categories = sorted(doc.get("categories", []), key=lambda c: c["id"])
    if any(c["id"] == 0 for c in categories):
        raise ValueError(f"{os.fspath(annotations)}: a category has id 0, which the masks keep for background")
    classes = [("background", 0)] + [(str(c["name"]), int(c["id"])) for c in categories]
    by_image: Dict[Any, List[Dict[str, Any]]] = collections.defaultdict(list)
    for a in doc.get("annotations", []):
        by_image[a["image_id"]].append(a)
    src = Source("seg", classes, ())
    box_of: Optional[Dict[int, str]] = None  # category id -> its box class name
    if boxes is not None:
        if not isinstance(boxes, str) or not boxes:
            raise ValueError(f"coco: boxes is a field name or None, not {boxes!r}")
        if not categories:
            raise ValueError(f"{os.fspath(annotations)}: no categories, so no box classes (boxes=None leaves boxes out)")
        # A field's names cannot hold a cell's separators (COCO has "traffic light"): '_' for them.
        box_of = {int(c["id"]): "".join("_" if ch in _FIELD_NAME_BREAKS else ch for ch in str(c["name"]).strip()) or
                  str(c["id"]) for c in categories}
        for c in categories:
            if box_of[int(c["id"])] != str(c["name"]):
                src.left_out[f"box class name {c['name']!r} written as {box_of[int(c['id'])]!r}"] += 1
        if len(set(box_of.values())) != len(box_of):
            raise ValueError(f"{os.fspath(annotations)}: two categories have the same name (as box classes: "
                             f"{sorted(box_of.values())})")
        src.fields = {boxes: ("boxes", list(box_of.values()))}
    src.samples = _coco_samples(doc.get("images", []), by_image, os.fspath(images), mask_utils, src.left_out,
                                boxes, box_of, os.fspath(annotations))
    src.left_out.update({k: 1 for k in ("info", "licenses") if k in doc})
    return src


def _coco_samples(images: List[Dict[str, Any]], by_image: Dict[Any, List[Dict[str, Any]]], folder: str, mask_utils: Any,
                  left_out: "collections.Counter[str]", field: Optional[str], box_of: Optional[Dict[int, str]],
                  where: str) -> Iterator[Dict[str, Any]]:
    for im in images:
        h, w = int(im["height"]), int(im["width"])
        mask = np.zeros((h, w), np.uint16 if any(a["category_id"] > 255 for a in by_image.get(im["id"], [])) else np.uint8)
        image_boxes: List[Tuple[float, float, float, float, str]] = []
        for a in by_image.get(im["id"], []):
            if box_of is None:
                if "bbox" in a:
                    left_out["annotation boxes (bbox)"] += 1
            elif "bbox" not in a:
                left_out["annotations without a bbox"] += 1
            else:
                bb = a["bbox"]
                if len(bb) != 4:
                    raise ValueError(f"{where}: annotation {a.get('id')}: its bbox is not [x, y, width, height]")
                if a["category_id"] not in box_of:
                    raise ValueError(f"{where}: annotation {a.get('id')}: category_id {a['category_id']} is not in "
                                     "\"categories\"")
                x, y = float(bb[0]), float(bb[1])
                image_boxes.append((x, y, x + float(bb[2]), y + float(bb[3]), box_of[a["category_id"]]))
            seg = a.get("segmentation")
            if not seg:
                left_out["annotations without a segmentation (not in the masks" +
                         ("; their boxes are packed)" if box_of is not None else ")")] += 1
                continue
            if isinstance(seg, list):  # polygons
                rle = mask_utils.merge(mask_utils.frPyObjects(seg, h, w))
            elif isinstance(seg.get("counts"), list):  # uncompressed RLE
                rle = mask_utils.frPyObjects(seg, h, w)
            else:
                rle = seg
            mask[mask_utils.decode(rle).astype(bool)] = a["category_id"]
            if a.get("iscrowd"):
                left_out["crowd annotations painted as their category"] += 1
            if "keypoints" in a:
                left_out["annotation keypoints"] += 1
        with open(os.path.join(folder, im["file_name"]), "rb") as f:
            image = f.read()
        sample: Dict[str, Any] = {"key": im["file_name"], "image": image, "label": mask}
        if field is not None:
            sample["fields"] = {field: image_boxes}
        yield sample


# ---------------------------------------------------------------------------------------------
# Hugging Face datasets: a folder saved by Dataset.save_to_disk (or a DatasetDict's, with a
# split), with an Image column and a ClassLabel column; the images as stored (encoded bytes).

def hf(folder: PathLike, *, split: Optional[str] = None, image_column: Optional[str] = None,
       label_column: Optional[str] = None) -> Source:
    try:
        import datasets  # type: ignore[import-untyped,import-not-found,unused-ignore]
    except ImportError as e:
        raise ImportError("the Hugging Face converter needs datasets: pip install 'shardpack[hf]'") from e
    ds = datasets.load_from_disk(os.fspath(folder))
    if isinstance(ds, datasets.DatasetDict):
        if split is None:
            raise ValueError(f"{os.fspath(folder)} holds the splits {sorted(ds)}: give one (split=...)")
        ds = ds[split]
    features = ds.features
    if image_column is None:
        image_column = next((k for k, f in features.items() if isinstance(f, datasets.Image)), None)
    if label_column is None:
        label_column = next((k for k, f in features.items() if isinstance(f, datasets.ClassLabel)), None)
    if image_column is None or not isinstance(features.get(image_column), datasets.Image):
        raise ValueError(f"{os.fspath(folder)}: no Image column (columns: {list(features)})")
    if label_column is None or not isinstance(features.get(label_column), datasets.ClassLabel):
        raise ValueError(f"{os.fspath(folder)}: no ClassLabel column (columns: {list(features)})")
    names = list(features[label_column].names)
    ds = ds.cast_column(image_column, datasets.Image(decode=False))  # the stored bytes, not PIL images
    others = [k for k in features if k not in (image_column, label_column)]
    src = Source("cls", names, ())
    src.samples = _hf_samples(ds.select_columns([image_column, label_column]), image_column, label_column, src.left_out,
                              others)
    return src


def _hf_samples(ds: Any, image_column: str, label_column: str, left_out: "collections.Counter[str]",
                others: List[str]) -> Iterator[Dict[str, Any]]:
    for i, row in enumerate(ds):  # an Arrow table, read in batches: memory stays flat
        left_out.update(f"column '{k}'" for k in others)
        image = row[image_column]
        data = image.get("bytes")
        if data is None:
            with open(image["path"], "rb") as f:
                data = f.read()
        yield {"key": image.get("path") or str(i), "image": data, "label": int(row[label_column])}


# ---------------------------------------------------------------------------------------------
# TFRecord files of tf.train.Example protos (read here: no TensorFlow needed): the image's
# encoded bytes under image_key, the label (an int64 id or a bytes name) under label_key.
# GZIP-compressed files are recognised by their first bytes.

def tfrecord(files: Sequence[PathLike], *, classes: Optional[PathLike] = None, num_classes: Optional[int] = None,
             image_key: str = "image/encoded", label_key: str = "image/class/label", key_key: Optional[str] = None) -> Source:
    names = _class_names(classes, num_classes, "tfrecord")
    src = Source("cls", names, ())
    src.samples = _tfrecord_samples(list(files), names, image_key, label_key, key_key, src.left_out)
    return src


def _varint(buf: bytes, pos: int) -> Tuple[int, int]:
    shift = value = 0
    while True:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7


def _fields(buf: bytes) -> Iterator[Tuple[int, int, Any]]:
    """The protobuf wire format: (field number, wire type, value) of a message."""
    pos = 0
    while pos < len(buf):
        tag, pos = _varint(buf, pos)
        field, wire = tag >> 3, tag & 7
        value: Any
        if wire == 0:
            value, pos = _varint(buf, pos)
        elif wire == 2:
            n, pos = _varint(buf, pos)
            value, pos = buf[pos:pos + n], pos + n
        elif wire == 1:
            value, pos = buf[pos:pos + 8], pos + 8
        elif wire == 5:
            value, pos = buf[pos:pos + 4], pos + 4
        else:
            raise ValueError(f"protobuf wire type {wire} is not in a tf.train.Example")
        yield field, wire, value


def parse_example(record: bytes) -> Dict[str, List[Any]]:
    """A serialized tf.train.Example: feature name -> its values (bytes, int or float)."""
    out: Dict[str, List[Any]] = {}
    for field, _, features in _fields(record):
        if field != 1:  # Example.features
            continue
        for f2, _, entry in _fields(features):  # Features.feature: map<string, Feature> entries
            if f2 != 1:
                continue
            name = ""
            values: List[Any] = []
            for f3, _, v in _fields(entry):
                if f3 == 1:
                    name = v.decode("utf-8")
                elif f3 == 2:  # Feature: oneof bytes_list (1), float_list (2), int64_list (3)
                    for kind, _, lst in _fields(v):
                        for f4, wire, item in _fields(lst):
                            if f4 != 1:
                                continue
                            if kind == 1:
                                values.append(bytes(item))
                            elif kind == 3:
                                if wire == 2:  # packed
                                    p = 0
                                    while p < len(item):
                                        x, p = _varint(item, p)
                                        values.append(x - (1 << 64) if x >= 1 << 63 else x)
                                else:
                                    values.append(item - (1 << 64) if item >= 1 << 63 else item)
                            elif kind == 2:
                                values += list(struct.unpack(f"<{len(item) // 4}f", item)) if wire == 2 else \
                                    [struct.unpack("<f", item)[0]]
            out[name] = values
    return out


def tfrecords(path: PathLike) -> Iterator[bytes]:
    """The records of a TFRecord file (uncompressed or GZIP), one at a time. The CRCs are not
    checked (the build checks every image it decodes)."""
    p = os.fspath(path)
    with open(p, "rb") as raw:
        gz = raw.read(2) == b"\x1f\x8b"
    with (gzip.open(p, "rb") if gz else open(p, "rb")) as f:
        while True:
            head = f.read(12)
            if not head:
                return
            if len(head) != 12:
                raise ValueError(f"{p}: a truncated record header")
            (n,) = struct.unpack("<Q", head[:8])
            data = f.read(n)
            if len(data) != n or len(f.read(4)) != 4:
                raise ValueError(f"{p}: a truncated record")
            yield data


def _tfrecord_samples(files: List[PathLike], names: List[str], image_key: str, label_key: str, key_key: Optional[str],
                      left_out: "collections.Counter[str]") -> Iterator[Dict[str, Any]]:
    for path in files:
        for i, record in enumerate(tfrecords(path)):
            ex = parse_example(record)
            where = f"{os.fspath(path)}: record {i}"
            if image_key not in ex or label_key not in ex:
                left_out[f"records without '{image_key}' or '{label_key}'"] += 1
                continue
            left_out.update(f"feature '{k}'" for k in ex if k not in (image_key, label_key, key_key))
            key = ex[key_key][0].decode("utf-8") if key_key and ex.get(key_key) else f"{os.path.basename(os.fspath(path))}:{i}"
            label = ex[label_key][0]
            yield {"key": key, "image": ex[image_key][0], "label": _label_value(label, names, where)}


# ---------------------------------------------------------------------------------------------

def convert(source: Source, out: PathLike, **options: Any) -> Dict[str, Any]:
    """shardpack.write of a converter's samples; then logs what the source held that the dataset
    leaves out. Returns the build's report, with "left_out" added."""
    if source.fields:
        options = dict(options, fields=source.fields)
    report = write(out, source.samples, task=source.task, classes=source.classes, **options)  # type: ignore[arg-type]
    report["left_out"] = dict(source.left_out)
    if not options.get("quiet"):
        sys.stderr.write(f"left out: {source.left_out_text()}\n")
    return report


def _size(text: str) -> Tuple[int, int]:
    w, _, h = text.lower().partition("x")
    try:
        return int(w), int(h)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected WxH, e.g. 224x224, not {text!r}") from None


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m shardpack.convert", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    kinds = p.add_subparsers(dest="kind", required=True)
    wds = kinds.add_parser("webdataset", help="WebDataset tar files (image + .cls or .json label)")
    wds.add_argument("tars", nargs="+")
    wds.add_argument("--json-field", default="label", help="the label's field in a sample's .json (default: label)")
    cc = kinds.add_parser("coco", help="a COCO instances json (polygons/RLE -> index masks of category ids)")
    cc.add_argument("annotations")
    cc.add_argument("--images", required=True, help="the folder of the json's file_name entries")
    cc_boxes = cc.add_mutually_exclusive_group()
    cc_boxes.add_argument("--boxes-field", default="boxes",
                          help="the boxes field for each image's bboxes, in the build's geometry (default: boxes)")
    cc_boxes.add_argument("--no-boxes", action="store_true", help="leave the bboxes out (counted)")
    hh = kinds.add_parser("hf", help="a Hugging Face datasets folder (save_to_disk) with Image and ClassLabel columns")
    hh.add_argument("folder")
    hh.add_argument("--split")
    hh.add_argument("--image-column")
    hh.add_argument("--label-column")
    tf = kinds.add_parser("tfrecord", help="TFRecord files of tf.train.Example (encoded image bytes + label)")
    tf.add_argument("files", nargs="+")
    tf.add_argument("--image-key", default="image/encoded")
    tf.add_argument("--label-key", default="image/class/label")
    tf.add_argument("--key-key", help="a bytes feature naming each record (e.g. image/filename)")
    for sub in (wds, tf):
        sub.add_argument("--classes", help="the class names, one per line (a label's id is its line)")
        sub.add_argument("--num-classes", type=int, help="instead of --classes: classes named 0..N-1")
    for sub in (wds, cc, hh, tf):
        sub.add_argument("--out", required=True, help="the dataset folder (shardpack build --out)")
        sub.add_argument("--size", type=_size)
        for opt in ("resize", "crop", "filter", "color", "compression", "shard-size", "on-error", "memory-limit",
                    "label-layout", "report"):
            sub.add_argument("--" + opt)
        for opt in ("level", "threads", "max-errors"):
            sub.add_argument("--" + opt, type=int)
        sub.add_argument("--force", action="store_true")
        sub.add_argument("-q", "--quiet", action="store_true")
    a = p.parse_args(argv)
    options = {k: v for k, v in vars(a).items()
               if k in ("size", "resize", "crop", "filter", "color", "compression", "shard_size", "on_error", "memory_limit",
                        "label_layout", "report", "level", "threads", "max_errors") and v is not None}
    options.update(force=a.force, quiet=a.quiet)
    from ._shardpack import ArgumentTypeError, ArgumentValueError, Error
    try:  # the source's arguments: usage (exit 2)
        if a.kind == "webdataset":
            src = webdataset(a.tars, classes=a.classes, num_classes=a.num_classes, json_field=a.json_field)
        elif a.kind == "coco":
            src = coco(a.annotations, images=a.images, boxes=None if a.no_boxes else a.boxes_field)
        elif a.kind == "hf":
            src = hf(a.folder, split=a.split, image_column=a.image_column, label_column=a.label_column)
        else:
            src = tfrecord(a.files, classes=a.classes, num_classes=a.num_classes, image_key=a.image_key,
                           label_key=a.label_key, key_key=a.key_key)
    except (ValueError, TypeError) as e:
        sys.stderr.write(f"error: {e}\n")
        return 2
    except (OSError, ImportError) as e:
        sys.stderr.write(f"error: {e}\n")
        return 1
    try:  # the build: bad options (exit 2), bad data or I/O (exit 1)
        convert(src, a.out, **options)
    except (ArgumentValueError, ArgumentTypeError) as e:
        sys.stderr.write(f"error: {e}\n")
        return 2
    except (Error, OSError, ValueError, tarfile.TarError) as e:
        sys.stderr.write(f"error: {e}\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
