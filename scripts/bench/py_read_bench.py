#!/usr/bin/env python3
"""The Python reading benchmark: samples/s delivered to a training loop, every way side by side.

    py_read_bench.py prepare --job seg|cls --src SRC --raw-ds DS --work JOBDIR
    py_read_bench.py write --format mds|wds|litdata --work JOBDIR
    py_read_bench.py run --method METHOD --work JOBDIR [--epochs E] [--seed S] [--threads T] [--check]
    py_read_bench.py drive --work JOBDIR --results FILE --python PY [--tf-python PY] --bin DIR
                           [--rounds R] [--epochs E] [--threads T] [--methods M,M,...]

What every method delivers to the loop, per batch of 64 shuffled samples (a new permutation
each epoch): images as float32 NCHW, normalised with ImageNet's mean and std (grey images:
0.449 / 0.226, as shardpack's "imagenet"), and labels: segmentation one-hot float32 (N, K, H, W),
classification int64 class ids (N,). As torch tensors, except tf.data, which hands NumPy arrays
(`.numpy()` of its eager tensors). Every method reads the same uint8 tensors (prepare takes them
from the raw shardpack dataset through tests/spec/read_shardpack.py, the reader written from the
spec alone, so the reference is not the code under test), except source_cv2, which decodes the
source files itself.

Methods (2 threads or 2 workers each; --threads):
  source_cv2      a torch Dataset decoding the source files with OpenCV (seg: PNG image and color
                  mask, centre crop, colors mapped through class_dict.csv to one-hot; cls: JPEG as
                  grey, resized shorter side to the size with INTER_AREA, centre crop) in a
                  DataLoader with 2 workers; uint8 batches normalised in the loop's process.
  npy_ram         the whole uint8 array np.load-ed into RAM (the load counts in the time to the
                  first batch), each batch fancy-indexed and normalised with torch (2 threads).
  npy_dl          the same arrays in RAM behind a map-style torch Dataset (a sample per
                  __getitem__) in a DataLoader with 2 workers and the default collate (the seed
                  user's .npy preload); the uint8 batch normalised in the loop's process.
  tfdata          TFRecord (written by scripts/bench/tfrecord_bench.py) + tf.data: shuffle over
                  the whole dataset, map(parse, parallel), batch, map(normalise, parallel),
                  prefetch; a private thread pool of 2.
  mds             MosaicML Streaming: MDSWriter (ndarray columns, no compression), its
                  StreamingDataset (shuffle) in a DataLoader with 2 workers.
  wds             WebDataset: ShardWriter (.npy members, 8 shards), WebDataset with shard shuffle
                  and a sample shuffle buffer, in a DataLoader with 2 workers.
  litdata         LitData: optimize() (NumPy arrays, 64 MB chunks), its StreamingDataset
                  (shuffle) through its StreamingDataLoader with 2 workers.
                  (mds, wds, litdata hand uint8 per sample; the collated uint8 batch is normalised
                  in the loop's process, so that a quarter of the bytes cross from the workers.)
  sp_zstd_loader, sp_raw_loader
                  shardpack.torch.Loader on the zstd / the raw (--compression none) dataset,
                  threads=2, prefetch=2: new tensors per batch.
  sp_zstd_ring, sp_raw_ring
                  the same with reuse_buffers=True (a ring of prefetch + 3 batch buffers).
  sp_zstd_u8, sp_zstd_u8_ring
                  Loader on the zstd dataset delivering what a GPU should convert: uint8 NCHW
                  images as stored and index labels (label="index": class ids per pixel, or per
                  sample; label_dtype="uint8" where read_batch has it), new tensors / the ring. The epoch check sums the uint8 values and the
                  class ids.
  sp_zstd_dl, sp_raw_dl
                  shardpack.torch.Dataset in a torch DataLoader with 2 workers (__getitems__: one
                  read_batch per batch in the worker), collate_fn=shardpack.torch.collate.
  sp_zstd_batch, sp_raw_batch
                  read_batch(out=...) straight in the loop into one pair of arrays reused for
                  every batch, threads=2, nothing ahead.
  sp_raw_fresh    read_batch() straight in the loop into new arrays (out=None) on the raw dataset;
                  after each of its steady epochs, one of sp_raw_batch's in the same process (the
                  fresh/out= target's ratio from one process: "read_batch_out_in_process").
  bare_zstd       tools/bench_read --modes zstd_nt,reader_nt: bare ZSTD_decompressDCtx of the zstd
                  dataset's frames into one buffer per thread, same threads (no conversion), and
                  the C++ reader's read_into (uint8) beside it. With --bare-lib (bench.sh builds
                  scripts/bench/py_bare_zstd.cpp), the uint8 methods also time bare zstd epochs
                  (ctypes, same batches and threads) between their own, in their own process
                  ("bare_zstd_in_process"): the uint8 target's ratio without the load moving
                  between two processes.

run measures in one fresh process: the time from before the dataset/loader is made to the first
batch (worker start-up, np.load, shard opening included), the first epoch, then E-1 more
epochs (the samples/s is N / the median of those), and peak memory: the process and its
children (DataLoader workers) sampled every 10 ms from /proc (RSS = anon + file + shmem;
anon alone), and the RSS after the imports (the interpreter and torch, before any data).
--check adds an untimed epoch summing the images and labels delivered, compared with the sums
the prepared tensors give (every sample once, with the right values), and a failure exits 1.

drive runs R rounds; a round runs every method once, each in its own process, in an order
rotated by one each round; one JSON line per run is appended to --results as
{"name": "py.JOB.METHOD", "result": {...}} (scripts/bench/py_report.py makes the table).
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import threading
import time

BATCH = 64
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

ALL_METHODS = ["source_cv2", "npy_ram", "npy_dl", "tfdata", "mds", "wds", "litdata",
               "sp_zstd_loader", "sp_zstd_ring", "sp_zstd_u8", "sp_zstd_u8_ring", "sp_raw_loader", "sp_raw_ring",
               "sp_zstd_dl", "sp_raw_dl", "sp_zstd_batch", "sp_raw_batch", "sp_raw_fresh", "bare_zstd"]
# drive's default: all but sp_raw_dl (the zstd DataLoader row shows that way; the run is long)
DEFAULT_METHODS = [m for m in ALL_METHODS if m != "sp_raw_dl"]
# Methods delivering uint8 images and index labels (checked against the uint8 sums)
U8_METHODS = {"sp_zstd_u8", "sp_zstd_u8_ring"}


def log(*args):
    print("py_read_bench:", *args, file=sys.stderr, flush=True)


def mean_std(channels):
    if channels == 1:
        return [sum(IMAGENET_MEAN) / 3], [sum(IMAGENET_STD) / 3]
    return list(IMAGENET_MEAN), list(IMAGENET_STD)


def load_job(work):
    with open(os.path.join(work, "job.json")) as f:
        return json.load(f)


# --------------------------------------------------------------------------------------------
# prepare: the reference tensors, from the raw dataset through the reader written from the spec

def cmd_prepare(a):
    import numpy as np
    sys.path.insert(0, os.path.join(ROOT, "tests", "spec"))
    import read_shardpack as spec

    manifest = json.load(open(os.path.join(a.raw_ds, "manifest.json")))
    shards = [spec.open_shard(os.path.join(a.raw_ds, e["file"])) for e in manifest["shards"]]
    s = shards[0]["schema"]
    n = sum(len(sh["entries"]) for sh in shards)
    h, w, c, k = s["fixed_h"], s["fixed_w"], s["channels"], s["classes"]
    seg = s["task"] == 1
    if seg and s["layout"] != 1:
        raise SystemExit("prepare: the segmentation dataset must store one-hot labels")
    images = np.empty((n, h, w, c), np.uint8)
    labels = np.empty((n, h, w, k), np.uint8) if seg else np.empty((n,), np.int64)
    keys = []
    i = 0
    for sh in shards:
        b = sh["bytes"]
        for off, stored, decoded, csum, codec in sh["entries"]:
            if codec != 0:
                raise SystemExit("prepare: --raw-ds must be built with --compression none")
            rh, rw, class_id, key_length = spec.u32(b, off), spec.u32(b, off + 4), spec.i32(b, off + 8), spec.u32(b, off + 12)
            if (rh, rw) != (h, w):
                raise SystemExit("prepare: records of different sizes")
            keys.append(b[off + 16:off + 16 + key_length].decode())
            io = off + spec.align(16 + key_length, 64)
            images[i] = np.frombuffer(b, np.uint8, h * w * c, io).reshape(h, w, c)
            if seg:
                lo = off + spec.align(io - off + h * w * c, 64)
                labels[i] = np.frombuffer(b, np.uint8, h * w * k, lo).reshape(h, w, k)
            else:
                labels[i] = class_id
            i += 1
    os.makedirs(os.path.join(a.work, "tensors"), exist_ok=True)
    np.save(os.path.join(a.work, "tensors", "images.npy"), images)
    np.save(os.path.join(a.work, "tensors", "labels.npy"), labels)

    # The sums a correct epoch delivers: sum over every pixel of (x/255 - mean_c)/std_c, exact
    # from the per-channel sums of the uint8 values; labels: one-hot ones, or the class ids.
    mean, std = mean_std(c)
    channel_sums = images.reshape(-1, c).sum(axis=0, dtype=np.float64)
    pixels = n * h * w
    image_sum = float(sum((channel_sums[j] / 255 - pixels * mean[j]) / std[j] for j in range(c)))
    label_sum = float(labels.sum(dtype=np.float64))
    # uint8 delivery: the stored values, and the class ids (index labels) instead of one-hot
    image_u8_sum = float(channel_sums.sum())
    if seg:
        per_class = labels.reshape(-1, k).sum(axis=0, dtype=np.float64)
        label_index_sum = float((per_class * np.arange(k)).sum())
    else:
        label_index_sum = label_sum

    # Per-sample .npy pairs, the input tfrecord_bench.py takes.
    npy_dir = os.path.join(a.work, "npy")
    os.makedirs(npy_dir, exist_ok=True)
    for j in range(n):
        np.save(os.path.join(npy_dir, f"{j:06d}.image.npy"), images[j])
        np.save(os.path.join(npy_dir, f"{j:06d}.label.npy"), labels[j] if seg else np.int64(labels[j]))

    # The source files, for source_cv2: the build's list, in the dataset's record order.
    import csv
    src_csv = os.path.join(a.src, "list.csv")
    rows = {}
    with open(src_csv, newline="") as f:
        for r in list(csv.reader(f))[1:]:  # image, mask or class (make_sample_data's lists)
            rows[r[0]] = r
    class_names = {}
    if not seg:  # the dataset's classes are the list's names in sorted order, or integer ids
        labels_seen = sorted({r[1] for r in rows.values()})
        if not all(x.isdigit() for x in labels_seen):
            class_names = {name: i for i, name in enumerate(labels_seen)}
    sources = []
    for key in keys:
        r = rows[key]
        label = os.path.join(a.src, r[1]) if seg else class_names.get(r[1], None)
        if not seg and label is None:
            label = int(r[1])
        sources.append([os.path.join(a.src, r[0]), label])
    if not seg and [s[1] for s in sources] != labels.tolist():
        raise SystemExit("prepare: the list's class labels differ from the dataset's class ids")
    colors = []
    if seg:
        with open(os.path.join(a.src, "class_dict.csv"), newline="") as f:
            colors = [[int(r["r"]), int(r["g"]), int(r["b"])] for r in csv.DictReader(f)]
    job = dict(job=a.job, task="segmentation" if seg else "classification", n=n, h=h, w=w, c=c, k=k,
               image_sum=image_sum, label_sum=label_sum, image_u8_sum=image_u8_sum,
               label_index_sum=label_index_sum, sources=sources, colors=colors,
               src_size=list(a.src_size) if a.src_size else None,
               raw_ds=os.path.abspath(a.raw_ds), zstd_ds=os.path.abspath(a.zstd_ds),
               tensor_bytes=int(images.nbytes + labels.nbytes))
    with open(os.path.join(a.work, "job.json"), "w") as f:
        json.dump(job, f)
    print(json.dumps({"tool": "py_read_bench.prepare", "job": a.job, "samples": n, "shape": [h, w, c],
                      "classes": k, "tensor_bytes": job["tensor_bytes"]}))


# --------------------------------------------------------------------------------------------
# write: each peer's own writer, from the same tensors

def cmd_write(a):
    import numpy as np
    job = load_job(a.work)
    images = np.load(os.path.join(a.work, "tensors", "images.npy"), mmap_mode="r")
    labels = np.load(os.path.join(a.work, "tensors", "labels.npy"), mmap_mode="r")
    n, seg = job["n"], job["task"] == "segmentation"
    out = os.path.join(a.work, a.format)
    import shutil
    shutil.rmtree(out, ignore_errors=True)
    start = time.perf_counter()
    if a.format == "mds":
        from streaming import MDSWriter
        shape = ",".join(str(x) for x in images.shape[1:])
        columns = {"image": f"ndarray:uint8:{shape}",
                   "label": ("ndarray:uint8:" + ",".join(str(x) for x in labels.shape[1:])) if seg else "int"}
        with MDSWriter(out=out, columns=columns, compression=None, size_limit="64mb", progress_bar=False) as wr:
            for i in range(n):
                wr.write({"image": np.asarray(images[i]), "label": np.asarray(labels[i]) if seg else int(labels[i])})
    elif a.format == "wds":
        import webdataset as wds
        os.makedirs(out)
        per_shard = max(1, math.ceil(n / 8))
        with wds.ShardWriter(os.path.join(out, "shard-%05d.tar"), maxcount=per_shard, verbose=0) as sink:
            for i in range(n):
                sample = {"__key__": f"{i:07d}", "image.npy": np.asarray(images[i])}
                if seg:
                    sample["label.npy"] = np.asarray(labels[i])
                else:
                    sample["cls"] = int(labels[i])
                sink.write(sample)
    elif a.format == "litdata":
        from litdata import optimize
        optimize(fn=_litdata_sample, inputs=list(range(n)), output_dir=out, chunk_bytes="64MB", num_workers=1,
                 reorder_files=False)
    else:
        raise SystemExit(f"write: unknown format {a.format}")
    seconds = time.perf_counter() - start
    size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(out) for f in fs)
    print(json.dumps({"tool": "py_read_bench.write", "format": a.format, "samples": n, "seconds": round(seconds, 3),
                      "samples_per_s": round(n / seconds, 1), "bytes": size}))


_LIT = {}


def _litdata_sample(i):
    import numpy as np
    if not _LIT:
        work = os.environ["PY_READ_BENCH_WORK"]
        _LIT["images"] = np.load(os.path.join(work, "tensors", "images.npy"), mmap_mode="r")
        _LIT["labels"] = np.load(os.path.join(work, "tensors", "labels.npy"), mmap_mode="r")
        _LIT["seg"] = _LIT["labels"].ndim > 1
    image = np.array(_LIT["images"][i])
    label = np.array(_LIT["labels"][i]) if _LIT["seg"] else int(_LIT["labels"][i])
    return {"image": image, "label": label}


# --------------------------------------------------------------------------------------------
# run: one method, one fresh process

class MemorySampler:
    """Peak RSS of this process and its descendants, sampled from /proc every 10 ms."""

    def __init__(self):
        self.peak_total = self.peak_anon = 0
        self.peak_procs = 1
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    @staticmethod
    def _status(pid):
        out = {}
        try:
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    if line.startswith(("RssAnon:", "RssFile:", "RssShmem:")):
                        k, v = line.split(":")
                        out[k] = int(v.split()[0]) * 1024
        except OSError:
            pass
        return out

    @staticmethod
    def _tree(root):
        children = {}
        for d in os.listdir("/proc"):
            if not d.isdigit():
                continue
            try:
                with open(f"/proc/{d}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
                children.setdefault(ppid, []).append(int(d))
            except (OSError, ValueError, IndexError):
                pass
        pids, todo = [], [root]
        while todo:
            p = todo.pop()
            pids.append(p)
            todo.extend(children.get(p, []))
        return pids

    def sample(self):
        pids = self._tree(os.getpid())
        total = anon = 0
        for p in pids:
            s = self._status(p)
            anon += s.get("RssAnon", 0)
            total += s.get("RssAnon", 0) + s.get("RssFile", 0) + s.get("RssShmem", 0)
        self.peak_total = max(self.peak_total, total)
        self.peak_anon = max(self.peak_anon, anon)
        self.peak_procs = max(self.peak_procs, len(pids))
        return total, anon

    def _run(self):
        while not self._stop.wait(0.01):
            self.sample()

    def start(self):
        self._thread.start()
        return self

    def stop(self):
        self._stop.set()
        self._thread.join()
        self.sample()


def torch_normaliser(job, threads):
    """uint8 NHWC batch (torch) -> float32 NCHW normalised, contiguous; torch's intra-op threads."""
    import torch
    torch.set_num_threads(threads)
    mean, std = mean_std(job["c"])
    scale = torch.tensor([1 / (255 * s) for s in std], dtype=torch.float32).view(1, -1, 1, 1)
    shift = torch.tensor([m / s for m, s in zip(mean, std)], dtype=torch.float32).view(1, -1, 1, 1)
    seg = job["task"] == "segmentation"

    def convert(images, labels):
        images = torch.as_tensor(images)
        out = torch.empty((images.shape[0], images.shape[3], images.shape[1], images.shape[2]), dtype=torch.float32)
        out.copy_(images.permute(0, 3, 1, 2))
        out.mul_(scale).sub_(shift)
        labels = torch.as_tensor(labels)
        if seg:
            lab = torch.empty((labels.shape[0], labels.shape[3], labels.shape[1], labels.shape[2]), dtype=torch.float32)
            lab.copy_(labels.permute(0, 3, 1, 2))
            labels = lab
        else:
            labels = labels.to(torch.int64)
        return out, labels
    return convert


def make_method(method, job, work, threads, seed):
    """Returns epoch(e) -> iterable of (images, labels) as delivered to the loop; everything that
    opens files or starts workers happens on the first call, inside the timed region."""
    seg = job["task"] == "segmentation"
    n = job["n"]

    if method == "npy_ram":
        import numpy as np
        import torch
        convert = torch_normaliser(job, threads)
        state = {}

        def epoch(e):
            if not state:
                state["images"] = np.load(os.path.join(work, "tensors", "images.npy"))
                state["labels"] = np.load(os.path.join(work, "tensors", "labels.npy"))
            images, labels = state["images"], state["labels"]
            perm = np.random.default_rng([seed, e]).permutation(n)
            for b in range(0, n, BATCH):
                idx = perm[b:b + BATCH]
                yield convert(torch.from_numpy(images[idx]), torch.from_numpy(labels[idx]))
        return epoch

    if method in ("source_cv2", "npy_dl", "mds", "wds", "litdata"):
        import torch
        import torch.utils.data as tud
        convert = torch_normaliser(job, threads)

        def worker_init(_):
            torch.set_num_threads(1)
            try:
                import cv2
                cv2.setNumThreads(1)
            except ImportError:
                pass

        loaders = {}

        def dataloader():
            if method == "npy_dl":
                import numpy as np
                ds = NpyDataset(np.load(os.path.join(work, "tensors", "images.npy")),
                                np.load(os.path.join(work, "tensors", "labels.npy")))
                return tud.DataLoader(ds, batch_size=BATCH, shuffle=True, num_workers=threads,
                                      worker_init_fn=worker_init, generator=torch.Generator().manual_seed(seed))
            if method == "source_cv2":
                ds = SourceDataset(job)
                return tud.DataLoader(ds, batch_size=BATCH, shuffle=True, num_workers=threads,
                                      worker_init_fn=worker_init, generator=torch.Generator().manual_seed(seed))
            if method == "mds":
                from streaming import StreamingDataset
                from streaming.base.util import clean_stale_shared_memory
                clean_stale_shared_memory()

                class MDS(StreamingDataset):
                    def __getitem__(self, i):
                        d = super().__getitem__(i)
                        return d["image"], d["label"]
                ds = MDS(local=os.path.join(work, "mds"), shuffle=True, shuffle_seed=seed, batch_size=BATCH)
                return tud.DataLoader(ds, batch_size=BATCH, num_workers=threads, worker_init_fn=worker_init)
            if method == "wds":
                import webdataset as wds
                shards = sorted(os.path.join(work, "wds", f) for f in os.listdir(os.path.join(work, "wds")))
                ds = (wds.WebDataset(shards, shardshuffle=len(shards), seed=seed, empty_check=False)
                      .shuffle(min(1000, n)).decode()
                      .to_tuple("image.npy", "label.npy" if seg else "cls"))
                return tud.DataLoader(ds, batch_size=BATCH, num_workers=threads, worker_init_fn=worker_init)
            if method == "litdata":
                from litdata import StreamingDataLoader, StreamingDataset

                class Lit(StreamingDataset):
                    def __getitem__(self, i):
                        d = super().__getitem__(i)
                        return d["image"], d["label"]
                ds = Lit(os.path.join(work, "litdata"), shuffle=True, seed=seed)
                return StreamingDataLoader(ds, batch_size=BATCH, num_workers=threads, worker_init_fn=worker_init)
            raise AssertionError(method)

        def epoch(e):
            if not loaders:
                loaders["dl"] = dataloader()
            for images, labels in loaders["dl"]:
                yield convert(images, labels)
        return epoch

    if method == "tfdata":
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        import tensorflow as tf
        tf.config.threading.set_inter_op_parallelism_threads(threads)
        tf.config.threading.set_intra_op_parallelism_threads(threads)
        mean, std = mean_std(job["c"])
        scale = tf.constant([1 / (255 * s) for s in std], tf.float32)
        shift = tf.constant([m / s for m, s in zip(mean, std)], tf.float32)
        spec = {"image": tf.io.FixedLenFeature([], tf.string), "image_shape": tf.io.FixedLenFeature([3], tf.int64)}
        if seg:
            spec["label"] = tf.io.FixedLenFeature([], tf.string)
            spec["label_shape"] = tf.io.FixedLenFeature([3], tf.int64)
        else:
            spec["label"] = tf.io.FixedLenFeature([], tf.int64)
        h, w, c, k = job["h"], job["w"], job["c"], job["k"]

        def parse(record):
            ex = tf.io.parse_single_example(record, spec)
            image = tf.reshape(tf.io.decode_raw(ex["image"], tf.uint8), [h, w, c])
            label = tf.reshape(tf.io.decode_raw(ex["label"], tf.uint8), [h, w, k]) if seg else ex["label"]
            return image, label

        def normalise(images, labels):
            images = tf.transpose(tf.cast(images, tf.float32) * scale - shift, [0, 3, 1, 2])
            if seg:
                labels = tf.transpose(tf.cast(labels, tf.float32), [0, 3, 1, 2])
            return images, labels

        state = {}

        def epoch(e):
            if not state:
                files = sorted(os.path.join(work, "tfrecord", f) for f in os.listdir(os.path.join(work, "tfrecord"))
                               if ".tfrecord" in f)
                options = tf.data.Options()
                options.threading.private_threadpool_size = threads
                state["ds"] = (tf.data.TFRecordDataset(files)
                               .shuffle(n, seed=seed, reshuffle_each_iteration=True)
                               .map(parse, num_parallel_calls=tf.data.AUTOTUNE)
                               .batch(BATCH)
                               .map(normalise, num_parallel_calls=tf.data.AUTOTUNE)
                               .prefetch(tf.data.AUTOTUNE)
                               .with_options(options))
            for images, labels in state["ds"]:
                yield images.numpy(), labels.numpy()
        return epoch

    if method.startswith("sp_"):
        import torch
        import torch.utils.data as tud
        import shardpack
        import shardpack.torch as spt
        path = job["zstd_ds"] if "_zstd_" in method else job["raw_ds"]
        if method in U8_METHODS:  # what a GPU should convert: uint8 as stored, class ids
            options = dict(dtype="uint8", layout="NCHW", normalize=None, label="index")
            import inspect
            if "label_dtype" in inspect.signature(shardpack.Dataset.read_batch).parameters:
                options["label_dtype"] = "uint8"  # one byte a class id (the classes here fit)
        else:
            options = dict(dtype="float32", layout="NCHW", normalize="imagenet", label="onehot" if seg else "index")
        state = {}

        if method.endswith(("_loader", "_ring", "_u8")):
            def epoch(e):
                if not state:
                    state["loader"] = spt.Loader(path, batch_size=BATCH, shuffle=True, seed=seed, threads=threads,
                                                 prefetch=2, reuse_buffers=method.endswith("_ring"), **options)
                state["loader"].set_epoch(e)
                return iter(state["loader"])
            return epoch
        if method.endswith("_dl"):
            def epoch(e):
                if not state:
                    ds = spt.Dataset(path, **options)
                    state["dl"] = tud.DataLoader(ds, batch_size=BATCH, shuffle=True, num_workers=threads,
                                                 collate_fn=spt.collate,
                                                 generator=torch.Generator().manual_seed(seed))
                return iter(state["dl"])
            return epoch
        if method.endswith(("_batch", "_fresh")):
            import numpy as np
            reuse = method.endswith("_batch")

            def epoch(e):
                if not state:
                    state["ds"] = shardpack.open(path)
                    if reuse:  # one pair of arrays for every batch (a short last batch: their head)
                        spec_options = {k: v for k, v in options.items() if k != "normalize"}
                        (ishape, idt), (lshape, ldt) = state["ds"].batch_spec(BATCH, **spec_options)
                        state["out"] = (np.empty(ishape, idt), np.empty(lshape, ldt))
                ds = state["ds"]
                perm = shardpack.permutation(n, seed, e)
                for b in range(0, n, BATCH):
                    idx = perm[b:b + BATCH]
                    if reuse:
                        m = len(idx)
                        out = (state["out"][0][:m], state["out"][1][:m])
                        images, labels = ds.read_batch(idx, out=out, threads=threads, **options)
                    else:
                        images, labels = ds.read_batch(idx, threads=threads, **options)
                    yield torch.from_numpy(images), torch.from_numpy(labels)
            return epoch
    raise SystemExit(f"run: unknown method {method}")


class BareZstd:
    """scripts/bench/py_bare_zstd.cpp (built by bench.sh) through ctypes: bare ZSTD_decompressDCtx
    of the dataset's stored frames, a batch split over the threads as read_batch splits it."""

    def __init__(self, lib, dataset):
        import ctypes
        self.lib = ctypes.CDLL(lib)
        self.lib.bare_open.restype = ctypes.c_void_p
        self.lib.bare_open.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t]
        self.lib.bare_read.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t]
        error = ctypes.create_string_buffer(1024)
        self.handle = self.lib.bare_open(os.fsencode(dataset), error, len(error))
        if not self.handle:
            raise SystemExit(f"bare zstd: {error.value.decode(errors='replace')}")

    def epoch(self, order, threads):
        """Seconds to decompress every record of `order`, BATCH records a call."""
        import numpy as np
        order = np.ascontiguousarray(order, dtype=np.int64)
        start = time.perf_counter()
        for b in range(0, len(order), BATCH):
            idx = order[b:b + BATCH]
            if self.lib.bare_read(self.handle, idx.ctypes.data, len(idx), threads) != 0:
                raise SystemExit("bare zstd: a record failed to decompress")
        return time.perf_counter() - start


class NpyDataset:
    """A map-style dataset over in-RAM arrays: sample i is (images[i], labels[i])."""

    def __init__(self, images, labels):
        self.images, self.labels = images, labels

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        return self.images[i], self.labels[i]


class SourceDataset:
    """The seed's way: decode the source files with OpenCV in each __getitem__."""

    def __init__(self, job):
        self.job = job

    def __len__(self):
        return self.job["n"]

    def __getitem__(self, i):
        import cv2
        import numpy as np
        job = self.job
        h, w = job["h"], job["w"]
        path, label = job["sources"][i]
        if job["task"] == "segmentation":
            image = cv2.imread(path, cv2.IMREAD_COLOR)
            mask = cv2.imread(label, cv2.IMREAD_COLOR)
            if image is None or mask is None:
                raise RuntimeError(f"cannot read {path} or {label}")
            y, x = (image.shape[0] - h) // 2, (image.shape[1] - w) // 2
            image = cv2.cvtColor(image[y:y + h, x:x + w], cv2.COLOR_BGR2RGB)
            mask = mask[y:y + h, x:x + w]
            # BGR -> one 24-bit color per pixel, looked up in the sorted color table
            key = (mask[..., 2].astype(np.int32) << 16) | (mask[..., 1].astype(np.int32) << 8) | mask[..., 0]
            colors = np.array([(r << 16) | (g << 8) | b for r, g, b in job["colors"]], np.int32)
            order = np.argsort(colors)
            pos = np.searchsorted(colors[order], key)
            pos = np.minimum(pos, len(colors) - 1)
            if not np.all(colors[order][pos] == key):
                raise RuntimeError(f"{label}: a color not in the class dictionary")
            ids = order[pos]
            onehot = np.eye(job["k"], dtype=np.uint8)[ids]
            return image, onehot
        image = cv2.imread(path, cv2.IMREAD_GRAYSCALE)
        if image is None:
            raise RuntimeError(f"cannot read {path}")
        ih, iw = image.shape
        s = max(h / ih, w / iw)
        nh, nw = max(h, round(ih * s)), max(w, round(iw * s))
        image = cv2.resize(image, (nw, nh), interpolation=cv2.INTER_AREA)
        y, x = (nh - h) // 2, (nw - w) // 2
        return image[y:y + h, x:x + w, None].copy(), label


def cmd_run(a):
    sampler = MemorySampler()
    import numpy as np  # noqa: F401 (imported by every method: part of the baseline)
    job = load_job(a.work)
    os.environ["PY_READ_BENCH_WORK"] = a.work
    if a.method != "tfdata":
        import torch  # noqa: F401
    epoch_fn = make_method(a.method, job, a.work, a.threads, a.seed)
    base_total, base_anon = sampler.sample()
    sampler.start()
    n = job["n"]

    def run_epoch(e, check=False, fn=epoch_fn):
        count = 0
        image_sum = label_sum = 0.0
        first = None
        start = time.perf_counter()
        for images, labels in fn(e):
            if first is None:
                first = time.perf_counter() - start
            count += len(labels)
            if check:
                image_sum += float(images.sum(dtype=np.float64)) if isinstance(images, np.ndarray) else \
                    float(images.double().sum())
                label_sum += float(labels.sum(dtype=np.float64)) if isinstance(labels, np.ndarray) else \
                    float(labels.double().sum())
        return time.perf_counter() - start, first, count, image_sum, label_sum

    # The uint8 target's floor in this same process: a bare zstd epoch after each steady epoch
    # (py_bare_zstd.cpp through ctypes, the same batches and threads), so that the machine's
    # load changes both sides of the ratio alike.
    bare = BareZstd(a.bare_lib, job["zstd_ds"]) if a.bare_lib and a.method in U8_METHODS else None
    # Likewise fresh read_batch's target: an epoch of read_batch(out=) (sp_raw_batch's way) after
    # each steady epoch of sp_raw_fresh, in this process.
    reused = make_method("sp_raw_batch", job, a.work, a.threads, a.seed) if a.method == "sp_raw_fresh" else None
    if reused is not None:
        run_epoch(0, fn=reused)  # its arrays allocated and faulted in, as sp_raw_fresh's first epoch does
    first_epoch, ttfb, count, _, _ = run_epoch(0)
    times, bare_times, reused_times = [], [], []
    for e in range(1, a.epochs):
        t, _, c, _, _ = run_epoch(e)
        times.append(t)
        if c != count:
            raise SystemExit(f"{a.method}: epoch {e} delivered {c} samples, epoch 0 {count}")
        if bare is not None:
            bare_times.append(bare.epoch(np.random.default_rng([a.seed, e]).permutation(n), a.threads))
        if reused is not None:
            reused_times.append(run_epoch(e, fn=reused)[0])
    result = {"tool": "py_read_bench.run", "method": a.method, "job": job["job"], "samples": count,
              "dataset_samples": n, "threads": a.threads,
              "ttfb_s": round(ttfb, 4), "first_epoch_s": round(first_epoch, 4),
              "epoch_s": [round(t, 4) for t in times]}
    steady = statistics.median(times) if times else first_epoch
    result["samples_per_s"] = round(count / steady, 1)
    if reused_times:
        reused_rate = count / statistics.median(reused_times)
        result["read_batch_out_in_process"] = {"samples_per_s": round(reused_rate, 1),
                                               "epoch_s": [round(t, 4) for t in reused_times],
                                               "ratio": round(result["samples_per_s"] / reused_rate, 3)}
    if bare_times:
        bare_rate = n / statistics.median(bare_times)
        result["bare_zstd_in_process"] = {"samples_per_s": round(bare_rate, 1),
                                          "epoch_s": [round(t, 4) for t in bare_times],
                                          "ratio": round(result["samples_per_s"] / bare_rate, 3)}
    if a.check:
        t, _, c, isum, lsum = run_epoch(a.epochs, check=True)
        tol = 2e-3 if (a.method == "source_cv2" and job["task"] == "classification") else 1e-5
        u8 = a.method in U8_METHODS
        want_image = job["image_u8_sum"] if u8 else job["image_sum"]
        want_label = job["label_index_sum"] if u8 else job["label_sum"]
        ok_images = abs(isum - want_image) <= tol * max(1.0, abs(want_image)) + 1e-3 * n
        ok_labels = abs(lsum - want_label) <= 1e-6 * max(1.0, abs(want_label)) + 0.5
        result["check"] = {"samples": c, "image_sum": isum, "want_image_sum": want_image,
                           "label_sum": lsum, "want_label_sum": want_label,
                           "ok": bool(c == n and ok_images and ok_labels)}
    sampler.stop()
    result.update({"peak_rss_bytes": sampler.peak_total, "peak_anon_bytes": sampler.peak_anon,
                   "baseline_rss_bytes": base_total, "baseline_anon_bytes": base_anon,
                   "processes": sampler.peak_procs})
    print(json.dumps(result), flush=True)
    if count != n:
        log(f"{a.method}: an epoch delivered {count} samples, the dataset has {n}")
    if a.check and not result["check"]["ok"]:
        log(f"{a.method}: check failed: {result['check']}")
        return 1
    return 0


# --------------------------------------------------------------------------------------------
# parts: where a shardpack batch's time goes (the profile behind the targets)

def cmd_parts(a):
    """Seconds per sample of the parts of a float32 batch, each timed alone on the same
    permutation, threads=T, best of --reps epochs (the machine is noisy; the best is the cost):
      read_u8_stored     read_batch(dtype="uint8", layout="NHWC", label="stored"): decompress,
                         checksum, copy out as stored (what bare zstd does, plus the copy);
      read_f32           read_batch as the benchmark delivers it (float32 NCHW, normalised,
                         one-hot float / int64 ids): the above plus the conversion;
      loader             shardpack.torch.Loader epoch, the same options: read_f32 plus the
                         Python side (the queue, tensor allocation, prefetch thread);
      loader_ring        the same with reuse_buffers=True (no allocation per batch);
      write_floor        filling freshly allocated tensors of the float batch's size with
                         torch (fill_, T threads): the memory-bandwidth floor of delivering the
                         float batch at all, whatever the source;
      normalise_u8       the peers' main-process step: uint8 NHWC batch -> float32 NCHW;
    and for the raw dataset read_u8_stored and read_f32 again."""
    import numpy as np
    import torch
    import shardpack
    import shardpack.torch as spt
    job = load_job(a.work)
    seg = job["task"] == "segmentation"
    n, t = job["n"], a.threads
    batch = min(BATCH, n)  # a --quick data set can be smaller than one batch
    torch.set_num_threads(t)
    label = "onehot" if seg else "index"
    opts = dict(dtype="float32", layout="NCHW", normalize="imagenet", label=label)
    out = {"tool": "py_read_bench.parts", "job": job["job"], "threads": t, "samples": n}

    def best(fn):
        times = []
        for r in range(a.reps):
            perm = shardpack.permutation(n, 7, r)
            start = time.perf_counter()
            fn(perm)
            times.append(time.perf_counter() - start)
        return min(times) / n * 1e6  # microseconds per sample

    for kind in ("zstd", "raw"):
        ds = shardpack.open(job[f"{kind}_ds"])
        (ishape, idt), (lshape, ldt) = ds.batch_spec(batch, dtype="uint8", layout="NHWC", label="stored")
        bu = (np.empty(ishape, idt), np.empty(lshape, ldt))
        (fshape, fdt), (flshape, fldt) = ds.batch_spec(batch, dtype="float32", layout="NCHW", label=label)
        bf = (np.empty(fshape, fdt), np.empty(flshape, fldt))

        def read(perm, buffers, **kw):
            for b in range(0, n - batch + 1, batch):
                ds.read_batch(perm[b:b + batch], out=buffers, threads=t, **kw)
        out[f"{kind}_read_u8_stored_us"] = best(lambda p: read(p, bu, dtype="uint8", layout="NHWC",
                                                              normalize=None, label="stored"))
        out[f"{kind}_read_f32_us"] = best(lambda p: read(p, bf, **opts))
    whole = n - n % batch
    # per-sample figures above cover whole batches only: scale to per-sample of those
    for k in list(out):
        if k.endswith("_us"):
            out[k] *= n / whole
    for key, reuse in (("zstd_loader_us", False), ("zstd_loader_ring_us", True)):
        loader = spt.Loader(job["zstd_ds"], batch_size=batch, shuffle=True, seed=7, threads=t, prefetch=2,
                            reuse_buffers=reuse, **opts)
        times = []
        for r in range(a.reps):
            loader.set_epoch(r)
            start = time.perf_counter()
            for _ in loader:
                pass
            times.append(time.perf_counter() - start)
        out[key] = min(times) / n * 1e6
        del loader
    fbytes = int(np.prod(fshape[1:])) * 4 + int(np.prod(flshape[1:])) * (4 if seg else 8)
    out["float_batch_bytes_per_sample"] = fbytes

    def write_floor(_):
        for b in range(0, whole, batch):
            torch.empty(fshape, dtype=torch.float32).fill_(1.0)
            torch.empty(flshape, dtype=torch.float32 if seg else torch.int64).fill_(1)
    out["write_floor_us"] = best(write_floor) * n / whole
    convert = torch_normaliser(job, t)
    images = np.load(os.path.join(a.work, "tensors", "images.npy"), mmap_mode="r")
    labels = np.load(os.path.join(a.work, "tensors", "labels.npy"), mmap_mode="r")
    u8 = (torch.from_numpy(np.array(images[:batch])), torch.from_numpy(np.array(labels[:batch])))

    def normalise(_):
        for b in range(0, whole, batch):
            convert(*u8)
    out["normalise_u8_us"] = best(normalise) * n / whole
    for k in list(out):
        if k.endswith("_us"):
            out[k] = round(out[k], 2)
    print(json.dumps(out), flush=True)
    return 0


# --------------------------------------------------------------------------------------------
# drive: interleaved rounds

def cmd_drive(a):
    job = load_job(a.work)
    methods = a.methods.split(",") if a.methods else list(DEFAULT_METHODS)
    unknown = [m for m in methods if m not in ALL_METHODS]
    if unknown:
        raise SystemExit(f"drive: unknown methods {unknown}")
    results = open(a.results, "a")

    def record(method, result):
        results.write(json.dumps({"name": f"py.{job['job']}.{method}", "result": result}) + "\n")
        results.flush()

    # What could be installed (setup_py_venv.sh's JSON); a way whose package is missing is
    # recorded as skipped, with the reason, and not run.
    packages = {}
    if a.setup and os.path.exists(a.setup):
        with open(a.setup) as f:
            lines = [x for x in f.read().splitlines() if x.startswith("{")]
        if lines:
            packages = json.loads(lines[-1]).get("packages", {})
    need = {"mds": "mosaicml-streaming", "wds": "webdataset", "litdata": "litdata"}
    skip = {}
    for m in methods:
        pkg = "shardpack" if m.startswith("sp_") else need.get(m)
        if pkg and pkg in packages and not packages[pkg].get("ok"):
            skip[m] = f"{pkg} could not be installed: {packages[pkg].get('reason', '?')}"
    if "tfdata" in methods and not a.tf_python:
        skip["tfdata"] = "TensorFlow is not available (PyPI unreachable or tensorflow-cpu would not install)"

    # Each peer's own writer, from the same tensors (timed; recorded as py.JOB.write.FORMAT).
    writers = {"mds": "mds", "wds": "wds", "litdata": "litdata", "tfdata": "tfrecord"}
    for m in methods:
        if m not in writers or m in skip:
            continue
        log(f"{job['job']}: writing {writers[m]}")
        if m == "tfdata":
            cmd = [a.tf_python, os.path.join(HERE, "tfrecord_bench.py"), "--npy-dir", os.path.join(a.work, "npy"),
                   "--work", os.path.join(a.work, "tfrecord"), "--threads", str(a.threads), "--epochs", "1",
                   "--min-seconds", "0"]
        else:
            cmd = [a.python, os.path.abspath(__file__), "write", "--format", m, "--work", a.work]
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=a.timeout,
                           env=dict(os.environ, PY_READ_BENCH_WORK=a.work))
        lines = [x for x in p.stdout.splitlines() if x.startswith("{")]
        if p.returncode != 0 or not lines:
            tail = " | ".join(p.stderr.strip().splitlines()[-2:])
            skip[m] = f"its writer failed (exit {p.returncode}): {tail[-300:]}"
            log(f"{m}: {skip[m]}")
        else:
            record(f"write.{writers[m]}", json.loads(lines[-1]))

    for m, why in skip.items():
        if m in methods:
            record(m, {"skipped": why})
    methods = [m for m in methods if m not in skip]
    for r in range(a.rounds):
        order = methods[r % len(methods):] + methods[:r % len(methods)] if methods else []
        for m in order:
            log(f"{job['job']}: {m} (round {r + 1}/{a.rounds})")
            if m == "bare_zstd":
                cmd = [os.path.join(a.bin, "bench_read"), job["zstd_ds"], "--threads", str(a.threads),
                       "--modes", "zstd_nt,reader_nt", "--passes", "3", "--check", "off", "--breakdown", "off"]
            else:
                py = a.tf_python if m == "tfdata" else a.python
                epochs = min(a.epochs, 2) if m == "source_cv2" else a.epochs  # 10-20x slower than the rest
                cmd = [py, os.path.abspath(__file__), "run", "--method", m, "--work", a.work, "--epochs",
                       str(epochs), "--seed", str(a.seed + r), "--threads", str(a.threads)]
                if r == 0:
                    cmd.append("--check")
                if a.bare_lib and m in U8_METHODS:
                    cmd += ["--bare-lib", a.bare_lib]
            start = time.perf_counter()
            p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=a.timeout)
            wall = time.perf_counter() - start
            lines = [x for x in p.stdout.splitlines() if x.startswith("{")]
            if p.returncode != 0 or not lines:
                tail = " | ".join(p.stderr.strip().splitlines()[-3:])
                log(f"{m} failed (exit {p.returncode}): {tail}")
                record(m, {"failed": f"exit {p.returncode}: {tail[-400:]}", "round": r})
                continue
            result = json.loads(lines[-1])
            result["round"] = r
            result["process_wall_s"] = round(wall, 2)
            record(m, result)
    if any(m.startswith("sp_") for m in methods):
        log(f"{job['job']}: the parts of a shardpack batch")
        p = subprocess.run([a.python, os.path.abspath(__file__), "parts", "--work", a.work, "--threads", str(a.threads)],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=a.timeout)
        lines = [x for x in p.stdout.splitlines() if x.startswith("{")]
        if p.returncode == 0 and lines:
            record("parts", json.loads(lines[-1]))
        else:
            log(f"parts failed (exit {p.returncode}): {p.stderr.strip().splitlines()[-1:]}")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("--job", required=True)
    p.add_argument("--src", required=True)
    p.add_argument("--raw-ds", required=True)
    p.add_argument("--zstd-ds", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--src-size", type=int, nargs=2)
    p = sub.add_parser("write")
    p.add_argument("--format", required=True, choices=["mds", "wds", "litdata"])
    p.add_argument("--work", required=True)
    p = sub.add_parser("run")
    p.add_argument("--method", required=True, choices=[m for m in ALL_METHODS if m != "bare_zstd"])
    p.add_argument("--work", required=True)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--check", action="store_true")
    p.add_argument("--bare-lib", help="py_bare_zstd.cpp built as a shared library: the uint8 methods time "
                                      "bare zstd epochs in their own process, between their own")
    p = sub.add_parser("parts")
    p.add_argument("--work", required=True)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--reps", type=int, default=3)
    p = sub.add_parser("drive")
    p.add_argument("--work", required=True)
    p.add_argument("--results", required=True)
    p.add_argument("--python", required=True)
    p.add_argument("--tf-python")
    p.add_argument("--bin", required=True)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--methods")
    p.add_argument("--setup", help="setup_py_venv.sh's JSON: ways whose package is missing are skipped")
    p.add_argument("--timeout", type=float, default=900)
    p.add_argument("--bare-lib", help="passed to run for the uint8 methods")
    a = ap.parse_args()
    if getattr(a, "work", None):
        a.work = os.path.abspath(a.work)
    if getattr(a, "epochs", 2) < 1:
        ap.error("--epochs must be at least 1")
    return {"prepare": cmd_prepare, "write": cmd_write, "run": cmd_run, "parts": cmd_parts,
            "drive": cmd_drive}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
