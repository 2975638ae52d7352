#!/usr/bin/env bash
# A/B of two builds on 8-bit datasets without fields (issue 31: "pack and read speed unchanged,
# within 5%"): the pack benchmark's seg and cls jobs (scripts/bench/pack_bench.sh, same data and
# options), packed and read by each build, side by side, the order of the two swapped every
# repetition so that drift hits both alike.
#
#   ab_bench.sh --before DIR --after DIR --work DIR [--reps N] [--threads N]
#
# --before, --after: build folders with shardpack, bench_read and peak_rss (--after also
# make_sample_data and dump_dataset). --work: data sets (made once, kept and reused), datasets,
# results. --reps: repetitions (default 5). --threads: threads of the builds (default: all cores;
# reads are on 1 thread, as pack_bench's read rows).
# Per repetition, per job (seg: 240 1080p PNGs + color masks -> 512x512 one-hot; cls: 3000
# 500x375 JPEGs -> shorter 224, centre crop; both 8-bit, default codec):
#   pack   shardpack build under peak_rss: wall, CPU (user + sys), peak RSS; `sync` after each
#   read   bench_read --threads 1 --modes reader_1t,zstd_1t --passes 5 --min-time 0.2 (as
#          pack_bench's read rows) of that build's own output, by that build's bench_read
#          (zstd_1t, bare zstd of the same frames, is the control: it should not move)
# Once: the records of both builds' datasets compared (dump_dataset of --after on both: key,
# size, class id, CRC-32 of image and label bytes per record); different records fail the run.
# Expected run time with --reps 5 on an idle 2-core machine: about 5 minutes (estimated: one
# repetition took 75 s of CPU under a load average of 12, 7.6 minutes of wall there), once the
# data sets exist. Making them (1.0 GB, first run only) took 20 minutes under that load.
# Prints a markdown table (job, step, medians, after/before, reps); writes WORK/ab.md, WORK/ab.json
# and WORK/results.jsonl (raw). Exit 0; 1 when a step fails or records differ; 2 on bad usage.
set -euo pipefail
cd "$(dirname "$0")/../.."

before="" after="" work="" reps=5 threads=$(nproc)
while [ $# -gt 0 ]; do
  case "$1" in
    --before) before=$(realpath "$2"); shift ;;
    --after) after=$(realpath "$2"); shift ;;
    --work) work=$2; shift ;;
    --reps) reps=$2; shift ;;
    --threads) threads=$2; shift ;;
    -h|--help) sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "ab_bench.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
[ -n "$before" ] && [ -n "$after" ] && [ -n "$work" ] || { echo "ab_bench.sh: --before, --after and --work are required" >&2; exit 2; }
[[ "$reps" =~ ^[1-9][0-9]*$ ]] || { echo "ab_bench.sh: --reps needs a positive integer" >&2; exit 2; }
[[ "$threads" =~ ^[1-9][0-9]*$ ]] || { echo "ab_bench.sh: --threads needs a positive integer" >&2; exit 2; }
for tool in before/shardpack before/bench_read before/peak_rss after/shardpack after/bench_read after/peak_rss \
            after/make_sample_data after/dump_dataset; do
  dir=${tool%%/*}; dir=${!dir}
  [ -x "$dir/${tool#*/}" ] || { echo "ab_bench.sh: $dir/${tool#*/} is missing (build it first)" >&2; exit 2; }
done

n_seg=240 n_cls=3000
# WORK is this script's own folder: it removes and renames names of its own there (the datasets,
# DIR.part), so it refuses a folder that is not empty and that it did not make, and a link.
if [ -L "$work" ]; then echo "ab_bench.sh: --work $work is a symbolic link; give a folder" >&2; exit 2; fi
if [ -d "$work" ] && [ -n "$(ls -A "$work")" ] && [ ! -f "$work/.ab_bench" ]; then
  echo "ab_bench.sh: --work $work holds files this script did not make (no .ab_bench in it); give a new or empty folder" >&2
  exit 2
fi
mkdir -p "$work"
touch "$work/.ab_bench"
work=$(realpath "$work")
results=$work/results.jsonl
: >"$results"
log() { echo "ab bench: $*" >&2; }
record() { printf '{"name":"%s","result":%s}\n' "$1" "$(tr -d '\n' <<<"$2")" >>"$results"; }

seg_src=$work/src/seg1080-$n_seg cls_src=$work/src/jpeg500-$n_cls
# gen DIR ARGS...: a data set, made once (in DIR.part first: an interrupted run leaves no half set).
gen() {
  local dir=$1; shift
  [ -f "$dir/list.csv" ] && return
  log "making $dir (once)"
  rm -rf "$dir.part"
  "$after/make_sample_data" --out "$dir.part" "$@" >/dev/null
  mv "$dir.part" "$dir"
}
gen "$seg_src" --task seg --count "$n_seg" --width 1920 --height 1080
gen "$cls_src" --task cls --jpeg --count "$n_cls" --width 500 --height 375 --seed 2
record setup "{\"before\":\"$before\",\"after\":\"$after\",\"reps\":$reps,\"threads\":$threads,\"seg_records\":$n_seg,\"cls_records\":$n_cls}"
find "$seg_src" "$cls_src" -type f -exec cat {} + >/dev/null  # into the page cache, for both sides alike

# build_args JOB: the pack job's options (pack_bench.sh's job_args, 8-bit, no fields).
build_args() {
  if [ "$1" = seg ]; then args=(--csv "$seg_src/list.csv" --classes "$seg_src/class_dict.csv" --size 512x512 --resize none --crop center)
  else args=(--csv "$cls_src/list.csv" --size 224x224 --resize shorter --crop center); fi
}

for r in $(seq "$reps"); do
  sides=(before after)
  [ $((r % 2)) = 0 ] && sides=(after before)
  for job in seg cls; do
    build_args "$job"
    for side in "${sides[@]}"; do
      bin=${!side} out=$work/$side-$job.ds
      log "$job: pack, $side (rep $r/$reps)"
      rm -rf "$out"
      res=$("$bin/peak_rss" -- "$bin/shardpack" -q build "${args[@]}" --out "$out" --threads "$threads" 2>/dev/null) \
        || { log "$job: the $side build failed: $res"; exit 1; }
      sync
      record "$side.$job.pack" "$res"
    done
    for side in "${sides[@]}"; do
      bin=${!side}
      log "$job: read, $side (rep $r/$reps)"
      res=$("$bin/bench_read" "$work/$side-$job.ds" --threads 1 --modes reader_1t,zstd_1t --passes 5 --min-time 0.2 \
        2>/dev/null) || { log "$job: bench_read of the $side dataset failed"; exit 1; }
      record "$side.$job.read" "$res"
    done
  done
done

same=true
for job in seg cls; do
  for side in before after; do "$after/dump_dataset" "$work/$side-$job.ds" >"$work/$side-$job.dump"; done
  if cmp -s "$work/before-$job.dump" "$work/after-$job.dump"; then
    log "$job: records identical ($(wc -l <"$work/after-$job.dump") records)"
  else
    log "$job: RECORDS DIFFER (diff $work/before-$job.dump $work/after-$job.dump)"; same=false
  fi
done
record identical_records "{\"identical\":$same}"

/usr/bin/python3 - "$results" "$work" <<'EOF'
import json, statistics, sys
results, work = sys.argv[1], sys.argv[2]
raw = [json.loads(line) for line in open(results)]
by = {}
for m in raw:
    by.setdefault(m["name"], []).append(m["result"])
# (step, unit, value of one measurement, higher is better)
steps = [("pack", "wall s", lambda x: x["seconds"], False),
         ("pack", "CPU s", lambda x: x["user_s"] + x["sys_s"], False),
         ("pack", "peak RSS MB", lambda x: x["max_rss_kb"] / 1024, False),
         ("read", "reader_1t /s", lambda x: x["modes"]["reader_1t"]["samples_per_s"], True),
         ("read", "reader_1t /CPU-s", lambda x: x["modes"]["reader_1t"]["samples_per_cpu_s"], True),
         ("read", "zstd_1t /s (control)", lambda x: x["modes"]["zstd_1t"]["samples_per_s"], True)]
rows = []
for job in ("seg", "cls"):
    for step, unit, value, higher in steps:
        b = [value(x) for x in by[f"before.{job}.{step}"]]
        a = [value(x) for x in by[f"after.{job}.{step}"]]
        mb, ma = statistics.median(b), statistics.median(a)
        ratio = ma / mb
        within = ratio >= 0.95 if higher else ratio <= 1.05
        rows.append({"job": job, "step": f"{step} {unit}", "before": mb, "after": ma, "after_over_before": ratio,
                     "within_5pct": within, "reps": len(a), "before_all": b, "after_all": a})
same = by["identical_records"][0]["identical"]
md = ["| job | step | before median | after median | after/before | within 5% | reps |", "|---|---|---:|---:|---:|---|---:|"]
md += [f"| {r['job']} | {r['step']} | {r['before']:.3f} | {r['after']:.3f} | {r['after_over_before']:.3f}x | "
       f"{'yes' if r['within_5pct'] else 'no'} | {r['reps']} |" for r in rows]
md.append("")
md.append(f"Records of both builds' datasets identical: {'yes' if same else 'NO'}. Times: lower is better; "
          "rates (/s): higher is better; within 5%: after/before <= 1.05 for times, >= 0.95 for rates.")
text = "\n".join(md) + "\n"
open(f"{work}/ab.md", "w").write(text)
json.dump({"setup": by["setup"][0], "identical_records": same, "rows": rows}, open(f"{work}/ab.json", "w"), indent=1)
print(text, end="")
EOF
[ "$same" = true ] || exit 1
