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
from . import _checks
from ._shardpack import (CropPosition as _CropPosition, FlipMode as _FlipMode, ReadOptions as _ReadOptions,
                         SheetOptions as _SheetOptions)


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
        chosen = [int(i) for i in _checks.indices(records, n, dataset.path, what)]
        chosen = [i % n for i in chosen]
        if not chosen:
            raise _sp.ArgumentValueError("contact_sheet: records is empty")
    count = _checks.integer(count, "contact_sheet: count", 1, 10000)
    if sample_seed is not None:
        sample_seed = _checks.integer(sample_seed, "contact_sheet: sample_seed", 0, 2**64 - 1)
    tile = _checks.integer(tile, "contact_sheet: tile", 8, 4096)
    columns = _checks.integer(columns, "contact_sheet: columns", 0)
    alpha = _checks.probability(alpha, "contact_sheet: alpha")
    hidden = dataset._class_ids(hide, "contact_sheet: hide") if hide else []
    position = _checks.choice(crop_position, "contact_sheet: crop_position", _sp._CROP_POSITIONS)
    crop_h = crop_w = 0
    if crop is not None:
        crop_h, crop_w = _checks.crop_size(crop, "contact_sheet: crop")
    elif position != "center":
        raise _sp.ArgumentValueError(f"contact_sheet: crop_position={position!r} needs crop=(height, width)")
    if position == "foreground" and dataset.task != "segmentation":
        raise _sp.ArgumentValueError('contact_sheet: crop_position="foreground" needs a segmentation dataset')
    if crop_background is not None and position != "foreground":
        raise _sp.ArgumentValueError('contact_sheet: crop_background applies to crop_position="foreground"')
    background = [0] if crop_background is None else dataset._class_ids(crop_background, "contact_sheet: crop_background")
    hflip = _checks.probability(hflip, "contact_sheet: hflip")
    vflip = _checks.probability(vflip, "contact_sheet: vflip")
    seed, epoch = _checks.seed_and_epoch(seed, epoch, "contact_sheet")
    augment = None
    if crop is not None or hflip > 0.0 or vflip > 0.0:
        augment = _ReadOptions(crop_height=crop_h, crop_width=crop_w, crop_position=_CropPosition[position],
                               hflip=_FlipMode.random if hflip > 0.0 else _FlipMode.none, hflip_probability=hflip,
                               vflip=_FlipMode.random if vflip > 0.0 else _FlipMode.none, vflip_probability=vflip,
                               background=background)
    options = _SheetOptions(records=chosen, count=count, random=sample_seed is not None,
                            sample_seed=sample_seed or 0, tile=tile, columns=columns, alpha=alpha, hidden=hidden,
                            title=dataset.path)
    pixels, tiles, legend = r.contact_sheet(options, augment, seed, epoch)
    if path is not None:
        write_png(path, pixels)
    if return_layout:
        return pixels, {"tiles": tiles, "legend": legend}
    return pixels


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
