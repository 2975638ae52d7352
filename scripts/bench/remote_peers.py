#!/usr/bin/env python3
"""The peers of the remote-reading benchmark: MosaicML Streaming (MDS) and LitData, each reading
its own format from the same S3 server as shardpack (scripts/bench.sh starts SeaweedFS on
127.0.0.1), with the same tensors: every record of a local shardpack dataset, read with
shardpack, written with MDSWriter / litdata.optimize (uint8 image HxWxC and uint8 one-hot
label, no compression, shards of about the size of shardpack's), uploaded with boto3.

    remote_peers.py --local DIR --endpoint URL --bucket B --work DIR [--batch 256] [--batches 20]
                    [--rounds 3]

Each measurement reads `batches` batches of `batch` samples in each library's own shuffled
order (its default shuffle) into a fresh local cache, timed from the dataset's creation
(downloads included, as shardpack's remote measurement includes its GETs). Prints one JSON
line: per peer, the median samples/s and bytes downloaded per byte delivered (from the size
of its cache folder), or the reason it was left out.
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--local", required=True)
    ap.add_argument("--endpoint", required=True)
    ap.add_argument("--bucket", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--batches", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    os.environ["AWS_ENDPOINT_URL"] = a.endpoint
    os.environ["S3_ENDPOINT_URL"] = a.endpoint  # MosaicML Streaming's name for it
    import boto3
    import shardpack

    s3 = boto3.client("s3", endpoint_url=a.endpoint)
    ds = shardpack.open(a.local)
    n = len(ds)
    images, labels = ds.read_batch(np.arange(n, dtype=np.int64), dtype="uint8", label="onehot")
    record_bytes = images[0].nbytes + labels[0].nbytes
    shard_bytes = max(1 << 20, os.path.getsize(os.path.join(a.local, sorted(f for f in os.listdir(a.local) if f.endswith(".spk"))[0])))
    want = min(n, a.batch * a.batches)
    out = {"tool": "remote_peers", "records": n, "record_bytes": record_bytes, "samples_per_round": want, "peers": {}}

    def measure(name, make_iter, cache_root):
        rates, ratios = [], []
        for r in range(a.rounds):
            cache = os.path.join(cache_root, "r%d" % r)
            shutil.rmtree(cache, ignore_errors=True)
            t0 = time.perf_counter()
            got = 0
            for batch in make_iter(cache, r):
                got += batch
                if got >= want:
                    break
            dt = time.perf_counter() - t0
            rates.append(got / dt)
            ratios.append(folder_bytes(cache) / (got * record_bytes))
            shutil.rmtree(cache, ignore_errors=True)
        out["peers"][name] = {"ok": True, "samples_per_s": round(statistics.median(rates), 1),
                              "bytes_fetched_per_byte_delivered": round(statistics.median(ratios), 3),
                              "rounds": [round(x, 1) for x in rates]}

    # MosaicML Streaming (MDS).
    try:
        from streaming import MDSWriter, StreamingDataset
        mds = os.path.join(a.work, "mds")
        shutil.rmtree(mds, ignore_errors=True)
        h, w, c = images.shape[1:]
        cols = {"image": "ndarray:uint8:%d,%d,%d" % (h, w, c), "label": "ndarray:uint8:%s" % ",".join(map(str, labels.shape[1:]))}
        with MDSWriter(out=mds, columns=cols, size_limit=shard_bytes) as wr:
            for i in range(n):
                wr.write({"image": images[i], "label": labels[i]})
        upload(s3, a.bucket, mds, "peers/mds")

        def mds_iter(cache, r):
            import streaming.base.util as su
            su.clean_stale_shared_memory()
            sd = StreamingDataset(remote="s3://%s/peers/mds" % a.bucket, local=cache, shuffle=True, shuffle_seed=r,
                                  batch_size=a.batch)
            import torch.utils.data as tud
            for b in tud.DataLoader(sd, batch_size=a.batch, num_workers=0):
                yield len(b["image"])

        measure("mosaicml-streaming", mds_iter, os.path.join(a.work, "mds-cache"))
    except Exception as e:  # a peer that cannot run is left out, with the reason
        out["peers"]["mosaicml-streaming"] = {"ok": False, "reason": "%s: %s" % (type(e).__name__, str(e)[:300])}

    # LitData.
    try:
        import litdata
        lit = os.path.join(a.work, "lit")
        shutil.rmtree(lit, ignore_errors=True)

        os.makedirs(a.work, exist_ok=True)
        images_path, labels_path = os.path.join(a.work, "lit-images.npy"), os.path.join(a.work, "lit-labels.npy")
        np.save(images_path, images)
        np.save(labels_path, labels)
        litdata.optimize(fn=functools.partial(_lit_sample, images_path, labels_path), inputs=list(range(n)),
                         output_dir=lit, chunk_bytes=shard_bytes, num_workers=1)
        os.remove(images_path)
        os.remove(labels_path)
        upload(s3, a.bucket, lit, "peers/lit")

        def lit_iter(cache, r):
            sd = litdata.StreamingDataset("s3://%s/peers/lit" % a.bucket, shuffle=True, seed=r, cache_dir=cache)
            # prefetch_factor=2: litdata 0.2.40 passes None with num_workers=0, which Debian's
            # torch 1.13 DataLoader refuses (it accepts only its default, 2, without workers).
            dl = litdata.StreamingDataLoader(sd, batch_size=a.batch, num_workers=0, prefetch_factor=2)
            for b in dl:
                yield len(b["image"])

        measure("litdata", lit_iter, os.path.join(a.work, "lit-cache"))
    except Exception as e:
        out["peers"]["litdata"] = {"ok": False, "reason": "%s: %s" % (type(e).__name__, str(e)[:300])}
    print(json.dumps(out))


if __name__ == "__main__":
    sys.exit(main())
