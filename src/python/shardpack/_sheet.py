"""shardpack.contact_sheet: records, or what the loader delivers from them, as one image.

Drawn by the same C++ code as `shardpack export --grid` (src/inspect/contact_sheet.cpp, compiled
into the extension); this module checks the arguments and writes the PNG."""
from __future__ import annotations

import os
import struct
import zlib
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
import numpy.typing as npt

import shardpack as _sp


def contact_sheet(dataset: "_sp.Dataset", *, records: Optional[Sequence[int]] = None, count: int = 16,
                  sample_seed: Optional[int] = None, tile: int = 256, columns: int = 0, alpha: float = 0.5,
                  hide: Sequence[Union[int, str]] = (), crop: Optional[Tuple[int, int]] = None,
                  crop_position: str = "center", crop_background: Optional[Sequence[Union[int, str]]] = None,
                  hflip: float = 0.0, vflip: float = 0.0, seed: int = 0, epoch: int = 0,
                  path: Optional[Union[str, "os.PathLike[str]"]] = None, return_layout: bool = False
                  ) -> Union[npt.NDArray[np.uint8], Tuple[npt.NDArray[np.uint8], Dict[str, List[Dict[str, Any]]]]]:
    """A contact sheet of `dataset` as a uint8 array (H, W, 3), and written to `path` as a PNG
    when given: tiles of records with their label blended over them in ds.class_colors (opacity
    `alpha`; classes in `hide`, names or ids, left out), each captioned with its index and key
    (classification: its class name and key), a legend of the class colors, and a header line.

    records: the record indices to show; None: `count` records, the first ones, or drawn at
      random with sample_seed. tile: a tile's longest side in pixels (larger records shrink to it,
      nearest pixel; none grows). columns: tiles per row (0: about square).
    As the loader delivers them: crop=(height, width), crop_position ("center", "random",
      "foreground"), crop_background, hflip, vflip (probabilities), seed and epoch as read_batch
      takes them: each tile is then exactly the window and flips read_batch returns for that
      record, captioned with the window's (y, x) and flips.
    return_layout: also return {"tiles": [...], "legend": [...]}: per tile its index, place (x, y,
      width, height), source size and box (y, x, hflip, vflip); per legend entry its class_id (-1:
      ignored pixels), swatch (x, y, size) and color. `shardpack export DS --grid` takes the same
      options and draws the same pixels."""
    if not isinstance(dataset, _sp.Dataset):
        raise _sp.ArgumentTypeError(f"contact_sheet: dataset must be a shardpack.Dataset, not {type(dataset).__name__}")
    r = dataset._reader
    n = len(dataset)
    what = "contact_sheet"
    chosen: List[int] = []
    if records is not None:
        chosen = [int(i) for i in _sp._checked_indices(records, n, dataset.path, what)]
        chosen = [i % n for i in chosen]
        if not chosen:
            raise _sp.ArgumentValueError("contact_sheet: records is empty")
    count = _sp._integer(count, "contact_sheet: count")
    if not 1 <= count <= 10000:
        raise _sp.ArgumentValueError(f"contact_sheet: count must be in [1, 10000], not {count}")
    if sample_seed is not None:
        sample_seed = _sp._integer(sample_seed, "contact_sheet: sample_seed")
        if not 0 <= sample_seed < 2**64:
            raise _sp.ArgumentValueError("contact_sheet: sample_seed must be in [0, 2**64)")
    tile = _sp._integer(tile, "contact_sheet: tile")
    if not 8 <= tile <= 4096:
        raise _sp.ArgumentValueError(f"contact_sheet: tile must be in [8, 4096], not {tile}")
    columns = _sp._integer(columns, "contact_sheet: columns")
    if columns < 0:
        raise _sp.ArgumentValueError(f"contact_sheet: columns must be 0 or more, not {columns}")
    alpha = _probability(alpha, "contact_sheet: alpha")
    hidden = dataset._class_ids(hide, "contact_sheet: hide") if hide else []
    position = _sp._choice(crop_position, "contact_sheet: crop_position", _sp._CROP_POSITIONS)
    crop_h = crop_w = 0
    if crop is not None:
        try:
            crop_h, crop_w = (int(v) for v in crop)
        except (TypeError, ValueError):
            raise _sp.ArgumentTypeError(f"contact_sheet: crop must be None or (height, width), not {crop!r}") from None
        if not (1 <= crop_h <= 65536 and 1 <= crop_w <= 65536):
            raise _sp.ArgumentValueError(f"contact_sheet: crop sides must be in [1, 65536], not {crop!r}")
    elif position != "center":
        raise _sp.ArgumentValueError(f"contact_sheet: crop_position={position!r} needs crop=(height, width)")
    if position == "foreground" and dataset.task != "segmentation":
        raise _sp.ArgumentValueError('contact_sheet: crop_position="foreground" needs a segmentation dataset')
    if crop_background is not None and position != "foreground":
        raise _sp.ArgumentValueError('contact_sheet: crop_background applies to crop_position="foreground"')
    background = [0] if crop_background is None else dataset._class_ids(crop_background, "contact_sheet: crop_background")
    hflip = _probability(hflip, "contact_sheet: hflip")
    vflip = _probability(vflip, "contact_sheet: vflip")
    seed, epoch = _sp._integer(seed, "contact_sheet: seed"), _sp._integer(epoch, "contact_sheet: epoch")
    if not 0 <= seed < 2**64 or not 0 <= epoch < 2**64:
        raise _sp.ArgumentValueError("contact_sheet: seed and epoch must be integers in [0, 2**64)")
    augmented = crop is not None or hflip > 0.0 or vflip > 0.0
    pixels, tiles, legend = r.contact_sheet(chosen, count, sample_seed is not None, sample_seed or 0, tile, columns,
                                            alpha, hidden, dataset.path, augmented, crop_h, crop_w, position, hflip,
                                            vflip, seed, epoch, background)
    if path is not None:
        write_png(path, pixels)
    if return_layout:
        return pixels, {"tiles": tiles, "legend": legend}
    return pixels


def _probability(p: Any, what: str) -> float:
    if isinstance(p, (str, bytes, bool)):
        raise _sp.ArgumentTypeError(f"{what} must be a number in [0, 1], not {p!r}")
    try:
        v = float(p)
    except (TypeError, ValueError):
        raise _sp.ArgumentTypeError(f"{what} must be a number in [0, 1], not {p!r}") from None
    if not 0.0 <= v <= 1.0:
        raise _sp.ArgumentValueError(f"{what} must be in [0, 1], not {v}")
    return v


def write_png(path: Union[str, "os.PathLike[str]"], pixels: npt.NDArray[np.uint8]) -> None:
    """Writes an (H, W, 3) uint8 array as an 8-bit RGB PNG (zlib, no filter)."""
    h, w, _ = pixels.shape
    rows = np.zeros((h, 1 + 3 * w), dtype=np.uint8)  # filter byte 0 (none) before each row
    rows[:, 1:] = pixels.reshape(h, 3 * w)

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)) + \
        chunk(b"IDAT", zlib.compress(rows.tobytes(), 6)) + chunk(b"IEND", b"")
    with open(path, "wb") as f:
        f.write(png)
