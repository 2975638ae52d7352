#!/usr/bin/env python3
"""Fresh outputs against reused ones: what read_batch's allocation of new arrays costs (#19).

    .venv/bin/python scripts/bench/py_alloc_bench.py --build-dir build [--work DIR] [--rounds 7]

Builds (once, in --work) datasets of raw (--compression none) 512x512 segmentation records
from make_sample_data, one-hot and index-labelled (384 records each: more than the CPU's caches
hold), and then, interleaved in one process, round
after round, for batches of 32 random records:

  fresh_pool        read_batch into new arrays (the default: huge-page blocks, recycled)
  fresh_huge_pages  read_batch into new 2 MiB-aligned MADV_HUGEPAGE blocks, not recycled
  fresh_numpy       read_batch into np.empty arrays (NumPy's allocator)
  fresh_plain       read_batch into operator new memory (the allocation before #19)
  fresh_no_checksum fresh_pool from a dataset opened with verify_checksums=False (the reader
                    then copies each record once, as X[b] does; with checksums it also hashes it)
  out               read_batch(out=...) into the same two arrays every time (np.empty_like)
  numpy_index       X[b], Y[b] of the whole dataset held in RAM as NumPy arrays (a .npy preload)

with uint8 NHWC images and labels as stored (one-hot uint8, or index maps as uint8 with
label_dtype="uint8"), so every method moves the same bytes. The methods take turns batch by
batch (the same random batch for each, in a rotating order), and each keeps its previous batch
referenced while the next is read, as in a training loop. Then ds[i] of zstd records, pooled against plain
allocation. Prints one table per case: median samples/s over the rounds, the ratios the issue
sets targets for (fresh / out >= 0.9, fresh / numpy_index >= 1.0) and the minor page faults per
batch (getrusage; the whole process), which do not depend on the machine's load. Takes about two
minutes and ~2.5 GB of memory (the page cache and the in-RAM arrays).
"""
import argparse
import os
import resource
import statistics
import subprocess
import sys
import time

import numpy as np

import shardpack
from shardpack import _shardpack

FRESH = ["pool", "huge_pages", "numpy", "plain"]


def build(tools, work, records):
    """The datasets: `records` records listing make_sample_data's 64 images over and over (the
    records are independent; more records than the CPU's caches hold, so that X[b] reads RAM)."""
    src = os.path.join(work, f"src{min(64, records)}")
    if not os.path.exists(os.path.join(src, "list.csv")):
        subprocess.run([os.path.join(tools, "make_sample_data"), "--out", src, "--count", str(min(64, records)), "--width", "512",
                        "--height", "512", "--palette-masks"], check=True, stdout=subprocess.DEVNULL)
    rows = open(os.path.join(src, "list.csv")).read().splitlines()
    listing = os.path.join(src, f"list{records}.csv")
    with open(listing, "w") as f:
        f.write(rows[0] + "\n")
        for i in range(records):
            f.write(rows[1 + i % (len(rows) - 1)] + "\n")
    paths = {}
    for name, extra in (("raw-onehot", ["--compression", "none"]),
                        ("raw-index", ["--compression", "none", "--label-layout", "index"]),
                        ("zstd-index", ["--label-layout", "index"])):
        out = os.path.join(work, f"{name}-{records}")
        if not os.path.exists(os.path.join(out, "manifest.json")):
            subprocess.run([os.path.join(tools, "shardpack"), "-q", "build", "--csv", listing,
                            "--classes", os.path.join(src, "class_dict.csv"), "--size", "512x512", "--out", out,
                            *extra], check=True)
        paths[name] = out
    return paths


def batch_table(path, label_options, rounds, batches, batch, threads):
    ds = shardpack.open(path)
    n = len(ds)
    options = dict(dtype="uint8", layout="NHWC", threads=threads, **label_options)
    everything = ds.read_batch(range(n), **options)
    x_all, y_all = np.ascontiguousarray(everything[0]), np.ascontiguousarray(everything[1])
    out = (np.empty_like(x_all[:batch]), np.empty_like(y_all[:batch]))
    rng = np.random.default_rng(0)

    def fresh(how):
        def run(b):
            _shardpack._set_allocation(how)
            return ds.read_batch(b, **options)
        return run

    methods = {f"fresh_{how}": fresh(how) for how in FRESH}
    unchecked = shardpack.open(path, verify_checksums=False)
    methods["fresh_no_checksum"] = lambda b: (_shardpack._set_allocation("pool"), unchecked.read_batch(b, **options))[1]
    methods["out"] = lambda b: ds.read_batch(b, out=out, **options)
    methods["numpy_index"] = lambda b: (x_all[b], y_all[b])
    # Interleaved batch by batch (the methods in a rotating order), so that a change in the
    # machine's load reaches every method alike; each method keeps its previous batch alive.
    names = list(methods)
    rates = {m: [] for m in names}
    faults = dict.fromkeys(names, 0)  # minor page faults of the whole process during the calls
    keep = {m: methods[m](rng.integers(0, n, batch)) for m in names}  # warm
    for r in range(rounds):
        seconds = dict.fromkeys(names, 0.0)
        for j in range(batches):
            b = rng.integers(0, n, batch)
            k = (r * batches + j) % len(names)
            for name in names[k:] + names[:k]:
                f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
                t0 = time.perf_counter()
                keep[name] = methods[name](b)
                seconds[name] += time.perf_counter() - t0
                faults[name] += resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0
        for name in names:
            rates[name].append(batch * batches / seconds[name])
    del keep
    faults = {m: f / (rounds * batches) for m, f in faults.items()}
    _shardpack._set_allocation("pool")
    return {m: statistics.median(v) for m, v in rates.items()}, faults, x_all[:batch].nbytes + y_all[:batch].nbytes


def item_table(path, rounds, count):
    ds = shardpack.open(path)
    n = len(ds)
    rates = {how: [] for how in ("pool", "plain")}
    faults = dict.fromkeys(rates, 0)
    for _ in range(rounds):
        for how in rates:
            _shardpack._set_allocation(how)
            keep = ds[0]
            f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            t0 = time.perf_counter()
            for i in range(count):
                keep = ds[i % n]
            rates[how].append(count / (time.perf_counter() - t0))
            faults[how] += resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0
            del keep
    _shardpack._set_allocation("pool")
    return {m: statistics.median(v) for m, v in rates.items()}, {m: f / (rounds * count) for m, f in faults.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build-dir", default="build", help="where shardpack and make_sample_data are")
    ap.add_argument("--work", default="/tmp/shardpack-alloc-bench", help="where the datasets are built (kept)")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--batches", type=int, default=20, help="batches per method per round")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--records", type=int, default=384,
                    help="records per dataset (384: 384 MiB raw-index, 880 MiB raw-onehot, and as much in RAM)")
    ap.add_argument("--threads", type=int, default=0, help="read_batch threads (0: all cores)")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    paths = build(os.path.abspath(a.build_dir), a.work, a.records)
    thp = open("/sys/kernel/mm/transparent_hugepage/enabled").read().strip() \
        if os.path.exists("/sys/kernel/mm/transparent_hugepage/enabled") else "unknown"
    print(f"# {os.cpu_count()} cores, transparent huge pages: {thp}; batch {a.batch} of raw 512x512 records, "
          f"uint8 NHWC, {a.records} records, threads={a.threads}; median of {a.rounds} rounds x {a.batches} batches, interleaved")
    for name, label_options in (("raw-onehot", dict(label="stored")),
                                ("raw-index", dict(label="index", label_dtype="uint8"))):
        try:
            rates, faults, nbytes = batch_table(paths[name], label_options, a.rounds, a.batches, a.batch, a.threads)
        except TypeError as e:  # a version without label_dtype
            print(f"{name}: skipped ({e})")
            continue
        print(f"\n{name} ({nbytes / 2**20:.1f} MiB per batch)")
        print(f"{'method':<18}{'samples/s':>11}{'x out':>8}{'x numpy_index':>15}{'faults/batch':>14}")
        for m, r in rates.items():
            print(f"{m:<18}{r:>11.0f}{r / rates['out']:>8.2f}{r / rates['numpy_index']:>15.2f}{faults[m]:>14.0f}")
    rates, faults = item_table(paths["zstd-index"], a.rounds, 200)
    print("\nds[i] of zstd 512x512 records (index labels)")
    print(f"{'method':<18}{'records/s':>11}{'x plain':>8}{'faults/record':>15}")
    for m, r in rates.items():
        print(f"{m:<18}{r:>11.0f}{r / rates['plain']:>8.2f}{faults[m]:>15.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
