// PNG encoding of stored images, used to export them exactly (lossless, 8- or 16-bit).
#pragma once
#include <cstdint>
#include <vector>

#include "image.hpp"

namespace shardpack {

// Encodes an 8- or 16-bit (sample_bytes 2) gray (1 channel), gray + alpha (2), RGB (3) or RGBA (4)
// image as a non-interlaced PNG:
// zlib level 6, libpng's default adaptive filtering, no tIME/text/gamma chunks. The bytes
// depend only on the pixels (and the zlib build), so the same image always gives the same file.
// Throws std::invalid_argument for an empty image, another channel count or a pixel buffer of
// the wrong size; io_error "PNG encode: <libpng's reason>" if libpng fails (the caller adds
// the file's name); std::bad_alloc.
std::vector<std::uint8_t> encode_png(const image_u8& img);

}  // namespace shardpack
