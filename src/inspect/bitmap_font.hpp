// A small RGB canvas and a 5x7 bitmap font for ASCII, to draw contact sheets and charts with no
// font or plotting library. Needs only the standard library (the Python extension compiles it).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace shardpack {

struct rgb {
    std::uint8_t r = 0, g = 0, b = 0;
};

// Rows of `width` RGB pixels, top to bottom.
struct rgb_canvas {
    std::size_t width = 0, height = 0;
    std::vector<std::uint8_t> pixels;  // height * width * 3

    rgb_canvas() = default;
    rgb_canvas(std::size_t w, std::size_t h, rgb fill);
    std::uint8_t* at(std::size_t x, std::size_t y) { return pixels.data() + (y * width + x) * 3; }
    // The rectangle [x, x + w) x [y, y + h), cut to the canvas.
    void fill_rect(std::size_t x, std::size_t y, std::size_t w, std::size_t h, rgb color);
    // A one-pixel outline of that rectangle.
    void frame_rect(std::size_t x, std::size_t y, std::size_t w, std::size_t h, rgb color);
};

// Glyphs are 5x7 pixels in cells of 6x9 (a column and two rows apart), times `scale`.
inline constexpr std::size_t glyph_cell_width = 6, glyph_cell_height = 9;

// The 7 rows of the glyph of `c` (bit 4: the leftmost column); a character outside printable
// ASCII is drawn as '?'.
const std::uint8_t* glyph_rows(char c);
// Width in pixels of `text` drawn at `scale` (the last cell's spacing column included).
inline std::size_t text_width(std::string_view text, std::size_t scale = 1) {
    return text.size() * glyph_cell_width * scale;
}
// `text` shortened to fit max_width at `scale`, marked with "..": its first `keep_head`
// characters, "..", then as much of its end as fits (a path's file name); unchanged if it fits.
std::string fit_text(std::string_view text, std::size_t max_width, std::size_t scale, std::size_t keep_head);
// Draws `text` with its top-left at (x, y), cut at the canvas edge and at x + max_width (0: no limit).
void draw_text(rgb_canvas& canvas, std::size_t x, std::size_t y, std::string_view text, rgb color, std::size_t scale = 1,
               std::size_t max_width = 0);

}  // namespace shardpack
