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
  $reader "$work/$name" --writer >"$work/$name.py.jsonl"
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
# Format 1.4: uint16 images (16-bit PNGs), in band frames and raw, resized and as stored.
"$tool" --out "$work/seg16" --count 4 --width 40 --height 30 --bits 16 >/dev/null
"$tool" --out "$work/cls16" --task cls --count 4 --width 48 --height 40 --bits 16 >/dev/null
check seg-uint16-region-bands --csv "$work/seg16/list.csv" --classes "$work/seg16/class_dict.csv" --label-layout index
check seg-uint16-resized-band-rows --csv "$work/seg16/list.csv" --classes "$work/seg16/class_dict.csv" --size 16x16 --band-rows 5
check cls-uint16-gray-raw --csv "$work/cls16/list.csv" --color gray --compression none
check cls-uint16-record-frames --csv "$work/cls16/list.csv" --compression zstd-record --size 24x24
# Format 1.5: per-sample fields of every kind, in each stored form (values in the prefix of band
# records, inside the zstd frame of codec 1 records, in raw records).
python3 - "$work/seg" <<'PY'
import csv, sys
folder = sys.argv[1]
images = [row[0] for row in csv.reader(open(f"{folder}/list.csv"))][1:]  # names with spaces too
with open(f"{folder}/fields.csv", "w") as f:
    f.write("image,label,n,s,t,il,fl,tags,boxes\n")
    for i in range(5):
        boxes = "; ".join(f"{2 + k} {1 + i} {9.5 + k} {12 + i} {'car' if k % 2 else 'tree'}" for k in range(i % 3))
        tags = ";".join(t for b, t in enumerate(["a", "b", "c"]) if (i >> b) & 1)
        f.write(f"\"{images[i]}\",x,{i * -7},{i / 3!r},\"t {i}\",\"{' '.join(str(k) for k in range(i))}\","
                f"\"{' '.join(repr(k / 4) for k in range(i % 2))}\",\"{tags}\",\"{boxes}\"\n")
PY
fields=(--field n:int --field s:float --field t:str --field il:int-list --field fl:float-list --field tags:tags --field boxes:boxes)
check fields-raw --csv "$work/seg/fields.csv" "${fields[@]}" --compression none
check fields-record-frames --csv "$work/seg/fields.csv" "${fields[@]}" --compression zstd-record --size 24x20
check fields-bands --csv "$work/seg/fields.csv" "${fields[@]}" --size 32x24 --resize fit

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
check_golden_vector uint16_bands_shard.hex golden14 shard-00000-wide.spk 1.4 "" d.tif         # uint16 images, 5 bands
check_golden_vector fields_shard.hex golden15 shard-00000-fields.spk 1.5 "" d.png            # per-sample fields

# Format 1.2: the shard list in a binary shard table; first the golden table (spec 16.5) naming
# the golden tiny shard, then one of 3 shards as make_many_shards (the writer's encoding) lays it out.
# A dataset of the golden tiny shard listed by a golden shard table: golden_table_dataset TABLE_HEX
# TABLE_XXH3 FOLDER [CONTENT_HASH] (the manifest's content_hash only where given).
golden_table_dataset() {
  mkdir -p "$work/$3"
  python3 - "$src/tests/golden/tiny_shard.hex" "$src/tests/golden/$1" "$2" "$work/$3" "${4:-}" <<'PY'
import json, sys
def load(path):
    data = bytearray()
    for line in open(path):
        data += bytes(int(w, 16) for w in line.split()[1:])
    return data
shard, table = load(sys.argv[1]), load(sys.argv[2])
table_hash, folder, content_hash = sys.argv[3], sys.argv[4], sys.argv[5]
open(f"{folder}/shard-00000-d908886912887cfc.spk", "wb").write(shard)
open(f"{folder}/shards-{table_hash}.spt", "wb").write(table)
manifest = {"format": "shardpack", "format_version": "1.2", "records": 1}
if content_hash:
    manifest["content_hash"] = content_hash
manifest["shard_table"] = {"file": f"shards-{table_hash}.spt", "bytes": len(table), "xxh3": table_hash}
json.dump(manifest, open(f"{folder}/manifest.json", "w"))
PY
}
golden_table_dataset shard_table.hex 12a5db2463b6bb48 golden12
readers_agree golden12 a.png
# 1.6: the same shard in a table of 32-byte entries (index_xxh3)
golden_table_dataset shard_table_index.hex f658587dc1553912 golden16 3214a1cc7d3a3651
readers_agree golden16 a.png
"$many" "$work/table3" --shards 3 --records 2 --shard-table always 2>/dev/null
$reader "$work/table3" --writer >"$work/table3.py.jsonl"
"$dump" "$work/table3" >"$work/table3.cpp.jsonl"
diff -u "$work/table3.cpp.jsonl" "$work/table3.py.jsonl"
test "$(wc -l <"$work/table3.py.jsonl")" = 6
# A byte of the table changed (its entry count): both refuse.
cp -r "$work/table3" "$work/badtable"
printf '\x07' | dd of="$(ls "$work/badtable"/shards-*.spt)" bs=1 seek=16 conv=notrunc status=none
if $reader "$work/badtable" >/dev/null 2>&1; then echo "spec reader accepted a damaged shard table"; exit 1; fi
if "$dump" "$work/badtable" >/dev/null 2>&1; then echo "C++ reader accepted a damaged shard table"; exit 1; fi
echo "spec reader agrees on the 1.2 shard tables (golden and 3 shards)"
# A symbolic link at the shard table's name is followed, as at manifest.json and the shards
# (13.8 step 3): both read the table it leads to.
cp -r "$work/table3" "$work/linktable"
table=$(basename "$(ls "$work/linktable"/shards-*.spt)")
mv "$work/linktable/$table" "$work/linktable/real.spt"
ln -s real.spt "$work/linktable/$table"
$reader "$work/linktable" >"$work/linktable.py.jsonl"
"$dump" "$work/linktable" >"$work/linktable.cpp.jsonl"
diff -u "$work/linktable.cpp.jsonl" "$work/linktable.py.jsonl"
diff -u "$work/table3.cpp.jsonl" "$work/linktable.cpp.jsonl"
echo "spec reader and C++ reader follow a link at the shard table's name"

# Manifest members both readers refuse (13.3, 14.A.5.1): a fraction where an integer goes, a
# shard name holding a NUL byte, an object for the shard list.
for what in records-fraction shard-records-fraction nul-name shards-object index-xxh3-other index-xxh3-upper; do
  cp -r "$work/seg-index-raw" "$work/badmanifest"
  python3 - "$work/badmanifest/manifest.json" "$what" <<'PY'
import json, sys
path, what = sys.argv[1:3]
m = json.load(open(path))
if what == "records-fraction": m["records"] = float(m["records"])
elif what == "shard-records-fraction": m["shards"][0]["records"] = float(m["shards"][0]["records"])
elif what == "nul-name": m["shards"][0]["file"] = m["shards"][0]["file"] + "\u0000x"
elif what == "shards-object": m["shards"] = {}
elif what == "index-xxh3-other": m["shards"][-1]["index_xxh3"] = "%016x" % (int(m["shards"][-1]["index_xxh3"], 16) ^ 1)
elif what == "index-xxh3-upper": m["shards"][0]["index_xxh3"] = m["shards"][0]["index_xxh3"].upper() if m["shards"][0]["index_xxh3"].upper() != m["shards"][0]["index_xxh3"] else "G" * 16
open(path, "w").write(json.dumps(m))
PY
  if $reader "$work/badmanifest" >/dev/null 2>&1; then echo "spec reader accepted a manifest with $what"; exit 1; fi
  if "$dump" "$work/badmanifest" >/dev/null 2>&1; then echo "C++ reader accepted a manifest with $what"; exit 1; fi
  rm -rf "$work/badmanifest"
done
echo "spec reader and C++ reader refuse the same damaged manifests"
cp -r "$work/seg-index-raw" "$work/oldmanifest"  # an older writer's (1.5 and before): no index_xxh3, not checked
python3 - "$work/oldmanifest/manifest.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
for e in m["shards"]: del e["index_xxh3"]
open(sys.argv[1], "w").write(json.dumps(m))
PY
readers_agree oldmanifest "$(python3 -c 'import json,sys; print(json.loads(open(sys.argv[1]).readline())["key"])' "$work/seg-index-raw.py.jsonl")"
diff -u "$work/seg-index-raw.py.jsonl" "$work/oldmanifest.py.jsonl"
echo "spec reader and C++ reader read a manifest without index_xxh3 as before"

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

# The example manifest of 13.4 is what the tool writes for the command it names. Its hashes and
# sizes follow from the zstd, libpng and libjpeg-turbo versions: compared whole when `libraries`
# is the example's, else every member but those (and the versions) with a note.
mkdir -p "$work/example"
"$tool" --out "$work/example/src" --count 6 --seed 1 >/dev/null
"$cli" -q build --csv "$work/example/src/list.csv" --classes "$work/example/src/class_dict.csv" --out "$work/example/ds" \
  --size 32x32 --label-layout index
python3 - "$src/formats/shardpack-v1.md" "$work/example/ds/manifest.json" <<'PY'
import json, re, sys
spec, written = open(sys.argv[1]).read(), json.load(open(sys.argv[2]))
section = spec[spec.index("### 13.4 Example manifest"):]
shown = json.loads(re.search(r"```json\n(.*?)\n```", section, re.S).group(1))
if shown.get("libraries") != written.get("libraries"):
    print(f"13.4: libraries here {written.get('libraries')} differ from the example's; hashes and sizes not compared")
    for m in (shown, written):
        for k in ("content_hash", "libraries"):
            m.pop(k, None)
        for s in m.get("shards", []):
            for k in ("file", "bytes", "xxh3", "index_xxh3"):
                s.pop(k, None)
if shown != written:
    for k in sorted(set(shown) | set(written)):
        if shown.get(k) != written.get(k):
            print(f"13.4 example, member {k}: the spec shows {json.dumps(shown.get(k))}, the tool writes {json.dumps(written.get(k))}")
    sys.exit("formats/shardpack-v1.md 13.4: the example manifest is not what the tool writes")
print("13.4: the example manifest is what the tool writes")
PY
