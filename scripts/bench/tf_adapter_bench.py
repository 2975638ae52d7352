#!/usr/bin/env python3
"""tf_adapter_bench.py --dataset DIR [--batch B] [--rounds N] [--epochs E] [--threads T] [--label L]
   [--dtype D] [--step SECONDS] [--name NAME]

The tf.data adapter (shardpack.tf.dataset) against a bare read_batch loop over the same batches,
side by side in one process (issue #21 item 2: the adapter's batches should cost no more than a
read_batch; target at least 0.8x). Every way reads E epochs of the same shuffled order
(shardpack.epoch_order, seed 0), channels last; the ways are interleaved, N rounds each, and the
median samples/s of each is reported with its ratio to the bare read_batch:

  read_batch        ds.read_batch(order[b]) into fresh arrays (what a user's own loop does)
  read_batch_out    ds.read_batch(order[b], out=(images, labels)) into two reused arrays
  tf_dataset        for images, labels in shardpack.tf.dataset(ds, B, ...): one pass per epoch
                    (prefetch=2, the default)
  tf_dataset_noprefetch   the same with prefetch=0
  tf_from_generator the adapter before #21: tf.data.Dataset.from_generator over read_batch,
                    prefetch(2) (kept here to show what the change gives)

Besides samples/s (wall time, noisy on a shared machine) each way's CPU time (user + system, every
thread of the process: TensorFlow's, the C++ reader's) per 1,000 samples is reported: the cost of
a batch, steadier than its wall time when other jobs share the cores.

Each tf.data dataset is made once and iterated for every round, as a training run iterates one
dataset epoch after epoch.
--step sleeps that long per batch in every loop (a training step that releases the GIL, as a
TensorFlow step does): prefetching overlaps the reading with it.
Prints one line of JSON: {"tool":"tf_adapter_bench", ..., "rates": {way: [samples/s per round]},
"median": {...}, "ratio_to_read_batch": {...}}. Takes about rounds x 5 x epochs x (one epoch).
Run it in the TensorFlow venv: .venv-tf/bin/python (scripts/python-env.sh --tf)."""
import argparse
import json
import os
import resource
import statistics
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import shardpack  # noqa: E402
import shardpack.tf  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[1], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--dataset", required=True)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--threads", type=int, default=0, help="read_batch threads (0: all cores)")
    p.add_argument("--label", default="index", choices=("onehot", "index", "stored"))
    p.add_argument("--dtype", default="float32", choices=("float32", "uint8"))
    p.add_argument("--step", type=float, default=0.0)
    p.add_argument("--name", default="")
    a = p.parse_args()

    ds = shardpack.open(a.dataset)
    n = len(ds)
    options = dict(layout="NHWC", label=a.label, dtype=a.dtype, normalize="imagenet" if a.dtype == "float32" else None)
    batches = -(-n // a.batch)

    passes = {}

    def orders(way):
        """The next E epochs of `way`: every way counts its own passes from epoch 0, as each
        tf.data dataset does, so all of them read the same batches in the same round."""
        for _ in range(a.epochs):
            e = passes[way] = passes.get(way, -1) + 1
            order = shardpack.epoch_order(n, 0, e)
            yield e, [order[b * a.batch:(b + 1) * a.batch] for b in range(batches)]

    def cpu_seconds():
        r = resource.getrusage(resource.RUSAGE_SELF)
        return r.ru_utime + r.ru_stime

    def timed(loop):
        """(samples/s, CPU seconds per 1,000 samples)."""
        c0, t0 = cpu_seconds(), time.perf_counter()
        samples = loop()
        return samples / (time.perf_counter() - t0), 1000 * (cpu_seconds() - c0) / samples

    def read_batch():
        samples = 0
        for e, idx in orders("fresh"):
            for i in idx:
                images, labels = ds.read_batch(i, threads=a.threads, epoch=e, **options)
                samples += images.shape[0]
                if a.step:
                    time.sleep(a.step)
        return samples

    (ishape, idt), (lshape, ldt) = ds.batch_spec(a.batch, dtype=a.dtype, layout="NHWC", label=a.label)
    full = (np.empty(ishape, idt), np.empty(lshape, ldt))

    def read_batch_out():
        samples = 0
        for e, idx in orders("out"):
            for i in idx:
                out = full if len(i) == a.batch else (full[0][:len(i)], full[1][:len(i)])
                images, labels = ds.read_batch(i, out=out, threads=a.threads, epoch=e, **options)
                samples += images.shape[0]
                if a.step:
                    time.sleep(a.step)
        return samples

    def consume(data):
        samples = 0
        for _ in range(a.epochs):
            for images, labels in data:
                samples += int(images.shape[0])
                if a.step:
                    time.sleep(a.step)
        return samples

    def tf_dataset(prefetch):
        data = shardpack.tf.dataset(ds, a.batch, threads=a.threads, prefetch=prefetch, **options)
        return lambda: consume(data)

    def from_generator():
        (ishape_, idt_), (lshape_, ldt_) = ds.batch_spec(a.batch, dtype=a.dtype, layout="NHWC", label=a.label)
        signature = (tf.TensorSpec((None,) + tuple(ishape_[1:]), tf.as_dtype(idt_)),
                     tf.TensorSpec((None,) + tuple(lshape_[1:]), tf.as_dtype(ldt_)))
        epoch = {"next": 0}

        def gen():
            e = epoch["next"]
            epoch["next"] += 1
            order = shardpack.epoch_order(n, 0, e)
            for b in range(batches):
                yield ds.read_batch(order[b * a.batch:(b + 1) * a.batch], threads=a.threads, **options)

        data = tf.data.Dataset.from_generator(gen, output_signature=signature).prefetch(2)
        return lambda: consume(data)

    ways = {"read_batch": read_batch, "read_batch_out": read_batch_out, "tf_dataset": tf_dataset(2),
            "tf_dataset_noprefetch": tf_dataset(0), "tf_from_generator": from_generator()}
    for run in ways.values():  # warm up: page cache, TensorFlow's first-use costs
        run()
    rates = {name: [] for name in ways}
    cpu = {name: [] for name in ways}
    for _ in range(a.rounds):
        for name, run in ways.items():
            rate, cost = timed(run)
            rates[name].append(round(rate, 1))
            cpu[name].append(round(cost, 4))
    median = {name: statistics.median(r) for name, r in rates.items()}
    cpu_median = {name: statistics.median(c) for name, c in cpu.items()}
    print(json.dumps({
        "tool": "tf_adapter_bench", "name": a.name, "dataset": a.dataset, "records": n,
        "image_shape": ds.image_shape, "batch": a.batch, "epochs": a.epochs, "rounds": a.rounds,
        "threads": a.threads, "label": a.label, "dtype": a.dtype, "step_s": a.step,
        "tensorflow": tf.__version__, "rates": rates, "median": median,
        "ratio_to_read_batch": {name: round(m / median["read_batch"], 3) for name, m in median.items()},
        "ratio_to_read_batch_out": {name: round(m / median["read_batch_out"], 3) for name, m in median.items()},
        "cpu_s_per_1000": cpu, "cpu_median": cpu_median,
        "cpu_ratio_to_read_batch": {name: round(c / cpu_median["read_batch"], 3) for name, c in cpu_median.items()},
    }))


if __name__ == "__main__":
    main()
