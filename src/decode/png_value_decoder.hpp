// Index masks: a PNG whose pixel values are class ids, decoded to those values (not colors).
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "decode/png_reader.hpp"
#include "decode/sniff.hpp"

namespace shardpack {

// A mask's values, row-major: 8- or 16-bit grayscale samples, or a palette PNG's indices.
struct value_plane {
    std::uint32_t width = 0, height = 0;
    std::vector<std::uint16_t> values;
    const std::uint16_t* row(std::uint32_t y) const { return values.data() + std::size_t(y) * width; }
};

// Decodes a grayscale (1/2/4/8/16-bit, alpha dropped) or palette (1/2/4/8-bit, the indices,
// never the palette's colors) PNG to its values, 16-bit ones in full. max_rows as in
// decode_request (0: all; interlaced files return every row). Throws decode_error for corrupt
// files and for color (RGB/RGBA) PNGs and JPEGs, whose values are not class ids, saying so.
void decode_mask_values(const std::uint8_t* data, std::size_t size, std::uint32_t max_rows, value_plane& out);
// The same for a file whose format is known (sniffed when it was read); `interrupt` (may be
// null) stops the decode when it turns non-zero, as decode_request::interrupt does. `opened`:
// a session probe_image opened over these bytes, taken up after its header (see decode_png).
void decode_mask_values(const std::uint8_t* data, std::size_t size, file_format format, std::uint32_t max_rows,
                        value_plane& out, const std::atomic<int>* interrupt, png_reader* opened = nullptr);

}  // namespace shardpack
