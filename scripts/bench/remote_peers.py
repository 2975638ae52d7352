#!/usr/bin/env python3
"""The Python side of the remote-reading benchmark: shardpack's torch Loader, MosaicML Streaming
(MDS), WebDataset and LitData, each reading its own format from the same S3 server
(remote_bench.sh starts SeaweedFS on 127.0.0.1), with the same tensors: every record of a local
shardpack dataset, read with shardpack, written with MDSWriter / webdataset.ShardWriter /
litdata.optimize (uint8 image HxWxC and uint8 one-hot label, no compression, shards of about
the size of shardpack's), uploaded with boto3.

    remote_peers.py prepare --local DIR --endpoint URL --bucket B --work DIR
    remote_peers.py measure --peer NAME --local DIR --endpoint URL --bucket B --work DIR
                    [--batch 256] [--batches 0] [--workers 2] [--seed 0]

prepare writes and uploads the peers' formats once (the shardpack dataset is pushed by
remote_bench.sh). measure runs one reader in this process (its peak RSS is the reader's), with
`workers` workers: DataLoader workers for the peers, Loader(threads=workers) for shardpack, each
with its defaults otherwise (shardpack: io and order "auto"; MDS: shuffle=True; WebDataset:
shardshuffle=100 (what its True means) and .shuffle(1000), as its README shuffles; LitData:
shuffle=True). Epoch 1 is timed from the dataset's creation into a fresh local cache
(downloads included); epoch 2 reads again from the same objects (MDS and LitData from their
local copies). `batches` batches of `batch` samples per epoch (0: the whole epoch). Prints one
JSON line: per epoch samples/s, MB/s of the tensors delivered and bytes added to the cache
folder per byte delivered (for the readers that keep one), the process's peak RSS and its
largest worker's.
"""
import argparse
import functools
import json
import os
import shutil
import statistics
import sys
import time

import numpy as np


def folder_bytes(path):
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            try:
                total += os.path.getsize(os.path.join(root, f))
            except OSError:
                pass
    return total


# litdata.optimize runs fn in worker processes it starts with spawn (not fork): they see none of
# this process's globals, so the tensors reach them through files (.npy, memory-mapped once per
# worker) named in fn's arguments. fn must be a module-level function (pickled by name).
_MAPPED = {}


def _lit_sample(images_path, labels_path, i):
    for p in (images_path, labels_path):
        if p not in _MAPPED:
            _MAPPED[p] = np.load(p, mmap_mode="r")
    return {"image": np.array(_MAPPED[images_path][i]), "label": np.array(_MAPPED[labels_path][i])}


def upload(s3, bucket, folder, prefix):
    for root, _, files in os.walk(folder):
        for f in files:
            p = os.path.join(root, f)
            s3.upload_file(p, bucket, prefix + "/" + os.path.relpath(p, folder))


def prepare(a, s3, images, labels, shard_bytes):
    """Writes and uploads MDS, WebDataset and LitData copies of the tensors; a peer whose library
    is missing is left out with the reason."""
    n = len(images)
    done = {}
    try:
        from streaming import MDSWriter
        mds = os.path.join(a.work, "mds")
        shutil.rmtree(mds, ignore_errors=True)
        h, w, c = images.shape[1:]
        cols = {"image": "ndarray:uint8:%d,%d,%d" % (h, w, c), "label": "ndarray:uint8:%s" % ",".join(map(str, labels.shape[1:]))}
        with MDSWriter(out=mds, columns=cols, size_limit=shard_bytes) as wr:
            for i in range(n):
                wr.write({"image": images[i], "label": labels[i]})
        upload(s3, a.bucket, mds, "peers/mds")
        done["mosaicml-streaming"] = {"ok": True}
    except Exception as e:  # a peer that cannot run is left out, with the reason
        done["mosaicml-streaming"] = {"ok": False, "reason": "%s: %s" % (type(e).__name__, str(e)[:300])}
    try:
        import webdataset as wds
        folder = os.path.join(a.work, "wds")
        shutil.rmtree(folder, ignore_errors=True)
        os.makedirs(folder)
        with wds.ShardWriter(os.path.join(folder, "shard-%06d.tar"), maxsize=shard_bytes, verbose=0) as wr:
            for i in range(n):
                wr.write({"__key__": "%08d" % i, "image.bin": images[i].tobytes(), "label.bin": labels[i].tobytes()})
        upload(s3, a.bucket, folder, "peers/wds")
        done["webdataset"] = {"ok": True}
    except Exception as e:
        done["webdataset"] = {"ok": False, "reason": "%s: %s" % (type(e).__name__, str(e)[:300])}
    try:
        import litdata
        lit = os.path.join(a.work, "lit")
        shutil.rmtree(lit, ignore_errors=True)
        images_path, labels_path = os.path.join(a.work, "lit-images.npy"), os.path.join(a.work, "lit-labels.npy")
        np.save(images_path, images)
        np.save(labels_path, labels)
        litdata.optimize(fn=functools.partial(_lit_sample, images_path, labels_path), inputs=list(range(n)),
                         output_dir=lit, chunk_bytes=shard_bytes, num_workers=1)
        os.remove(images_path)
        os.remove(labels_path)
        upload(s3, a.bucket, lit, "peers/lit")
        done["litdata"] = {"ok": True}
    except Exception as e:
        done["litdata"] = {"ok": False, "reason": "%s: %s" % (type(e).__name__, str(e)[:300])}
    return done


def _wds_arrays(sample, image_shape, label_shape):
    image, label = sample
    return np.frombuffer(image, np.uint8).reshape(image_shape), np.frombuffer(label, np.uint8).reshape(label_shape)


def epochs_of(a, s3, cache, meta):
    """The peer's two epochs: a generator of generators of batch sizes."""
    import torch.utils.data as tud
    if a.peer == "shardpack":
        import shardpack.torch as spt
        os.environ["SHARDPACK_CACHE_DIR"] = cache  # empty: heads and indexes fetched too, as the peers' are
        ld = spt.Loader("s3://%s/bench/ds" % a.bucket, a.batch, threads=a.workers, seed=a.seed, dtype="uint8",
                        drop_last=True)
        meta["io"] = ld.dataset.io
        meta["order"] = ld.dataset.preferred_order
        for _ in range(2):
            yield (len(images) for images, _ in ld)
    elif a.peer == "mosaicml-streaming":
        import streaming.base.util as su
        from streaming import StreamingDataset
        su.clean_stale_shared_memory()
        sd = StreamingDataset(remote="s3://%s/peers/mds" % a.bucket, local=cache, shuffle=True, shuffle_seed=a.seed,
                              batch_size=a.batch)
        dl = tud.DataLoader(sd, batch_size=a.batch, num_workers=a.workers, drop_last=True)
        for _ in range(2):
            yield (len(b["image"]) for b in dl)
    elif a.peer == "webdataset":
        import webdataset as wds
        keys = sorted(o["Key"] for o in s3.list_objects_v2(Bucket=a.bucket, Prefix="peers/wds/")["Contents"])
        # Presigned URLs read with curl: WebDataset's way to read from a server without its
        # credentials in the URL (pipe: a command per shard).
        urls = ["pipe:curl -s -f '%s'" % s3.generate_presigned_url("get_object", Params={"Bucket": a.bucket, "Key": k},
                                                                    ExpiresIn=3600) for k in keys]
        shapes = meta["image_shape"], meta["label_shape"]
        ds = (wds.WebDataset(urls, shardshuffle=100, seed=a.seed).shuffle(1000).to_tuple("image.bin", "label.bin")
              .map(functools.partial(_wds_arrays, image_shape=shapes[0], label_shape=shapes[1]))
              .batched(a.batch, partial=False))
        dl = tud.DataLoader(ds, batch_size=None, num_workers=a.workers)
        for _ in range(2):
            yield (len(images) for images, _ in dl)
    elif a.peer == "litdata":
        import litdata
        sd = litdata.StreamingDataset("s3://%s/peers/lit" % a.bucket, shuffle=True, seed=a.seed, cache_dir=cache)
        # prefetch_factor=2: litdata 0.2.40 passes None with num_workers=0, which Debian's
        # torch 1.13 DataLoader refuses (it accepts only its default, 2, without workers).
        dl = litdata.StreamingDataLoader(sd, batch_size=a.batch, num_workers=a.workers, prefetch_factor=2, drop_last=True)
        for _ in range(2):
            yield (len(b["image"]) for b in dl)
    else:
        raise ValueError("unknown peer %s" % a.peer)


def measure(a, s3):
    import resource
    meta = json.load(open(os.path.join(a.work, "peers-meta.json")))
    record_bytes = meta["record_bytes"]
    want = meta["records"] if a.batches == 0 else min(meta["records"], a.batch * a.batches)
    cache = os.path.join(a.work, "cache-" + a.peer)
    shutil.rmtree(cache, ignore_errors=True)
    # The reader's modules imported before the clock starts (importing torch takes seconds on a
    # loaded machine, and is no part of reading).
    import importlib
    import torch.utils.data  # noqa: F401
    importlib.import_module({"shardpack": "shardpack.torch", "mosaicml-streaming": "streaming"}.get(a.peer, a.peer))
    out = {"tool": "remote_peers", "peer": a.peer, "imports_before_clock": True, "workers": a.workers, "batch": a.batch, "samples_per_epoch": want}
    t0 = time.perf_counter()
    fetched = 0
    for e, batches in enumerate(epochs_of(a, s3, cache, meta)):
        got = 0
        for n in batches:
            got += n
            if got + a.batch > want:
                break
        dt = time.perf_counter() - t0
        total = folder_bytes(cache)
        out["epoch%d" % (e + 1)] = {"seconds": round(dt, 3), "samples": got, "samples_per_s": round(got / dt, 1),
                                    "mb_per_s": round(got * record_bytes / dt / 1e6, 1),
                                    "cache_bytes_per_byte_delivered": round((total - fetched) / (got * record_bytes), 3)}
        fetched = total
        t0 = time.perf_counter()
    for k in ("io", "order"):
        if k in meta:
            out[k] = meta[k]
    out["peak_rss_kb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    out["largest_worker_peak_rss_kb"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    shutil.rmtree(cache, ignore_errors=True)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("step", choices=("prepare", "measure"))
    ap.add_argument("--peer", default="")
    ap.add_argument("--local", required=True)
    ap.add_argument("--endpoint", required=True)
    ap.add_argument("--bucket", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--batches", type=int, default=0)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    os.environ["AWS_ENDPOINT_URL"] = a.endpoint
    os.environ["S3_ENDPOINT_URL"] = a.endpoint  # MosaicML Streaming's name for it
    import boto3

    s3 = boto3.client("s3", endpoint_url=a.endpoint)
    os.makedirs(a.work, exist_ok=True)
    if a.step == "measure":
        try:
            out = measure(a, s3)
        except Exception as e:  # a peer that cannot run is left out, with the reason
            out = {"tool": "remote_peers", "peer": a.peer, "ok": False, "reason": "%s: %s" % (type(e).__name__, str(e)[:300])}
        print(json.dumps(out))
        return 0
    import shardpack
    ds = shardpack.open(a.local)
    n = len(ds)
    images, labels = ds.read_batch(np.arange(n, dtype=np.int64), dtype="uint8", label="onehot")
    shard_bytes = max(1 << 20, os.path.getsize(os.path.join(a.local, sorted(f for f in os.listdir(a.local) if f.endswith(".spk"))[0])))
    meta = {"records": n, "record_bytes": images[0].nbytes + labels[0].nbytes, "image_shape": list(images.shape[1:]),
            "label_shape": list(labels.shape[1:])}
    meta["prepared"] = prepare(a, s3, images, labels, shard_bytes)
    json.dump(meta, open(os.path.join(a.work, "peers-meta.json"), "w"))
    print(json.dumps({"tool": "remote_peers", "step": "prepare", **meta}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
