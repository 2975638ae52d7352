#!/usr/bin/env bash
# The benchmark: shardpack against the physical floor and the baselines users compare it with,
# every figure a ratio taken side by side in one run (these machines are shared and noisy).
#
#   ./scripts/bench.sh                  generated data sets, full size (~15-25 minutes on 2 cores,
#                                       and 10-20 more for the Python reading benchmark)
#   ./scripts/bench.sh --quick          smaller data sets and fewer repetitions (~5 minutes)
#   ./scripts/bench.sh --csv LIST --job seg|cls [--classes DICT] [--size N] [--resize none|shorter]
#                                       the packing and reading jobs on your own CSV
#   ./scripts/bench.sh --python         only the Python reading benchmark (with --quick: small)
#   ./scripts/bench.sh --remote         only the object-storage benchmark (SeaweedFS on 127.0.0.1;
#                                       scripts/bench/remote_bench.sh; with --quick: small)
#   ./scripts/bench.sh --cold           only the cold-storage benchmark (~13 minutes; --quick ~3): cold
#                                       epochs through a hard-disk and an NFS model below the page
#                                       cache (slowfs, 128 KiB read-ahead) and on this disk, evicted:
#                                       the floor, a .npy preload, today's reader and its defaults,
#                                       the C++ reader, a dataset twice the cache budget; the
#                                       order-quality table (scripts/bench/cold_bench.py, order_quality.py)
#   ./scripts/bench.sh --tf-adapter     only the tf.data adapter against a bare read_batch
#                                       (scripts/bench/tf_adapter.sh, ~5 minutes; --quick: ~1)
#   ./scripts/bench.sh --pack           only the pack benchmark (~10 minutes; --quick ~5): each pack
#                                       job against its decode floor and the Python baseline (the
#                                       whole run, and per record in the steady state), and
#                                       full-record and crop reads per codec, in one run
#                                       (scripts/bench/pack_bench.sh; WORK/pack/pack.md, pack.json);
#                                       --tiny: a few records, to check it runs (figures mean
#                                       nothing); --bin DIR: use DIR's binaries, build nothing
#   ./scripts/bench.sh --writer         only the Python writer's benchmark (~3 minutes; --quick ~1):
#                                       shardpack.write from arrays against the build from PNGs
#                                       minus their decode, and its peak memory over a 100k-sample
#                                       generator (scripts/bench/writer_bench.py; WORK/writer/)
#   options: --work DIR (default out/bench), --threads N (default all cores), --reps N,
#            --no-tf (leave TFRecord out), --no-rss (leave the 100k-record RSS runs out),
#            --no-python (leave the Python reading benchmark out of the full run; --quick
#            leaves it out unless --python is given), --no-remote (leave the object-storage
#            benchmark out of the full run)
#
# Prints one table and writes it, with every raw measurement, to WORK/bench.json; the Python
# reading benchmark's table to WORK/python.json and WORK/python.md.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

quick=0 user_csv="" user_job="" user_classes="" user_size="" user_resize="" tf=1 rss=1 python="" python_only=0 cold_only=0
tf_adapter_only=0 remote=1 remote_only=0 pack_only=0 tiny=0 bin_dir="" writer_only=0
work=out/bench threads=$(nproc) reps=""
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=1 ;;
    --csv) user_csv=$(realpath "$2"); shift ;;
    --job) user_job=$2; shift ;;
    --classes) user_classes=$(realpath "$2"); shift ;;
    --size) user_size=$2; shift ;;
    --resize) user_resize=$2; shift ;;
    --work) work=$2; shift ;;
    --threads) threads=$2; shift ;;
    --reps) reps=$2; shift ;;
    --no-tf) tf=0 ;;
    --no-rss) rss=0 ;;
    --python) python=1 python_only=1 ;;
    --tf-adapter) tf_adapter_only=1 ;;
    --no-python) python=0 ;;
    --remote) remote_only=1 ;;
    --no-remote) remote=0 ;;
    --cold) cold_only=1 ;;
    --pack) pack_only=1 ;;
    --writer) writer_only=1 ;;
    --tiny) tiny=1 ;;
    --bin) bin_dir=$(realpath "$2"); shift ;;
    -h|--help) sed -n '2,38p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
if [ -n "$user_csv" ] && [ "$user_job" != seg ] && [ "$user_job" != cls ]; then
  echo "bench.sh: --csv needs --job seg or --job cls" >&2; exit 2
fi
case "$user_resize" in ""|none|shorter) ;; *) echo "bench.sh: --resize none or shorter (what the Python baseline does too)" >&2; exit 2 ;; esac
[ -z "$reps" ] && reps=$([ $quick = 1 ] && echo 1 || echo 3)
[ -z "$python" ] && python=$([ $quick = 1 ] || [ -n "$user_csv" ] && echo 0 || echo 1)
if [ $python_only = 1 ] && [ -n "$user_csv" ]; then
  echo "bench.sh: --python runs on generated data sets, not with --csv" >&2; exit 2
fi

if { [ $tiny = 1 ] || [ -n "$bin_dir" ]; } && [ $pack_only = 0 ]; then
  echo "bench.sh: --tiny and --bin go with --pack" >&2; exit 2
fi
# The pack benchmark (issue 22): scripts/bench/pack_bench.sh, results in WORK/pack.
if [ $pack_only = 1 ]; then
  if [ -z "$bin_dir" ]; then
    ./scripts/install-deps.sh python3-opencv python3-numpy >&2
    SHARDPACK_BUILD_TYPE=Release SHARDPACK_BUILD_DIR=build-bench ./scripts/build.sh -DSHARDPACK_BUILD_TESTS=OFF >/dev/null
    bin_dir=$root/build-bench
  fi
  size_arg=()
  [ $quick = 1 ] && size_arg=(--quick)
  [ $tiny = 1 ] && size_arg=(--tiny)
  exec scripts/bench/pack_bench.sh --bin "$bin_dir" --work "$work/pack" --threads "$threads" --reps "$reps" "${size_arg[@]}"
fi

# The writer's benchmark (issue 32): the package in .venv with the CLI of build-bench.
if [ $writer_only = 1 ]; then
  SHARDPACK_BUILD_TYPE=Release SHARDPACK_BUILD_DIR=build-bench ./scripts/build.sh -DSHARDPACK_BUILD_TESTS=OFF >/dev/null
  SHARDPACK_BUILD_DIR=build-bench ./scripts/python-env.sh >&2
  size_arg=()
  [ $quick = 1 ] && size_arg=(--count 40 --memory-samples 20000)
  exec .venv/bin/python scripts/bench/writer_bench.py --bin build-bench --work "$work/writer" --threads "$threads" \
    --reps "$reps" --pipe "${size_arg[@]}"
fi

# The cold-storage benchmark (issues 16, 29): the package in .venv (scripts/python-env.sh), slowfs
# (build-bench/slowfs, where fuse3 and ../shared/tools/slowfs are there), the datasets and their
# .npy copies under WORK/cold (scripts/bench/cold_bench.py says what is measured); results in
# WORK/cold.json and WORK/cold.md.
if [ $cold_only = 1 ]; then
  SHARDPACK_BUILD_TYPE=Release SHARDPACK_BUILD_DIR=build-bench ./scripts/build.sh -DSHARDPACK_BUILD_TESTS=OFF >/dev/null
  ./scripts/python-env.sh >&2
  mkdir -p "$work/cold"
  work=$(realpath "$work")
  size_arg=()
  [ $quick = 1 ] && size_arg=(--quick)
  .venv/bin/python scripts/bench/cold_bench.py prepare --bin build-bench --work "$work/cold" "${size_arg[@]}" >&2
  .venv/bin/python scripts/bench/cold_bench.py drive --bin build-bench --work "$work/cold" "${size_arg[@]}" \
    --reps "$reps" --json "$work/cold.json" --markdown "$work/cold.md"
  .venv/bin/python scripts/bench/order_quality.py --json "$work/order-quality.json" --markdown "$work/order-quality.md"
  exit 0
fi

./scripts/install-deps.sh python3-opencv python3-numpy python3-venv python3-zstandard
[ $python = 1 ] && ./scripts/install-deps.sh python3-torch python3-torchvision python3-pil python3-dev
SHARDPACK_BUILD_TYPE=Release SHARDPACK_BUILD_DIR=build-bench ./scripts/build.sh -DSHARDPACK_BUILD_TESTS=OFF >/dev/null
bin=$root/build-bench
py=/usr/bin/python3   # Debian's, where python3-opencv and python3-numpy live
mkdir -p "$work"
work=$(realpath "$work")
results=$work/results.jsonl
: >"$results"
log() { echo "bench: $*" >&2; }
if [ $tf_adapter_only = 1 ]; then
  exec scripts/bench/tf_adapter.sh "$bin" "$work" $([ $quick = 1 ] && echo --quick) --reps "$reps"
fi

# record NAME JSON: one measurement, one line of results.jsonl
record() { printf '{"name":"%s","result":%s}\n' "$1" "$(tr -d '\n' <<<"$2")" >>"$results"; }

# pack NAME CSV OUT ARGS...: one full shardpack build from nothing, timed with its peak RSS
pack() {
  local name=$1 csv=$2 out=$3; shift 3
  rm -rf "$out"
  record "$name" "$("$bin/peak_rss" -- "$bin/shardpack" -q build --csv "$csv" --out "$out" --threads "$threads" "$@")"
}

# job NAME SRC_DIR JOB SIZE RESIZE: the packing comparison for one data set, repeated and
# interleaved (shardpack, floor, Python, shardpack, ...) so that drift hits all alike.
job() {
  local name=$1 src=$2 kind=$3 size=$4 resize=$5
  local csv=$src/list.csv classes_args=() py_classes=()
  if [ -n "$user_csv" ] && [ "$src" = user ]; then csv=$user_csv; fi
  local classes_file=""
  if [ "$kind" = seg ]; then
    classes_file=${user_classes:-$src/class_dict.csv}
    classes_args=(--classes "$classes_file"); py_classes=(--classes "$classes_file")
  elif [ -n "$user_classes" ]; then
    classes_args=(--classes "$user_classes")
  fi
  local geometry=(--size "${size}x${size}" --resize "$resize" --crop center)
  cat "$(dirname "$csv")"/* >/dev/null 2>&1 || true
  for r in $(seq "$reps"); do
    log "$name: shardpack build (rep $r)"
    pack "$name.shardpack" "$csv" "$work/$name.ds" "${classes_args[@]}" "${geometry[@]}"
    log "$name: bare decode floor (rep $r)"
    record "$name.floor" "$("$bin/bench_decode" --csv "$csv" --threads "$threads" --passes 1)"
    log "$name: Python baseline (rep $r)"
    rm -rf "$work/$name.npy"
    record "$name.python" "$("$py" scripts/bench/python_baseline.py --csv "$csv" "${py_classes[@]}" --job "$kind" \
      --size "$size" --resize "$resize" --out "$work/$name.npy" --procs "$threads")"
  done
  log "$name: reading (header reader vs bare ZSTD_decompressDCtx)"
  record "$name.read" "$("$bin/bench_read" "$work/$name.ds" --threads "$threads")"
  log "$name: decoding the source files, 1 thread"
  record "$name.source_decode_1t" "$("$bin/bench_decode" --csv "$csv" --threads 1 --passes "$reps")"
  log "$name: np.load of the baseline's .npy files"
  record "$name.npy_read" "$("$py" scripts/bench/npy_read.py --dir "$work/$name.npy")"
  if [ $tf = 1 ] && [ -n "${tf_python:-}" ]; then
    log "$name: TFRecord write and tf.data read of the same tensors"
    rm -rf "$work/$name.tfrecord"
    record "$name.tfrecord" "$("$tf_python" scripts/bench/tfrecord_bench.py --npy-dir "$work/$name.npy" \
      --work "$work/$name.tfrecord" --threads "$threads")" || log "$name: TFRecord run failed"
  fi
}

# codecs SRC_DIR: the segmentation job's 512x512 records stored with each codec, each read by the
# reader against bare zstd of the same bytes, and (in the job's table) against TFRecord.
codecs() {
  local src=$1
  for codec in zstd-record none auto; do
    log "seg1080: 512x512 records stored with --compression $codec"
    rm -rf "$work/seg1080-$codec.ds"
    "$bin/shardpack" -q build --csv "$src/list.csv" --classes "$src/class_dict.csv" --out "$work/seg1080-$codec.ds" \
      --threads "$threads" --size 512x512 --resize none --crop center --compression "$codec"
    record "seg1080.read.$codec" "$("$bin/bench_read" "$work/seg1080-$codec.ds" --threads "$threads")"
  done
}

# crops SRC_DIR: random 512x512 crops + flips from full 1080p records (index labels) at read time,
# against a new user's Python cropping of the same full records (python_crop.py) and against
# reading stored 512x512 crops; interleaved, --reps times.
crops() {
  local src=$1
  for codec in zstd zstd-record auto none; do
    rm -rf "$work/full1080-$codec.ds"
    "$bin/shardpack" -q build --csv "$src/list.csv" --classes "$src/class_dict.csv" --out "$work/full1080-$codec.ds" \
      --threads "$threads" --label-layout index --compression "$codec"
  done
  for r in $(seq "$reps"); do
    log "crops: shardpack reader, Python cropping, stored crops (rep $r)"
    for codec in zstd auto none; do
      record "crop.shardpack.$codec" "$("$bin/bench_crop" "$work/full1080-$codec.ds" --crop 512x512 --threads "$threads")"
    done
    for codec in zstd-record zstd auto none; do
      record "crop.python.$codec" "$("$py" scripts/bench/python_crop.py --dataset "$work/full1080-$codec.ds" --crop 512x512 \
        --procs "$threads")"
    done
    record "crop.stored" "$("$bin/bench_crop" "$work/seg1080.ds" --crop none --threads "$threads")"
  done
  for codec in zstd zstd-record auto none; do
    record "crop.size.$codec" "{\"bytes\":$(du -sb "$work/full1080-$codec.ds" | cut -f1)}"
  done
}

# gen DIR ARGS...: a generated data set, made once (kept between runs)
gen() { [ -f "$1/list.csv" ] || "$bin/make_sample_data" --out "$@" >/dev/null; }

tf_python=""
if [ $tf = 1 ] && [ $remote_only = 0 ]; then  # (--remote needs no TensorFlow)
  if scripts/bench/setup_tf_venv.sh "$work/tf-venv" >&2; then
    tf_python=$work/tf-venv/bin/python
  else
    log "TensorFlow is not available: the TFRecord comparison is left out"
  fi
fi

# The Python reading benchmark (issue 9): samples/s delivered to a training loop by every way of
# reading the same tensors, in interleaved rounds (scripts/bench/py_read_bench.py).
python_part() {
  local pw=$work/py py_python=$work/py-venv/bin/python n_seg n_cls rounds epochs=3
  if [ $quick = 1 ]; then n_seg=32 n_cls=1000 rounds=1; else n_seg=128 n_cls=7000 rounds=$reps; fi
  log "Python: venv with Debian's torch, the peers from PyPI and this shardpack (pip install .)"
  scripts/bench/setup_py_venv.sh "$work/py-venv" "$root" >"$work/py-setup.json" \
    || { log "Python: the venv could not be made; the Python benchmark is left out"; return 0; }
  # The uint8 target's floor, loaded into the uint8 methods' own processes (py_bare_zstd.cpp).
  mkdir -p "$pw"
  c++ -std=c++17 -O2 -DNDEBUG -shared -fPIC -Iinclude -Itools -o "$pw/libpy_bare_zstd.so" scripts/bench/py_bare_zstd.cpp -lzstd
  log "Python: generating data sets under $pw/src"
  gen "$pw/src/seg1080-$n_seg" --task seg --count "$n_seg" --width 1920 --height 1080
  gen "$pw/src/cls160-$n_cls" --task cls --jpeg --count "$n_cls" --width 160 --height 160 --seed 5
  local j src build_args
  for j in seg cls; do
    if [ $j = seg ]; then
      src=$pw/src/seg1080-$n_seg
      build_args=(--classes "$src/class_dict.csv" --size 512x512 --resize none --crop center)
    else
      src=$pw/src/cls160-$n_cls
      build_args=(--color gray --size 112x112 --resize shorter --crop center)
    fi
    rm -rf "$pw/$j" "$pw/$j.zstd.ds" "$pw/$j.raw.ds"
    "$bin/shardpack" -q build --csv "$src/list.csv" --threads "$threads" "${build_args[@]}" --out "$pw/$j.zstd.ds"
    "$bin/shardpack" -q build --csv "$src/list.csv" --threads "$threads" "${build_args[@]}" --compression none \
      --out "$pw/$j.raw.ds"
    "$py_python" scripts/bench/py_read_bench.py prepare --job $j --src "$src" --raw-ds "$pw/$j.raw.ds" \
      --zstd-ds "$pw/$j.zstd.ds" --work "$pw/$j" >/dev/null
    "$py_python" scripts/bench/py_read_bench.py drive --work "$pw/$j" --results "$results" --python "$py_python" \
      ${tf_python:+--tf-python "$tf_python"} --bin "$bin" --rounds "$rounds" --epochs $epochs \
      --threads 2 --setup "$work/py-setup.json" --bare-lib "$pw/libpy_bare_zstd.so"
  done
}

# Object storage (issue 17): shardpack from SeaweedFS on 127.0.0.1 against local disk and the
# peers (scripts/bench/remote_bench.sh; its table in WORK/remote/remote.md).
remote_part() {
  scripts/bench/setup_py_venv.sh "$work/py-venv" "$root" >"$work/py-setup.json" || true
  scripts/bench/remote_bench.sh "$bin" "$work" $([ $quick = 1 ] && echo --quick) >&2
}
if [ $remote_only = 1 ]; then
  remote_part
  exit 0
fi

if [ $python_only = 1 ]; then
  python_part
  "$py" scripts/bench/py_report.py "$results" --json "$work/python.json" --markdown "$work/python.md" \
    --setup "$work/py-setup.json"
  exit 0
fi

if [ -n "$user_csv" ]; then
  job user user "$user_job" "${user_size:-224}" "${user_resize:-shorter}"
else
  if [ $quick = 1 ]; then n_seg=12 n_jpg=120 n_big=24; else n_seg=48 n_jpg=400 n_big=80; fi
  log "generating data sets under $work/src"
  gen "$work/src/seg1080-$n_seg" --task seg --count "$n_seg" --width 1920 --height 1080
  gen "$work/src/jpeg500-$n_jpg" --task cls --jpeg --count "$n_jpg" --width 500 --height 375 --seed 2
  gen "$work/src/jpeg1600-$n_big" --task cls --jpeg --count "$n_big" --width 1600 --height 1200 --seed 3

  job seg1080 "$work/src/seg1080-$n_seg" seg 512 none
  codecs "$work/src/seg1080-$n_seg"
  crops "$work/src/seg1080-$n_seg"
  job jpeg500 "$work/src/jpeg500-$n_jpg" cls 224 shorter
  job jpeg1600 "$work/src/jpeg1600-$n_big" cls 224 shorter

  # Rebuilds from cron: nothing changed, and 1% of the rows changed (new pixels, same names),
  # on a copy of the JPEG set; each incremental result is compared with a fresh full build.
  log "rebuilds: full, no change, 1% changed"
  src=$work/src/jpeg500-$n_jpg copy=$work/src/rebuild
  changed=$(( (n_jpg + 99) / 100 ))
  for r in $(seq "$reps"); do
    rm -rf "$copy" "$work/rebuild.ds" "$work/rebuild-fresh.ds"
    cp -r "$src" "$copy"
    rebuild=(--csv "$copy/list.csv" --threads "$threads" --shard-size 4MiB --size 224x224 --resize shorter --crop center)
    record rebuild.full "$("$bin/peak_rss" -- "$bin/shardpack" -q build "${rebuild[@]}" --out "$work/rebuild.ds")"
    record rebuild.nochange "$("$bin/peak_rss" -- "$bin/shardpack" -q build "${rebuild[@]}" --out "$work/rebuild.ds")"
    record rebuild.nochange.report "$(cat "$work/rebuild.ds/report.json")"
    mapfile -t files < <(tail -n +2 "$copy/list.csv" | cut -d, -f1 | tr -d '"' | head -n $((changed * 2)))
    for ((i = 0; i < changed; i++)); do
      cp "$copy/${files[$((i * 2 + 1))]}" "$copy/${files[$((i * 2))]}"
    done
    record rebuild.one_percent "$("$bin/peak_rss" -- "$bin/shardpack" -q build "${rebuild[@]}" --out "$work/rebuild.ds")"
    record rebuild.one_percent.report "$(cat "$work/rebuild.ds/report.json")"
    "$bin/shardpack" -q build "${rebuild[@]}" --out "$work/rebuild-fresh.ds"
    same=false
    cmp -s "$work/rebuild.ds/manifest.json" "$work/rebuild-fresh.ds/manifest.json" && same=true
    record rebuild.identical_to_full "{\"identical\":$same}"
  done
  rm -rf "$copy" "$work/rebuild.ds" "$work/rebuild-fresh.ds"

  # Peak memory against record count: small JPEGs, classification, one list cut at each size.
  if [ $rss = 1 ]; then
    if [ $quick = 1 ]; then counts="1000 5000"; else counts="1000 20000 100000"; fi
    max=${counts##* }
    small=$work/src/small-$max
    log "RSS: generating $max small JPEGs"
    gen "$small" --task cls --jpeg --count "$max" --width 48 --height 48 --seed 4
    for n in $counts; do
      head -n $((n + 1)) "$small/list.csv" >"$small/list-$n.csv"
      log "RSS: build of $n records"
      pack "rss.$n" "$small/list-$n.csv" "$work/rss.ds" --size 32x32 --resize shorter --crop center --shard-size 16MiB
    done
    rm -rf "$work/rss.ds"
  fi
fi

[ $remote = 1 ] && [ $quick = 0 ] && [ -z "$user_csv" ] && remote_part
"$py" scripts/bench/report.py "$results" --json "$work/bench.json" --threads "$threads"
if [ $python = 1 ]; then
  python_part
  "$py" scripts/bench/py_report.py "$results" --json "$work/python.json" --markdown "$work/python.md" \
    --setup "$work/py-setup.json"
fi
