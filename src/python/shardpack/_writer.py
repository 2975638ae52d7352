"""shardpack.write: a dataset from any iterable of samples, packed by the same C++ build as
`shardpack build`.

The samples go to the CLI binary the wheel carries (`shardpack build --samples -`) as a sample
stream on its standard input (src/pipeline/sample_stream.hpp): each sample's key, its image
and label as pixels (NumPy arrays, PIL images) or as the encoded PNG/JPEG bytes the build's
decoders take, and its field values as the text of CSV cells (parsed by the build's --field
rules). Large pixel parts do not cross the pipe: they are written into a ring of shared memory
(a sealed memfd) the build maps read-only, and the pipe carries their place in it. Everything else is the build's own: geometry and label options, record encoding,
sharding, checksums, manifest and report, the atomic publish into a folder it owns, the lock,
--on-error, the memory budget and the thread-count-independent output. The C++ works in its own
process, so the GIL is never held for it; this process only iterates and sends.

A separate process rather than an extension module: the wheel already builds the packer once (for
its CLI), so the writer adds no compile time; and a writer killed mid-write (kill -9) closes the
stream without its end mark, which the build takes as "stop, publish nothing".
"""
from __future__ import annotations

import collections as _collections
import json as _json
import os as _os
import shutil as _shutil
import socket as _socket
import struct as _struct
import subprocess as _subprocess
import sys as _sys
import tempfile as _tempfile
import threading as _threading
from typing import Any, Dict, Iterable, Iterator, List, Literal, Mapping, Optional, Sequence, Tuple, Union

import numpy as _np

from . import _checks
from ._cli import cli_path as _cli_path
from ._shardpack import ArgumentTypeError, ArgumentValueError, Error

__all__ = ["write"]

PathLike = Union[str, "_os.PathLike[str]"]
ClassEntry = Union[str, Tuple[str, Tuple[int, int, int]], Tuple[str, int]]
FieldKind = Literal["int", "float", "str", "int-list", "float-list", "tags", "boxes"]
FieldSpec = Union[FieldKind, Tuple[Literal["tags", "boxes"], Sequence[str]]]
_FIELD_KINDS = ("int", "float", "str", "int-list", "float-list", "tags", "boxes")

# The stream's layout: src/pipeline/sample_stream.hpp (one fact, one place: this mirrors it).
_MAGIC = b"SPSAMPv3"
_HEADER = _struct.Struct("<8sQiiQ")  # magic, total, ring_fd, ack_fd, ring_bytes
_HEAD = _struct.Struct("<BBBBBBBBIIIIiIIIQQII")
_NONE, _ENCODED, _PIXELS, _RING = 0, 1, 2, 3
_OFFSET = _struct.Struct("<Q")  # a ring part's bytes on the stream: its offset in the ring
_MAX_BANDS = 255  # a record's most bands (formats/shardpack-v1.md)

# The ring's largest size (0: none, every part on the pipe) and its smallest, and the smallest part
# put there (smaller ones cost less on the pipe than a place in the ring). A part over a quarter
# of the ring goes on the pipe (sample_stream.hpp says why). The ring fills whenever this process
# is faster than the build, so each of its pages is written at least once a write, and the first
# write into a page costs a page fault (0.7-1 ms a MiB here, scripts/bench/README.md): the
# ring is sized by the first sample, four times its largest pixel part, 4 to 16 MiB (1024x1024
# RGB parts fit in 16).
_RING_BYTES = 16 << 20
_RING_MIN_BYTES = 4 << 20
_RING_MIN_PART = 64 << 10


def _word(value: Any, what: str, allowed: Sequence[str]) -> str:
    return _checks.choice(value, f"write: {what}", allowed)


def _count(value: Any, what: str, low: int = 0, high: int = 2**63 - 1) -> int:
    return _checks.integer(value, f"write: {what}", low, high)


def _depth(value: Any) -> str:
    if isinstance(value, str):
        if value != "auto":
            raise ArgumentValueError(f"write: depth must be 'auto', 8 or 16, not {value!r}")
        return value
    if isinstance(value, bool) or not isinstance(value, int):
        raise ArgumentTypeError(f"write: depth must be 'auto', 8 or 16, not {type(value).__name__}")
    if value not in (8, 16):
        raise ArgumentValueError(f"write: depth must be 'auto', 8 or 16, not {value}")
    return str(value)


def _byte_size(value: Any, what: str) -> str:
    """A size as the CLI takes it: an integer (bytes) or a string like "256MiB" (the CLI checks it)."""
    if isinstance(value, str):
        return value
    return str(_count(value, what, 1))


def _class_table(task: str, classes: Any, mask_values: str) -> Tuple[str, List[str], bool]:
    """The class table file's text, the class names, and whether masks hold class ids."""
    if isinstance(classes, (str, bytes)) or not isinstance(classes, Sequence):
        raise ArgumentTypeError("write: classes must be a sequence: class names (cls), or (name, (r, g, b)) or "
                                f"(name, id) pairs (seg), not {type(classes).__name__}")
    if not classes:
        raise ArgumentValueError("write: classes is empty")
    names: List[str] = []
    if task == "cls":
        for c in classes:
            if not isinstance(c, str):
                raise ArgumentTypeError(f"write: cls classes are names (str), not {type(c).__name__}")
            if not c.strip() or any(ch in c for ch in "\r\n\",") or c != c.strip():
                raise ArgumentValueError(f"write: class name {c!r}: names must be non-empty, without commas, quotes, "
                                         "line breaks or outer spaces")
            names.append(c)
        return "name\n" + "".join(n + "\n" for n in names), names, False
    colors = ids = 0
    rows = []
    for c in classes:
        if not (isinstance(c, tuple) and len(c) == 2 and isinstance(c[0], str)):
            raise ArgumentTypeError(f"write: seg classes are (name, (r, g, b)) or (name, id) pairs, not {c!r}")
        name, v = c
        if not name.strip() or any(ch in name for ch in "\r\n\",") or name != name.strip():
            raise ArgumentValueError(f"write: class name {name!r}: names must be non-empty, without commas, quotes, "
                                     "line breaks or outer spaces")
        names.append(name)
        if isinstance(v, tuple):
            rgb = [_count(x, f"the color of class {name!r}", 0, 255) for x in v]
            if len(rgb) != 3:
                raise ArgumentValueError(f"write: the color of class {name!r} must be (r, g, b), not {v!r}")
            rows.append(f"{name},{rgb[0]},{rgb[1]},{rgb[2]}\n")
            colors += 1
        else:
            rows.append(f"{name},{_count(v, f'the id of class {name!r}', 0, 65535)}\n")
            ids += 1
    if colors and ids:
        raise ArgumentValueError("write: seg classes must all be (name, (r, g, b)) or all (name, id)")
    header = "name,r,g,b\n" if colors else "name,id\n"
    index_masks = mask_values == "index" or (mask_values == "auto" and ids > 0)
    return header + "".join(rows), names, index_masks


_IMAGE_PIL_16 = ("I;16", "I;16L", "I;16B")


def _as_array(x: Any, what: str, mask: bool, index_masks: bool) -> Tuple[int, Any]:
    """(kind, payload): encoded bytes, or a C-contiguous NumPy array of pixels (uint16 in the
    host's byte order). Raises ValueError or TypeError with the reason for one that cannot be."""
    if type(x) is _np.ndarray:  # the common case first: no conversion to look for
        a = x
    elif isinstance(x, (bytes, bytearray, memoryview)):
        return _ENCODED, memoryview(x).cast("B")
    elif type(x).__module__.startswith("PIL.") and hasattr(x, "mode") and hasattr(x, "convert"):
        mode = x.mode
        if mask and mode in ("P", "L", "I;16", "I;16L", "I;16B", "1") and index_masks:
            a = _np.asarray(x.convert("L") if mode == "1" else x)
            if a.dtype not in (_np.uint8, _np.uint16):
                a = a.astype(_np.uint16)
        elif mode in ("L", "RGB", "RGBA"):
            a = _np.asarray(x)
        elif not mask and mode in _IMAGE_PIL_16:  # 16-bit grey, as a 16-bit PNG of it
            a = _np.asarray(x)
        elif mode == "1":
            a = _np.asarray(x.convert("L"))
        elif mode in ("P", "PA", "LA", "RGBX", "CMYK", "YCbCr"):
            # What the build's decoders give a file of this mode: its colors (palettes
            # expanded), alpha kept where the file has it.
            has_alpha = mode in ("PA", "LA") or (mode == "P" and "transparency" in x.info)
            a = _np.asarray(x.convert("RGBA" if has_alpha else "RGB"))
        else:
            raise TypeError(f"the {what} is a PIL image of mode {mode}, which the build does not take "
                            "(8-bit L, RGB, RGBA, P; 16-bit grey as I;16)")
    elif isinstance(x, _np.ndarray) or hasattr(x, "__array_interface__") or hasattr(x, "__array__"):
        a = _np.asarray(x)
    else:
        raise TypeError(f"the {what} is a {type(x).__name__}: expected a NumPy array, a PIL image or PNG/JPEG bytes")
    if a.dtype.kind == "u" and a.dtype.itemsize == 2 and a.dtype != _np.uint16:
        a = a.astype(_np.uint16)  # big-endian uint16 (a PIL I;16B image): the stream's are the host's
    if a.ndim == 3 and a.shape[2] == 1:
        a = a[:, :, 0]
    if mask:
        if a.ndim not in (2, 3) or (a.ndim == 3 and a.shape[2] not in (3, 4)):
            raise ValueError(f"the {what} has shape {a.shape}: expected HxW, HxWx1, HxWx3 or HxWx4")
        if a.dtype == _np.uint16 and a.ndim == 2:
            pass
        elif a.dtype != _np.uint8:
            raise TypeError(f"the {what} is {a.dtype}: expected uint8 (or uint16 class ids)")
    else:
        # Bands other than 1, 3 and 4 are taken as a TIFF of them would be: as stored with
        # color="bands", else converted (gray + alpha, or the first bands).
        if a.ndim not in (2, 3) or (a.ndim == 3 and not 1 <= a.shape[2] <= _MAX_BANDS):
            raise ValueError(f"the {what} has shape {a.shape}: expected HxW or HxWxC with C in 1..{_MAX_BANDS}")
        if a.dtype not in (_np.uint8, _np.uint16):
            raise TypeError(f"the {what} is {a.dtype}: expected uint8 or uint16")
    if a.shape[0] == 0 or a.shape[1] == 0:
        raise ValueError(f"the {what} is empty ({a.shape})")
    return _PIXELS, _np.ascontiguousarray(a)


def _field_declarations(fields: Any) -> Tuple[List[Tuple[str, str]], Dict[str, List[str]]]:
    """fields= as [(name, kind)] in the mapping's order, and the names of tags and boxes fields.
    The build checks the rest (name lengths, counts) as it checks --field."""
    if fields is None:
        return [], {}
    if not isinstance(fields, Mapping):
        raise ArgumentTypeError(f"write: fields must be a mapping of field name -> kind, or (kind, names) for tags and "
                                f"boxes, not {type(fields).__name__}")
    kinds: List[Tuple[str, str]] = []
    names: Dict[str, List[str]] = {}
    for name, spec in fields.items():
        if not isinstance(name, str):
            raise ArgumentTypeError(f"write: a field's name is a str, not {type(name).__name__}")
        if not name or any(ch in name for ch in ":=\0\r\n"):
            raise ArgumentValueError(f"write: field name {name!r}: names must be non-empty, without ':', '=', NUL or "
                                     "line breaks")
        declared: Optional[Sequence[str]] = None
        if isinstance(spec, tuple) and len(spec) == 2:
            spec, declared = spec
        if not isinstance(spec, str):
            raise ArgumentTypeError(f"write: field {name!r}: its kind is one of {', '.join(map(repr, _FIELD_KINDS))}, or "
                                    f"(kind, names) for tags and boxes; not {type(spec).__name__}")
        if spec not in _FIELD_KINDS:
            raise ArgumentValueError(f"write: field {name!r}: unknown kind {spec!r} (kinds: {', '.join(_FIELD_KINDS)})")
        if spec in ("tags", "boxes"):
            if declared is None:
                raise ArgumentValueError(f"write: field {name!r} ({spec}) needs its names: ({spec!r}, [name, ...]), "
                                         "in id order (the build cannot find them in samples that have not come yet)")
            if isinstance(declared, (str, bytes)) or not isinstance(declared, Sequence):
                raise ArgumentTypeError(f"write: field {name!r}: its names are a sequence of str, not "
                                        f"{type(declared).__name__}")
            if not declared:
                raise ArgumentValueError(f"write: field {name!r}: its list of names is empty")
            for n in declared:
                if not isinstance(n, str):
                    raise ArgumentTypeError(f"write: field {name!r}: a name is a str, not {type(n).__name__}")
                if not n or n != n.strip() or any(ch in n for ch in _FIELD_NAME_BREAKS):
                    raise ArgumentValueError(f"write: field {name!r}: name {n!r} must be non-empty, without outer or "
                                             "inner spaces, ';', '|', ',', quotes or line breaks (a cell's separators)")
            names[name] = list(declared)
        elif declared is not None:
            raise ArgumentValueError(f"write: field {name!r}: only tags and boxes fields have names, not {spec}")
        kinds.append((name, spec))
    return kinds, names


_FIELD_NAME_BREAKS = " \t;|,\"\r\n\0"


def _number(v: Any, integer: bool, what: str) -> str:
    """A number as a CSV cell writes it, exactly: ints in decimal, floats in repr's shortest
    round-trip form (the build parses it back to the same double)."""
    if isinstance(v, bool) or not (isinstance(v, (int, float)) or hasattr(v, "__index__") or hasattr(v, "__float__")):
        raise TypeError(f"{what} is a {type(v).__name__}, not a number")
    if integer:
        if not hasattr(v, "__index__"):
            raise TypeError(f"{what} is a {type(v).__name__}, not an integer")
        return str(int(v.__index__()))
    return str(int(v.__index__())) if hasattr(v, "__index__") else repr(float(v))


def _items(v: Any, what: str) -> List[Any]:
    if isinstance(v, (str, bytes)) or not (isinstance(v, Sequence) or hasattr(v, "__array__") or hasattr(v, "tolist")):
        raise TypeError(f"{what} is a {type(v).__name__}, not a sequence")
    a = v.tolist() if hasattr(v, "tolist") else list(v)
    return a if isinstance(a, list) else [a]


def _label_text(v: Any, what: str) -> str:
    if isinstance(v, str):
        if not v or any(ch in v for ch in _FIELD_NAME_BREAKS):
            raise ValueError(f"{what} {v!r} is not a name of the field (empty, or with a separator)")
        return v
    return _number(v, True, what)


def _cell(kind: str, v: Any, name: str) -> str:
    """Field `name`'s value as the text of its CSV cell (src/input/field_columns.cpp parses it)."""
    what = f"field {name!r} ({kind})"
    if isinstance(v, str) and kind != "str":
        return v  # already a cell's text: the build's rules apply
    if kind == "str":
        if not isinstance(v, str):
            raise TypeError(f"{what}: the value is a {type(v).__name__}, not a str")
        return v
    if kind in ("int", "float"):
        return _number(v, kind == "int", f"{what}: the value")
    if kind in ("int-list", "float-list"):
        return " ".join(_number(x, kind == "int-list", f"{what}: an item") for x in _items(v, f"{what}: the value"))
    if kind == "tags":
        return ";".join(_label_text(t, f"{what}: tag") for t in _items(v, f"{what}: the value"))
    boxes = []
    for b in _items(v, f"{what}: the value"):
        parts = _items(b, f"{what}: a box")
        if len(parts) != 5:
            raise ValueError(f"{what}: a box is (x0, y0, x1, y1, label), not {len(parts)} items")
        boxes.append(" ".join([_number(x, False, f"{what}: a coordinate") for x in parts[:4]] +
                              [_label_text(parts[4], f"{what}: box label")]))
    return ";".join(boxes)


def _field_cells(values: Any, fields: Sequence[Tuple[str, str]]) -> bytes:
    """A sample's field values as the stream carries them: one cell per field, NUL-ended."""
    if not fields:
        if values is not None:
            raise ValueError("the sample has 'fields', but write's fields= declares none")
        return b""
    if not isinstance(values, Mapping):
        raise ValueError(f"the sample needs 'fields': a dict of a value per declared field "
                         f"({', '.join(n for n, _ in fields)})" if values is None else
                         f"'fields' is a {type(values).__name__}, not a dict")
    declared = {n for n, _ in fields}
    missing = [n for n, _ in fields if n not in values]
    extra = sorted(str(k) for k in values if k not in declared)
    if missing or extra:
        raise ValueError((f"fields {missing} missing" if missing else "") + ("; " if missing and extra else "") +
                         (f"fields {extra} not declared by write's fields=" if extra else ""))
    out = []
    for name, kind in fields:
        text = _cell(kind, values[name], name)
        if "\0" in text:
            raise ValueError(f"field {name!r}: a NUL character in the value")
        out.append(text.encode("utf-8", "surrogateescape") + b"\0")
    return b"".join(out)


class _Frame:
    """One sample, ready to send: its head (a bytearray), key texts and payloads. pixels: for each
    pixel part the ring may take instead of the pipe, (its index in parts, the byte of the head
    that says its kind)."""
    __slots__ = ("parts", "pixels")

    def __init__(self, parts: List[Any], pixels: Sequence[Tuple[int, int]] = ()):
        self.parts = parts
        self.pixels = pixels


class _Ring:
    """The ring (sample_stream.hpp, "The ring"): a memfd sealed against shrinking and growing,
    mapped here to be written and by the build to be read, and the socket on which the build
    says how many ring parts it has copied out. Parts are written in order, each whole (a part
    that would cross the end starts again at 0), and their room is reused once released."""

    def __init__(self, size: int):
        import fcntl
        import mmap
        self.size = size
        self.fd = _os.memfd_create("shardpack-ring", _os.MFD_CLOEXEC | _os.MFD_ALLOW_SEALING)
        try:
            _os.ftruncate(self.fd, size)
            fcntl.fcntl(self.fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL)
            self.map = mmap.mmap(self.fd, size)
            # NumPy copies into it without the GIL: the iterable keeps making samples meanwhile.
            self.view: Optional[Any] = _np.frombuffer(self.map, _np.uint8)
            self.acks, self.build_end = _socket.socketpair(_socket.AF_UNIX, _socket.SOCK_STREAM)
        except BaseException:
            _os.close(self.fd)
            raise
        self.head = 0  # bytes taken since the start, gaps at the end included
        self.ends: "_collections.deque[int]" = _collections.deque()  # each unreleased part's end (as head)
        self.tail = 0  # the end of the last released part
        self.released = 0
        self.pending = b""

    def fits(self, nbytes: int) -> bool:
        return _RING_MIN_PART <= nbytes <= self.size // 4

    def put(self, data: memoryview) -> int:
        """Writes `data` into the ring, waiting for the build to release room; its offset."""
        n = data.nbytes
        at = self.head % self.size
        start = self.head if at + n <= self.size else self.head + self.size - at
        if start + n - self.tail > self.size:
            self._take_releases(block=False)
            while start + n - self.tail > self.size:
                self._take_releases(block=True)
        offset = start % self.size
        self.view[offset:offset + n] = _np.frombuffer(data, _np.uint8)  # type: ignore[index]
        self.head = start + n
        self.ends.append(self.head)
        return offset

    def _take_releases(self, block: bool) -> None:
        try:
            got = self.acks.recv(4096, 0 if block else _socket.MSG_DONTWAIT)
        except BlockingIOError:
            return
        if not got:  # the build stopped: its stderr says why
            raise BrokenPipeError("the build closed its ring acknowledgements")
        self.pending += got
        whole = len(self.pending) // 8 * 8
        if whole:
            count = _struct.unpack_from("<Q", self.pending, whole - 8)[0]
            self.pending = self.pending[whole:]
            while self.released < count and self.ends:
                self.tail = self.ends.popleft()
                self.released += 1

    def close(self) -> None:
        self.acks.close()
        self.build_end.close()
        self.view = None  # the mapping closes only without views of it
        self.map.close()
        _os.close(self.fd)


def _frame(index: int, item: Any, task: str, class_ids: Dict[str, int], index_masks: bool,
           fields: Sequence[Tuple[str, str]]) -> _Frame:
    key = str(index)
    values: Any = None
    try:
        if isinstance(item, Mapping):
            if "image" not in item or "label" not in item:
                raise ValueError(f"a mapping sample needs 'image' and 'label' entries, not {sorted(map(str, item))}")
            # An entry the build would drop is an error, not silence.
            unknown = sorted(str(k) for k in item if k not in ("image", "label", "key", "fields"))
            if unknown:
                raise ValueError(f"unknown entries {unknown}: a sample has 'image', 'label', 'key' and 'fields' (a dict "
                                 "of the values of the fields that write's fields= declares)")
            key = str(item.get("key", key))
            image, label = item["image"], item["label"]
            values = item.get("fields")
        elif isinstance(item, tuple) and len(item) == 2:
            image, label = item
        elif isinstance(item, tuple) and len(item) == 3:
            key = str(item[0])
            image, label = item[1], item[2]
        else:
            raise TypeError(f"a sample is a mapping with 'image' and 'label' (and 'key'), or an (image, label) or "
                            f"(key, image, label) tuple, not {type(item).__name__}")
        if "\0" in key:
            raise ValueError("the key has a NUL character")
        cells = _field_cells(values, fields)
        ik, img = _as_array(image, "image", False, index_masks)
        class_id = -1
        label_kind, lab, label_key = _NONE, None, ""
        if task == "cls":
            if isinstance(label, str):
                if label not in class_ids:
                    raise ValueError(f"class {label!r} is not among the classes")
                class_id, label_key = class_ids[label], label
            elif isinstance(label, bool) or not hasattr(label, "__index__"):
                raise TypeError(f"a cls label is a class id (int) or name (str), not {type(label).__name__}")
            else:
                class_id = int(label.__index__())
                if not 0 <= class_id < len(class_ids):
                    raise ValueError(f"class id {class_id} is not in [0, {len(class_ids)})")
                label_key = str(class_id)
        else:
            label_kind, lab = _as_array(label, "mask", True, index_masks)
            label_key = "mask"
    except (TypeError, ValueError) as e:
        k = key.encode("utf-8", "surrogateescape")
        reason = str(e).encode("utf-8", "replace")
        head = _HEAD.pack(ord("R"), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, -1, len(k), 0, len(reason), 0, 0, 0, 0)
        return _Frame([head, k, reason])
    k = key.encode("utf-8", "surrogateescape")
    lk = label_key.encode("utf-8", "surrogateescape")
    parts: List[Any] = [b"", k, lk]  # the head first, once the shapes are known
    pixels: List[Tuple[int, int]] = []
    if ik == _PIXELS:
        iw, ih, ic, iv, ib = img.shape[1], img.shape[0], (img.shape[2] if img.ndim == 3 else 1), img.dtype.itemsize, img.nbytes
        img = memoryview(img).cast("B")
        if ib >= _RING_MIN_PART:
            pixels.append((len(parts), 1))
    else:
        iw = ih = ic = 0
        iv, ib = 1, img.nbytes
    parts.append(img)
    if lab is None:
        lw = lh = lc = lb = 0
        lv = 1
    elif label_kind == _PIXELS:
        lw, lh, lc, lv, lb = lab.shape[1], lab.shape[0], (lab.shape[2] if lab.ndim == 3 else 1), lab.dtype.itemsize, lab.nbytes
        if lb >= _RING_MIN_PART:
            pixels.append((len(parts), 3))
        parts.append(memoryview(lab).cast("B"))
    else:
        lw = lh = lc = 0
        lv, lb = 1, lab.nbytes
        parts.append(lab)
    parts[0] = bytearray(_HEAD.pack(ord("S"), ik, ic, label_kind, lc, lv, iv, 0, iw, ih, lw, lh, class_id, len(k), len(lk),
                                    0, ib, lb, len(cells), 0))
    if cells:
        parts.append(cells)
    return _Frame(parts, pixels)


class _BuildStopped(Exception):
    """The build stopped reading its standard input."""


class _Stream:
    """The build's standard input. A frame is sent whole before send() returns, its pixels copied
    into the ring or the pipe: nothing of a sample is held once the iterable is asked for the
    next one, which may reuse its arrays (a generator that fills one buffer). The iterable is thus
    read ahead of the build by what the ring and the pipe hold, besides the build's own rows in
    flight. Sending on the iterating thread, not a second one, costs no thread switches: the
    copies and writes release the GIL, and wait only when the build is behind."""

    def __init__(self, fd: int, ring: Optional[_Ring]):
        self.fd = fd
        self.ring = ring

    def send(self, frame: _Frame) -> None:
        """Raises _BuildStopped when the build has stopped reading: its exit status and stderr say why."""
        try:
            self._send(frame)
        except (BrokenPipeError, ConnectionError) as e:  # the pipe, or the ring's socket, closed with the build
            raise _BuildStopped from e

    def _send(self, frame: _Frame) -> None:
        parts = frame.parts
        if self.ring is not None:
            for i, kind_at in frame.pixels:
                if self.ring.fits(parts[i].nbytes):
                    parts[i] = _OFFSET.pack(self.ring.put(parts[i]))
                    parts[0][kind_at] = _RING
        views = [memoryview(p) for p in parts]
        while views:
            n = _os.writev(self.fd, views[:64])
            while n and views:
                if n >= views[0].nbytes:
                    n -= views[0].nbytes
                    views.pop(0)
                else:
                    views[0] = views[0][n:]
                    n = 0
            while views and views[0].nbytes == 0:
                views.pop(0)


def _relay(stream: Any, keep: List[bytes], out: Any) -> None:
    """Copies the build's log to this process's sys.stderr as it comes, keeping it for errors."""
    while True:
        chunk = _os.read(stream.fileno(), 65536)
        if not chunk:
            return
        keep.append(chunk)
        try:
            out.write(chunk.decode("utf-8", "replace"))
            out.flush()
        except (OSError, ValueError):
            pass


def write(path: PathLike, samples: Iterable[Any], *, task: Literal["seg", "cls"], classes: Sequence[ClassEntry],
          color: Literal["rgb", "gray", "rgba", "bands"] = "rgb", depth: Literal["auto", 8, 16] = "auto",
          size: Optional[Tuple[int, int]] = None,
          resize: Optional[Literal["none", "stretch", "shorter", "fit"]] = None,
          crop: Literal["center", "topleft", "none"] = "center", filter: Literal["area", "bilinear", "lanczos"] = "area",
          label_layout: Literal["onehot", "index"] = "onehot", unknown_label: Literal["error", "ignore"] = "error",
          color_tolerance: int = 0, mask_values: Literal["auto", "color", "index"] = "auto",
          ignore_values: Sequence[int] = (), compression: Literal["zstd", "auto", "zstd-record", "none"] = "zstd",
          level: int = 1, band_rows: int = 0, shard_size: Union[int, str] = "256MiB",
          on_error: Literal["fail", "skip"] = "fail", max_errors: int = 0, threads: int = 0,
          memory_limit: Union[int, str, None] = None, report: Optional[PathLike] = None, force: bool = False,
          progress: Optional[bool] = None, quiet: bool = False, fields: Optional[Mapping[str, FieldSpec]] = None,
          unknown_name: Literal["error", "ignore"] = "error") -> Dict[str, Any]:
    """Packs `samples` into the dataset folder `path` and returns the build's report (a dict, as
    report.json). See src/python/README.md, "Writing a dataset", and `shardpack build --help`:
    each option is the build's option of the same name (size as (width, height)).

    A sample is a mapping {"image": ..., "label": ..., "key": str} or a tuple (image, label) or
    (key, image, label); the key defaults to the sample's index. An image is a uint8 or uint16
    NumPy array (HxW or HxWxC: C 1, 3 or 4, or 1..255 with color="bands"), a PIL image, or
    PNG/JPEG bytes; uint16 pixels are taken as a 16-bit PNG (or TIFF, for other band counts) of
    them would be. depth: "auto" (16 when the first sample's image is uint16, as the CLI decides
    from the first row), 8 (uint16 images keep their high byte, counted in the report's
    images_reduced_to_8_bits) or 16. A label is, for task="seg", a
    mask in the same forms (uint8/uint16 HxW class ids for index masks, HxWx3 colors for color
    masks), for task="cls" a class id or name. `classes`: class names (cls), or (name, (r, g, b))
    or (name, id) pairs (seg).

    fields: per-sample fields (format 1.5) by name, each a kind ("int", "float", "str",
    "int-list", "float-list") or ("tags", names) / ("boxes", names), the names in id order. A
    sample then is a mapping with "fields": {name: value}: an int, a float, a str, a sequence of
    numbers, a sequence of tag names or ids, a sequence of (x0, y0, x1, y1, label) boxes in the
    source image's pixels (label a name or id), or any of them as the text of a CSV cell of that
    field. They are parsed by the CLI's rules for CSV columns (`--field`): a dataset written with
    them equals `shardpack build --field ...` of the same cells, and boxes follow the build's
    geometry. unknown_name: a tag or box class not among the names: "error" or "ignore"
    (dropped and counted).

    A sample that cannot be packed fails the write, or with
    on_error="skip" is listed in rejected.csv; either way the message names its index and key.
    Each sample is copied to the build before the next one is asked for: a generator may refill
    the arrays it yielded.

    Raises shardpack.Error when the build fails (nothing is published; a previous dataset in
    `path` stays as it was), ArgumentTypeError/ArgumentValueError (TypeError/ValueError) for
    bad arguments.
    """
    if not isinstance(path, (str, _os.PathLike)):
        raise ArgumentTypeError(f"write: path must be a str or os.PathLike, not {type(path).__name__}")
    out = _os.fspath(path)
    if not isinstance(out, str) or not out:
        raise ArgumentValueError("write: path is empty")
    task_word = _word(task, "task", ("seg", "cls"))
    if not hasattr(samples, "__iter__"):
        raise ArgumentTypeError(f"write: samples must be iterable, not {type(samples).__name__}")
    mask_word = _word(mask_values, "mask_values", ("auto", "color", "index"))
    table, names, index_masks = _class_table(task_word, classes, mask_word)
    field_kinds, field_names = _field_declarations(fields)
    args = ["build", "--samples", "-", "--task", task_word, "--out", out, "--json",
            "--color", _word(color, "color", ("rgb", "gray", "rgba", "bands")),
            "--depth", _depth(depth),
            "--crop", _word(crop, "crop", ("center", "topleft", "none")),
            "--filter", _word(filter, "filter", ("area", "bilinear", "lanczos")),
            "--compression", _word(compression, "compression", ("zstd", "auto", "zstd-record", "none")),
            "--level", str(_count(level, "level", -7, 22)),
            "--shard-size", _byte_size(shard_size, "shard_size"),
            "--on-error", _word(on_error, "on_error", ("fail", "skip")),
            "--threads", str(_count(threads, "threads", 0, 1 << 20))]
    if size is not None:
        if isinstance(size, (str, bytes)) or not isinstance(size, Sequence) or len(size) != 2:
            raise ArgumentTypeError(f"write: size must be None or (width, height), not {size!r}")
        w, h = (_count(v, "size", 1, 65536) for v in size)
        args += ["--size", f"{w}x{h}"]
    if resize is not None:
        args += ["--resize", _word(resize, "resize", ("none", "stretch", "shorter", "fit"))]
    if task_word == "seg":
        args += ["--label-layout", _word(label_layout, "label_layout", ("onehot", "index")),
                 "--unknown-label", _word(unknown_label, "unknown_label", ("error", "ignore")),
                 "--mask-values", mask_word]
        if color_tolerance:
            args += ["--color-tolerance", str(_count(color_tolerance, "color_tolerance", 0, 255))]
        if isinstance(ignore_values, (str, bytes)) or not isinstance(ignore_values, Sequence):
            raise ArgumentTypeError(f"write: ignore_values must be a sequence of integers, not {type(ignore_values).__name__}")
        if ignore_values:
            args += ["--ignore-values", ",".join(str(_count(v, "ignore_values", 0, 65535)) for v in ignore_values)]
    if band_rows:
        args += ["--band-rows", str(_count(band_rows, "band_rows", 0, 65536))]
    if max_errors:
        args += ["--max-errors", str(_count(max_errors, "max_errors"))]
    if memory_limit is not None:
        args += ["--memory-limit", _byte_size(memory_limit, "memory_limit")]
    if report is not None:
        if not isinstance(report, (str, _os.PathLike)):
            raise ArgumentTypeError(f"write: report must be a path, not {type(report).__name__}")
        args += ["--report", _os.fspath(report)]
    if not isinstance(force, bool) or not isinstance(quiet, bool) or not (progress is None or isinstance(progress, bool)):
        raise ArgumentTypeError("write: force and quiet must be bool, progress None or bool")
    if force:
        args.append("--force")
    if progress if progress is not None else (not quiet and _isatty(_sys.stderr)):
        args.append("--progress")
    if quiet:
        args.insert(0, "--quiet")

    binary = _cli_path()
    if binary is None:
        raise Error("shardpack.write runs the shardpack CLI, which this installation lacks (a reader-only wheel: "
                    "the packer's dependencies were missing when it was built); run `shardpack` for the reason")
    try:
        total = len(samples)  # type: ignore[arg-type]
    except TypeError:
        total = 0

    tmp = _tempfile.mkdtemp(prefix="shardpack-write-")
    try:
        classes_file = _os.path.join(tmp, "classes.csv")
        with open(classes_file, "w", encoding="utf-8") as f:
            f.write(table)
        args += ["--classes", classes_file]
        for i, (name, kind) in enumerate(field_kinds):
            args += ["--field", f"{name}:{kind}"]
            if name in field_names:
                names_file = _os.path.join(tmp, f"field-names-{i}.csv")
                with open(names_file, "w", encoding="utf-8") as f:
                    f.write("name\n" + "".join(n + "\n" for n in field_names[name]))
                args += ["--field-names", f"{name}={names_file}"]
        if field_kinds:
            args += ["--unknown-name", _word(unknown_name, "unknown_name", ("error", "ignore"))]
        return _run(binary, args, samples, total, task_word, {n: i for i, n in enumerate(names)}, index_masks,
                    field_kinds)
    finally:
        _shutil.rmtree(tmp, ignore_errors=True)


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


def _ring_size(first: Optional[_Frame]) -> int:
    """The ring's size for a write whose first sample is `first`: four times its largest pixel part
    (a power of two), at least _RING_MIN_BYTES, at most _RING_BYTES."""
    largest = max((first.parts[i].nbytes for i, _ in first.pixels), default=0) if first is not None else 0
    size = _RING_MIN_BYTES
    while size < 4 * largest and size < _RING_BYTES:
        size *= 2
    return min(size, _RING_BYTES)


def _new_ring(size: int) -> Optional[_Ring]:
    """The ring, or None where there is none to have (size 0, no memfd or seals): then every part
    goes on the pipe."""
    if not size:
        return None
    try:
        return _Ring(size)
    except (AttributeError, ImportError, OSError):
        return None


_NO_SAMPLE = object()


def _run(binary: str, args: List[str], samples: Iterable[Any], total: int, task: str, class_ids: Dict[str, int],
         index_masks: bool, fields: Sequence[Tuple[str, str]]) -> Dict[str, Any]:
    items = iter(samples)
    # The first sample before the build starts: it sizes the ring. An exception from the iterable
    # here leaves everything as it was, as one later does (the build then publishes nothing).
    item = next(items, _NO_SAMPLE)
    first = None if item is _NO_SAMPLE else _frame(0, item, task, class_ids, index_masks, fields)
    ring = _new_ring(_ring_size(first))
    try:
        return _run_build(binary, args, first, items, total, task, class_ids, index_masks, fields, ring)
    finally:
        if ring is not None:
            ring.close()


def _run_build(binary: str, args: List[str], first: Optional[_Frame], items: Iterator[Any], total: int, task: str,
               class_ids: Dict[str, int], index_masks: bool, fields: Sequence[Tuple[str, str]],
               ring: Optional[_Ring]) -> Dict[str, Any]:
    passed = (ring.fd, ring.build_end.fileno()) if ring is not None else ()
    proc = _subprocess.Popen([binary] + args, stdin=_subprocess.PIPE, stdout=_subprocess.PIPE, stderr=_subprocess.PIPE,
                             pass_fds=passed)
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    if ring is not None:
        ring.build_end.close()  # the build's alone: its end closes when the build stops
    try:
        import fcntl
        fcntl.fcntl(proc.stdin.fileno(), 1031, 1 << 20)  # F_SETPIPE_SZ: fewer, larger writes
    except (ImportError, OSError):
        pass
    log: List[bytes] = []
    report: List[bytes] = []
    relay = _threading.Thread(target=_relay, args=(proc.stderr, log, _sys.stderr), daemon=True)
    reader = _threading.Thread(target=lambda: report.append(proc.stdout.read()), daemon=True)  # type: ignore[union-attr]
    relay.start()
    reader.start()
    stream = _Stream(proc.stdin.fileno(), ring)
    failure: Optional[BaseException] = None
    try:
        stream.send(_Frame([_HEADER.pack(_MAGIC, total, *passed, ring.size) if ring is not None else
                            _HEADER.pack(_MAGIC, total, -1, -1, 0)]))
        sent = 0
        if first is not None:
            stream.send(first)
            sent = 1
            for index, item in enumerate(items, 1):
                frame = _frame(index, item, task, class_ids, index_masks, fields)
                stream.send(frame)
                sent += 1
        stream.send(_Frame([_HEAD.pack(ord("E"), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, -1, 0, 0, 0, sent, 0, 0, 0)]))
    except _BuildStopped:
        pass  # its exit status and stderr say why
    except BaseException as e:  # the iterable failed, or KeyboardInterrupt: the build publishes nothing
        failure = e
    proc.stdin.close()  # without the end mark (failure): the build stops and publishes nothing
    rc = proc.wait()
    relay.join()
    reader.join()
    if failure is not None:
        raise failure
    text = b"".join(log).decode("utf-8", "replace")
    if rc != 0:
        errors = [line[len("error: "):] for line in text.splitlines() if line.startswith("error: ")]
        message = "; ".join(errors) if errors else (text.strip().splitlines() or [f"exit status {rc}"])[-1]
        if rc == 2:
            raise ArgumentValueError(f"write: {message}")
        raise Error(message)
    result: Dict[str, Any] = _json.loads(b"".join(report).decode("utf-8"))
    return result
