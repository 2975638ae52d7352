#!/usr/bin/python3
"""The hand-written preprocessing script that shardpack replaces, as a benchmark baseline.

    python_baseline.py --csv LIST [--classes class_dict.csv] --job seg|cls --size 512
                       [--resize none|shorter] --out OUTDIR [--procs N]

This is the code a user writes today: a multiprocessing.Pool over the CSV rows, OpenCV to
decode, NumPy to crop and one-hot encode, one pair of .npy files per sample:

  seg  image and color mask read with cv2.imread (BGR -> RGB), both centre-cropped (or
       padded) to SIZE x SIZE (--resize none, the default for seg), the mask one-hot encoded
       with one np.all(mask == color, axis=-1) per class of class_dict.csv into an
       H x W x C uint8 array. --resize shorter first scales the shorter side to SIZE
       (INTER_AREA for the image, INTER_NEAREST for the mask).
  cls  the shorter side resized to SIZE with cv2.INTER_AREA, centre crop SIZE x SIZE
       (--resize shorter, the default for cls), the class id as a 0-d int64 array. Class ids:
       the integer labels as written, or names numbered in sorted order (as shardpack does
       without --classes), or the order of a --classes file (one name a line; a header line
       "name" or "class" and any columns after the first are ignored).

Writes OUTDIR/NNNNN.image.npy and OUTDIR/NNNNN.label.npy (NNNNN = CSV row, from 0); old
*.image.npy / *.label.npy files there are removed first. The time covers the whole pool run,
pool start-up included, as the user waits for it. Paths in the CSV are relative to its folder.

Stdout: one line of JSON
  {"tool":"python_baseline","job":..,"samples":..,"procs":..,"seconds":..,
   "samples_per_s":..,"bytes_out":..,...}
Logs go to stderr. Exit 0 on success, 1 on a data error, 2 on bad usage.
Run it with Debian's /usr/bin/python3 (python3-opencv, python3-numpy).
"""
import argparse
import csv
import json
import os
import sys
import time
from multiprocessing import Pool

import cv2
import numpy as np

# Set in the parent before the pool forks; the workers inherit them.
SIZE = 512
RESIZE = "none"
COLORS = []  # seg: one (r, g, b) per class, in class_dict.csv order
OUT = "."


def log(*args):
    print("python_baseline:", *args, file=sys.stderr, flush=True)


def read_rgb(path):
    img = cv2.imread(path, cv2.IMREAD_COLOR)
    if img is None:
        raise RuntimeError(f"cannot read {path}")
    return cv2.cvtColor(img, cv2.COLOR_BGR2RGB)


def resize_shorter(img, size, interpolation):
    h, w = img.shape[:2]
    scale = size / min(h, w)
    new_w = size if w <= h else round(w * scale)
    new_h = size if h <= w else round(h * scale)
    return cv2.resize(img, (new_w, new_h), interpolation=interpolation)


def center_crop_or_pad(img, size):
    """Like tf.image.resize_with_crop_or_pad: crop the centre, or pad with zeros around it."""
    h, w = img.shape[:2]
    if h > size:
        top = (h - size) // 2
        img = img[top:top + size]
    if w > size:
        left = (w - size) // 2
        img = img[:, left:left + size]
    h, w = img.shape[:2]
    if h < size or w < size:
        top, left = (size - h) // 2, (size - w) // 2
        pad = [(top, size - h - top), (left, size - w - left)] + [(0, 0)] * (img.ndim - 2)
        img = np.pad(img, pad)
    return img


def process_seg(task):
    i, image_path, mask_path = task
    image = read_rgb(image_path)
    mask = read_rgb(mask_path)
    if RESIZE == "shorter":
        image = resize_shorter(image, SIZE, cv2.INTER_AREA)
        mask = resize_shorter(mask, SIZE, cv2.INTER_NEAREST)
    image = center_crop_or_pad(image, SIZE)
    mask = center_crop_or_pad(mask, SIZE)

    onehot = np.zeros((SIZE, SIZE, len(COLORS)), dtype=np.uint8)
    for c, color in enumerate(COLORS):
        onehot[:, :, c] = np.all(mask == color, axis=-1)

    image_file = os.path.join(OUT, f"{i:05d}.image.npy")
    label_file = os.path.join(OUT, f"{i:05d}.label.npy")
    np.save(image_file, image)
    np.save(label_file, onehot)
    return os.path.getsize(image_file) + os.path.getsize(label_file)


def process_cls(task):
    i, image_path, class_id = task
    image = read_rgb(image_path)
    if RESIZE == "shorter":
        image = resize_shorter(image, SIZE, cv2.INTER_AREA)
    image = center_crop_or_pad(image, SIZE)

    image_file = os.path.join(OUT, f"{i:05d}.image.npy")
    label_file = os.path.join(OUT, f"{i:05d}.label.npy")
    np.save(image_file, image)
    np.save(label_file, np.array(class_id, dtype=np.int64))
    return os.path.getsize(image_file) + os.path.getsize(label_file)


def read_rows(csv_path):
    """(image, label) cells of every row after the header; the image path made absolute."""
    root = os.path.dirname(os.path.abspath(csv_path))
    with open(csv_path, newline="", encoding="utf-8-sig") as f:
        rows = [r for r in csv.reader(f) if r]
    if rows and rows[0][0].strip().lower() in ("image", "path", "file", "image_path"):
        rows = rows[1:]
    return [(os.path.join(root, r[0]), r[1]) for r in rows]


def read_colors(path):
    with open(path, newline="", encoding="utf-8-sig") as f:
        return [(int(r["r"]), int(r["g"]), int(r["b"])) for r in csv.DictReader(f)]


def read_class_names(path):
    with open(path, newline="", encoding="utf-8-sig") as f:
        names = [r[0].strip() for r in csv.reader(f) if r and r[0].strip()]
    if names and names[0].lower() in ("name", "class"):
        names = names[1:]
    return names


def main():
    global SIZE, RESIZE, COLORS, OUT
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--csv", required=True, help="list.csv (image,mask or image,label)")
    p.add_argument("--classes", help="seg: class_dict.csv (name,r,g,b,...); cls: optional names")
    p.add_argument("--job", required=True, choices=["seg", "cls"])
    p.add_argument("--size", type=int, required=True, help="output is SIZE x SIZE")
    p.add_argument("--resize", choices=["none", "shorter"],
                   help="default: none for seg, shorter for cls")
    p.add_argument("--out", required=True, help="output folder for the .npy files")
    p.add_argument("--procs", type=int, default=os.cpu_count(), help="pool size (all cores)")
    args = p.parse_args()
    if args.size < 1:
        p.error("--size must be positive")
    if args.procs < 1:
        p.error("--procs must be positive")
    if args.job == "seg" and not args.classes:
        p.error("--job seg needs --classes class_dict.csv")
    if not os.path.isfile(args.csv):
        p.error(f"--csv {args.csv}: no such file")
    if args.classes and not os.path.isfile(args.classes):
        p.error(f"--classes {args.classes}: no such file")

    SIZE = args.size
    RESIZE = args.resize or ("none" if args.job == "seg" else "shorter")
    OUT = args.out
    rows = read_rows(args.csv)
    if not rows:
        log(f"{args.csv}: no rows")
        return 1

    if args.job == "seg":
        COLORS = read_colors(args.classes)
        root = os.path.dirname(os.path.abspath(args.csv))
        tasks = [(i, image, os.path.join(root, mask)) for i, (image, mask) in enumerate(rows)]
        worker = process_seg
    else:
        labels = [label.strip() for _, label in rows]
        if args.classes:
            ids = {name: i for i, name in enumerate(read_class_names(args.classes))}
        elif all(label.isdigit() for label in labels):
            ids = {label: int(label) for label in labels}
        else:
            ids = {name: i for i, name in enumerate(sorted(set(labels)))}
        unknown = sorted(set(labels) - ids.keys())
        if unknown:
            log(f"labels not in the class list: {unknown[:5]}")
            return 1
        tasks = [(i, image, ids[label]) for i, ((image, _), label) in enumerate(zip(rows, labels))]
        worker = process_cls

    os.makedirs(OUT, exist_ok=True)
    for name in os.listdir(OUT):
        if name.endswith((".image.npy", ".label.npy")):
            os.remove(os.path.join(OUT, name))

    log(f"{len(tasks)} {args.job} rows, {args.procs} processes, {SIZE}x{SIZE}, resize {RESIZE}")
    start = time.perf_counter()
    try:
        with Pool(args.procs) as pool:
            sizes = pool.map(worker, tasks)
    except RuntimeError as e:
        log(e)
        return 1
    seconds = time.perf_counter() - start

    print(json.dumps({
        "tool": "python_baseline",
        "job": args.job,
        "samples": len(sizes),
        "procs": args.procs,
        "seconds": round(seconds, 4),
        "samples_per_s": round(len(sizes) / seconds, 2),
        "bytes_out": sum(sizes),
        "size": SIZE,
        "resize": RESIZE,
        "opencv": cv2.__version__,
        "numpy": np.__version__,
    }), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
