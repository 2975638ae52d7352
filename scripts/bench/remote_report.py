#!/usr/bin/env python3
"""The table of the object-storage benchmark (scripts/bench/remote_bench.sh): each way of reading
the same records, first and second epoch (medians over rounds), and the targets of issue 29 as
ratios of one run.

    remote_report.py WAYS.jsonl FIRST_BATCH.json PEERS.jsonl --json OUT.json --markdown OUT.md

WAYS.jsonl: tools/bench_remote --way lines; PEERS.jsonl: remote_peers.py measure lines (may be
empty: the Python readers left out).
"""
import argparse
import json
import statistics

WAYS = (("local", "C++ reader, local disk (evicted), defaults"),
        ("auto", "C++ reader, server, defaults (io auto)"),
        ("pread", "C++ reader, server, io=pread, global shuffle (before the engine)"),
        ("pread-blocks", "C++ reader, server, io=pread, blocks order (before the engine, its best)"))
PEERS = (("shardpack", "shardpack.torch.Loader, server, defaults"),
         ("mosaicml-streaming", "MosaicML Streaming (MDS), server"),
         ("webdataset", "WebDataset, server (curl; shardshuffle, shuffle(1000))"),
         ("litdata", "LitData, server"))


def lines(path):
    out = []
    for line in open(path):
        line = line.strip()
        if line.startswith("{"):
            out.append(json.loads(line))
    return out


def timed_after_imports(runs):
    """The runs whose clock started after the reader's imports (remote_peers.py since it says
    so), where there are any: an earlier line counted seconds of `import torch` in epoch 1."""
    later = [r for r in runs if r.get("imports_before_clock")]
    return later or runs


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def summarize(runs, epoch):
    """Medians of one epoch's figures over the runs of one way."""
    es = [r[epoch] for r in runs if epoch in r]
    if not es:
        return None
    s = {k: med([e.get(k) for e in es]) for k in ("seconds", "samples_per_s", "mb_per_s", "gets", "fetched_bytes")}
    if runs[0].get("record_bytes"):  # MB/s of the same tensors for every reader
        s["mb_per_s"] = s["samples_per_s"] * runs[0]["record_bytes"] / 1e6
    s["rounds"] = [e["samples_per_s"] for e in es]
    s["peak_rss_kb"] = med([r.get("peak_rss_kb") for r in runs])
    s["worker_rss_kb"] = med([r.get("largest_worker_peak_rss_kb") for r in runs])
    return s


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("ways")
    ap.add_argument("first_batch")
    ap.add_argument("peers")
    ap.add_argument("--json", required=True)
    ap.add_argument("--markdown", required=True)
    a = ap.parse_args()
    ways = lines(a.ways)
    fb = json.load(open(a.first_batch))
    peers = lines(a.peers)
    rows, table = [], {}
    for key, label, runs in ([(k, l, [w for w in ways if w["way"] == k]) for k, l in WAYS] +
                             [(k, l, timed_after_imports([p for p in peers if p.get("peer") == k and "epoch1" in p]))
                              for k, l in PEERS]):
        if not runs:
            continue
        r0 = runs[0]
        epochs = (("epoch1", "1 (cold)"), ("epoch2", "2"), ("warm", "warm (fresh open, resident)"))
        for e, elabel in epochs:
            s = summarize(runs, e)
            if s is None:
                continue
            io = r0.get("warm_io") if e == "warm" else r0.get("io", "")
            order = r0.get("order", "global" if key == "local" else "")
            if key == "local" and e != "warm":
                order = ""
            table[(key, e)] = s
            rows.append((label, io or "", order or "", elabel, s))
    left_out = [p for p in peers if p.get("ok") is False]

    def ratio(x, y):
        a_, b_ = table.get(x), table.get(y)
        return a_["samples_per_s"] / b_["samples_per_s"] if a_ and b_ else None

    targets = []
    for what, x, y, limit in (
            ("C++ defaults, cold epoch / MosaicML Streaming's >= 2", ("auto", "epoch1"), ("mosaicml-streaming", "epoch1"), 2.0),
            ("C++ defaults, cold epoch / WebDataset's >= 1", ("auto", "epoch1"), ("webdataset", "epoch1"), 1.0),
            ("Loader defaults, cold epoch / MosaicML Streaming's >= 2", ("shardpack", "epoch1"), ("mosaicml-streaming", "epoch1"), 2.0),
            ("Loader defaults, cold epoch / WebDataset's >= 1", ("shardpack", "epoch1"), ("webdataset", "epoch1"), 1.0),
            ("C++ defaults, second epoch / local warm read >= 0.8", ("auto", "epoch2"), ("local", "warm"), 0.8),
            ("C++ defaults, second epoch / local second epoch >= 0.8", ("auto", "epoch2"), ("local", "epoch2"), 0.8),
            ("C++ defaults, cold epoch / io=pread global (no cost to the first) >= 1", ("auto", "epoch1"), ("pread", "epoch1"), 1.0),
            ("C++ defaults, cold epoch / io=pread blocks order >= 1", ("auto", "epoch1"), ("pread-blocks", "epoch1"), 1.0)):
        v = ratio(x, y)
        if v is not None:
            targets.append({"what": what, "value": v, "limit": limit, "met": v >= limit})
    out = {"ways": ways, "first_batch": fb, "peers": peers, "targets": targets}
    json.dump(out, open(a.json, "w"), indent=1)
    f = lambda v, d=1: "" if v is None else ("%.*f" % (d, v))
    md = ["| reader (2 threads or workers) | io | order | epoch | samples/s | MB/s | GETs | MB fetched | peak RSS MB |",
          "|---|---|---|---|---:|---:|---:|---:|---:|"]
    for label, io, order, elabel, s in rows:
        rss = f(s["peak_rss_kb"] / 1024, 0) if s["peak_rss_kb"] else ""
        if s.get("worker_rss_kb"):
            rss += " + %s per worker" % f(s["worker_rss_kb"] / 1024, 0)
        remote = "local" not in label
        md.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            label, io, order, elabel, f(s["samples_per_s"]), f(s["mb_per_s"]),
            f(s["gets"], 0) if remote and s["gets"] is not None else "",
            f(s["fetched_bytes"] / 1e6) if remote and s["fetched_bytes"] is not None else "", rss))
    md.append("")
    w0 = ways[0] if ways else {}
    md.append("%s records (%s MB in %s shards), batches of %s, %s threads; medians of %d rounds; samples/s per round: %s. "
              "MB/s: the uint8 tensors delivered (image and one-hot label). Epoch 1 is timed from the open (C++) or the "
              "dataset's creation (Python), downloads included; peak RSS: the process's (C++ ways: one process per way "
              "and round), the largest DataLoader worker's beside it. S3 range buffer (io=pread) %d MiB. First batch of a "
              "%s-shard dataset, empty disk cache: open %.3f s, open to first batch %.3f s (median of 3, max %.3f), %s GETs."
              % (w0.get("records"), f(w0.get("dataset_bytes", 0) / 1e6, 0), w0.get("shards"), w0.get("batch"), w0.get("threads"),
                 max([len(s["rounds"]) for *_, s in rows] or [0]),
                 "; ".join("%s %s %s" % (key_of(label), el, ", ".join("%.0f" % x for x in s["rounds"]))
                           for label, _, _, el, s in rows),
                 w0.get("buffer_bytes", 0) >> 20, fb.get("shards"), fb.get("open_s_median", 0),
                 fb.get("open_to_first_batch_s_median", 0), fb.get("open_to_first_batch_s_max", 0), fb.get("gets_median", "?")))
    for p in left_out:
        md.append("%s left out: %s" % (p.get("peer"), p.get("reason")))
    if not peers:
        md.append("The Python readers (shardpack's Loader, MDS, WebDataset, LitData) left out: no venv with them (see remote_bench.sh).")
    md.append("")
    md.append("| target | value | met |")
    md.append("|---|---:|---|")
    for t in targets:
        md.append("| %s | %.2f | %s |" % (t["what"], t["value"], "yes" if t["met"] else "NO"))
    open(a.markdown, "w").write("\n".join(md) + "\n")


def key_of(label):
    for k, l in WAYS + PEERS:
        if l == label:
            return k
    return label


if __name__ == "__main__":
    main()
