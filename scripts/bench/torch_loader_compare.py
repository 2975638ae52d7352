#!/usr/bin/env python3
"""torch_loader_compare.py DATASET [--reps N] [--step SECONDS] [--batch B] [--threads T]

A quick side-by-side of the ways to feed a PyTorch loop from a shardpack dataset: Loader (C++
threads, prefetching, no worker processes), DataLoader with 2 workers (shardpack.torch.Dataset
with __getitems__) and DataLoader with no workers (the Dataset reading on T C++ threads).
Batches of B, float32 NCHW ImageNet-normalised images and int64 labels, shuffled; each run is
3 epochs; --step sleeps that long per batch (a training step that releases the GIL). The
configurations are interleaved, N runs each; prints the median samples/s and time to the first
batch. The full benchmark is scripts/bench.sh."""
import argparse
import statistics
import time

from torch.utils.data import DataLoader

import shardpack.torch as spt

p = argparse.ArgumentParser()
p.add_argument("dataset")
p.add_argument("--reps", type=int, default=5)
p.add_argument("--step", type=float, default=0.0)
p.add_argument("--batch", type=int, default=64)
p.add_argument("--threads", type=int, default=2)
a = p.parse_args()
label = "index"


def consume(loader):
    t0, n, first = time.perf_counter(), 0, None
    for _ in range(3):
        for images, labels in loader:
            if first is None:
                first = time.perf_counter() - t0
            n += images.shape[0]
            if a.step:
                time.sleep(a.step)
    return n / (time.perf_counter() - t0), first


def loader():
    return consume(spt.Loader(a.dataset, batch_size=a.batch, shuffle=True, threads=a.threads, label=label))


def dataloader(workers):
    tds = spt.Dataset(a.dataset, label=label, threads=None if workers else a.threads)
    return consume(DataLoader(tds, batch_size=a.batch, sampler=spt.Sampler(tds, shuffle=True),
                              collate_fn=spt.collate, num_workers=workers, persistent_workers=workers > 0))


runs = {f"Loader(threads={a.threads})": loader, "DataLoader(num_workers=2)": lambda: dataloader(2),
        f"DataLoader(num_workers=0), Dataset(threads={a.threads})": lambda: dataloader(0)}
results = {name: [] for name in runs}
for _ in range(a.reps):
    for name, run in runs.items():
        results[name].append(run())
for name, r in results.items():
    print(f"{name:50s} {statistics.median(x for x, _ in r):8.0f} samples/s   first batch "
          f"{1000 * statistics.median(f for _, f in r):6.1f} ms   runs: {[round(x) for x, _ in r]}")
