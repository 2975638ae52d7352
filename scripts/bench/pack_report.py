#!/usr/bin/env python3
"""The tables of `./scripts/bench.sh --pack` (scripts/bench/pack_bench.sh), from its results.jsonl.

    pack_report.py RESULTS.jsonl --json OUT.json --markdown OUT.md

Every figure is the median over the run's repetitions; every ratio is taken between figures of
the same run. Pack jobs are compared in CPU seconds (user + system of the whole process, or of
the decoding threads for the floor), which hold on a shared machine where wall time swings with
the load; the wall-clock ratios are given beside them. Targets are those of issue 22.
Prints the Markdown tables; writes them to --markdown and, with every raw figure, to --json."""
import argparse
import json
import os
import platform
import statistics
import sys

JOBS = {
    "seg": "1080p PNG + color mask -> 512x512 centre crop, one-hot",
    "cls": "500x375 JPEG -> shorter side 224, centre crop",
}
# Issue 22's targets: pack CPU at most this many times its floor's, Python at least this many
# times the pack's.
FLOOR_TARGET = {"seg": 1.1, "cls": 1.2}
PYTHON_TARGET = {"seg": 10.0, "cls": 4.0}
CODECS = ("zstd", "zstd-record", "auto", "none")
CODEC_WHAT = {
    "zstd": "band frames (the default)",
    "zstd-record": "one frame per record",
    "auto": "band frames, bands zstd saves < 1/2 of stored raw",
    "none": "raw",
}


def load(path):
    runs = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                entry = json.loads(line)
                runs.setdefault(entry["name"], []).append(entry["result"])
    return runs


def median_of(runs, name, fn):
    """The median of fn(result) over the results of `name` (None where it has none)."""
    values = []
    for r in runs.get(name, []):
        try:
            v = fn(r)
        except (KeyError, TypeError):
            v = None
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            values.append(float(v))
    return statistics.median(values) if values else None


def ratio(a, b):
    return a / b if a is not None and b else None


def fmt(v, digits=2, suffix=""):
    return "n/a" if v is None else f"{v:,.{digits}f}{suffix}"


def verdict(value, target, at_most):
    """Met or missed, judged on the ratio as printed in the targets table (3 decimals)."""
    if value is None:
        return "not measured"
    value = round(value, 3)
    met = value <= target if at_most else value >= target
    return ("met" if met else "MISSED") + f" ({'<=' if at_most else '>='} {target:g}x)"


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("results")
    ap.add_argument("--json", required=True)
    ap.add_argument("--markdown", required=True)
    a = ap.parse_args()
    runs = load(a.results)
    setup = (runs.get("setup") or [{}])[-1]
    python_missing = (runs.get("python.unavailable") or [{}])[-1].get("reason")

    cpu = lambda r: r["user_s"] + r["sys_s"]  # noqa: E731 (peak_rss: the whole process)
    pack_rows, steady_rows, targets, data = [], [], [], {"pack": {}, "read": {}, "crop": {}}
    for job, title in JOBS.items():
        if f"pack.{job}.pack" not in runs:
            continue
        pack_cpu = median_of(runs, f"pack.{job}.pack", cpu)
        pack_wall = median_of(runs, f"pack.{job}.pack", lambda r: r["seconds"])
        floor_cpu = median_of(runs, f"pack.{job}.floor", lambda r: r["cpu_seconds_median"])
        floor_wall = median_of(runs, f"pack.{job}.floor", lambda r: r["seconds_median"])
        full_cpu = median_of(runs, f"pack.{job}.floor_full", lambda r: r["cpu_seconds_median"])
        py_cpu = median_of(runs, f"pack.{job}.python", cpu)
        py_wall = median_of(runs, f"pack.{job}.python", lambda r: r["seconds"])
        samples = median_of(runs, f"pack.{job}.floor", lambda r: r["samples"])
        d = {"samples": samples, "pack_cpu_s": pack_cpu, "pack_wall_s": pack_wall, "floor_cpu_s": floor_cpu,
             "floor_wall_s": floor_wall, "floor_full_cpu_s": full_cpu, "python_cpu_s": py_cpu, "python_wall_s": py_wall,
             "pack_over_floor_cpu": ratio(pack_cpu, floor_cpu), "pack_over_floor_wall": ratio(pack_wall, floor_wall),
             "pack_over_full_decode_cpu": ratio(pack_cpu, full_cpu),
             "python_over_pack_cpu": ratio(py_cpu, pack_cpu), "python_over_pack_wall": ratio(py_wall, pack_wall)}
        data["pack"][job] = d
        py_text = "n/a (" + python_missing + ")" if python_missing else fmt(py_cpu, 3)
        pack_rows.append([f"{job}: {title} ({samples:.0f})" if samples else f"{job}: {title}",
                          fmt(pack_cpu, 3), fmt(pack_wall, 3), fmt(floor_cpu, 3), fmt(full_cpu, 3), py_text, fmt(py_wall, 3),
                          fmt(d["pack_over_floor_cpu"], 2, "x"), fmt(d["pack_over_full_decode_cpu"], 2, "x"),
                          fmt(d["python_over_pack_cpu"], 2, "x"), fmt(d["python_over_pack_wall"], 2, "x")])
        targets.append([f"{job} pack CPU / its decode floor's", fmt(d["pack_over_floor_cpu"], 3, "x"),
                        verdict(d["pack_over_floor_cpu"], FLOOR_TARGET[job], True)])
        targets.append([f"{job} Python CPU / pack CPU", fmt(d["python_over_pack_cpu"], 3, "x"),
                        verdict(d["python_over_pack_cpu"], PYTHON_TARGET[job], False)])
        targets.append([f"{job} Python wall / pack wall (same threads)", fmt(d["python_over_pack_wall"], 3, "x"),
                        verdict(d["python_over_pack_wall"], PYTHON_TARGET[job], False)])

        # Per record, steady state: the run over the list repeated minus the run over the list,
        # per added record. What each run pays once (start-up, first touch of its buffers, thread
        # start, publishing) cancels; a data set of thousands of records costs about this a record.
        repeat = setup.get("repeat")
        added = samples * (repeat - 1) if samples and repeat and repeat > 1 else None

        def per_record_ms(side, seconds_of):
            long_v, short_v = (median_of(runs, f"pack.{job}.{side}_long", seconds_of),
                               median_of(runs, f"pack.{job}.{side}", seconds_of))
            if long_v is None or short_v is None or not added:
                return None
            v = (long_v - short_v) / added * 1000
            return v if v > 0 else None  # a difference lost in the noise (tiny data sets) is no figure

        s = {"repeat": repeat, "added_records": added,
             "pack_cpu_ms": per_record_ms("pack", cpu), "pack_wall_ms": per_record_ms("pack", lambda r: r["seconds"]),
             "floor_cpu_ms": per_record_ms("floor", lambda r: r["cpu_seconds_median"]),
             "python_cpu_ms": per_record_ms("python", cpu), "python_wall_ms": per_record_ms("python", lambda r: r["seconds"])}
        s["pack_over_floor_cpu"] = ratio(s["pack_cpu_ms"], s["floor_cpu_ms"])
        s["python_over_pack_cpu"] = ratio(s["python_cpu_ms"], s["pack_cpu_ms"])
        s["python_over_pack_wall"] = ratio(s["python_wall_ms"], s["pack_wall_ms"])
        # What the run over the list paid once: its CPU less its records at the steady-state cost.
        s["pack_once_cpu_s"] = pack_cpu - samples * s["pack_cpu_ms"] / 1000 if pack_cpu and samples and s["pack_cpu_ms"] else None
        s["python_once_cpu_s"] = (py_cpu - samples * s["python_cpu_ms"] / 1000
                                  if py_cpu and samples and s["python_cpu_ms"] else None)
        d["per_record"] = s
        steady_rows.append([f"{job}: {title}", f"{added:.0f}" if added else "n/a", fmt(s["pack_cpu_ms"], 2),
                            fmt(s["floor_cpu_ms"], 2), fmt(s["python_cpu_ms"], 2), fmt(s["pack_over_floor_cpu"], 2, "x"),
                            fmt(s["python_over_pack_cpu"], 2, "x"), fmt(s["python_over_pack_wall"], 2, "x"),
                            fmt(s["pack_once_cpu_s"], 3), fmt(s["python_once_cpu_s"], 3)])
        targets.append([f"{job} pack CPU / its decode floor's, per record (steady state)",
                        fmt(s["pack_over_floor_cpu"], 3, "x"), verdict(s["pack_over_floor_cpu"], FLOOR_TARGET[job], True)])
        targets.append([f"{job} Python CPU / pack CPU, per record (steady state)", fmt(s["python_over_pack_cpu"], 3, "x"),
                        verdict(s["python_over_pack_cpu"], PYTHON_TARGET[job], False)])

    read_rows = []
    # 16-bit: the seg job's scenes as 16-bit PNGs, the seg job's options: its pack beside the 8-bit one.
    if "pack.seg16.pack" in runs:
        cpu16 = median_of(runs, "pack.seg16.pack", cpu)
        wall16 = median_of(runs, "pack.seg16.pack", lambda r: r["seconds"])
        seg8 = data["pack"].get("seg", {})
        data["pack"]["seg16"] = {"pack_cpu_s": cpu16, "pack_wall_s": wall16,
                                 "over_8_bit_cpu": ratio(cpu16, seg8.get("pack_cpu_s")),
                                 "over_8_bit_wall": ratio(wall16, seg8.get("pack_wall_s"))}
        pack_rows.append(["seg16: the seg job's scenes as 16-bit PNGs (uint16 images; vs 8-bit: "
                          f"{fmt(data['pack']['seg16']['over_8_bit_cpu'], 2, 'x')} CPU, "
                          f"{fmt(data['pack']['seg16']['over_8_bit_wall'], 2, 'x')} wall)",
                          fmt(cpu16, 3), fmt(wall16, 3), "n/a", "n/a", "n/a", "n/a", "n/a", "n/a", "n/a", "n/a"])

    # The pack jobs' records, and the full 1080p records (index labels) delivered one-hot (the
    # reader's default label output: 6x the stored bytes) and as stored (uint8 class ids: the
    # codec's cost alone, what bare zstd decodes).
    read_sets = {job: (f"pack.read.{job}.{{}}", f"pack.size.{job}.{{}}", f"{job} records") for job in JOBS}
    read_sets["1080p"] = ("pack.read1080.{}", "pack.size.crop.{}", "1080p records, labels one-hot")
    read_sets["1080p_ids"] = ("pack.read1080_ids.{}", "pack.size.crop.{}", "1080p records, labels as stored (uint8 ids)")
    read_sets["seg16"] = ("pack.read.seg16.{}", "pack.size.seg16.{}", "seg records, 16-bit images (uint16, as stored)")
    for job, (read_name, size_name, what) in read_sets.items():
        rate = {}
        for codec in CODECS:
            name = read_name.format(codec)
            if name not in runs:
                continue
            mode = lambda m, k: (lambda r: r["modes"][m][k])  # noqa: E731
            rate[codec] = {
                "reader_per_s": median_of(runs, name, mode("reader_1t", "samples_per_s")),
                "reader_per_cpu_s": median_of(runs, name, mode("reader_1t", "samples_per_cpu_s")),
                "zstd_per_s": median_of(runs, name, mode("zstd_1t", "samples_per_s")),
                "zstd_per_cpu_s": median_of(runs, name, mode("zstd_1t", "samples_per_cpu_s")),
                "bytes": median_of(runs, size_name.format(codec), lambda r: r["bytes"]),
                "records": median_of(runs, name, lambda r: r["dataset"]["records"]),
            }
        if not rate:
            continue
        frame = rate.get("zstd-record", {})
        for codec, r in rate.items():
            r["vs_one_frame_per_record_cpu"] = ratio(r["reader_per_cpu_s"], frame.get("reader_per_cpu_s"))
            r["vs_one_frame_per_record_wall"] = ratio(r["reader_per_s"], frame.get("reader_per_s"))
            r["vs_bare_zstd_cpu"] = ratio(r["reader_per_cpu_s"], r["zstd_per_cpu_s"])
            r["vs_bare_zstd_wall"] = ratio(r["reader_per_s"], r["zstd_per_s"])
            read_rows.append([f"{what}, {codec}: {CODEC_WHAT[codec]}",
                              fmt(r["bytes"] / 1e6 if r["bytes"] else None, 2), fmt(r["reader_per_s"], 0),
                              fmt(r["reader_per_cpu_s"], 0), fmt(r["zstd_per_cpu_s"], 0),
                              fmt(r["vs_one_frame_per_record_cpu"], 2, "x"), fmt(r["vs_one_frame_per_record_wall"], 2, "x"),
                              fmt(r["vs_bare_zstd_cpu"], 2, "x"), fmt(r["vs_bare_zstd_wall"], 2, "x")])
        data["read"][job] = rate
        tname = job if job in JOBS else what
        if "zstd" in rate:
            targets.append([f"{tname} full-record read, default codec / one frame per record (CPU)",
                            fmt(rate["zstd"]["vs_one_frame_per_record_cpu"], 3, "x"),
                            verdict(rate["zstd"]["vs_one_frame_per_record_cpu"], 1.0, False)])
            targets.append([f"{tname} full-record read, default codec / bare zstd of the same frames (CPU)",
                            fmt(rate["zstd"]["vs_bare_zstd_cpu"], 3, "x"),
                            verdict(rate["zstd"]["vs_bare_zstd_cpu"], 0.97, False)])

    crop_rows, crops = [], {}
    for codec in CODECS:
        name = f"pack.crop.{codec}"
        if name in runs:
            crops[codec] = {"per_s": median_of(runs, name, lambda r: r["samples_per_s_1t"]),
                            "per_cpu_s": median_of(runs, name, lambda r: r["samples_per_cpu_s_1t"]),
                            "bytes": median_of(runs, f"pack.size.crop.{codec}", lambda r: r["bytes"]),
                            "records": median_of(runs, name, lambda r: r["records"])}
    frame = crops.get("zstd-record", {})
    for codec, c in crops.items():
        c["vs_one_frame_per_record_cpu"] = ratio(c["per_cpu_s"], frame.get("per_cpu_s"))
        c["vs_one_frame_per_record_wall"] = ratio(c["per_s"], frame.get("per_s"))
        crop_rows.append([f"{codec}: {CODEC_WHAT[codec]}", fmt(c["bytes"] / 1e6 if c["bytes"] else None, 1),
                          fmt(c["per_s"], 0), fmt(c["per_cpu_s"], 0), fmt(c["vs_one_frame_per_record_cpu"], 2, "x"),
                          fmt(c["vs_one_frame_per_record_wall"], 2, "x")])
    data["crop"] = crops

    # Band heights: four reads (full-record reads and 256x256 crops of the seg job's 512x512 records,
    # full-record reads and 512x512 crops of the 1080p records), each with one frame per record,
    # with every fixed height (--band-rows: one height for both regions, codec 2) and with the
    # default (1.3: the image's height from its row size, the label's from the data, codec 3).
    # Ratios against one frame per record, the 1.1 default height (one height, ~256 KiB of image)
    # and, for full reads, bare zstd of the same frames.
    bands = {}
    band_tables = []
    full_read = lambda r: r["modes"]["reader_1t"]["samples_per_cpu_s"]  # noqa: E731
    bare_zstd = lambda r: r["modes"]["zstd_1t"]["samples_per_cpu_s"]  # noqa: E731
    crop_rate = lambda r: r["samples_per_cpu_s_1t"]  # noqa: E731
    # (key, title, per-band-height result prefix, per-codec result name, record rows, default height, full read?)
    for key, title, prefix, codec_name, height, default_rows, is_read in (
            ("read", "full-record reads of the seg records (512x512, one-hot)", "pack.bands.read.", "pack.read.seg.{}", 512,
             setup.get("seg_default_band_rows"), True),
            ("crop256", "random 256x256 crops + flips of the seg records (512x512, one-hot)", "pack.bands.crop256.",
             "pack.crop256.{}", 512, setup.get("seg_default_band_rows"), False),
            ("read1080", "full-record reads of the 1080p records (index labels)", "pack.bands.read1080.", "pack.read1080.{}",
             1080, setup.get("crop_default_band_rows"), True),
            ("crop", "random 512x512 crops + flips of the 1080p records (index labels)", "pack.bands.crop.", "pack.crop.{}",
             1080, setup.get("crop_default_band_rows"), False)):
        rate_of = full_read if is_read else crop_rate
        by_rows = {int(n[len(prefix):]): n for n in runs if n.startswith(prefix)}
        if not by_rows:
            continue
        one_frame = median_of(runs, codec_name.format("zstd-record"), rate_of)
        old_default = median_of(runs, by_rows[default_rows], rate_of) if default_rows in by_rows else None
        part, rows_out = {}, []

        def row(label, name, frames):
            rate = median_of(runs, name, rate_of)
            bare = median_of(runs, name, bare_zstd) if is_read else None
            entry = {"per_cpu_s": rate, "vs_one_frame_per_record_cpu": ratio(rate, one_frame),
                     "vs_1_1_default_cpu": ratio(rate, old_default)}
            if is_read:
                entry["reader_per_cpu_s"] = rate
                entry["bare_zstd_per_cpu_s"] = bare
                entry["vs_bare_zstd_cpu"] = ratio(rate, bare)
            rows_out.append([label, frames, fmt(rate, 0), fmt(entry["vs_one_frame_per_record_cpu"], 2, "x"),
                             fmt(entry["vs_1_1_default_cpu"], 2, "x")] + ([fmt(entry["vs_bare_zstd_cpu"], 2, "x")] if is_read else []))
            return entry

        if codec_name.format("zstd-record") in runs:
            part["one_frame_per_record"] = row("one frame per record (zstd-record)", codec_name.format("zstd-record"), 1)
        for rows in sorted(by_rows):
            label = f"{rows}" + (" (1.1 default)" if rows == default_rows else "")
            part[rows] = row(label, by_rows[rows], 2 * -(-height // rows))
        if codec_name.format("zstd") in runs:
            part["default"] = row("default (1.3): heights from the data (label one frame when it shrinks 32x, then "
                                  "image bands of ~128 KiB)", codec_name.format("zstd"), "-")
            if old_default and part["default"]["per_cpu_s"]:
                targets.append([f"{title}, default codec (1.3) / the 1.1 default (--band-rows {default_rows}) (CPU)",
                                fmt(part["default"]["vs_1_1_default_cpu"], 3, "x"),
                                verdict(part["default"]["vs_1_1_default_cpu"], 1.0, False)])
        bands[key] = part
        header = ["band rows", "frames a record", "reads /CPU-s" if is_read else "crops /CPU-s", "vs one frame per record",
                  "vs 1.1 default"] + (["vs bare zstd, same frames"] if is_read else [])
        band_tables.append((title, header, rows_out))
    data["bands"] = bands

    threads = setup.get("threads", "?")
    lines = [f"shardpack pack benchmark: {cpu_model()}, {os.cpu_count()} cores; data sets '{setup.get('size', '?')}', "
             f"{setup.get('reps', '?')} interleaved repetitions, medians", "",
             f"Pack jobs ({threads} threads for the pack, the floor and the Python pool; CPU = user + system seconds):", ""]
    lines += table(["job (records)", "pack CPU s", "pack wall s", "floor CPU s (decode as packed)", "full decode CPU s",
                    "Python CPU s", "Python wall s", "pack / floor (CPU)", "pack / full decode (CPU)", "Python / pack (CPU)",
                    "Python / pack (wall)"], pack_rows)
    fields_cpu = median_of(runs, "pack.cls_fields.pack", cpu)
    if fields_cpu is not None:
        cls_cpu = median_of(runs, "pack.cls.pack", cpu)
        fields_wall = median_of(runs, "pack.cls_fields.pack", lambda r: r["seconds"])
        data["fields"] = {"pack_cpu_s": fields_cpu, "pack_wall_s": fields_wall, "vs_cls_cpu": ratio(fields_cpu, cls_cpu)}
        lines += ["", "Per-sample fields (format 1.5): the cls job with a float, 2 tags and 2 boxes a row:", ""]
        lines += table(["job", "pack CPU s", "pack wall s", "vs cls without fields (CPU)"],
                       [["cls + fields", fmt(fields_cpu), fmt(fields_wall), fmt(ratio(fields_cpu, cls_cpu), 3, "x")]])
    lines += ["", f"Per record, steady state: the run over each list repeated {setup.get('repeat', '?')} times less the run "
              "over the list, per added record (ms of CPU; what a run pays once cancels), and what the run over the list "
              "paid once (its CPU less its records at that cost):", ""]
    lines += table(["job", "added records", "pack ms", "floor ms", "Python ms", "pack / floor (CPU)", "Python / pack (CPU)",
                    "Python / pack (wall)", "pack once, s", "Python once, s"], steady_rows)
    lines += ["", "Full-record reads, 1 thread, random order, checksums on (samples/s; ratios: higher is faster):", ""]
    lines += table(["records, codec", "MB", "reader /s", "reader /CPU-s", "bare zstd /CPU-s",
                    "vs one frame per record (CPU)", "(wall)", "vs bare zstd, same frames (CPU)", "(wall)"], read_rows)
    lines += ["", f"Random 512x512 crops + flips of full 1080p records (index labels, "
              f"{setup.get('crop_records', '?')} records), 1 thread:", ""]
    lines += table(["codec", "MB", "crops /s", "crops /CPU-s", "vs one frame per record (CPU)", "(wall)"], crop_rows)
    lines += ["", "Band heights (1 thread, CPU): `--compression zstd` with `--band-rows` (one height for both regions, "
              "codec 2) and the default (1.3: a height per region, codec 3), against one frame per record, the 1.1 "
              "default height and bare zstd:"]
    for title, header, rows_out in band_tables:
        lines += ["", title + ":", ""]
        lines += table(header, rows_out)
    lines += ["", "Targets (issue 22):", ""]
    lines += table(["target", "measured", "verdict"], targets)
    text = "\n".join(lines) + "\n"
    print(text, end="")
    with open(a.markdown, "w") as f:
        f.write(text)
    with open(a.json, "w") as f:
        json.dump({"machine": {"cpu": cpu_model(), "cores": os.cpu_count()}, "setup": setup, "python_unavailable": python_missing,
                   "tables": data, "targets": [{"target": t[0], "measured": t[1], "verdict": t[2]} for t in targets],
                   "raw": runs}, f, indent=1)
    print(f"written: {a.json}, {a.markdown}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
