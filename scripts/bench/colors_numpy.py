#!/usr/bin/python3
"""The hand-written baseline for `shardpack colors`: every distinct mask color with its pixel and
file counts, by PIL decoding and np.unique, over the masks a list names (column 2).

    colors_numpy.py LIST.csv [--processes N]

Prints the number of masks, distinct colors and seconds; --json prints the counts too."""
import csv
import json
import os
import sys
import time
from multiprocessing import Pool

import numpy as np
from PIL import Image


def count_mask(path):
    rgb = np.asarray(Image.open(path).convert("RGB"), dtype=np.uint32)
    packed = (rgb[..., 0] << 16) | (rgb[..., 1] << 8) | rgb[..., 2]
    values, counts = np.unique(packed, return_counts=True)
    return values, counts


def main():
    args = sys.argv[1:]
    processes = 1
    if "--processes" in args:
        i = args.index("--processes")
        processes = int(args[i + 1])
        del args[i:i + 2]
    as_json = "--json" in args
    args = [a for a in args if a != "--json"]
    list_path = args[0]
    base = os.path.dirname(list_path)
    with open(list_path, newline="") as f:
        rows = list(csv.reader(f))[1:]
    masks = [os.path.join(base, r[1]) for r in rows]
    start = time.perf_counter()
    pixels, files = {}, {}
    if processes > 1:
        with Pool(processes) as pool:
            results = pool.map(count_mask, masks, chunksize=4)
    else:
        results = map(count_mask, masks)
    for values, counts in results:
        for v, c in zip(values.tolist(), counts.tolist()):
            pixels[v] = pixels.get(v, 0) + c
            files[v] = files.get(v, 0) + 1
    seconds = time.perf_counter() - start
    out = {"masks": len(masks), "colors": len(pixels), "seconds": seconds, "masks_per_second": len(masks) / seconds}
    if as_json:
        out["counts"] = {f"{v >> 16},{(v >> 8) & 255},{v & 255}": [pixels[v], files[v]] for v in sorted(pixels)}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
