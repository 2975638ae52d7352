#!/usr/bin/env bash
# Holds the spec and the code together: tests/spec/read_shardpack.py, written from
# formats/shardpack-v1.md alone, must read what the writer wrote exactly as the C++ reader does,
# read the golden test vector, and refuse what the C++ reader refuses.
# Arguments: SOURCE_DIR WORK_DIR SHARDPACK_CLI MAKE_SAMPLE_DATA DUMP_DATASET MAKE_MANY_SHARDS
set -euo pipefail
src=$1 work=$2 cli=$3 tool=$4 dump=$5 many=$6
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
check seg-onehot-zstd-region-bands --csv "$work/seg/list.csv" --classes "$work/seg/class_dict.csv" --shard-size 16KiB
check seg-index-bands --csv "$work/seg/list.csv" --classes "$work/seg/class_dict.csv" --label-layout index --band-rows 7
check seg-onehot-record-frames --csv "$work/seg/list.csv" --classes "$work/seg/class_dict.csv" --compression zstd-record
check cls-auto --csv "$work/cls/list.csv" --size 24x24 --compression auto
check seg-index-raw --csv "$work/seg/list.csv" --classes "$work/seg/class_dict.csv" --label-layout index --compression none
check seg-resized --csv "$work/seg/list.csv" --classes "$work/seg/class_dict.csv" --size 16x16 --resize fit
check cls-jpeg --csv "$work/cls/list.csv" --size 24x24
# Raw bands (bit 63 of a frame_sizes entry): JPEG images whose bands zstd does not halve, under
# --compression auto, beside labels it shrinks; the records must hold some, or this check would
# not test them.
"$tool" --out "$work/segjpeg" --count 4 --width 40 --height 30 --palette-masks --jpeg >/dev/null
check seg-jpeg-auto-raw-bands --csv "$work/segjpeg/list.csv" --classes "$work/segjpeg/class_dict.csv" --compression auto
python3 - "$work/seg-jpeg-auto-raw-bands" <<'PY'
import glob, struct, sys
raw = 0
for path in glob.glob(sys.argv[1] + "/shard-*.spk"):
    b = open(path, "rb").read()
    index_offset, count = struct.unpack_from("<QQ", b, len(b) - 40)
    for i in range(count):
        offset, _, _, _, codec = struct.unpack_from("<QQQQI", b, index_offset + 40 * i)
        if codec in (2, 3):
            key_length = struct.unpack_from("<I", b, offset + 12)[0]
            table = offset + (16 + key_length + 63) // 64 * 64
            fixed = 8 if codec == 2 else 12
            frames = struct.unpack_from("<I", b, table + fixed - 4)[0]
            raw += sum(struct.unpack_from("<Q", b, table + fixed + 8 * f)[0] >> 63 for f in range(frames))
if raw == 0:
    sys.exit("seg-jpeg-auto-raw-bands: no raw band was written, so none was read")
print(f"spec reader agrees on {raw} raw bands")
PY

# Both readers read the dataset $work/FOLDER and must agree; its first record's key must be KEY.
readers_agree() {  # FOLDER KEY
  $reader "$work/$1" >"$work/$1.py.jsonl"
  "$dump" "$work/$1" >"$work/$1.cpp.jsonl"
  diff -u "$work/$1.cpp.jsonl" "$work/$1.py.jsonl"
  grep -q "\"key\": \"$2\"" "$work/$1.py.jsonl"
}

# A golden test vector (a hex dump of one shard) as a dataset with the manifest the spec shows
# for it, read by both readers.
check_golden_vector() {  # HEX_FILE FOLDER_NAME SHARD_NAME FORMAT_VERSION XXH3 KEY
  mkdir -p "$work/$2"
  python3 - "$src/tests/golden/$1" "$work/$2" "$3" "$4" "$5" <<'PY'
import json, sys
hex_file, folder, name, version, xxh3 = sys.argv[1:6]
data = bytearray()
for line in open(hex_file):
    data += bytes(int(w, 16) for w in line.split()[1:])
open(f"{folder}/{name}", "wb").write(data)
json.dump({"format": "shardpack", "format_version": version, "records": 1,
           "shards": [{"file": name, "records": 1, "first_record": 0, "bytes": len(data), "xxh3": xxh3}]},
          open(f"{folder}/manifest.json", "w"))
PY
  readers_agree "$2" "$6"
}
check_golden_vector tiny_shard.hex golden shard-00000-d908886912887cfc.spk 1.0 d908886912887cfc a.png
check_golden_vector band_shard.hex golden11 shard-00000-band.spk 1.1 "" b.png                 # band frames
check_golden_vector region_band_shard.hex golden13 shard-00000-region.spk 1.3 "" c.png        # a band height per region

# Format 1.2: the shard list in a binary shard table; first the golden table (spec 16.5) naming
# the golden tiny shard, then one of 3 shards as make_many_shards (the writer's encoding) lays it out.
mkdir -p "$work/golden12"
python3 - "$src/tests/golden/tiny_shard.hex" "$src/tests/golden/shard_table.hex" "$work/golden12" <<'PY'
import json, sys
def load(path):
    data = bytearray()
    for line in open(path):
        data += bytes(int(w, 16) for w in line.split()[1:])
    return data
shard, table = load(sys.argv[1]), load(sys.argv[2])
open(f"{sys.argv[3]}/shard-00000-d908886912887cfc.spk", "wb").write(shard)
open(f"{sys.argv[3]}/shards-12a5db2463b6bb48.spt", "wb").write(table)
json.dump({"format": "shardpack", "format_version": "1.2", "records": 1,
           "shard_table": {"file": "shards-12a5db2463b6bb48.spt", "bytes": len(table), "xxh3": "12a5db2463b6bb48"}},
          open(f"{sys.argv[3]}/manifest.json", "w"))
PY
readers_agree golden12 a.png
"$many" "$work/table3" --shards 3 --records 2 --shard-table always 2>/dev/null
$reader "$work/table3" >"$work/table3.py.jsonl"
"$dump" "$work/table3" >"$work/table3.cpp.jsonl"
diff -u "$work/table3.cpp.jsonl" "$work/table3.py.jsonl"
test "$(wc -l <"$work/table3.py.jsonl")" = 6
# A byte of the table changed (its entry count): both refuse.
cp -r "$work/table3" "$work/badtable"
printf '\x07' | dd of="$(ls "$work/badtable"/shards-*.spt)" bs=1 seek=16 conv=notrunc status=none
if $reader "$work/badtable" >/dev/null 2>&1; then echo "spec reader accepted a damaged shard table"; exit 1; fi
if "$dump" "$work/badtable" >/dev/null 2>&1; then echo "C++ reader accepted a damaged shard table"; exit 1; fi
echo "spec reader agrees on the 1.2 shard tables (golden and 3 shards)"

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

# A manifest whose content_hash does not match its shards' names (14.A.7): both refuse (the
# spec reader hashes with the xxhash module: python3-xxhash).
cp -r "$work/seg-index-raw" "$work/badhash"
python3 - "$work/badhash/manifest.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
m["content_hash"] = ("1" if m["content_hash"][0] == "0" else "0") + m["content_hash"][1:]
json.dump(m, open(sys.argv[1], "w"))
PY
if "$dump" "$work/badhash" >/dev/null 2>&1; then echo "C++ reader accepted a changed content_hash"; exit 1; fi
if ! python3 -c "import xxhash" 2>/dev/null; then
  echo "spec reader's content_hash check skipped: no python3 xxhash module (apt-get install python3-xxhash)"
elif $reader "$work/badhash" >/dev/null 2>&1; then
  echo "spec reader accepted a changed content_hash"; exit 1
else
  echo "spec reader and C++ reader refuse a changed content_hash"
fi
