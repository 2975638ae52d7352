#!/usr/bin/env python3
"""TFRecord baseline: the same decoded tensors, written and read the standard TensorFlow way.

    VENV/bin/python tfrecord_bench.py --npy-dir OUTDIR --work DIR [--threads N]
        [--shards K] [--compression none|zlib|gzip] [--epochs E] [--min-seconds S]
        [--shuffle-buffer B] [--seed N]

Run it with the Python of the venv that scripts/bench/setup_tf_venv.sh made.

Input: the NNNNN.image.npy / NNNNN.label.npy pairs of python_baseline.py, loaded into memory
first (not timed).

Write (timed): one tf.train.Example per sample, the image as raw bytes plus its shape
(int64 [H, W, C]); a segmentation label (an array) as raw bytes plus its shape (decoded
with the dtype of the .npy), a class label (a 0-d array) as an int64; serialized into K files
(default 1) with tf.io.TFRecordWriter, closed. Not fsynced (the page cache holds it, as for the other tools).

Read: tf.data.TFRecordDataset(files).map(parse, num_parallel_calls=AUTOTUNE)
.prefetch(AUTOTUNE), parse = tf.io.parse_single_example + tf.io.decode_raw + reshape,
iterated in Python as a training loop does. One warm-up epoch (which also checks every
decoded sample against the .npy arrays, bit for bit), then E timed runs (default 3) of one
epoch each, or of as many epochs as make about --min-seconds (default 1) when the dataset is
small; the median time per epoch is reported. With --shuffle-buffer B > 0 the serialized
records also go through .shuffle(B) before the map: E more timed runs, read_shuffled_*.

Stdout: one line of JSON
  {"tool":"tfrecord","write_samples_per_s":..,"read_samples_per_s":..,"read_gb_per_s":..,
   "tf_version":..,...}
GB = 1e9 bytes of decoded tensors (image + label). Logs go to stderr. Exit 2 on bad usage,
3 when tensorflow cannot be imported, 1 when the read-back differs from the input.
"""
import argparse
import json
import math
import os
import statistics
import sys
import time


def log(*args):
    print("tfrecord_bench:", *args, file=sys.stderr, flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--npy-dir", required=True, help="folder of NNNNN.image.npy / .label.npy")
    p.add_argument("--work", required=True, help="folder for the .tfrecord files")
    p.add_argument("--threads", type=int, default=os.cpu_count(), help="TF threads (all cores)")
    p.add_argument("--shards", type=int, default=1, help="number of .tfrecord files (1)")
    p.add_argument("--compression", choices=["none", "zlib", "gzip"], default="none")
    p.add_argument("--epochs", type=int, default=3, help="timed read runs, median reported (3)")
    p.add_argument("--min-seconds", type=float, default=1.0,
                   help="each timed run repeats the epoch until it lasts about this long (1)")
    p.add_argument("--shuffle-buffer", type=int, default=0, help="also a shuffled read (0: off)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    if not os.path.isdir(args.npy_dir):
        p.error(f"--npy-dir {args.npy_dir}: no such folder")
    if args.threads < 1 or args.shards < 1 or args.epochs < 1:
        p.error("--threads, --shards and --epochs must be positive")
    if args.shuffle_buffer < 0 or args.min_seconds < 0:
        p.error("--shuffle-buffer and --min-seconds must not be negative")

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
    try:
        import numpy as np
        import tensorflow as tf
    except ImportError as e:
        log(f"{e}; run scripts/bench/setup_tf_venv.sh VENV and this script with VENV/bin/python")
        return 3
    tf.config.threading.set_inter_op_parallelism_threads(args.threads)
    tf.config.threading.set_intra_op_parallelism_threads(args.threads)

    # The decoded tensors.
    names = sorted(n for n in os.listdir(args.npy_dir) if n.endswith(".image.npy"))
    if not names:
        log(f"no *.image.npy in {args.npy_dir}")
        p.exit(2)
    samples = []
    for n in names:
        base = os.path.join(args.npy_dir, n[:-len(".image.npy")])
        samples.append((np.load(base + ".image.npy"), np.load(base + ".label.npy")))
    count = len(samples)
    dense_label = samples[0][1].ndim > 0
    label_dtype = samples[0][1].dtype
    decoded_bytes = sum(image.nbytes + label.nbytes for image, label in samples)
    log(f"{count} samples, {decoded_bytes / 1e6:.1f} MB decoded, "
        f"label {'array ' + str(label_dtype) if dense_label else 'class id'}; "
        f"TensorFlow {tf.__version__}, {args.threads} threads")

    os.makedirs(args.work, exist_ok=True)
    for n in os.listdir(args.work):
        if n.startswith("data-") and ".tfrecord" in n:
            os.remove(os.path.join(args.work, n))
    files = [os.path.join(args.work, f"data-{k:05d}-of-{args.shards:05d}.tfrecord")
             for k in range(args.shards)]
    compression = {"none": "", "zlib": "ZLIB", "gzip": "GZIP"}[args.compression]

    def bytes_feature(b):
        return tf.train.Feature(bytes_list=tf.train.BytesList(value=[b]))

    def int64_feature(values):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=list(values)))

    # --- write ---
    start = time.perf_counter()
    writers = [tf.io.TFRecordWriter(f, options=compression) for f in files]
    for i, (image, label) in enumerate(samples):
        feature = {
            "image": bytes_feature(image.tobytes()),
            "image_shape": int64_feature(image.shape),
        }
        if dense_label:
            feature["label"] = bytes_feature(label.tobytes())
            feature["label_shape"] = int64_feature(label.shape)
        else:
            feature["label"] = int64_feature([int(label)])
        example = tf.train.Example(features=tf.train.Features(feature=feature))
        writers[i * args.shards // count].write(example.SerializeToString())
    for w in writers:
        w.close()
    write_seconds = time.perf_counter() - start
    tfrecord_bytes = sum(os.path.getsize(f) for f in files)
    log(f"wrote {tfrecord_bytes / 1e6:.1f} MB in {write_seconds:.3f} s")

    # --- read ---
    spec = {
        "image": tf.io.FixedLenFeature([], tf.string),
        "image_shape": tf.io.FixedLenFeature([3], tf.int64),
    }
    if dense_label:
        spec["label"] = tf.io.FixedLenFeature([], tf.string)
        spec["label_shape"] = tf.io.FixedLenFeature([samples[0][1].ndim], tf.int64)
    else:
        spec["label"] = tf.io.FixedLenFeature([], tf.int64)
    tf_label_dtype = tf.as_dtype(label_dtype)

    def parse_fn(record):
        ex = tf.io.parse_single_example(record, spec)
        image = tf.reshape(tf.io.decode_raw(ex["image"], tf.uint8), ex["image_shape"])
        if dense_label:
            label = tf.reshape(tf.io.decode_raw(ex["label"], tf_label_dtype), ex["label_shape"])
        else:
            label = ex["label"]
        return image, label

    options = tf.data.Options()
    options.threading.private_threadpool_size = args.threads

    def dataset(shuffle_buffer=0):
        ds = tf.data.TFRecordDataset(files, compression_type=compression)
        if shuffle_buffer:
            ds = ds.shuffle(shuffle_buffer, seed=args.seed, reshuffle_each_iteration=True)
        ds = ds.map(parse_fn, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)
        return ds.with_options(options)

    # Warm-up epoch, checking every sample (in file order) against the input.
    n = 0
    for (image, label), (want_image, want_label) in zip(dataset(), samples):
        if not (np.array_equal(image.numpy(), want_image)
                and np.array_equal(label.numpy(), want_label)):
            log(f"sample {n} differs after the TFRecord round trip")
            return 1
        n += 1
    if n != count:
        log(f"read {n} samples back, wrote {count}")
        return 1
    log("warm-up epoch: every sample read back bit-identical")

    def epoch(ds):
        n = 0
        for image, label in ds:
            n += 1
        if n != count:
            raise RuntimeError(f"epoch read {n} samples, expected {count}")

    # A small dataset reads in a fraction of a second; so that timer and scheduler noise do
    # not dominate, each timed run reads ceil(min_seconds / epoch time) epochs (one more
    # untimed epoch measures that) and reports the time of one epoch.
    start = time.perf_counter()
    epoch(dataset())
    per_run = max(1, math.ceil(args.min_seconds / (time.perf_counter() - start)))

    def timed_epochs(ds):
        times = []
        for _ in range(args.epochs):
            start = time.perf_counter()
            for _ in range(per_run):
                epoch(ds)
            times.append((time.perf_counter() - start) / per_run)
        return times

    read_times = timed_epochs(dataset())
    read_median = statistics.median(read_times)
    log(f"read, seconds per epoch ({per_run} epochs a run): "
        + ", ".join(f"{t:.4f}" for t in read_times))

    result = {
        "tool": "tfrecord",
        "samples": count,
        "write_seconds": round(write_seconds, 4),
        "write_samples_per_s": round(count / write_seconds, 2),
        "read_samples_per_s": round(count / read_median, 2),
        "read_gb_per_s": round(decoded_bytes / read_median / 1e9, 3),
        "read_epoch_seconds": [round(t, 4) for t in read_times],
        "epochs_per_run": per_run,
        "tfrecord_bytes": tfrecord_bytes,
        "decoded_bytes": decoded_bytes,
        "shards": args.shards,
        "compression": args.compression,
        "threads": args.threads,
        "tf_version": tf.__version__,
    }
    if args.shuffle_buffer:
        shuffled_times = timed_epochs(dataset(args.shuffle_buffer))
        shuffled_median = statistics.median(shuffled_times)
        log("shuffled read, seconds per epoch: " + ", ".join(f"{t:.4f}" for t in shuffled_times))
        result["shuffle_buffer"] = args.shuffle_buffer
        result["read_shuffled_samples_per_s"] = round(count / shuffled_median, 2)
        result["read_shuffled_gb_per_s"] = round(decoded_bytes / shuffled_median / 1e9, 3)

    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
