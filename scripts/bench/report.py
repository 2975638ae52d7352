#!/usr/bin/env python3
"""Turns the measurements scripts/bench.sh collected (results.jsonl, one JSON object per line)
into one table of ratios against the issue's targets, and writes it with every raw figure as JSON.

Repeated measurements are summarised by their median; every ratio is taken between figures of
the same run."""
import argparse
import json
import os
import platform
import statistics
import sys


def load(path):
    runs = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            entry = json.loads(line)
            runs.setdefault(entry["name"], []).append(entry["result"])
    return runs


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def field(runs, name, *path):
    """The median over the runs of `name` of the value at `path` (None where absent)."""
    out = []
    for r in runs.get(name, []):
        v = r
        for p in path:
            v = v.get(p) if isinstance(v, dict) else None
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            out.append(v)
    return median(out)


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def fmt_rate(v, unit="samples/s"):
    if v is None:
        return "n/a"
    return f"{v:,.0f} {unit}" if v >= 100 else f"{v:.1f} {unit}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("results")
    ap.add_argument("--json", required=True)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    a = ap.parse_args()
    runs = load(a.results)
    rows = []  # job, shardpack figure, baseline name, baseline figure, ratio, target, met

    def add(job, ours, ours_text, against, theirs, theirs_text, target=None, higher_is_better=True):
        ratio = ours / theirs if ours is not None and theirs else None
        met = None
        if ratio is not None and target is not None:
            met = ratio >= target if higher_is_better else ratio <= target
        rows.append({"job": job, "shardpack": ours_text, "against": against, "baseline": theirs_text,
                     "ratio": ratio, "target": target, "target_is_minimum": higher_is_better, "met": met})

    def build_rate(job):
        samples = field(runs, f"{job}.floor", "samples")
        seconds = field(runs, f"{job}.shardpack", "seconds")
        return samples / seconds if samples and seconds else None

    jobs = {
        "seg1080": ("1080p PNG + color mask -> 512 crop, one-hot", 6.0, 1.0, "PNGs", 20.0),
        "jpeg500": ("~500 px JPEG -> shorter 224, centre crop", 3.0, None, "JPEGs", 5.0),
        "jpeg1600": ("1600x1200 JPEG -> shorter 224, centre crop", None, 2.0, "JPEGs", 5.0),
        "user": ("your CSV", None, None, "files", None),
    }
    for job, (title, python_target, floor_target, _, _) in jobs.items():
        if f"{job}.shardpack" not in runs:
            continue
        ours = build_rate(job)
        python = field(runs, f"{job}.python", "samples_per_s")
        floor = field(runs, f"{job}.floor", "samples_per_s")
        add(f"pack: {title}", ours, fmt_rate(ours), "Python cv2+numpy, Pool", python, fmt_rate(python), python_target)
        add(f"pack: {title}", ours, fmt_rate(ours), "bare full decode", floor, fmt_rate(floor), floor_target)
        tf_write = field(runs, f"{job}.tfrecord", "write_samples_per_s")
        if tf_write:
            add(f"pack: {title}", ours, fmt_rate(ours), "TFRecordWriter (tensors given)", tf_write, fmt_rate(tf_write))

    for job, (title, _, _, source_kind, source_target) in jobs.items():
        if f"{job}.read" not in runs:
            continue
        r1 = field(runs, f"{job}.read", "modes", "reader_1t", "samples_per_s")
        rn = field(runs, f"{job}.read", "modes", "reader_nt", "samples_per_s")
        z1 = field(runs, f"{job}.read", "modes", "zstd_1t", "samples_per_s")
        g1 = field(runs, f"{job}.read", "modes", "reader_1t", "gb_per_s")
        src = field(runs, f"{job}.source_decode_1t", "samples_per_s")
        npy = field(runs, f"{job}.npy_read", "samples_per_s")
        tfr = field(runs, f"{job}.tfrecord", "read_samples_per_s")
        ours1 = f"{fmt_rate(r1)}, {g1:.2f} GB/s" if r1 and g1 else fmt_rate(r1)
        add(f"read {job}, random, 1 thread", r1, ours1, "bare ZSTD_decompressDCtx, 1 thread", z1, fmt_rate(z1), 0.97)
        add(f"read {job}, random, 1 thread", r1, fmt_rate(r1), f"decoding the source {source_kind}, 1 thread", src,
            fmt_rate(src), source_target)
        add(f"read {job}, random, 1 thread", r1, fmt_rate(r1), "np.load of .npy (page cache), 1 process", npy, fmt_rate(npy))
        if tfr:
            add(f"read {job}, {a.threads} threads", rn, fmt_rate(rn), "TFRecord via tf.data, parallel map", tfr,
                fmt_rate(tfr), 3.0)

    # The segmentation records stored with each codec (the job's own build is --compression zstd).
    tfr = field(runs, "seg1080.tfrecord", "read_samples_per_s")
    for codec in ("zstd-record", "none", "auto"):
        name = f"seg1080.read.{codec}"
        if name not in runs:
            continue
        r1 = field(runs, name, "modes", "reader_1t", "samples_per_s")
        rn = field(runs, name, "modes", "reader_nt", "samples_per_s")
        z1 = field(runs, name, "modes", "zstd_1t", "samples_per_s")
        raw = field(runs, name, "dataset", "raw_records")
        title = f"read seg1080 stored --compression {codec} ({raw} raw records)" if raw is not None else f"read seg1080 ({codec})"
        add(f"{title}, 1 thread", r1, fmt_rate(r1), "bare ZSTD_decompressDCtx (memcpy for raw), 1 thread", z1, fmt_rate(z1),
            0.97 if codec == "zstd-record" else None)
        if tfr:
            add(f"{title}, {a.threads} threads", rn, fmt_rate(rn), "TFRecord via tf.data, parallel map", tfr, fmt_rate(tfr), 3.0)

    # Random 512x512 crops + flips from full 1080p records.
    stored = field(runs, "crop.stored", "samples_per_s_1t")
    stored_n = field(runs, "crop.stored", "samples_per_s_nt")
    for codec in ("zstd", "auto", "none"):
        for suffix, threads_text in (("1t", "1 thread"), ("nt", f"{a.threads} threads")):
            ours = field(runs, f"crop.shardpack.{codec}", f"samples_per_s_{suffix}")
            if ours is None:
                continue
            size = field(runs, f"crop.size.{codec}", "bytes")
            mb = f", {size / 1e6:.0f} MB" if size else ""
            title = f"random 512 crops + flips of full 1080p records ({codec}{mb}), {threads_text}"
            for base in ("zstd-record", codec):
                py_rate = field(runs, f"crop.python.{base}", f"samples_per_s_{suffix}")
                what = "1.0 zstd records" if base == "zstd-record" else f"the same {codec} records"
                add(title, ours, fmt_rate(ours), f"Python: whole {what} + numpy crop/flip/float", py_rate, fmt_rate(py_rate), 5.0)
            st = stored if suffix == "1t" else stored_n
            add(title, ours, fmt_rate(ours), "reading stored 512x512 crops (one-hot, zstd)", st, fmt_rate(st))

    rss = {}
    for name in runs:
        if name.startswith("rss."):
            rss[int(name.split(".")[1])] = field(runs, name, "max_rss_kb")
    if rss:
        smallest = min(rss)
        for n in sorted(rss):
            mb = rss[n] / 1024 if rss[n] else None
            add(f"build peak RSS, {n:,} records", mb, f"{mb:.0f} MB" if mb else "n/a", f"{smallest:,} records",
                rss[smallest] / 1024 if rss[smallest] else None, f"{rss[smallest] / 1024:.0f} MB" if rss[smallest] else "n/a",
                1.10 if n != smallest else None, higher_is_better=False)

    full = field(runs, "rebuild.full", "seconds")
    for name, label, target in (("rebuild.nochange", "rebuild, nothing changed", 0.05),
                                ("rebuild.one_percent", "rebuild, 1% of rows changed", 0.15)):
        t = field(runs, name, "seconds")
        if t is not None and full:
            rep = runs.get(name + ".report", [{}])[-1]
            detail = f"{t:.2f} s ({rep.get('decoded_records', '?')} decoded, {rep.get('shards_written', '?')} shards written)"
            add(label, t, detail, "full build", full, f"{full:.2f} s", target, higher_is_better=False)
    identical = [r.get("identical") for r in runs.get("rebuild.identical_to_full", [])]

    width = [max(len(str(x)) for x in col) for col in zip(*(
        [("job", "shardpack", "against", "baseline", "ratio", "target")] +
        [(r["job"], r["shardpack"], r["against"], r["baseline"],
          f"{r['ratio']:.2f}x" if r["ratio"] is not None else "n/a",
          ("" if r["target"] is None else ((">= " if r["target_is_minimum"] else "<= ") + f"{r['target']:g}x"
           + ("" if r["met"] is None else (" met" if r["met"] else " MISSED"))))) for r in rows]))]
    header = ("job", "shardpack", "against", "baseline", "ratio", "target")
    print(f"shardpack benchmark: {cpu_model()}, {os.cpu_count()} cores, {a.threads} threads")
    line = " | ".join(h.ljust(w) for h, w in zip(header, width))
    print(line)
    print("-+-".join("-" * w for w in width))
    for r in rows:
        cells = (r["job"], r["shardpack"], r["against"], r["baseline"],
                 f"{r['ratio']:.2f}x" if r["ratio"] is not None else "n/a",
                 ("" if r["target"] is None else ((">= " if r["target_is_minimum"] else "<= ") + f"{r['target']:g}x"
                  + ("" if r["met"] is None else (" met" if r["met"] else " MISSED")))))
        print(" | ".join(str(c).ljust(w) for c, w in zip(cells, width)))
    if identical:
        print(f"incremental rebuilds byte-identical to a fresh full build: {sum(bool(x) for x in identical)}/{len(identical)}")

    with open(a.json, "w") as f:
        json.dump({"machine": {"cpu": cpu_model(), "cores": os.cpu_count(), "threads": a.threads},
                   "table": rows, "incremental_identical": identical, "raw": runs}, f, indent=1)
    print(f"written: {a.json}", file=sys.stderr)


if __name__ == "__main__":
    main()
