#!/usr/bin/env bash
# A partitioned build with Ray (scripts/ray/build_parts.py) on a local Ray started by the
# script (--local, 2 CPUs): 4 ray.remote tasks build the parts, then the merge. The merged
# dataset must equal a one-machine build byte for byte (content hash, manifest.json, every shard).
# Ray comes from PyPI into .venv-ray/ (scripts/ray/setup_ray.sh, which scripts/test.sh runs)
# or $SHARDPACK_RAY_PYTHON; without it the test is skipped (exit 77) with the reason.
#
# usage: run_ray_test.sh SOURCE_DIR WORK_DIR SHARDPACK MAKE_SAMPLE_DATA
set -uo pipefail
src=$1 work=$2 shardpack=$3 make_sample=$4
python=${SHARDPACK_RAY_PYTHON:-$src/.venv-ray/bin/python}
fail() { echo "FAILED: $*"; exit 1; }
[[ -x "$python" ]] || { echo "SKIPPED: no Python with Ray at $python (scripts/ray/setup_ray.sh installs it from PyPI)"; exit 77; }
"$python" -c "import ray" 2>/dev/null || { echo "SKIPPED: $python cannot import ray"; exit 77; }

rm -rf "$work"; mkdir -p "$work"
"$make_sample" --out "$work/data" --count 24 --width 96 --height 64 > /dev/null || fail "make_sample_data"
options="--size 48x32 --label-layout index --shard-size 16KiB --shuffle --seed 7"
"$shardpack" -q build --csv "$work/data/list.csv" --classes "$work/data/class_dict.csv" --out "$work/single" \
    $options --threads 1 || fail "one-machine build"
# Ray's own files (sockets, logs, the ~/.ray token it writes) in a short private folder (socket
# paths must stay under 108 bytes), removed at exit.
raytmp=$(mktemp -d /tmp/shardpack-ray.XXXXXX) || fail "mktemp"
trap 'rm -rf "$raytmp"' EXIT
HOME=$raytmp RAY_TMPDIR=$raytmp timeout 600 "$python" "$src/scripts/ray/build_parts.py" --local --local-cpus 2 \
    --csv "$work/data/list.csv" --parts-dir "$work/parts" --out "$work/merged" --parts 4 --shardpack "$shardpack" \
    -- --classes "$work/data/class_dict.csv" $options > "$work/ray.log" 2>&1
code=$?
grep -v "^\s*$" "$work/ray.log" | tail -n 15
[[ $code -eq 0 ]] || fail "build_parts.py exited $code"
single_hash=$("$shardpack" inspect --json "$work/single" | grep -o '"content_hash": "[0-9a-f]*"')
merged_hash=$("$shardpack" inspect --json "$work/merged" | grep -o '"content_hash": "[0-9a-f]*"')
echo "one machine: $single_hash; merged from 4 Ray tasks: $merged_hash"
[[ -n "$single_hash" && "$single_hash" == "$merged_hash" ]] || fail "content hashes differ"
cmp "$work/single/manifest.json" "$work/merged/manifest.json" || fail "manifests differ"
shards=0
for f in "$work"/single/shard-*.spk; do
    cmp "$f" "$work/merged/$(basename "$f")" || fail "$(basename "$f") differs"
    shards=$((shards + 1))
done
echo "merged dataset == one-machine build: same manifest.json and $shards identical shards"
echo "PASSED"
