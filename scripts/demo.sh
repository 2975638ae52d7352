#!/usr/bin/env bash
# The main job end to end on a fresh Debian machine: installs what is missing, builds the CLI
# and the sample-data tool (only those: the tests and benchmarks are scripts/test.sh's), makes a
# small sample dataset (street scenes with color masks and a class dictionary), packs it,
# verifies it, reads it from Python, and says where the CLI is and how to put it on the PATH.
# Everything goes under out/demo/; the build under build/ (or $SHARDPACK_BUILD_DIR), where
# scripts/test.sh goes on to build the rest.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
build_dir=${SHARDPACK_BUILD_DIR:-build}
demo=out/demo

echo "== 0. build the CLI and the sample-data tool into $build_dir/ (make's progress below)"
t0=$(date +%s)
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE="${SHARDPACK_BUILD_TYPE:-RelWithDebInfo}" >/dev/null
cmake --build "$build_dir" -j"$(nproc)" --target shardpack make_sample_data
echo "built $build_dir/shardpack and $build_dir/make_sample_data in $(( $(date +%s) - t0 )) s"
rm -rf "$demo"
mkdir -p "$demo"

echo

echo "== 1. sample data: 48 images 640x480 with color masks (palette PNGs whose palette order differs from the dictionary's)"
"$build_dir/make_sample_data" --out "$demo/src" --count 48 --width 640 --height 480 --palette-masks --spaces
head -3 "$demo/src/list.csv"
cat "$demo/src/class_dict.csv"

echo
echo "== 2. pack: 256x256 centre crop of the shorter side, area filter, one-hot labels"
"$build_dir/shardpack" build --csv "$demo/src/list.csv" --classes "$demo/src/class_dict.csv" \
  --out "$demo/dataset" --size 256x256 --resize shorter --crop center --shard-size 4MiB

echo
echo "== 3. verify: every checksum, every record decoded, manifest against shards"
"$build_dir/shardpack" verify "$demo/dataset"

echo
echo "== 4. inspect"
"$build_dir/shardpack" inspect "$demo/dataset"

echo
echo "== 5. export record 0 as PNGs"
"$build_dir/shardpack" export "$demo/dataset" --index 0 --out "$demo/record0"
echo
ls -l "$demo"/record0.*

echo
echo "== 6. class frequencies (for class weights), from the build report"
python3 - "$demo/dataset/report.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print(f"{r['records']} records, {r['bytes_in']} bytes in, {r['bytes_out']} bytes out, "
      f"compression ratio {r['compression_ratio']:.2f}, {r['samples_per_second']:.1f} samples/s")
for c in r["class_frequencies"]:
    print(f"  {c['class']:<12} {c['fraction']*100:6.2f} %")
PY
echo
echo "== 7. read it from Python: pip install . into .venv/ (scripts/python-env.sh: the extension is built, the CLI taken from $build_dir/), then shardpack.open"
# pip -v's output, shortened to the build's progress; all of it in $demo/python-env.log.
SHARDPACK_BUILD_DIR=$build_dir SHARDPACK_PIP_VERBOSE=1 ./scripts/python-env.sh --minimal 2>&1 | tee "$demo/python-env.log" |
  { grep --line-buffered -E '^python-env|Building|Linking|Installing|Successfully|rror|arning' || true; } ||
  { echo "scripts/python-env.sh failed; its whole output is in $demo/python-env.log" >&2; exit 1; }
.venv/bin/python - "$demo/dataset" <<'PY'
import sys, time
import numpy as np
import shardpack

ds = shardpack.open(sys.argv[1])
print(ds)
img, label = ds[0]
print(f"ds[0]: image {img.dtype} {img.shape}, label {label.dtype} {label.shape}, key {ds.key(0)!r}")
order = shardpack.permutation(len(ds), seed=0)
images, labels = ds.read_batch(order[:16])   # float32 NCHW, ImageNet-normalised, one-hot labels
print(f"read_batch(16): images {images.dtype} {images.shape}, labels {labels.dtype} {labels.shape}")
out = (np.empty_like(images), np.empty_like(labels))
t0, n = time.perf_counter(), 0
while time.perf_counter() - t0 < 1.0:
    for start in range(0, len(order) - 15, 16):
        ds.read_batch(order[start:start + 16], out=out)
        n += 16
print(f"read_batch into the same arrays, shuffled batches of 16: {n / (time.perf_counter() - t0):.0f} samples/s")
PY
cli=$(realpath "$build_dir/shardpack")
echo
echo "== demo done"
echo "dataset:     $demo/dataset"
echo "Python:      .venv/bin/python -c \"import shardpack; print(len(shardpack.open('$demo/dataset')))\""
echo "the CLI:     $cli (and .venv/bin/shardpack, from pip install .)"
echo "on the PATH: export PATH=\"$(dirname "$cli"):\$PATH\"     (this shell), or install it:"
echo "             cmake --install $build_dir --prefix ~/.local    (then ~/.local/bin/shardpack; Debian's ~/.profile puts ~/.local/bin on the PATH at login)"
