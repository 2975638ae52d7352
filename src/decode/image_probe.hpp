// What a file's first bytes and header say about it. The build finds this once per file (the
// format when the file is read, the header before anything is decoded) and passes it on to the
// memory estimate, the JPEG DCT-scaling choice and the decoder, instead of sniffing the bytes and
// parsing the header again at each step. The decoders still read the header they decode.
#pragma once
#include <cstdint>

#include "decode/sniff.hpp"

namespace shardpack {

struct image_probe {
    file_format format = file_format::unknown;
    std::uint32_t width = 0, height = 0;          // the full size, before any scaling
    std::uint8_t bit_depth = 8, color_type = 0;   // PNG: IHDR's (color type 3: palette); JPEG: 8, 0
    bool interlaced = false;                      // PNG: Adam7
    std::uint32_t channels = 0;                   // TIFF: samples per pixel (0 where not read)
};

}  // namespace shardpack
