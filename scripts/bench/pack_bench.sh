#!/usr/bin/env bash
# The pack benchmark (issue 22), run by `./scripts/bench.sh --pack`: every pack job against its
# own decode floor and the Python baseline, and full-record and crop reads per codec, all in one
# run, repetitions interleaved, medians and ratios (scripts/bench/pack_report.py).
#
#   pack_bench.sh --bin DIR --work DIR [--threads N] [--reps N] [--quick | --tiny]
#
# --bin: a build folder with shardpack, bench_decode, bench_read, bench_crop, make_sample_data and
# peak_rss. --work: where the data sets, the datasets and the results go (data sets are kept and
# reused between runs). --threads: threads of the pack jobs, their floors and the Python pool
# (default: all cores); reads are measured on 1 thread. --quick: smaller data sets; --tiny: a few
# records each, to check that the step runs (its figures mean nothing; the smoke test uses it).
#
# Per repetition, in an order that rotates with the repetition, for each pack job:
#   pack         shardpack build (the job's options), whole process under peak_rss: wall and CPU
#   floor        bench_decode --size ...: the same files decoded as that build decodes them (its
#                decoders, rows up to the last the crop needs, the JPEG DCT scale), nothing else
#   floor_full   bench_decode --png fast: the same decoders, every row at full size
#   python       scripts/bench/python_baseline.py (the Python baseline of ./scripts/bench.sh: a
#                multiprocessing Pool, OpenCV, NumPy, .npy files), whole process under peak_rss
#   pack_long, floor_long, python_long
#                the same three on the job's list repeated 4 times (twice with --tiny): the
#                difference from the runs above, per added record, is the steady-state cost of a
#                record, without what each run pays once (start-up, first touch of its buffers,
#                thread start, publishing); a user's data set of thousands of records pays that
# then, per repetition, codecs rotating:
#   read         bench_read --modes reader_1t,zstd_1t on the job's records stored with each
#                --compression (zstd = band frames, the default; zstd-record = one frame per
#                record; auto; none): the reader against bare zstd of the same frames
#   crop         bench_crop --crop 512x512 on full 1080p records (index labels) per codec, and
#                --crop 256x256 on the seg job's 512x512 records; full-record reads of the 1080p
#                records per codec (bench_read, as above), their labels delivered one-hot (6x the
#                stored bytes) and as stored (--label index_u8: uint8 class ids)
#   fields       the cls job's list with three per-sample fields a row (a float, 2 tags, 2 boxes;
#                format 1.5), packed as the cls job (pack side only): what fields cost a build
#   bands        the same reads and crops of both with the default codec at fixed band heights
#                (--band-rows: one height for image and label, format 1.1's codec 2), against the
#                default (a height per region from the data, codec 3): what the rule rests on
#   16-bit       the seg job on the same scenes as 16-bit PNGs (uint16 images, format 1.4, every
#                bit used): the build under peak_rss, and full-record reads (bench_read, the
#                images delivered as stored, uint16), beside the seg job's 8-bit figures
#
# Writes WORK/results.jsonl (raw), WORK/pack.json and WORK/pack.md (the tables); prints the tables.
# Exit 0; 1 when a measurement fails; 2 on bad usage.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD

bin="" work="" threads=$(nproc) reps=3 size=full
while [ $# -gt 0 ]; do
  case "$1" in
    --bin) bin=$(realpath "$2"); shift ;;
    --work) work=$2; shift ;;
    --threads) threads=$2; shift ;;
    --reps) reps=$2; shift ;;
    --quick) size=quick ;;
    --tiny) size=tiny ;;
    -h|--help) sed -n '2,39p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "pack_bench.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
[ -n "$bin" ] && [ -n "$work" ] || { echo "pack_bench.sh: --bin and --work are required" >&2; exit 2; }
[[ "$threads" =~ ^[1-9][0-9]*$ ]] || { echo "pack_bench.sh: --threads needs a positive integer" >&2; exit 2; }
[[ "$reps" =~ ^[1-9][0-9]*$ ]] || { echo "pack_bench.sh: --reps needs a positive integer" >&2; exit 2; }
for tool in shardpack bench_decode bench_read bench_crop make_sample_data peak_rss; do
  [ -x "$bin/$tool" ] || { echo "pack_bench.sh: $bin/$tool is missing (build it first)" >&2; exit 2; }
done

# Data set sizes, and how long each read measurement lasts.
case $size in
  full)  n_seg=24 n_cls=300 n_full=16 repeat=4 read_args=(--passes 5 --min-time 0.2) crop_seconds=2 ;;
  quick) n_seg=12 n_cls=120 n_full=8  repeat=4 read_args=(--passes 3 --min-time 0.1) crop_seconds=1 ;;
  tiny)  n_seg=2  n_cls=8   n_full=2  repeat=2 read_args=(--passes 3 --min-time 0.01) crop_seconds=0.05 ;;
esac
mkdir -p "$work"
work=$(realpath "$work")
results=$work/results.jsonl
: >"$results"
log() { echo "pack bench: $*" >&2; }
# record NAME JSON: one measurement, one line of results.jsonl
record() { printf '{"name":"%s","result":%s}\n' "$1" "$(tr -d '\n' <<<"$2")" >>"$results"; }
gen() { [ -f "$1/list.csv" ] || "$bin/make_sample_data" --out "$@" >/dev/null; }

# The Python baseline needs Debian's python3 with OpenCV and NumPy (bench.sh installs them).
py=/usr/bin/python3
python_ok=1
if ! "$py" -c 'import cv2, numpy' 2>/dev/null; then
  python_ok=0
  log "python3-opencv or python3-numpy is missing: the Python baseline is left out"
  record python.unavailable '{"reason":"python3 cannot import cv2 and numpy (apt-get install python3-opencv python3-numpy)"}'
fi

src=$work/src
log "data sets under $src ($size)"
seg_src=$src/seg1080-$n_seg cls_src=$src/jpeg500-$n_cls
gen "$seg_src" --task seg --count "$n_seg" --width 1920 --height 1080
gen "$cls_src" --task cls --jpeg --count "$n_cls" --width 500 --height 375 --seed 2
seg16_src=$src/seg1080-16bit-$n_seg
gen "$seg16_src" --task seg --count "$n_seg" --width 1920 --height 1080 --bits 16
# repeat_list SRC: SRC/repeat-R.csv, the rows of SRC/list.csv R times (beside it: relative paths).
repeat_list() { { head -n 1 "$1/list.csv"; for ((i = 0; i < repeat; i++)); do tail -n +2 "$1/list.csv"; done; } >"$1/repeat-$repeat.csv"; }
repeat_list "$seg_src"
repeat_list "$cls_src"
# The cls list with per-sample fields: a float, two tags and two boxes (source pixels) a row.
awk -F, 'NR == 1 { print $0 ",score,tags,boxes"; next }
         { print $0 "," NR / 7 ",\"a;" (NR % 2 ? "b" : "c") "\",\"10 20 200 150 car; 50.5 60 300 300 person\"" }' \
  "$cls_src/list.csv" >"$cls_src/fields.csv"
# The writer's default band height (formats/shardpack-v1.md 10.3: about 256 KiB of image a band).
record setup "{\"size\":\"$size\",\"threads\":$threads,\"reps\":$reps,\"seg_records\":$n_seg,\"cls_records\":$n_cls,\"crop_records\":$n_full,\"repeat\":$repeat,\"seg_default_band_rows\":$((262144 / (512 * 3))),\"crop_default_band_rows\":$((262144 / (1920 * 3)))}"

# job_args JOB [long]: sets csv (with long: the list repeated), build_args (shardpack build),
# floor_args (bench_decode) and py_args (python_baseline.py) for a pack job.
job_args() {
  local list=list.csv
  [ "${2:-}" = long ] && list=repeat-$repeat.csv
  if [ "$1" = seg ]; then
    csv=$seg_src/$list
    build_args=(--classes "$seg_src/class_dict.csv" --size 512x512 --resize none --crop center)
    floor_args=(--size 512x512 --resize none --crop center)
    py_args=(--classes "$seg_src/class_dict.csv" --job seg --size 512 --resize none)
  elif [ "$1" = cls_fields ]; then
    csv=$cls_src/fields.csv
    build_args=(--size 224x224 --resize shorter --crop center --field score:float --field tags:tags --field boxes:boxes)
  else
    csv=$cls_src/$list
    build_args=(--size 224x224 --resize shorter --crop center)
    floor_args=(--size 224x224 --resize shorter --crop center)
    py_args=(--job cls --size 224 --resize shorter)
  fi
}

# measure JOB WHAT: one measurement of one side of a pack job.
measure() {
  local job=$1 what=$2 out
  job_args "$job" "$([[ $what == *_long ]] && echo long)"
  case ${what%_long} in
    pack)
      rm -rf "$work/$job.ds"
      out=$("$bin/peak_rss" -- "$bin/shardpack" -q build --csv "$csv" --out "$work/$job.ds" --threads "$threads" \
        "${build_args[@]}" 2>/dev/null) || { log "$job: the build failed: $out"; return 1; } ;;
    floor) out=$("$bin/bench_decode" --csv "$csv" --threads "$threads" --passes 1 "${floor_args[@]}" 2>/dev/null) ;;
    floor_full) out=$("$bin/bench_decode" --csv "$csv" --threads "$threads" --passes 1 --png fast 2>/dev/null) ;;
    python)
      [ $python_ok = 1 ] || return 0
      rm -rf "$work/$job.npy"
      out=$("$bin/peak_rss" -- "$py" scripts/bench/python_baseline.py --csv "$csv" "${py_args[@]}" --out "$work/$job.npy" \
        --procs "$threads" 2>/dev/null) || { log "$job: the Python baseline failed: $out"; return 1; } ;;
  esac
  record "pack.$job.$what" "$out"
}

sides=(pack floor floor_full python pack_long floor_long python_long)
codecs=(zstd zstd-record auto none)
# rotate K WORDS...: the words rotated left by K (the order of a repetition).
rotate() { local k=$1; shift; local a=("$@") n=$#; for ((i = 0; i < n; i++)); do printf '%s\n' "${a[$(((i + k) % n))]}"; done; }

cat "$seg_src"/* "$cls_src"/* >/dev/null 2>&1 || true  # into the page cache, for every side alike
for r in $(seq "$reps"); do
  for job in seg cls; do
    for what in $(rotate "$r" "${sides[@]}"); do
      log "$job: $what (rep $r/$reps)"
      measure "$job" "$what"
    done
  done
  log "cls_fields: pack (rep $r/$reps)"
  measure cls_fields pack
done
rm -rf "$work/seg.npy" "$work/cls.npy"

# Full-record reads: each job's records stored with each codec (the same build options).
for job in seg cls; do
  job_args "$job"
  for codec in "${codecs[@]}"; do
    rm -rf "$work/$job-$codec.ds"
    "$bin/shardpack" -q build --csv "$csv" --out "$work/$job-$codec.ds" --threads "$threads" "${build_args[@]}" \
      --compression "$codec" 2>/dev/null
    record "pack.size.$job.$codec" "{\"bytes\":$(du -sb "$work/$job-$codec.ds" | cut -f1)}"
  done
done
# Band heights: the default codec's records at fixed --band-rows (one height for both regions,
# codec 2; the record's height: one frame per region). 170 and 45 are the 1.1 writer's default
# (about 256 KiB of image a band for both regions): "today" for the 1.3 default (the zstd
# datasets: image bands of that height, the label's height from the data, codec 3).
seg_band_rows=(16 64 170 256 512) crop_band_rows=(22 45 90 180 1080)
job_args seg
for rows in "${seg_band_rows[@]}"; do
  rm -rf "$work/seg-rows$rows.ds"
  "$bin/shardpack" -q build --csv "$csv" --out "$work/seg-rows$rows.ds" --threads "$threads" "${build_args[@]}" \
    --band-rows "$rows" 2>/dev/null
done
# Crops: full 1080p records with index labels, per codec.
crop_csv=$seg_src/first-$n_full.csv  # beside list.csv: its paths are relative to that folder
head -n $((n_full + 1)) "$seg_src/list.csv" >"$crop_csv"
for codec in "${codecs[@]}"; do
  rm -rf "$work/crop-$codec.ds"
  "$bin/shardpack" -q build --csv "$crop_csv" --classes "$seg_src/class_dict.csv" --out "$work/crop-$codec.ds" \
    --threads "$threads" --label-layout index --compression "$codec" 2>/dev/null
  record "pack.size.crop.$codec" "{\"bytes\":$(du -sb "$work/crop-$codec.ds" | cut -f1)}"
done
for rows in "${crop_band_rows[@]}"; do
  rm -rf "$work/crop-rows$rows.ds"
  "$bin/shardpack" -q build --csv "$crop_csv" --classes "$seg_src/class_dict.csv" --out "$work/crop-rows$rows.ds" \
    --threads "$threads" --label-layout index --band-rows "$rows" 2>/dev/null
done
for r in $(seq "$reps"); do
  for codec in $(rotate "$r" "${codecs[@]}"); do
    for job in seg cls; do
      log "read $job records, --compression $codec (rep $r/$reps)"
      record "pack.read.$job.$codec" "$("$bin/bench_read" "$work/$job-$codec.ds" --threads 1 --modes reader_1t,zstd_1t \
        "${read_args[@]}" 2>/dev/null)"
    done
    log "crops of full 1080p records, --compression $codec (rep $r/$reps)"
    record "pack.crop.$codec" "$("$bin/bench_crop" "$work/crop-$codec.ds" --crop 512x512 --threads 1 \
      --seconds "$crop_seconds" 2>/dev/null)"
    log "crops 256 of seg records, full reads of 1080p records, --compression $codec (rep $r/$reps)"
    record "pack.crop256.$codec" "$("$bin/bench_crop" "$work/seg-$codec.ds" --crop 256x256 --threads 1 \
      --seconds "$crop_seconds" 2>/dev/null)"
    record "pack.read1080.$codec" "$("$bin/bench_read" "$work/crop-$codec.ds" --threads 1 --modes reader_1t,zstd_1t \
      "${read_args[@]}" 2>/dev/null)"
    log "full reads of 1080p records as stored (uint8 class ids), --compression $codec (rep $r/$reps)"
    record "pack.read1080_ids.$codec" "$("$bin/bench_read" "$work/crop-$codec.ds" --threads 1 --modes reader_1t,zstd_1t \
      --label index_u8 "${read_args[@]}" 2>/dev/null)"
  done
  job_args seg
  log "16-bit: pack and read the seg job's scenes as 16-bit PNGs (rep $r/$reps)"
  rm -rf "$work/seg16.ds"
  record "pack.seg16.pack" "$("$bin/peak_rss" -- "$bin/shardpack" -q build --csv "$seg16_src/list.csv" --out "$work/seg16.ds" \
    --threads "$threads" "${build_args[@]/$seg_src/$seg16_src}" 2>/dev/null)"
  record "pack.size.seg16.zstd" "{\"bytes\":$(du -sb "$work/seg16.ds" | cut -f1)}"
  record "pack.read.seg16.zstd" "$("$bin/bench_read" "$work/seg16.ds" --threads 1 --modes reader_1t,zstd_1t \
    "${read_args[@]}" 2>/dev/null)"
  for i in $(rotate "$r" 0 1 2 3 4); do
    rows=${seg_band_rows[$i]}
    log "read seg records, --band-rows $rows (rep $r/$reps)"
    record "pack.bands.read.$rows" "$("$bin/bench_read" "$work/seg-rows$rows.ds" --threads 1 --modes reader_1t,zstd_1t \
      "${read_args[@]}" 2>/dev/null)"
    record "pack.bands.crop256.$rows" "$("$bin/bench_crop" "$work/seg-rows$rows.ds" --crop 256x256 --threads 1 \
      --seconds "$crop_seconds" 2>/dev/null)"
    rows=${crop_band_rows[$i]}
    log "crops of full 1080p records, --band-rows $rows (rep $r/$reps)"
    record "pack.bands.crop.$rows" "$("$bin/bench_crop" "$work/crop-rows$rows.ds" --crop 512x512 --threads 1 \
      --seconds "$crop_seconds" 2>/dev/null)"
    record "pack.bands.read1080.$rows" "$("$bin/bench_read" "$work/crop-rows$rows.ds" --threads 1 --modes reader_1t,zstd_1t \
      "${read_args[@]}" 2>/dev/null)"
  done
done

"$py" scripts/bench/pack_report.py "$results" --json "$work/pack.json" --markdown "$work/pack.md"
