#!/usr/bin/python3
"""Read back the .npy pairs that python_baseline.py wrote, the way a training loop would.

    npy_read.py --dir OUTDIR [--seconds S] [--seed N]

The usual "fix" for slow preprocessing: decode once to .npy, then np.load each sample. One
process reads NNNNN.image.npy and NNNNN.label.npy with np.load in a random order (a new
seeded permutation each epoch) until at least S seconds have passed (default 3) and at least
one whole epoch was read. Every file is read once before the clock starts, so the files are
warm in the page cache: this measures np.load itself, not the disk.

Stdout: one line of JSON
  {"tool":"npy_read","samples":..,"seconds":..,"samples_per_s":..,"gb_per_s":..,...}
"samples" counts samples read (pairs, over all epochs); gb_per_s is 1e9 bytes of returned
arrays (image.nbytes + label.nbytes) a second. Logs go to stderr; exit 2 on bad usage.
"""
import argparse
import json
import os
import sys
import time

import numpy as np


def log(*args):
    print("npy_read:", *args, file=sys.stderr, flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--dir", required=True, help="folder of NNNNN.image.npy / NNNNN.label.npy")
    p.add_argument("--seconds", type=float, default=3.0, help="read for at least this long (3)")
    p.add_argument("--seed", type=int, default=0, help="seed of the read order (0)")
    args = p.parse_args()
    if not os.path.isdir(args.dir):
        p.error(f"--dir {args.dir}: no such folder")
    if args.seconds < 0:
        p.error("--seconds must not be negative")

    pairs = []
    for name in sorted(os.listdir(args.dir)):
        if name.endswith(".image.npy"):
            image = os.path.join(args.dir, name)
            label = image[:-len(".image.npy")] + ".label.npy"
            if not os.path.isfile(label):
                log(f"{label} missing")
                return 1
            pairs.append((image, label))
    if not pairs:
        log(f"no *.image.npy in {args.dir}")
        p.exit(2)

    # Warm the page cache: read every byte once.
    file_bytes = 0
    for image, label in pairs:
        for path in (image, label):
            with open(path, "rb") as f:
                file_bytes += len(f.read())
    log(f"{len(pairs)} pairs, {file_bytes / 1e6:.1f} MB of files, warm; reading >= {args.seconds} s")

    rng = np.random.default_rng(args.seed)
    samples = 0
    nbytes = 0
    epochs = 0
    start = time.perf_counter()
    elapsed = 0.0
    done = False
    while not done:
        for i in rng.permutation(len(pairs)):
            image_path, label_path = pairs[i]
            image = np.load(image_path)
            label = np.load(label_path)
            nbytes += image.nbytes + label.nbytes
            samples += 1
            elapsed = time.perf_counter() - start
            if epochs >= 1 and elapsed >= args.seconds:
                done = True
                break
        else:
            epochs += 1
            done = elapsed >= args.seconds

    print(json.dumps({
        "tool": "npy_read",
        "samples": samples,
        "seconds": round(elapsed, 4),
        "samples_per_s": round(samples / elapsed, 2),
        "gb_per_s": round(nbytes / elapsed / 1e9, 3),
        "dataset_samples": len(pairs),
        "epochs": round(samples / len(pairs), 2),
        "numpy": np.__version__,
    }), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
