#!/usr/bin/env python3
"""What the blocks order (shardpack.epoch_order(order="blocks")) gives up against the global
permutation, measured on the orders themselves (no I/O; scripts/bench.sh --cold runs it):

- how far a record moves (|position - index| / n) and how far apart two records that are
  neighbours in the dataset land in the epoch (|pos(i) - pos(i + 1)| / n);
- on a dataset stored sorted by class (a CSV listed class by class, built without --shuffle):
  the distinct classes in a batch of 64, and the chance that two records of one batch share a
  class (the global shuffle's is about 1 / classes);
- the same on a dataset written shuffled (shardpack build --shuffle), where the blocks order's
  batches should be as mixed as the global order's.

  order_quality.py [--records 128000] [--classes 1000] [--record-bytes 110000] [--json OUT] [--markdown OUT]

The default shape is ImageNet's training set scaled to 128 records per class; blocks of about
4 MiB of 110 KB records (38 records), windows of 4, 16 (the default) and 64 blocks.
"""
import argparse
import json
import pathlib

import numpy as np

import shardpack

BATCH = 64


def measure(order, labels):
    n = len(order)
    position = np.empty(n, dtype=np.int64)
    position[order] = np.arange(n)
    moved = np.abs(position - np.arange(n)) / n
    apart = np.abs(np.diff(position)) / n
    batches = labels[order[: n // BATCH * BATCH]].reshape(-1, BATCH)
    distinct = np.array([len(np.unique(b)) for b in batches])
    same_pairs = []
    for b in batches:
        counts = np.bincount(b)
        same_pairs.append((counts * (counts - 1)).sum() / (BATCH * (BATCH - 1)))
    return {"moved_median": float(np.median(moved)), "moved_p10": float(np.quantile(moved, 0.1)),
            "neighbours_apart_median": float(np.median(apart)),
            "neighbours_within_a_batch": float((np.abs(np.diff(position)) < BATCH).mean()),
            "distinct_classes_per_batch": float(distinct.mean()), "same_class_pairs": float(np.mean(same_pairs))}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--records", type=int, default=128_000)
    p.add_argument("--classes", type=int, default=1000)
    p.add_argument("--record-bytes", type=int, default=110_000)
    p.add_argument("--windows", type=int, nargs="+", default=[4, 16, 64])
    p.add_argument("--json")
    p.add_argument("--markdown")
    args = p.parse_args()
    n = args.records
    sorted_labels = (np.arange(n) * args.classes // n).astype(np.int64)
    shuffled_labels = sorted_labels[np.random.default_rng(1).permutation(n)]
    block = max(1, round(shardpack.BLOCK_BYTES / args.record_bytes))
    rows = []
    orders = [("global", None, shardpack.epoch_order(n, 0, 0))]
    for w in args.windows:
        orders.append((f"blocks, window {w}", w, shardpack.epoch_order(n, 0, 0, order="blocks", block=block, window=w)))
    for name, w, order in orders:
        rows.append({"order": name, "block": None if w is None else block, "window": w,
                     "sorted": measure(order, sorted_labels), "shuffled": measure(order, shuffled_labels)})
    result = {"records": n, "classes": args.classes, "batch": BATCH, "block": block, "rows": rows}
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(result, indent=1))
    lines = [f"{n} records, {args.classes} classes, batches of {BATCH}, blocks of {block} records "
             f"(~4 MiB of {args.record_bytes // 1000} KB records)", "",
             "| order | records move (median, of n) | dataset neighbours apart (median, of n) | "
             "neighbours in one batch | classes per batch: sorted data | same-class pairs: sorted | "
             "classes per batch: shuffled data | same-class pairs: shuffled |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        s, h = r["sorted"], r["shuffled"]
        lines.append(f"| {r['order']} | {s['moved_median']:.3f} | {s['neighbours_apart_median']:.4f} | "
                     f"{100 * s['neighbours_within_a_batch']:.1f}% | {s['distinct_classes_per_batch']:.1f} | "
                     f"{100 * s['same_class_pairs']:.2f}% | {h['distinct_classes_per_batch']:.1f} | "
                     f"{100 * h['same_class_pairs']:.2f}% |")
    table = "\n".join(lines) + "\n"
    if args.markdown:
        pathlib.Path(args.markdown).write_text(table)
    print(table)


if __name__ == "__main__":
    main()
