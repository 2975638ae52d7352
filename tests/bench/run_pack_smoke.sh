#!/usr/bin/env bash
# Smoke test of `./scripts/bench.sh --pack` (issue 22), so that the pack benchmark cannot rot: runs
# it on tiny data (--tiny: 2 1080p PNG + mask pairs, 8 JPEGs, 2 full-size records for the crops;
# one repetition) with the build's own binaries (--bin), and checks the report's shape: both pack
# jobs with their pack, floor, full-decode and Python figures and ratios, over the whole run and
# per record (the list repeated twice, less the list: seg's figures must be there); the floor
# decoding what the build decodes (fewer bytes than the full decode); full-record reads of both
# jobs' records and of the 1080p records (labels one-hot and as stored) with every codec, each
# against one frame per record and bare zstd; crops with every codec; full reads and crops of
# both the 512x512 and the 1080p records at every band height and with the 1.3 default (a height
# per region); the issue's targets each with a verdict; the Markdown tables. The
# figures themselves mean nothing on such data and are not judged. About 15 s (14 s measured on the shared 2-core machine).
#
# Exit 0: passed; 1: failed; 77: skipped (ctest shows it skipped) when Debian's python3 lacks
# OpenCV or NumPy, so the Python baseline's cells could not be checked (everything else was,
# and passed, or the exit would be 1).
#
# usage: run_pack_smoke.sh SOURCE_DIR BUILD_DIR WORK_DIR
set -uo pipefail
src=$1 build=$2 work=$3
rm -rf "$work"
mkdir -p "$work"
if ! "$src/scripts/bench.sh" --pack --tiny --reps 1 --threads 2 --bin "$build" --work "$work" >"$work/stdout.txt" 2>"$work/stderr.txt"; then
  echo "FAILED: bench.sh --pack exited non-zero"; tail -n 30 "$work/stderr.txt"; exit 1
fi
python3 - "$work/pack" <<'PY'
import json, os, sys
work = sys.argv[1]
problems = []
def check(cond, what):
    if not cond:
        problems.append(what)
def positive(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0

with open(os.path.join(work, "pack.json")) as f:
    report = json.load(f)
tables = report["tables"]
python_missing = report.get("python_unavailable")
for job in ("seg", "cls"):
    p = tables["pack"].get(job)
    check(p is not None, f"pack job {job} missing")
    if p is None:
        continue
    for k in ("pack_cpu_s", "pack_wall_s", "floor_cpu_s", "floor_wall_s", "floor_full_cpu_s",
              "pack_over_floor_cpu", "pack_over_floor_wall", "pack_over_full_decode_cpu"):
        check(positive(p.get(k)), f"pack {job}: {k} = {p.get(k)!r}")
    for k in ("python_cpu_s", "python_wall_s", "python_over_pack_cpu", "python_over_pack_wall"):
        check(positive(p.get(k)) if not python_missing else p.get(k) is None, f"pack {job}: {k} = {p.get(k)!r}")
    check(p.get("samples") == (2 if job == "seg" else 8), f"pack {job}: samples = {p.get('samples')!r}")
    # Per record, steady state (the list repeated twice with --tiny, less the list): seg's two added
    # 1080p records stand well above the noise; a difference lost in it is None, never negative.
    s = p.get("per_record") or {}
    check(s.get("repeat") == 2 and s.get("added_records") == p.get("samples"), f"per record {job}: {s!r}")
    for k in ("pack_cpu_ms", "pack_wall_ms", "floor_cpu_ms", "python_cpu_ms", "python_wall_ms", "pack_over_floor_cpu",
              "python_over_pack_cpu", "python_over_pack_wall", "pack_once_cpu_s", "python_once_cpu_s"):
        check(k in s and (s[k] is None or positive(s[k]) or k.endswith("once_cpu_s")), f"per record {job}: {k} = {s.get(k)!r}")
    if job == "seg":
        for k in ("pack_cpu_ms", "floor_cpu_ms", "pack_over_floor_cpu"):
            check(positive(s.get(k)), f"per record seg: {k} = {s.get(k)!r}")
    for side in ("pack_long", "floor_long") + (() if python_missing else ("python_long",)):
        check(len(report["raw"].get(f"pack.{job}.{side}", [])) == 1, f"pack {job}: no run of {side}")
    floor = report["raw"][f"pack.{job}.floor"][0]
    full = report["raw"][f"pack.{job}.floor_full"][0]
    size = "512x512" if job == "seg" else "224x224"
    check(isinstance(floor.get("as_build"), str) and floor["as_build"].startswith(size), f"floor {job} not as built: {floor.get('as_build')!r}")
    check(full.get("as_build") is None and full.get("png_decoder") == "fast", f"full-decode floor {job}: {full!r}")
    # seg stops inflating after the crop's last row; cls decodes at a DCT scale: fewer bytes either way.
    check(floor["decoded_bytes"] < full["decoded_bytes"], f"floor {job} decoded {floor['decoded_bytes']} bytes, the full decode {full['decoded_bytes']}")
codecs = ("zstd", "zstd-record", "auto", "none")
for job in ("seg", "cls", "1080p", "1080p_ids"):
    r = tables["read"].get(job, {})
    for c in codecs:
        row = r.get(c)
        check(row is not None, f"read {job} {c} missing")
        if row is None:
            continue
        for k in ("reader_per_s", "reader_per_cpu_s", "zstd_per_s", "zstd_per_cpu_s", "bytes",
                  "vs_one_frame_per_record_cpu", "vs_one_frame_per_record_wall", "vs_bare_zstd_cpu", "vs_bare_zstd_wall"):
            check(positive(row.get(k)), f"read {job} {c}: {k} = {row.get(k)!r}")
        check(row.get("records") == (8 if job == "cls" else 2), f"read {job} {c}: records = {row.get('records')!r}")
    if "zstd-record" in r:
        check(abs(r["zstd-record"]["vs_one_frame_per_record_cpu"] - 1) < 1e-9, "zstd-record against itself is not 1")
for c in codecs:
    row = tables["crop"].get(c)
    check(row is not None, f"crop {c} missing")
    if row:
        for k in ("per_s", "per_cpu_s", "bytes", "vs_one_frame_per_record_cpu"):
            check(positive(row.get(k)), f"crop {c}: {k} = {row.get(k)!r}")
        check(row.get("records") == 2, f"crop {c}: records = {row.get('records')!r}")
bands = tables.get("bands", {})
seg_rows, crop_rows = {16, 64, 170, 256, 512}, {22, 45, 90, 180, 1080}
for part, want_rows in (("read", seg_rows), ("crop256", seg_rows), ("read1080", crop_rows), ("crop", crop_rows)):
    got = bands.get(part, {})
    heights = {int(k) for k in got if k.isdigit()}
    check(heights == want_rows, f"band heights, {part}: rows {sorted(heights)}")
    check("default" in got and "one_frame_per_record" in got, f"band heights, {part}: the 1.3 default or one frame per record missing")
    for k, v in got.items():
        check(positive(v.get("per_cpu_s")) and positive(v.get("vs_one_frame_per_record_cpu")) and positive(v.get("vs_1_1_default_cpu")),
              f"band heights, {part} {k}: {v!r}")
        if part.startswith("read"):
            check(positive(v.get("vs_bare_zstd_cpu")), f"band heights, {part} {k}: no ratio to bare zstd: {v!r}")
targets = {t["target"]: t for t in report["targets"]}
want = ["seg pack CPU / its decode floor's", "cls pack CPU / its decode floor's", "seg Python CPU / pack CPU",
        "cls Python CPU / pack CPU", "seg pack CPU / its decode floor's, per record (steady state)",
        "cls pack CPU / its decode floor's, per record (steady state)",
        "seg Python CPU / pack CPU, per record (steady state)", "seg full-record read, default codec / one frame per record (CPU)",
        "seg full-record read, default codec / bare zstd of the same frames (CPU)",
        "1080p records, labels as stored (uint8 ids) full-record read, default codec / bare zstd of the same frames (CPU)"]
for t in want:
    check(t in targets, f"target row missing: {t}")
    if t in targets:
        v = targets[t]["verdict"]
        ok = v.startswith("met") or v.startswith("MISSED") or (python_missing and "Python" in t and v == "not measured") \
             or ("per record" in t and not t.startswith("seg pack") and v == "not measured")  # tiny differences may drown
        check(ok, f"target {t}: verdict {v!r}")
with open(os.path.join(work, "pack.md")) as f:
    md = f.read()
for heading in ("Pack jobs", "Per record, steady state", "Full-record reads", "Random 512x512 crops", "Band heights", "256x256 crops", "Targets (issue 22)"):
    check(heading in md, f"pack.md lacks the table {heading!r}")
check(md.count("\n| seg") + md.count("\n| cls") >= 10, "pack.md has too few job rows")
if problems:
    print("FAILED: the report's shape:\n  " + "\n  ".join(problems))
    sys.exit(1)
if python_missing:
    print(f"SHARDPACK-SKIPPED: the Python baseline could not run ({python_missing}); every other cell was checked and passed")
    sys.exit(77)
print("passed: bench.sh --pack report has every table, row and target")
PY
