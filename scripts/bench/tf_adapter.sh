#!/usr/bin/env bash
# scripts/bench/tf_adapter.sh BIN_DIR WORK_DIR [--quick] [--reps N]
#
# The tf.data adapter against a bare read_batch over the same batches (issue #21 item 2), on
# two generated data sets: cls (7,000 grey 112x112 records, batches of 64, index labels) and seg
# (256 records of 512x512, batches of 8, index labels and float32 one-hot). Run by
# `scripts/bench.sh --tf-adapter`. Uses .venv-tf (scripts/python-env.sh --tf: TensorFlow and this
# package); where it cannot be made, says so and exits 0 with nothing measured.
# Writes one JSON line per run (scripts/bench/tf_adapter_bench.py) to WORK_DIR/tf_adapter.jsonl
# and prints the medians and ratios. About 5 minutes on 2 cores (--quick: about 1).
set -euo pipefail
cd "$(dirname "$0")/../.."
[[ $# -ge 2 ]] || { echo "usage: $0 BIN_DIR WORK_DIR [--quick] [--reps N]" >&2; exit 2; }
bin=$1 work=$2 quick=0 reps=5
shift 2
while [[ $# -gt 0 ]]; do
  case $1 in
    --quick) quick=1 reps=1 ;;
    --reps) reps=$2; shift ;;
    *) echo "usage: $0 BIN_DIR WORK_DIR [--quick] [--reps N]" >&2; exit 2 ;;
  esac
  shift
done
log() { echo "tf_adapter: $*" >&2; }
./scripts/python-env.sh --tf >&2
py=.venv-tf/bin/python
if ! TF_CPP_MIN_LOG_LEVEL=3 "$py" -c 'import tensorflow, shardpack.tf' 2>/dev/null; then
  log "no .venv-tf with TensorFlow (see above): the tf.data adapter benchmark is left out"
  exit 0
fi
if [[ $quick = 1 ]]; then n_cls=1000 n_seg=32; else n_cls=7000 n_seg=256; fi
mkdir -p "$work"
out=$work/tf_adapter.jsonl
: >"$out"
cls=$work/tfa-cls-$n_cls seg=$work/tfa-seg-$n_seg
[[ -f $cls.src/list.csv ]] || "$bin/make_sample_data" --out "$cls.src" --task cls --jpeg --count "$n_cls" \
  --width 160 --height 160 --seed 5 >/dev/null
[[ -f $seg.src/list.csv ]] || "$bin/make_sample_data" --out "$seg.src" --task seg --count "$n_seg" --width 512 \
  --height 512 >/dev/null
rm -rf "$cls.ds" "$seg.ds"
"$bin/shardpack" -q build --csv "$cls.src/list.csv" --size 112x112 --color gray --resize shorter --crop center \
  --out "$cls.ds"
"$bin/shardpack" -q build --csv "$seg.src/list.csv" --classes "$seg.src/class_dict.csv" --size 512x512 --out "$seg.ds"
run() { log "$*"; "$py" scripts/bench/tf_adapter_bench.py --rounds "$reps" "$@" >>"$out"; }
run --name cls --dataset "$cls.ds" --batch 64 --epochs 1
run --name cls-step5ms --dataset "$cls.ds" --batch 64 --epochs 1 --step 0.005
run --name seg --dataset "$seg.ds" --batch 8 --epochs 1
run --name seg-onehot --dataset "$seg.ds" --batch 8 --epochs 1 --label onehot
"$py" - "$out" <<'PY'
import json, sys
print(f"{'run':12s} {'read_batch':>10s} {'(out=)':>8s} {'tf.dataset':>10s} {'x fresh':>8s} {'x out=':>7s} "
      f"{'CPU x':>6s} {'no prefetch':>11s} {'from_generator':>14s}   samples/s, medians; CPU x: CPU time per "
      f"sample against read_batch's")
for line in open(sys.argv[1]):
    r = json.loads(line)
    m, f, o = r["median"], r["ratio_to_read_batch"], r["ratio_to_read_batch_out"]
    print(f"{r['name']:12s} {m['read_batch']:10.0f} {m['read_batch_out']:8.0f} {m['tf_dataset']:10.0f} "
          f"{f['tf_dataset']:7.2f}x {o['tf_dataset']:6.2f}x {r['cpu_ratio_to_read_batch']['tf_dataset']:5.2f}x "
          f"{m['tf_dataset_noprefetch']:11.0f} {m['tf_from_generator']:14.0f}")
PY
