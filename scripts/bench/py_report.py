#!/usr/bin/env python3
"""The Python reading benchmark's table (scripts/bench/py_read_bench.py drive wrote the runs).

    py_report.py RESULTS.jsonl --json OUT.json [--markdown OUT.md] [--setup SETUP.json]

One row per way of reading, per job: the median over the interleaved rounds of samples/s (N /
the median steady epoch), the steady epoch, the first epoch and the time to the first batch (a
fresh process), and peak RSS (the process and its DataLoader workers; anon = not file-backed).
The target column holds issue 19's targets, each a ratio of medians from the same run:
  fresh read_batch of raw records (new arrays) >= 0.9x read_batch(out=) into reused arrays
    (out= epochs timed in sp_raw_fresh's own process between its epochs; the ratio per run,
    then the median; else sp_raw_batch's separate process)
    and >= 1.0x NumPy indexing of the in-RAM .npy array (npy_ram);
  Loader (float32, the faster of new tensors and reused buffers) >= 3x TFRecord + tf.data and
    >= 2x every streaming peer (MosaicML Streaming, WebDataset, LitData);
  uint8 delivery of zstd records (Loader, uint8 images + index labels) >= 0.85x bare
    ZSTD_decompressDCtx of the same frames on the same threads, timed in the Loader's own
    process between its epochs (py_bare_zstd.cpp; the ratio per run, then the median); where
    that was not run, against bench_read's separate process;
and, without a target, Loader against the .npy arrays in a DataLoader (npy_dl).
shardpack's figure in a target is its faster way for that kind of record, named in the cell.
A way that could not run says why instead of a number.

--markdown writes one table with a column group per job (scripts/bench/README.md, "Python reading
performance")."""
import argparse
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from report import cpu_model, load  # noqa: E402

JOBS = {
    "seg": "512x512 RGB segmentation, one-hot float32 labels (from 1080p PNG + color mask)",
    "cls": "112x112 grey classification, int64 class ids (from ~160 px JPEGs)",
}
WAYS = [
    ("source_cv2", "PyTorch Dataset, OpenCV decode of the source files, DataLoader 2 workers"),
    ("npy_ram", "in-RAM .npy array, indexed in the loop, normalised with torch (2 threads)"),
    ("npy_dl", "in-RAM .npy arrays, map-style Dataset in a DataLoader, 2 workers, default collate"),
    ("tfdata", "TFRecord + tf.data (parallel map, prefetch)"),
    ("mds", "MosaicML Streaming (MDS), DataLoader 2 workers"),
    ("wds", "WebDataset, DataLoader 2 workers"),
    ("litdata", "LitData, StreamingDataLoader 2 workers"),
    ("sp_zstd_loader", "shardpack zstd, Loader, new float32 tensors (2 threads)"),
    ("sp_zstd_ring", "shardpack zstd, Loader, reused buffers (reuse_buffers=True), float32"),
    ("sp_raw_loader", "shardpack raw, Loader, new float32 tensors"),
    ("sp_raw_ring", "shardpack raw, Loader, reused buffers, float32"),
    ("sp_zstd_u8", "shardpack zstd, Loader, uint8 images + index labels, new tensors"),
    ("sp_zstd_u8_ring", "shardpack zstd, Loader, uint8 images + index labels, reused buffers"),
    ("sp_zstd_dl", "shardpack zstd, shardpack.torch.Dataset in DataLoader 2 workers (spt.collate)"),
    ("sp_raw_dl", "shardpack raw, shardpack.torch.Dataset in DataLoader 2 workers (spt.collate)"),
    ("sp_zstd_batch", "shardpack zstd, read_batch(out=) into reused arrays in the loop"),
    ("sp_raw_batch", "shardpack raw, read_batch(out=) into reused arrays in the loop"),
    ("sp_raw_fresh", "shardpack raw, read_batch() into new arrays in the loop"),
    ("bare_zstd", "bare ZSTD_decompressDCtx of the zstd records, 2 threads (C++, uint8, no conversion)"),
    ("bare_zstd_inproc", "bare ZSTD_decompressDCtx in the uint8 Loaders' processes, an epoch after each of theirs"),
]
AGAINST = {"npy_ram": "the .npy array indexed in the loop", "npy_dl": "the .npy arrays in a DataLoader",
           "tfdata": "TFRecord + tf.data", "mds": "MosaicML Streaming", "wds": "WebDataset", "litdata": "LitData",
           "bare_zstd": "bare zstd (bench_read, its own process)",
           "bare_zstd_inproc": "bare zstd in the same process, epochs interleaved",
           "sp_raw_batch": "read_batch(out=) of raw records (its own process)",
           "sp_raw_batch_inproc": "read_batch(out=) of raw records in the same process, epochs interleaved"}
FLOAT_LOADERS = {"zstd": ("sp_zstd_loader", "sp_zstd_ring"), "raw": ("sp_raw_loader", "sp_raw_ring")}
U8_LOADERS = ("sp_zstd_u8", "sp_zstd_u8_ring")


def med(values):
    values = [v for v in values if isinstance(v, (int, float))]
    return statistics.median(values) if values else None


def summarise(runs, job, way):
    if way == "bare_zstd_inproc":  # measured inside the uint8 Loaders' runs
        bare = [e["bare_zstd_in_process"] for w in U8_LOADERS for e in runs.get(f"py.{job}.{w}", [])
                if "bare_zstd_in_process" in e]
        if not bare:
            return None
        return {"status": "ok", "samples_per_s": med([b["samples_per_s"] for b in bare]), "runs": len(bare),
                "failed_runs": 0}
    entries = runs.get(f"py.{job}.{way}", [])
    skipped = [e["skipped"] for e in entries if "skipped" in e]
    if skipped:
        return {"status": "skipped", "reason": skipped[0]}
    ok = [e for e in entries if "failed" not in e]
    failed = [e["failed"] for e in entries if "failed" in e]
    if not ok:
        return {"status": "failed", "reason": failed[0] if failed else "not run"} if (failed or entries) else None
    if way == "bare_zstd":
        z = med([e.get("modes", {}).get("zstd_nt", {}).get("samples_per_s") for e in ok])
        r = med([e.get("modes", {}).get("reader_nt", {}).get("samples_per_s") for e in ok])
        return {"status": "ok", "samples_per_s": z, "reader_uint8_samples_per_s": r, "runs": len(ok),
                "failed_runs": len(failed)}
    checks = [e["check"]["ok"] for e in ok if "check" in e]
    paired = [e["bare_zstd_in_process"]["ratio"] for e in ok if "bare_zstd_in_process" in e]
    out_paired = [e["read_batch_out_in_process"]["ratio"] for e in ok if "read_batch_out_in_process" in e]
    return {
        "vs_bare_in_process": med(paired), "vs_out_in_process": med(out_paired),
        "status": "ok", "runs": len(ok), "failed_runs": len(failed),
        "samples_per_s": med([e["samples_per_s"] for e in ok]),
        "epoch_s": med([med(e["epoch_s"]) for e in ok if e["epoch_s"]]),
        "first_epoch_s": med([e["first_epoch_s"] for e in ok]),
        "ttfb_s": med([e["ttfb_s"] for e in ok]),
        "peak_rss_mb": med([e["peak_rss_bytes"] / 1e6 for e in ok]),
        "peak_anon_mb": med([e["peak_anon_bytes"] / 1e6 for e in ok]),
        "baseline_rss_mb": med([e["baseline_rss_bytes"] / 1e6 for e in ok]),
        "processes": max(e.get("processes", 1) for e in ok),
        "check": (all(checks) if checks else None),
    }


def build(runs):
    rows, targets = [], []
    for job, title in JOBS.items():
        if not any(k.startswith(f"py.{job}.") for k in runs):
            continue
        s = {way: summarise(runs, job, way) for way, _ in WAYS}
        rate = {w: (v["samples_per_s"] if v and v["status"] == "ok" else None) for w, v in s.items()}

        def best(*ways):
            cands = [(rate[w], w) for w in ways if rate.get(w)]
            return max(cands) if cands else (None, None)

        per_row_target = {}

        def target(way, text, ratio, minimum, sp_way):
            met = None if ratio is None or minimum is None else ratio >= minimum
            entry = {"job": job, "against": way, "target": text, "way": sp_way, "ratio": ratio, "minimum": minimum,
                     "met": met}
            targets.append(entry)
            per_row_target.setdefault(way, []).append(entry)

        fresh = rate.get("sp_raw_fresh")
        # Fresh against out=: each sp_raw_fresh run's own ratio to the out= epochs it timed between
        # its own (median over the runs), else the two separate processes' rates.
        fresh_paired = s["sp_raw_fresh"].get("vs_out_in_process") if s.get("sp_raw_fresh") and \
            s["sp_raw_fresh"]["status"] == "ok" else None
        if fresh_paired:
            target("sp_raw_batch_inproc", "fresh read_batch of raw records", fresh_paired, 0.9, "sp_raw_fresh")
        if fresh and rate.get("sp_raw_batch"):
            target("sp_raw_batch", "fresh read_batch of raw records", fresh / rate["sp_raw_batch"],
                   None if fresh_paired else 0.9, "sp_raw_fresh")
        if fresh and rate.get("npy_ram"):
            target("npy_ram", "fresh read_batch of raw records", fresh / rate["npy_ram"], 1.0, "sp_raw_fresh")
        loaders = {kind: best(*ways) for kind, ways in FLOAT_LOADERS.items()}
        for peer, minimum in (("tfdata", 3.0), ("mds", 2.0), ("wds", 2.0), ("litdata", 2.0), ("npy_dl", None)):
            if not rate.get(peer):
                continue
            for kind, (r, way) in loaders.items():
                if r:
                    target(peer, f"Loader {kind}", r / rate[peer], minimum, way)
        # uint8 delivery against bare zstd: the ratio of each run to the bare zstd epochs timed in
        # its own process (medians over the runs), else against bench_read's separate process.
        paired = [(s[w]["vs_bare_in_process"], w) for w in U8_LOADERS
                  if s.get(w) and s[w]["status"] == "ok" and s[w].get("vs_bare_in_process")]
        u8_rate, u8_way = best(*U8_LOADERS)
        if paired:
            ratio, way = max(paired)
            target("bare_zstd_inproc", "uint8 delivery of zstd records", ratio, 0.85, way)
        if rate.get("bare_zstd") and u8_rate:
            target("bare_zstd", "uint8 delivery of zstd records", u8_rate / rate["bare_zstd"],
                   None if paired else 0.85, u8_way)
        for way, label in WAYS:
            v = s[way]
            if v is None:
                continue
            rows.append({"job": job, "job_title": title, "way": way, "label": label, **v,
                         "targets": per_row_target.get(way, [])})
    return rows, targets


def fmt(v, digits=1, unit=""):
    if v is None:
        return "n/a"
    if v >= 100:
        return f"{v:,.0f}{unit}"
    return f"{v:.{digits}f}{unit}"


def cells(r):
    if r["status"] != "ok":
        reason = r["reason"]
        return [r["label"], f"not measured: {reason}", "", "", "", "", ""]
    if r["way"] in ("bare_zstd", "bare_zstd_inproc"):
        t = "; ".join(target_text(e) for e in r["targets"])
        return [r["label"], fmt(r["samples_per_s"]), "", "", "", "", t]
    t = "; ".join(target_text(e) for e in r["targets"])
    rss = f"{fmt(r['peak_rss_mb'], 0)} ({fmt(r['peak_anon_mb'], 0)} anon)"
    if r["processes"] > 1:
        rss += f", {r['processes']} processes"
    check = "" if r.get("check") is not False else " CHECK FAILED"
    return [r["label"] + check, fmt(r["samples_per_s"]), fmt(r["epoch_s"], 2), fmt(r["first_epoch_s"], 2),
            fmt(r["ttfb_s"], 2), rss, t]


def target_text(e):
    goal = f" >= {e['minimum']:g}x" if e.get("minimum") else ""
    s = f"{e['target']} ({e['way']}){goal}"
    if e["ratio"] is None:
        return f"{s}: n/a"
    s = f"{s}: {e['ratio']:.2f}x"
    if e["met"] is None:
        return s
    return s + (" met" if e["met"] else " MISSED")


def parts_text(p):
    """One line: where a shardpack batch's time goes (py_read_bench.py parts)."""
    def us(k):
        v = p.get(k)
        return "n/a" if v is None else (f"{v:,.0f}" if v >= 100 else f"{v:.1f}")
    return (f"Parts, microseconds per sample ({p['threads']} threads, best of 3): read_batch zstd uint8 as stored "
            f"{us('zstd_read_u8_stored_us')}, zstd float32 NCHW {us('zstd_read_f32_us')}, raw uint8 "
            f"{us('raw_read_u8_stored_us')}, raw float32 {us('raw_read_f32_us')} (into reused buffers); Loader "
            f"epoch (zstd, new tensors per batch) {us('zstd_loader_us')}, with reused buffers "
            f"{us('zstd_loader_ring_us')}; allocating and filling new float "
            f"tensors of the batch's size {us('write_floor_us')} "
            f"({p.get('float_batch_bytes_per_sample', 0) / 1e6:.2f} MB a sample); the peers' uint8 -> float32 "
            f"NCHW step {us('normalise_u8_us')}.")


HEADER = ["way", "samples/s", "epoch s", "first epoch s", "first batch s", "peak RSS MB", "target"]


def combined_markdown(rows, targets):
    """One table, a column group per job: samples/s, epoch / first batch s, peak RSS; then one
    row per target with each job's ratio."""
    jobs = [j for j in JOBS if any(r["job"] == j for r in rows)]
    head = ["way"]
    for j in jobs:
        head += [f"{j} samples/s", f"{j} epoch / first batch s", f"{j} peak RSS MB"]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    by = {(r["job"], r["way"]): r for r in rows}
    for way, label in WAYS:
        if not any((j, way) in by for j in jobs):
            continue
        line = [label]
        for j in jobs:
            r = by.get((j, way))
            if r is None:
                line += ["", "", ""]
            elif r["status"] != "ok":
                line += [f"not measured: {r['reason']}", "", ""]
            elif way in ("bare_zstd", "bare_zstd_inproc"):
                line += [fmt(r["samples_per_s"]), "", ""]
            else:
                check = "" if r.get("check") is not False else " CHECK FAILED"
                rss = fmt(r["peak_rss_mb"], 0) + (f" ({r['processes']})" if r["processes"] > 1 else "")
                line += [fmt(r["samples_per_s"]) + check, f"{fmt(r['epoch_s'], 2)} / {fmt(r['ttfb_s'], 2)}", rss]
        out.append("| " + " | ".join(str(c).replace("|", "/") for c in line) + " |")
    order, cells_by = [], {}
    for t in targets:
        key = (t["against"], t["target"], t.get("minimum"))
        if key not in cells_by:
            order.append(key)
            cells_by[key] = {}
        cells_by[key][t["job"]] = t
    for key in order:
        against, text, minimum = key
        if minimum:
            line = [f"target: {text} >= {minimum:g}x against {AGAINST[against]}"]
        else:
            line = [f"ratio (no target): {text} against {AGAINST[against]}"]
        for j in jobs:
            t = cells_by[key].get(j)
            if t is None or t["ratio"] is None:
                line += ["n/a", "", ""]
                continue
            verdict = "" if t["met"] is None else (" met" if t["met"] else " MISSED")
            line += [f"{t['ratio']:.2f}x{verdict} ({t['way']})", "", ""]
        out.append("| " + " | ".join(line) + " |")
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("results")
    ap.add_argument("--json", required=True)
    ap.add_argument("--markdown")
    ap.add_argument("--setup", help="setup_py_venv.sh's JSON (versions of the peers)")
    a = ap.parse_args()
    runs = load(a.results)
    rows, targets = build(runs)
    if not rows:
        print("py_report: no Python benchmark runs in", a.results, file=sys.stderr)
        return 1
    setup = None
    if a.setup and os.path.exists(a.setup):
        with open(a.setup) as f:
            lines = [x for x in f.read().splitlines() if x.startswith("{")]
            setup = json.loads(lines[-1]) if lines else None
    samples = {}
    for k, v in runs.items():
        parts = k.split(".")
        if len(parts) == 3 and parts[0] == "py":
            for e in v:
                if "dataset_samples" in e:
                    samples[parts[1]] = e["dataset_samples"]
    rounds = max((e.get("round", 0) + 1 for v in runs.values() for e in v if isinstance(e, dict)), default=0)

    print(f"shardpack Python reading benchmark: {cpu_model()}, {os.cpu_count()} cores; batches of 64, "
          f"float32 NCHW, ImageNet-normalised, shuffled; medians of {rounds} interleaved rounds")
    md = []
    for job, title in JOBS.items():
        jr = [r for r in rows if r["job"] == job]
        if not jr:
            continue
        head = f"{job}: {title}, {samples.get(job, '?')} samples"
        table = [HEADER] + [cells(r) for r in jr]
        width = [max(len(str(c)) for c in col) for col in zip(*table)]
        print()
        print(head)
        for i, row in enumerate(table):
            print(" | ".join(str(c).ljust(w) for c, w in zip(row, width)))
            if i == 0:
                print("-+-".join("-" * w for w in width))
        md.append(f"**{head}**\n")
        md.append("| " + " | ".join(HEADER) + " |")
        md.append("|" + "---|" * len(HEADER))
        for row in table[1:]:
            md.append("| " + " | ".join(str(c).replace("|", "/") for c in row) + " |")
        parts = (runs.get(f"py.{job}.parts") or [None])[-1]
        if parts:
            text = parts_text(parts)
            print(text)
            md.append(text + "\n")
        md.append("")
    with open(a.json, "w") as f:
        json.dump({"machine": {"cpu": cpu_model(), "cores": os.cpu_count()}, "rounds": rounds, "samples": samples,
                   "setup": setup, "rows": rows, "targets": targets, "raw": runs}, f, indent=1)
    if a.markdown:
        with open(a.markdown, "w") as f:
            f.write(combined_markdown(rows, targets) + "\n" + "\n".join(md) + "\n")
    print(f"written: {a.json}" + (f", {a.markdown}" if a.markdown else ""), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
