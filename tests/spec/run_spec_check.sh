#!/usr/bin/env bash
# Holds the spec and the code together: tests/spec/read_shardpack.py, written from
# formats/shardpack-v1.md alone, must read what the writer wrote exactly as the C++ reader does,
# read the golden test vector, and refuse what the C++ reader refuses.
# Arguments: SOURCE_DIR WORK_DIR SHARDPACK_CLI MAKE_SAMPLE_DATA DUMP_DATASET
set -euo pipefail
src=$1 work=$2 cli=$3 tool=$4 dump=$5
reader="python3 $src/tests/spec/read_shardpack.py"
rm -rf "$work"
mkdir -p "$work"
command -v zstd >/dev/null || { echo "the zstd command is needed (apt-get install zstd)"; exit 1; }

"$tool" --out "$work/seg" --count 5 --width 40 --height 30 --palette-masks --spaces >/dev/null
"$tool" --out "$work/cls" --task cls --jpeg --count 5 --width 48 --height 40 >/dev/null
check() {  # name, then build options
  local name=$1; shift
  "$cli" -q build --out "$work/$name" "$@"
  $reader "$work/$name" >"$work/$name.py.jsonl"
  "$dump" "$work/$name" >"$work/$name.cpp.jsonl"
  diff -u "$work/$name.cpp.jsonl" "$work/$name.py.jsonl"
  echo "spec reader agrees on $name: $(wc -l <"$work/$name.py.jsonl") records"
}
check seg-onehot-zstd --csv "$work/seg/list.csv" --classes "$work/seg/class_dict.csv" --shard-size 16KiB
check seg-index-bands --csv "$work/seg/list.csv" --classes "$work/seg/class_dict.csv" --label-layout index --band-rows 7
check seg-onehot-record-frames --csv "$work/seg/list.csv" --classes "$work/seg/class_dict.csv" --compression zstd-record
check cls-auto --csv "$work/cls/list.csv" --size 24x24 --compression auto
check seg-index-raw --csv "$work/seg/list.csv" --classes "$work/seg/class_dict.csv" --label-layout index --compression none
check seg-resized --csv "$work/seg/list.csv" --classes "$work/seg/class_dict.csv" --size 16x16 --resize fit
check cls-jpeg --csv "$work/cls/list.csv" --size 24x24

# The golden test vector, as a dataset with the manifest the spec shows for it.
mkdir -p "$work/golden"
python3 - "$src/tests/golden/tiny_shard.hex" "$work/golden" <<'PY'
import json, sys
data = bytearray()
for line in open(sys.argv[1]):
    data += bytes(int(w, 16) for w in line.split()[1:])
name = "shard-00000-d908886912887cfc.spk"
open(f"{sys.argv[2]}/{name}", "wb").write(data)
json.dump({"format": "shardpack", "format_version": "1.0", "records": 1,
           "shards": [{"file": name, "records": 1, "first_record": 0, "bytes": len(data), "xxh3": "d908886912887cfc"}]},
          open(f"{sys.argv[2]}/manifest.json", "w"))
PY
$reader "$work/golden" >"$work/golden.py.jsonl"
"$dump" "$work/golden" >"$work/golden.cpp.jsonl"
diff -u "$work/golden.cpp.jsonl" "$work/golden.py.jsonl"
grep -q '"key": "a.png"' "$work/golden.py.jsonl"

# The 1.1 test vector (band frames).
mkdir -p "$work/golden11"
python3 - "$src/tests/golden/band_shard.hex" "$work/golden11" <<'PY'
import json, sys
data = bytearray()
for line in open(sys.argv[1]):
    data += bytes(int(w, 16) for w in line.split()[1:])
name = "shard-00000-band.spk"
open(f"{sys.argv[2]}/{name}", "wb").write(data)
json.dump({"format": "shardpack", "format_version": "1.1", "records": 1,
           "shards": [{"file": name, "records": 1, "first_record": 0, "bytes": len(data), "xxh3": ""}]},
          open(f"{sys.argv[2]}/manifest.json", "w"))
PY
$reader "$work/golden11" >"$work/golden11.py.jsonl"
"$dump" "$work/golden11" >"$work/golden11.cpp.jsonl"
diff -u "$work/golden11.cpp.jsonl" "$work/golden11.py.jsonl"
grep -q '"key": "b.png"' "$work/golden11.py.jsonl"

# Damage both readers must refuse at open: a byte of the index, the trailer magic, a version.
shard=$(ls "$work/seg-index-raw"/shard-*.spk)
size=$(stat -c %s "$shard")
for what in index trailer version; do
  cp -r "$work/seg-index-raw" "$work/bad"
  bad=$(ls "$work/bad"/shard-*.spk)
  case $what in
    index) offset=$((size - 40 - 40 + 3)) ;;
    trailer) offset=$((size - 1)) ;;
    version) offset=8 ;;
  esac
  printf '\x07' | dd of="$bad" bs=1 seek="$offset" conv=notrunc status=none
  if $reader "$work/bad" >/dev/null 2>&1; then echo "spec reader accepted a damaged $what"; exit 1; fi
  if "$dump" "$work/bad" >/dev/null 2>&1; then echo "C++ reader accepted a damaged $what"; exit 1; fi
  rm -rf "$work/bad"
done
echo "spec reader and C++ reader refuse the same damaged shards"
