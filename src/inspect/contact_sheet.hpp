// Contact sheets: records (or the windows the loader delivers from them) as tiles on one RGB
// canvas, each with its label blended over it in the class colors, a caption and a legend.
// `shardpack export --grid` and shardpack.contact_sheet (Python) both draw with this code. Needs
// only the reader and the standard library (the Python extension compiles it).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "inspect/bitmap_font.hpp"
#include "shardpack/reader.hpp"

namespace shardpack {

// The color class `id` is drawn in: its dictionary color, or for a class without one a color of
// a fixed palette of distinct colors, by id.
rgb class_color(const dataset& ds, std::size_t id);
// Ignored label pixels, in overlays and legends.
inline constexpr rgb ignore_color{255, 0, 255};

// `count` record indices of a dataset of `size` records: the first ones, or with `random` a
// sample drawn without repetition from `seed` (in the order drawn). Fewer when size < count.
std::vector<std::size_t> sheet_records(std::size_t size, std::size_t count, bool random, std::uint64_t seed);

struct contact_sheet_options {
    std::vector<std::size_t> records;   // the tiles, in order
    std::size_t tile = 256;             // a tile's longest side; larger records shrink (nearest pixel), none grows
    std::size_t columns = 0;            // 0: about square (ceil(sqrt(tiles)))
    double alpha = 0.5;                 // the overlay's opacity, in [0, 1]
    std::vector<std::uint32_t> hidden;  // class ids left out of the overlay (listed in the legend as such)
    // Null: the records as stored. Else each tile is what dataset::read_into delivers under this
    // augmentation (crop window and flips), as the training loader gets it.
    const augmentation* augment = nullptr;
    std::string title;                  // the first line of the sheet
};

// Where things were drawn, for callers and tests.
struct sheet_tile {
    std::size_t index = 0;                // the record
    std::size_t x = 0, y = 0;             // top-left of the tile on the canvas
    std::size_t width = 0, height = 0;    // the tile's size (the shown pixels)
    std::size_t source_height = 0, source_width = 0;  // what it shows: the record, or the delivered window
    crop_box box;                         // the window and flips (augmented sheets)
};
struct sheet_legend_entry {
    std::int64_t class_id = -1;           // -1: ignored pixels
    std::size_t x = 0, y = 0, size = 0;   // the color swatch, a size x size square
    rgb color;
    bool hidden = false;
};
struct contact_sheet {
    rgb_canvas canvas;
    std::vector<sheet_tile> tiles;
    std::vector<sheet_legend_entry> legend;
};

// A tile pixel (ty, tx) of a tile of th x tw shows source pixel ((2 ty + 1) sh / (2 th),
// (2 tx + 1) sw / (2 tw)) (nearest, rounded down) with its class c blended over it per channel:
// (v (256 - a) + color_c a + 128) >> 8, a = round(alpha * 256); ignored pixels blend with
// ignore_color likewise. Where c is hidden, the first class neither hidden nor ignored of the
// pixel's footprint (rows [ty sh / th, (ty + 1) sh / th), columns likewise, row-major) is
// blended instead, if any: thin labels survive the shrinking. Gray images are shown as gray
// RGB, RGBA without alpha. Cells are as large as the largest tile; a caption under each.
// Throws shardpack::error for a bad option (named) or a record that cannot be read.
contact_sheet render_contact_sheet(const dataset& ds, const contact_sheet_options& o);

}  // namespace shardpack
