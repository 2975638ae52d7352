#!/usr/bin/python3
"""Baseline: random crops and flips in Python, as a new user writes them on a full-resolution build.

    /usr/bin/python3 python_crop.py --dataset DIR [--crop 512x512] [--procs N] [--seconds S] [--seed N]

For each record of a shardpack dataset, in a seeded random permutation: the whole record is
decoded (its stored bytes from a memory map; codec 1 and each frame of codec 2 through the
zstandard module, which is libzstd; raw records as they are), viewed as NumPy arrays (the image
H x W x C uint8, the index label H x W), then a random HxW window is sliced out of both, flipped
left-right and top-bottom each with probability 0.5, and converted as bench_crop delivers it:
the image to float32 normalised with the ImageNet mean and deviation (NHWC, contiguous), the
label to int64 class ids (contiguous). Index label layout only (a one-hot 1080p label is 8x
larger than its index map; nobody crops those in Python).

Measures 1 process, then N processes (multiprocessing, default: all cores, each a share of the
permutation), each for about --seconds (default 3). Stdout: one JSON line with
samples_per_s_1t and samples_per_s_nt. Needs python3-numpy and python3-zstandard (Debian).
"""
import argparse
import json
import mmap
import multiprocessing
import os
import random
import struct
import sys
import time

import numpy as np
import zstandard

MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)


def align(v, a):
    return (v + a - 1) // a * a


class Dataset:
    """Just enough of formats/shardpack-v1.md to decode whole records (no checks: a baseline)."""

    def __init__(self, folder):
        m = json.load(open(os.path.join(folder, "manifest.json")))
        self.records = []
        self.maps = []
        for s in m["shards"]:
            f = open(os.path.join(folder, s["file"]), "rb")
            b = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
            self.maps.append(b)
            size = len(b)
            index_offset, count = struct.unpack_from("<QQ", b, size - 40)
            sec = 64
            schema = None
            for _ in range(struct.unpack_from("<I", b, 32)[0]):
                stype, _, length = struct.unpack_from("<IIQ", b, sec)
                if stype == 1:
                    schema = bytes(b[sec + 16:sec + 16 + 32])
                sec = align(sec + 16 + length, 8)
            self.channels, self.layout, self.dtype_bytes = schema[1], schema[3], schema[4]
            if schema[0] != 1 or self.layout != 2 or self.dtype_bytes != 1:
                sys.exit("python_crop.py: needs a segmentation dataset with uint8 index labels (--label-layout index)")
            for i in range(count):
                off, stored, decoded, _, codec = struct.unpack_from("<QQQQI", b, index_offset + 40 * i)
                self.records.append((b, off, stored, decoded, codec))
        self.dctx = zstandard.ZstdDecompressor()

    def decode(self, i):
        b, off, stored, decoded, codec = self.records[i]
        data = b[off:off + stored]
        if codec == 1:
            data = self.dctx.decompress(data)
        h, w, _, key_length = struct.unpack_from("<IIiI", data, 0)
        image_offset = align(16 + key_length, 64)
        image_bytes = h * w * self.channels
        label_offset = align(image_offset + image_bytes, 64)
        if codec == 2:
            out = bytearray(decoded)
            rows, frames = struct.unpack_from("<II", data, image_offset)
            sizes = struct.unpack_from(f"<{frames}Q", data, image_offset + 8)
            bands = (h + rows - 1) // rows
            at = image_offset + 8 + 8 * frames
            for f, n in enumerate(sizes):
                start, row_bytes = (image_offset, w * self.channels) if f < bands else (label_offset, w)
                first = (f % bands) * rows
                raw, n = n >> 63, n & ((1 << 63) - 1)
                part = data[at:at + n] if raw else self.dctx.decompress(data[at:at + n])
                out[start + first * row_bytes:start + first * row_bytes + len(part)] = part
                at += n
            data = out
        image = np.frombuffer(data, np.uint8, image_bytes, image_offset).reshape(h, w, self.channels)
        label = np.frombuffer(data, np.uint8, h * w, label_offset).reshape(h, w)
        return image, label


def crop_and_flip(image, label, ch, cw, rng):
    h, w = label.shape
    y, x = rng.randrange(h - ch + 1), rng.randrange(w - cw + 1)
    img, lab = image[y:y + ch, x:x + cw], label[y:y + ch, x:x + cw]
    if rng.random() < 0.5:
        img, lab = img[:, ::-1], lab[:, ::-1]
    if rng.random() < 0.5:
        img, lab = img[::-1], lab[::-1]
    img = np.ascontiguousarray((img.astype(np.float32) / 255.0 - MEAN) / STD)
    lab = np.ascontiguousarray(lab, dtype=np.int64)
    return img, lab


def run(args, share, seconds, seed):
    ds = Dataset(args.dataset)
    ch, cw = args.crop
    rng = random.Random(seed)
    done, start, sink = 0, time.perf_counter(), 0.0
    while True:
        for i in share:
            img, lab = crop_and_flip(*ds.decode(i), ch, cw, rng)
            sink += float(img[0, 0, 0]) + int(lab[0, 0])
            done += 1
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return done, elapsed


def worker(job):
    args, share, seconds, seed = job
    return run(args, share, seconds, seed)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--dataset", required=True)
    p.add_argument("--crop", default="512x512")
    p.add_argument("--procs", type=int, default=os.cpu_count())
    p.add_argument("--seconds", type=float, default=3.0)
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()
    args.crop = tuple(int(v) for v in args.crop.split("x"))
    n = len(Dataset(args.dataset).records)
    perm = list(range(n))
    random.Random(args.seed).shuffle(perm)
    run(args, perm[:max(1, n // 4)], 0.0, args.seed)  # warm-up: page cache, imports
    done, elapsed = run(args, perm, args.seconds, args.seed)
    one = done / elapsed
    shares = [perm[k * n // args.procs:(k + 1) * n // args.procs] for k in range(args.procs)]
    start = time.perf_counter()
    with multiprocessing.Pool(args.procs) as pool:
        results = pool.map(worker, [(args, s, args.seconds, args.seed + k) for k, s in enumerate(shares)])
    total = sum(d for d, _ in results)
    many = total / max(e for _, e in results)
    print(json.dumps({"tool": "python_crop", "records": n, "crop": f"{args.crop[0]}x{args.crop[1]}",
                      "procs": args.procs, "samples_per_s_1t": round(one, 2), "samples_per_s_nt": round(many, 2),
                      "wall_s_nt": round(time.perf_counter() - start, 2)}))


if __name__ == "__main__":
    main()
