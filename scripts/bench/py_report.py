#!/usr/bin/env python3
"""The Python reading benchmark's table (scripts/bench/py_read_bench.py drive wrote the runs).

    py_report.py RESULTS.jsonl --json OUT.json [--markdown OUT.md] [--setup SETUP.json]

One row per way of reading, per job: the median over the interleaved rounds of samples/s (N /
the median steady epoch), the steady epoch, the first epoch and the time to the first batch (a
fresh process), and peak RSS (the process and its DataLoader workers; anon = not file-backed).
The target column holds the issue's targets, each a ratio of medians from the same run:
  raw records >= 0.8x the in-RAM .npy array, with peak RSS under a quarter of its;
  zstd records >= 0.85x bare ZSTD_decompressDCtx on the same threads;
  shardpack >= 3x TFRecord + tf.data, MosaicML Streaming (MDS), WebDataset and LitData.
shardpack's figure in a target is its faster way (Loader or DataLoader) for that kind of
record, named in the cell. A way that could not run says why instead of a number."""
import argparse
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from report import cpu_model, load  # noqa: E402

JOBS = {
    "seg": "512x512 RGB segmentation, one-hot float32 labels (from 1080p PNG + colour mask)",
    "cls": "112x112 grey classification, int64 class ids (from ~160 px JPEGs)",
}
WAYS = [
    ("source_cv2", "PyTorch Dataset, OpenCV decode of the source files, DataLoader 2 workers"),
    ("npy_ram", "in-RAM .npy array, indexed, normalised with torch (2 threads)"),
    ("tfdata", "TFRecord + tf.data (parallel map, prefetch)"),
    ("mds", "MosaicML Streaming (MDS), DataLoader 2 workers"),
    ("wds", "WebDataset, DataLoader 2 workers"),
    ("litdata", "LitData, StreamingDataLoader 2 workers"),
    ("sp_zstd_loader", "shardpack zstd, shardpack.torch.Loader (2 threads)"),
    ("sp_zstd_dl", "shardpack zstd, shardpack.torch.Dataset in DataLoader 2 workers"),
    ("sp_zstd_batch", "shardpack zstd, read_batch(out=) in the loop (2 threads)"),
    ("sp_raw_loader", "shardpack raw, shardpack.torch.Loader (2 threads)"),
    ("sp_raw_dl", "shardpack raw, shardpack.torch.Dataset in DataLoader 2 workers"),
    ("bare_zstd", "bare ZSTD_decompressDCtx of the zstd records, 2 threads (C++, uint8, no conversion)"),
]


def med(values):
    values = [v for v in values if isinstance(v, (int, float))]
    return statistics.median(values) if values else None


def summarise(runs, job, way):
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
    return {
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

        zstd_rate, zstd_way = best("sp_zstd_loader", "sp_zstd_dl")
        raw_rate, raw_way = best("sp_raw_loader", "sp_raw_dl")
        sp_rate, sp_way = best("sp_zstd_loader", "sp_zstd_dl", "sp_raw_loader", "sp_raw_dl")
        per_row_target = {}

        def target(way, text, ratio, minimum, maximum=None, ratio2=None):
            met = None
            if ratio is not None:
                met = ratio >= minimum if minimum is not None else True
                if maximum is not None:
                    met = met and ratio2 is not None and ratio2 < maximum
            entry = {"job": job, "against": way, "target": text, "ratio": ratio, "ratio_rss": ratio2, "met": met}
            targets.append(entry)
            per_row_target.setdefault(way, []).append(entry)

        npy = s.get("npy_ram")
        if npy and npy["status"] == "ok" and raw_rate:
            raw = s[raw_way]
            rss_ratio = raw["peak_rss_mb"] / npy["peak_rss_mb"] if npy["peak_rss_mb"] else None
            target("npy_ram", f"raw records ({raw_way}) >= 0.8x, peak RSS < 0.25x",
                   raw_rate / npy["samples_per_s"], 0.8, 0.25, rss_ratio)
            above = npy["peak_rss_mb"] - npy["baseline_rss_mb"]
            targets[-1]["ratio_rss_above_baseline"] = \
                (raw["peak_rss_mb"] - raw["baseline_rss_mb"]) / above if above > 0 else None
        if rate.get("bare_zstd") and zstd_rate:
            target("bare_zstd", f"zstd records ({zstd_way}) >= 0.85x", zstd_rate / rate["bare_zstd"], 0.85)
        for peer in ("tfdata", "mds", "wds", "litdata"):
            if rate.get(peer) and zstd_rate:
                target(peer, f"zstd records ({zstd_way}) >= 3x", zstd_rate / rate[peer], 3.0)
                if raw_rate:
                    target(peer, f"raw records ({raw_way}) >= 3x", raw_rate / rate[peer], 3.0)
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
    if r["way"] == "bare_zstd":
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
    if e["ratio"] is None:
        return f"{e['target']}: n/a"
    s = f"{e['target']}: {e['ratio']:.2f}x"
    if e["ratio_rss"] is not None:
        s += f", RSS {e['ratio_rss']:.2f}x"
        if e.get("ratio_rss_above_baseline") is not None:
            s += f" ({e['ratio_rss_above_baseline']:.2f}x above the interpreter's)"
    return s + (" met" if e["met"] else " MISSED")


def parts_text(p):
    """One line: where a shardpack batch's time goes (py_read_bench.py parts)."""
    def us(k):
        v = p.get(k)
        return "n/a" if v is None else (f"{v:,.0f}" if v >= 100 else f"{v:.1f}")
    return (f"Parts, microseconds per sample ({p['threads']} threads, best of 3): read_batch zstd uint8 as stored "
            f"{us('zstd_read_u8_stored_us')}, zstd float32 NCHW {us('zstd_read_f32_us')}, raw uint8 "
            f"{us('raw_read_u8_stored_us')}, raw float32 {us('raw_read_f32_us')} (into reused buffers); Loader "
            f"epoch (zstd, new tensors per batch) {us('zstd_loader_us')}; allocating and filling new float "
            f"tensors of the batch's size {us('write_floor_us')} "
            f"({p.get('float_batch_bytes_per_sample', 0) / 1e6:.2f} MB a sample); the peers' uint8 -> float32 "
            f"NCHW step {us('normalise_u8_us')}.")


HEADER = ["way", "samples/s", "epoch s", "first epoch s", "first batch s", "peak RSS MB", "target"]


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
            f.write("\n".join(md) + "\n")
    print(f"written: {a.json}" + (f", {a.markdown}" if a.markdown else ""), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
