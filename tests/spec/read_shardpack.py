#!/usr/bin/env python3
"""An independent shardpack v1 reader, written from formats/shardpack-v1.md alone.

Reads a dataset folder, makes the spec's reader checks (section 14), decodes every record and
prints one JSON line per record: index, key, height, width, class_id and CRC-32s of the image
and label bytes. Exits 1, naming the problem, on anything the spec says to refuse.

    read_shardpack.py DIR [--writer]

--writer: also check what the spec asks of a writer where a file shows it (a reader must not
refuse these): each shard's version_minor (5, 15), the manifest's format_version (13.3, 15) and
each shard's listed index_xxh3 (1.6: every entry has one; a table has 32-byte entries).

Standard library only. zstd records are decompressed with the `zstd` command. XXH3-64
checksums are verified when the `xxhash` module is importable (otherwise said on stderr).
"""
import json
import os
import stat
import struct
import subprocess
import sys
import zlib

try:
    import xxhash
except ImportError:
    xxhash = None

MAGIC = b"\x89SPK\r\n\x1a\n"
TRAILER_MAGIC = b"SPKTRAIL"


class Refused(Exception):
    pass


def u16(b, o): return struct.unpack_from("<H", b, o)[0]
def u32(b, o): return struct.unpack_from("<I", b, o)[0]
def i32(b, o): return struct.unpack_from("<i", b, o)[0]
def u64(b, o): return struct.unpack_from("<Q", b, o)[0]
def align(v, a): return (v + a - 1) // a * a


def xxh3(data):
    return xxhash.xxh3_64_intdigest(data) if xxhash else None


def parse_schema(p):
    if len(p) < 32:
        raise Refused("schema section shorter than 32 bytes")
    s = dict(task=p[0], channels=p[1], order=p[2], layout=p[3], dtype=p[4], image_dtype=p[5],
             fixed_h=u32(p, 8), fixed_w=u32(p, 12), classes=u32(p, 16), ignore=u32(p, 20))
    seg = s["task"] == 1
    if s["image_dtype"] not in (1, 2): raise Refused("image dtype")
    if s["task"] not in (1, 2): raise Refused("task")
    if s["order"] == 4:  # bands (1.4): 1 to 255 channels
        if s["channels"] == 0: raise Refused("bands without a channel")
    elif {1: 1, 2: 3, 3: 4}.get(s["order"]) != s["channels"]: raise Refused("channel order/count")
    if not 1 <= s["classes"] <= 65535: raise Refused("class count")
    if s["fixed_h"] > 65536 or s["fixed_w"] > 65536: raise Refused("fixed size")
    if (s["fixed_h"] == 0) != (s["fixed_w"] == 0): raise Refused("one fixed dimension")
    if seg:
        if s["layout"] not in (1, 2): raise Refused("segmentation layout")
        if s["layout"] == 1:
            if s["dtype"] != 1: raise Refused("one-hot dtype")
            if s["ignore"] != (255 if s["classes"] <= 255 else 65535): raise Refused("one-hot ignore value")
        else:
            if s["dtype"] not in (1, 2): raise Refused("index dtype")
            limit = 255 if s["dtype"] == 1 else 65535
            if s["classes"] > limit or s["ignore"] != limit: raise Refused("index classes/ignore")
    elif s["layout"] != 3 or s["dtype"] != 0:
        raise Refused("classification layout")
    return s


def parse_classes(p):
    if len(p) < 4: raise Refused("classes section too short")
    n, at, out = u32(p, 0), 4, []
    if n > 65535: raise Refused("too many classes")
    for _ in range(n):
        if len(p) - at < 8: raise Refused("classes section ends inside a class")
        if p[at] > 1: raise Refused("bad color flag")
        ln = u32(p, at + 4)
        at += 8
        if ln > len(p) - at: raise Refused("class name runs past the section")
        out.append(p[at:at + ln]); at += ln
    if at != len(p): raise Refused("bytes after the last class")
    return out


def plain_name(name):
    """14.A.5.1 and 13.8: one file of the dataset folder."""
    return isinstance(name, str) and name != "" and "/" not in name and "\0" not in name and not name.startswith(".")


def nonnegative(value, what):
    """13.3: records, bytes and first_record are non-negative integers (20.0 and -1 are refused)."""
    if type(value) is not int or value < 0: raise Refused(f"{what}: not a non-negative integer: {value!r}")
    return value


def read_regular(path):
    """A regular file's bytes (14.A.5.2, 13.8 step 3); a symbolic link to one is followed, as
    the spec says for every name the manifest gives."""
    if not stat.S_ISREG(os.stat(path).st_mode): raise Refused(f"{path}: not a regular file")
    return open(path, "rb").read()


KINDS = {1: "int", 2: "float", 3: "str", 4: "int-list", 5: "float-list", 6: "tags", 7: "boxes"}


def parse_fields(p):
    """Spec 6.5: the FIELDS section (format 1.5)."""
    at, out = 4, []
    if len(p) < 4: raise Refused("fields section too short")
    count = u32(p, 0)
    if not 1 <= count <= 256: raise Refused("field count")

    def take(limit):
        nonlocal at
        if len(p) - at < 4: raise Refused("fields section ends inside a length")
        n = u32(p, at)
        at += 4
        if n > limit or len(p) - at < n: raise Refused("fields section: a name runs past it")
        v = p[at:at + n]
        at += n
        return v

    for _ in range(count):
        if len(p) - at < 4: raise Refused("fields section ends inside a kind")
        kind = p[at]
        if kind not in KINDS or p[at + 1:at + 4] != b"\0\0\0": raise Refused("field kind")
        at += 4
        name = take(256)
        if len(p) - at < 4: raise Refused("fields section ends inside a name count")
        names = u32(p, at)
        at += 4
        if names > 65535: raise Refused("vocabulary size")
        vocab = [take(65536) for _ in range(names)]
        if not name or any(f["name"] == name for f in out): raise Refused("field name empty or repeated")
        if (kind in (6, 7)) != bool(vocab): raise Refused("vocabulary of a field")
        out.append(dict(name=name, kind=kind, names=len(vocab)))
    if at != len(p): raise Refused("bytes after the last field")
    return out


def decode_fields(fields, p, h, w):
    """Spec 10.4: a record's field values, in the canonical form dump_dataset prints (floats as
    their IEEE bit patterns)."""
    at, out = 0, []

    def need(n):
        if len(p) - at < n: raise Refused("a field value runs past the record's fields")

    def count(element):
        nonlocal at
        need(4)
        c = u32(p, at)
        at += 4
        if c > (len(p) - at) // element: raise Refused("field elements run past the record's fields")
        return c

    for f in fields:
        k = f["kind"]
        if k in (1, 2):
            need(8)
            out.append(struct.unpack_from("<q", p, at)[0] if k == 1 else u64(p, at))
            at += 8
        elif k == 3:
            c = count(1)
            out.append(p[at:at + c].decode("utf-8", "replace"))
            at += c
        elif k in (4, 5):
            c = count(8)
            out.append([struct.unpack_from("<q" if k == 4 else "<Q", p, at + 8 * j)[0] for j in range(c)])
            at += 8 * c
        elif k == 6:
            c = count(2)
            ids = [u16(p, at + 2 * j) for j in range(c)]
            if any(i >= f["names"] for i in ids) or any(b <= a for a, b in zip(ids, ids[1:])): raise Refused("tag ids")
            out.append(ids)
            at += 2 * c
        else:
            c = count(20)
            boxes = []
            for j in range(c):
                x0, y0, x1, y1 = struct.unpack_from("<4f", p, at + 20 * j)
                label = u32(p, at + 20 * j + 16)
                if not (0 <= x0 < x1 <= w and 0 <= y0 < y1 <= h) or label >= f["names"]: raise Refused("box")
                boxes.append(list(struct.unpack_from("<4I", p, at + 20 * j)) + [label])
            out.append(boxes)
            at += 20 * c
    if at != len(p): raise Refused("bytes after the last field value")
    return out


def open_shard(path):
    b = read_regular(path)
    size = len(b)
    if size < 104: raise Refused("truncated")
    if b[:8] != MAGIC: raise Refused("bad magic")
    major, minor = u16(b, 8), u16(b, 10)
    if major != 1: raise Refused(f"format version {major}.{minor} is not supported")
    header_length, required, count_sections, alignment = u32(b, 12), u64(b, 16), u32(b, 32), u32(b, 36)
    shard_number, first_record = u64(b, 40), u64(b, 48)
    t = size - 40
    if b[t + 32:] != TRAILER_MAGIC: raise Refused("no trailer")
    index_offset, count, checksum = u64(b, t), u64(b, t + 8), u64(b, t + 16)
    if u16(b, t + 24) != major or u16(b, t + 26) != minor or u32(b, t + 28) != 40: raise Refused("trailer/header mismatch")
    if count > (size - 104) // 40: raise Refused("record count")
    if index_offset + 40 * count + 40 != size: raise Refused("index does not end at the trailer")
    if header_length < 64 or header_length % 8 or header_length > index_offset or header_length > 64 << 20:
        raise Refused("header length")
    if xxhash and xxh3(b[:header_length] + b[index_offset:index_offset + 40 * count]) != checksum:
        raise Refused("header/index checksum")
    if required & ~0x1f: raise Refused("unknown required feature")
    if alignment < 64 or alignment & (alignment - 1) or alignment > 1 << 20: raise Refused("alignment")
    at, schema, classes, schema_raw, classes_raw, fields, fields_raw = 64, None, None, b"", b"", None, b""
    for _ in range(count_sections):
        if header_length - at < 16: raise Refused("section header past the header")
        stype, flags, length = u32(b, at), u32(b, at + 4), u64(b, at + 8)
        at += 16
        if length > header_length - at: raise Refused("section past the header")
        payload = b[at:at + length]
        if stype == 1:
            if schema is not None: raise Refused("two schema sections")
            schema, schema_raw = parse_schema(payload), payload
        elif stype == 2:
            if classes is not None: raise Refused("two classes sections")
            classes, classes_raw = parse_classes(payload), payload
        elif stype == 3:
            if fields is not None: raise Refused("two fields sections")
            fields, fields_raw = parse_fields(payload), payload
        elif flags & 1:
            raise Refused(f"unknown required section type {stype}")
        at = align(at + length, 8)
    if schema is None or classes is None: raise Refused("schema or classes missing")
    if (schema["image_dtype"] == 2 or schema["order"] == 4) and not required & 8:
        raise Refused("uint16 images or bands without the feature bit")
    if len(classes) != schema["classes"]: raise Refused("class count mismatch")
    if (fields is not None) != bool(required & 0x10): raise Refused("fields section and feature bit 4 disagree")
    schema["fields"] = fields
    entries, end = [], align(header_length, alignment)
    for i in range(count):
        e = index_offset + 40 * i
        off, stored, decoded, csum, codec = u64(b, e), u64(b, e + 8), u64(b, e + 16), u64(b, e + 24), u32(b, e + 32)
        if codec not in (0, 1, 2, 3): raise Refused("codec")
        if codec == 1 and not required & 1: raise Refused("zstd without the feature bit")
        if codec == 2 and not required & 2: raise Refused("band frames without the feature bit")
        if codec == 3 and not required & 4: raise Refused("per-region band frames without the feature bit")
        if off % alignment: raise Refused("unaligned record")
        if off < end or stored > index_offset or off > index_offset - stored: raise Refused("record outside the record area")
        if decoded > 1 << 32 or decoded < 16: raise Refused("decoded size")
        if codec == 0 and stored != decoded: raise Refused("raw size mismatch")
        end = off + stored
        entries.append((off, stored, decoded, csum, codec))
    return dict(bytes=b, shard_number=shard_number, first_record=first_record, schema=schema,
                schema_key=schema_raw + classes_raw + fields_raw, entries=entries, minor=minor, required=required,
                checksum=checksum)


def prefix_end(s, data, key_length):
    """The end of a record's key, or with fields (1.5) of its field values (spec 10.2, 10.4)."""
    if s["fields"] is None: return 16 + key_length
    if len(data) < 20 + key_length: raise Refused("record ends before its fields_length")
    n = u32(data, 16 + key_length)
    if n > 1 << 26: raise Refused("fields_length")
    return 20 + key_length + n


def layout(s, data, decoded):
    """image_offset, image_bytes, label_offset, label_bytes, height of a record (spec 10.2)."""
    h, w, key_length = u32(data, 0), u32(data, 4), u32(data, 12)
    image_offset = align(prefix_end(s, data, key_length), 64)
    image_bytes = h * w * s["channels"] * s["image_dtype"]
    label_bytes = 0 if s["task"] == 2 else h * w * (s["classes"] if s["layout"] == 1 else s["dtype"])
    label_offset = align(image_offset + image_bytes, 64) if label_bytes else image_offset + image_bytes
    return image_offset, image_bytes, label_offset, label_bytes, h


def one_frame_size(frame):
    """The size of the zstd frame at the start of `frame` and its Frame_Content_Size (None when
    absent), from its header and block headers (RFC 8878); refuses a skippable frame."""
    if len(frame) < 5 or u32(frame, 0) != 0xFD2FB528: raise Refused("band frame is not one zstd frame")
    fhd = frame[4]
    fcs_flag, single, checksum, did = fhd >> 6, (fhd >> 5) & 1, (fhd >> 2) & 1, fhd & 3
    fcs_bytes = 1 if fcs_flag == 0 and single else (0, 2, 4, 8)[fcs_flag]
    at = 5 + (0 if single else 1) + (0, 1, 2, 4)[did]
    if len(frame) < at + fcs_bytes: raise Refused("band frame header")
    content = int.from_bytes(frame[at:at + fcs_bytes], "little") if fcs_bytes else None
    if fcs_bytes == 2: content += 256
    at += fcs_bytes
    while True:
        if len(frame) < at + 3: raise Refused("band frame block header")
        bh = int.from_bytes(frame[at:at + 3], "little")
        at += 3 + (1 if (bh >> 1) & 3 == 1 else bh >> 3)
        if (bh >> 1) & 3 == 3 or at > len(frame): raise Refused("band frame block")
        if bh & 1: break
    return at + 4 * checksum, content


def unband(s, data, decoded, codec):
    """Codecs 2 and 3 (spec 10.3): prefix, band table, one zstd frame per band of each region;
    codec 3 has a band height per region."""
    if len(data) < 16: raise Refused("band record shorter than its header")
    image_offset, image_bytes, label_offset, label_bytes, h = layout(s, data, decoded)
    if not 1 <= h <= 65536 or label_offset + label_bytes != decoded: raise Refused("band record layout")
    fixed = 8 if codec == 2 else 12
    if len(data) < image_offset + fixed: raise Refused("band table missing")
    image_rows = u32(data, image_offset)
    label_rows = image_rows if codec == 2 else u32(data, image_offset + 4)
    frames = u32(data, image_offset + fixed - 4)
    if not 1 <= image_rows <= h: raise Refused("band rows")
    regions = [(image_offset, image_bytes, image_rows)]
    if label_bytes:
        if not 1 <= label_rows <= h: raise Refused("label band rows")
        regions.append((label_offset, label_bytes, label_rows))
    elif codec == 3 and label_rows != 0: raise Refused("label band rows without a label")
    if frames != sum((h + rows - 1) // rows for _, _, rows in regions): raise Refused("frame count")
    at = image_offset + fixed + 8 * frames
    if at > len(data): raise Refused("band table past the record")
    entries = [u64(data, image_offset + fixed + 8 * f) for f in range(frames)]
    sizes = [e & ((1 << 63) - 1) for e in entries]
    if at + sum(sizes) != len(data): raise Refused("band frames do not fill the record")
    out = bytearray(decoded)
    out[:image_offset] = data[:image_offset]
    f = 0
    for start, nbytes, rows in regions:
        row_bytes = nbytes // h
        for b in range((h + rows - 1) // rows):
            first, last = b * rows, min(h, (b + 1) * rows)
            frame = data[at:at + sizes[f]]
            if entries[f] >> 63:  # the band stored raw
                part = frame
            else:
                size, content = one_frame_size(frame)
                if size != len(frame): raise Refused(f"band frame {f}: more than one zstd frame")
                if content != (last - first) * row_bytes: raise Refused(f"band frame {f} content size")
                part = subprocess.run(["zstd", "-d", "-c", "-q"], input=frame, capture_output=True, check=True).stdout
            if len(part) != (last - first) * row_bytes: raise Refused(f"band frame {f} size")
            out[start + first * row_bytes:start + last * row_bytes] = part
            at += sizes[f]
            f += 1
    return bytes(out)


def decode_record(shard, i):
    off, stored, decoded, csum, codec = shard["entries"][i]
    data = shard["bytes"][off:off + stored]
    if xxhash and xxh3(data) != csum: raise Refused(f"record {i}: checksum mismatch")
    s = shard["schema"]
    if codec == 1:
        data = subprocess.run(["zstd", "-d", "-c", "-q"], input=data, capture_output=True, check=True).stdout
    elif codec in (2, 3):
        data = unband(s, data, decoded, codec)
    if len(data) != decoded: raise Refused(f"record {i}: decoded size")
    h, w, class_id, key_length = u32(data, 0), u32(data, 4), i32(data, 8), u32(data, 12)
    if not (1 <= h <= 65536 and 1 <= w <= 65536): raise Refused("record size")
    if s["fixed_h"] and (h, w) != (s["fixed_h"], s["fixed_w"]): raise Refused("record size differs from schema")
    if key_length > 65536: raise Refused("key length")
    if s["task"] == 2 and not 0 <= class_id < s["classes"]: raise Refused("class id")
    if s["task"] == 1 and class_id != -1: raise Refused("segmentation class id")
    end = prefix_end(s, data, key_length)
    image_offset = align(end, 64)
    image_bytes = h * w * s["channels"] * s["image_dtype"]
    label_bytes = 0 if s["task"] == 2 else h * w * (s["classes"] if s["layout"] == 1 else s["dtype"])
    label_offset = align(image_offset + image_bytes, 64) if label_bytes else image_offset + image_bytes
    if label_offset + label_bytes != len(data): raise Refused("record length")
    out = dict(key=data[16:16 + key_length].decode("utf-8", "replace"), height=h, width=w, class_id=class_id,
               image_crc=zlib.crc32(data[image_offset:image_offset + image_bytes]),
               label_crc=zlib.crc32(data[label_offset:label_offset + label_bytes]))
    if s["fields"] is not None:
        out["fields"] = decode_fields(s["fields"], data[20 + key_length:end], h, w)
    return out


def read_shard_table(folder, t):
    """Spec 13.8: the binary shard table (format 1.2; 32-byte entries with index_xxh3 since 1.6), as
    a list of manifest-style entries."""
    name = t["file"]
    if not plain_name(name): raise Refused("shard table name")
    b = read_regular(os.path.join(folder, name))
    if len(b) != nonnegative(t["bytes"], "shard_table.bytes"): raise Refused(f"{name}: size differs from the manifest")
    if xxhash and f"{xxh3(b):016x}" != t["xxh3"]: raise Refused(f"{name}: XXH3-64 differs from the manifest")
    if len(b) < 32 or b[:8] != b"\x89SPT\r\n\x1a\n": raise Refused(f"{name}: not a shard table")
    major, minor, entry_size, count = struct.unpack_from("<HHIQ", b, 8)
    if major != 1: raise Refused(f"{name}: table version")
    if entry_size < 24 or entry_size % 8 or entry_size > 4096: raise Refused(f"{name}: entry size")
    if count < 1 or count > 1 << 22 or len(b) != 32 + count * entry_size: raise Refused(f"{name}: entry count")
    out, first = [], 0
    for k in range(count):
        records, size, h = struct.unpack_from("<QQQ", b, 32 + k * entry_size)
        e = dict(file=f"shard-{k:05d}-{h:016x}.spk", records=records, first_record=first, bytes=size, xxh3=f"{h:016x}")
        if entry_size >= 32:  # 1.6: bytes 24-31, the shard's trailer checksum
            e["index_xxh3"] = f"{u64(b, 32 + k * entry_size + 24):016x}"
        out.append(e)
        first += records
    return out, minor, entry_size


def writer_checks(m, shards):
    """What a writer declares (5, 13.3, 15): version_minor 5 with bit 4, else 4 with bit 3, else
    3 with bit 2, else 1 with bit 1, else 0; format_version "1.5" when a shard declares 5, else
    "1.4" when one declares 4, else "1.3" when one declares 3, else "1.2" with a shard table, else
    "1.1" when one declares 1, else "1.0"."""
    for k, shard in enumerate(shards):
        r = shard["required"]
        want = 5 if r & 0x10 else 4 if r & 8 else 3 if r & 4 else 1 if r & 2 else 0
        if shard["minor"] != want:
            raise Refused(f"writer: shard {k} declares version_minor {shard['minor']}, its feature bits call for {want}")
    # 1.6: every entry lists its shard's trailer checksum; a table does in 32-byte entries.
    if "shard_table" in m and (m["table_minor"], m["table_entry_size"]) != (6, 32):
        raise Refused(f"writer: the shard table is version 1.{m['table_minor']} with {m['table_entry_size']}-byte entries, not 1.6 with 32")
    if any("index_xxh3" not in e for e in m["entries"]):
        raise Refused("writer: a shard entry has no index_xxh3")
    minors = {shard["minor"] for shard in shards}
    want = ("1.5" if 5 in minors else "1.4" if 4 in minors else "1.3" if 3 in minors else "1.2" if "shard_table" in m
            else "1.1" if 1 in minors else "1.0")
    if m["format_version"] != want:
        raise Refused(f"writer: format_version {m['format_version']!r}, the shards and the shard list call for {want!r}")


def main(folder, writer=False):
    if xxhash is None:
        print("read_shardpack.py: xxhash module missing; checksums not verified", file=sys.stderr)
    m = json.load(open(os.path.join(folder, "manifest.json"), encoding="utf-8"))
    if m.get("format") != "shardpack": raise Refused("not a shardpack manifest")
    if not isinstance(m.get("format_version"), str) or not m["format_version"].startswith("1."):
        raise Refused("format version")
    shards, total = [], 0
    if "shards" in m and "shard_table" in m: raise Refused("both shards and shard_table")
    if "shard_table" in m:
        entries, m["table_minor"], m["table_entry_size"] = read_shard_table(folder, m["shard_table"])
    else:
        entries = m["shards"]
    if not isinstance(entries, list) or not entries: raise Refused("shards: not a non-empty array")
    for k, e in enumerate(entries):
        name = e["file"]
        if not plain_name(name): raise Refused("shard name")
        path = os.path.join(folder, name)
        shard = open_shard(path)
        if len(shard["bytes"]) != nonnegative(e["bytes"], f"{name}: bytes"): raise Refused(f"{name}: size differs from the manifest")
        if len(shard["entries"]) != nonnegative(e["records"], f"{name}: records"): raise Refused(f"{name}: record count differs")
        if shard["shard_number"] != k or shard["first_record"] != total or nonnegative(e["first_record"], f"{name}: first_record") != total:
            raise Refused(f"{name}: position differs")
        if k and shard["schema_key"] != shards[0]["schema_key"]: raise Refused(f"{name}: schema differs")
        # 1.6 (14.A.5.8): the listed trailer checksum identifies the file; absent, not checked.
        if "index_xxh3" in e:
            ix = e["index_xxh3"]
            if not isinstance(ix, str) or len(ix) != 16 or any(c not in "0123456789abcdef" for c in ix):
                raise Refused(f"{name}: index_xxh3 is not 16 lowercase hex digits")
            if int(ix, 16) != shard["checksum"]:
                raise Refused(f"{name}: is not the file the manifest lists (index_xxh3 differs from its trailer checksum)")
        shards.append(shard)
        total += len(shard["entries"])
    if total != nonnegative(m["records"], "records"): raise Refused("record total differs")
    # 13.2 and 14.A.7: content_hash is the XXH3-64 of the shards' hashes, the values in their names.
    names = [e["file"] for e in entries]
    hashes = [n[-20:-4] for n in names]
    if xxhash and isinstance(m.get("content_hash"), str) and all(
            n == f"shard-{k:05d}-{h}.spk" and all(c in "0123456789abcdef" for c in h) for k, (n, h) in enumerate(zip(names, hashes))):
        if f"{xxh3(b''.join(int(h, 16).to_bytes(8, 'little') for h in hashes)):016x}" != m["content_hash"]:
            raise Refused("manifest.json: content_hash differs from the shards' hashes")
    if writer:
        m["entries"] = entries
        writer_checks(m, shards)
    index = 0
    for shard in shards:
        for i in range(len(shard["entries"])):
            r = decode_record(shard, i)
            print(json.dumps(dict(index=index, **r), sort_keys=True))
            index += 1


if __name__ == "__main__":
    try:
        main(sys.argv[1], writer="--writer" in sys.argv[2:])
    except (Refused, KeyError, ValueError, struct.error) as e:
        print(f"read_shardpack.py: refused: {e}", file=sys.stderr)
        sys.exit(1)
