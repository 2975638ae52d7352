#!/usr/bin/env bash
# Smoke test of the cold benchmark (scripts/bench/cold_bench.py, `./scripts/bench.sh --cold`; issue
# 29), so that it cannot rot: its quick data (1,000 cls records, 24 seg records, 2 epochs of the
# half-budget dataset), one rep, runs cut after 2 s, with this build's binaries and .venv's package,
# and checks the report's shape: every storage, dataset and way has a row (or says why not), every
# measured row its seconds, rates and ratios, the mounts their seeks. The figures themselves mean
# nothing at this size and are not judged.
#
# Exit 0: passed; 1: failed; 77: skipped (ctest shows it skipped), with the reason, when .venv has
# no shardpack.torch (scripts/python-env.sh makes it) or slowfs cannot mount here (no /dev/fuse,
# not root, not built): then only this disk's rows were checked.
#
# usage: run_cold_smoke.sh SOURCE_DIR BUILD_DIR WORK_DIR
set -uo pipefail
src=$1 build=$2 work=$3
py=$src/.venv/bin/python
if ! "$py" -c "import shardpack.torch" 2>/dev/null; then
  echo "SHARDPACK-SKIPPED: $py cannot import shardpack.torch (run scripts/python-env.sh)"; exit 77
fi
rm -rf "$work"
mkdir -p "$work"
"$py" "$src/scripts/bench/cold_bench.py" prepare --bin "$build" --work "$work" --quick >"$work/prepare.txt" 2>&1 ||
  { echo "FAILED: cold_bench.py prepare"; tail -n 30 "$work/prepare.txt"; exit 1; }
if ! "$py" "$src/scripts/bench/cold_bench.py" drive --bin "$build" --work "$work" --quick --reps 1 --max-seconds 2 \
     --json "$work/cold.json" --markdown "$work/cold.md" >"$work/stdout.txt" 2>"$work/stderr.txt"; then
  echo "FAILED: cold_bench.py drive exited non-zero"; tail -n 30 "$work/stderr.txt"; exit 1
fi
python3 - "$work/cold.json" "$work/cold.md" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
table = open(sys.argv[2]).read()
problems, skipped = [], None
mounts_measured = not any("not measured" in n for n in report["notes"])
if not mounts_measured:
    skipped = "; ".join(report["notes"])
storages = ["local"] + (["hdd", "nfs"] if mounts_measured else [])
rows = report["summary"]
for storage in storages:
    for dataset in ("cls", "seg", "cls-half"):
        for way in ("floor", "npy", "mmap-global", "pread-blocks", "loader", "cxx-auto"):
            mine = [r for r in rows if (r["storage"], r["dataset"], r["row"]) == (storage, dataset, way)]
            if not mine:
                problems.append(f"no row for {storage} {dataset} {way}")
                continue
            if "unavailable" in mine[0]:
                if dataset != "cls-half":
                    problems.append(f"{storage} {dataset} {way}: unavailable ({mine[0]['unavailable']})")
                continue
            epochs = max(r["epoch"] for r in mine)
            want = 2 if dataset == "cls-half" else 1
            if epochs != want and not any(r["cut"] for r in mine):
                problems.append(f"{storage} {dataset} {way}: {epochs} epochs, not {want}")
            for r in mine:
                for k in ("seconds", "samples_per_s", "mb_per_s"):
                    if not r.get(k, 0) > 0:
                        problems.append(f"{storage} {dataset} {way} epoch {r['epoch']}: {k} missing")
                if way != "floor" and "vs_floor" not in r:
                    problems.append(f"{storage} {dataset} {way}: no ratio to the floor")
                if storage != "local" and r["epoch"] == 1 and r["seeks"] is None and len(mine) == 1:
                    problems.append(f"{storage} {dataset} {way}: no seek count")
                if way not in ("floor",) and not r.get("peak_rss_mb"):
                    problems.append(f"{storage} {dataset} {way}: no peak RSS")
        if f"| {dataset} |" not in table:
            problems.append(f"the Markdown table has no {dataset} row")
if problems:
    print("FAILED:\n  " + "\n  ".join(problems))
    sys.exit(1)
if skipped:
    print(f"SHARDPACK-SKIPPED: the mounts were not measured ({skipped}); this disk's rows passed")
    sys.exit(77)
print("cold benchmark smoke test: every row there")
PY
