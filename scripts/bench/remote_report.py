#!/usr/bin/env python3
"""The table of the object-storage benchmark (scripts/bench/remote_bench.sh): samples/s from the
server against local disk and against MosaicML Streaming and LitData, GETs and bytes fetched,
the first batch of a 1,000-shard dataset, and the targets of issue 17 as ratios of one run.

    remote_report.py SHARDPACK.json FIRST_BATCH.json PEERS.json --json OUT.json --markdown OUT.md
"""
import argparse
import json


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("shardpack")
    ap.add_argument("first_batch")
    ap.add_argument("peers")
    ap.add_argument("--json", required=True)
    ap.add_argument("--markdown", required=True)
    a = ap.parse_args()
    sp = json.load(open(a.shardpack))
    fb = json.load(open(a.first_batch))
    peers = json.load(open(a.peers)).get("peers", {})
    m = sp["modes"]
    rows = []
    for name, label in (("local_global", "shardpack, local disk, global shuffle"),
                        ("local_blocks", "shardpack, local disk, blocks order"),
                        ("remote_global", "shardpack, server, global shuffle (64 KiB merges)"),
                        ("remote_blocks", "shardpack, server, blocks order (whole blocks read ahead)")):
        r = m[name]
        remote = name.startswith("remote")
        rows.append((label, r["samples_per_s"], r["gets_per_batch"] if remote else None,
                     r["gets_per_mb_delivered"] if remote else None, r["bytes_fetched_per_byte_delivered"] if remote else None))
    for peer in ("mosaicml-streaming", "litdata"):
        p = peers.get(peer)
        if p and p.get("ok"):
            rows.append((peer + ", server, its own shuffle", p["samples_per_s"], None, None, p["bytes_fetched_per_byte_delivered"]))
    rb = m["remote_blocks"]["samples_per_s"]
    targets = [
        ("server blocks / local blocks >= 0.5", rb / m["local_blocks"]["samples_per_s"], 0.5, ">="),
        ("GETs per MB delivered (server, blocks) <= 1", m["remote_blocks"]["gets_per_mb_delivered"], 1.0, "<="),
        ("open to first batch, 1,000 shards, s <= 1", fb["open_to_first_batch_s_median"], 1.0, "<="),
    ]
    for peer in ("mosaicml-streaming", "litdata"):
        p = peers.get(peer)
        if p and p.get("ok"):
            targets.append(("server blocks / %s >= 2" % peer, rb / p["samples_per_s"], 2.0, ">="))
    out = {"shardpack": sp, "first_batch": fb, "peers": peers,
           "targets": [{"what": w, "value": v, "limit": l, "met": (v >= l if op == ">=" else v <= l)} for w, v, l, op in targets]}
    json.dump(out, open(a.json, "w"), indent=1)
    f = lambda v, d=1: "" if v is None else ("%.*f" % (d, v))
    lines = ["| reader | samples/s | GETs per batch | GETs per MB delivered | bytes fetched per byte delivered |",
             "|---|---:|---:|---:|---:|"]
    for label, sps, gpb, gpm, fpd in rows:
        lines.append("| %s | %s | %s | %s | %s |" % (label, f(sps), f(gpb, 2), f(gpm, 3), f(fpd, 3)))
    lines.append("")
    lines.append("Range buffer %d MiB, blocks of %d KiB. " % (sp.get("buffer_bytes", 0) >> 20, sp.get("block_bytes", 0) >> 10) +
                 "%d records in %d shards, batches of %d, %d batches per measurement, %d rounds (medians). "
                 "First batch: %d shards, open %.3f s, open to first batch %.3f s (median of 3, max %.3f, empty "
                 "disk cache), %s GETs."
                 % (sp["records"], sp["shards"], sp["batch"], sp["batches"], sp["rounds"], fb["shards"],
                    fb["open_s_median"], fb["open_to_first_batch_s_median"], fb.get("open_to_first_batch_s_max", 0),
                    fb.get("gets_median", "?")))
    lines.append("Samples/s per round: " + "; ".join(
        "%s %s" % (name, ", ".join("%.0f" % x for x in m[name].get("samples_per_s_rounds", [])))
        for name in ("local_global", "local_blocks", "remote_global", "remote_blocks")) + ".")
    for peer in ("mosaicml-streaming", "litdata"):
        p = peers.get(peer)
        if p is not None and not p.get("ok"):
            lines.append("%s left out: %s" % (peer, p.get("reason")))
    if not peers:
        lines.append("MosaicML Streaming and LitData left out (no venv with them; see remote_bench.sh)")
    lines.append("")
    lines.append("| target | value | met |")
    lines.append("|---|---:|---|")
    for t in out["targets"]:
        lines.append("| %s | %.3f | %s |" % (t["what"], t["value"], "yes" if t["met"] else "NO"))
    open(a.markdown, "w").write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
