// A fast path for the PNGs that matter most (8-bit, not interlaced: gray, gray+alpha, RGB,
// RGBA, palette): chunks parsed and CRC-checked here, the zlib stream inflated by libdeflate in
// one call (about twice as fast as zlib), rows unfiltered and converted here. Everything else,
// and anything unusual or damaged, goes to libpng, so errors keep libpng's wording.
#pragma once
#include <cstddef>
#include <cstdint>

#include "decode/decode_limits.hpp"
#include "image.hpp"

namespace shardpack {

// Decodes into `out` and returns true, or returns false having changed nothing but `out`
// when the file is not one this path takes (the caller then uses libpng). Pixels are
// bit-identical to decode_png_libpng's. Without libdeflate at build time, always false.
bool decode_png_fast(const std::uint8_t* data, std::size_t size, const decode_request& req, image_u8& out,
                     decoded_info* info);

}  // namespace shardpack
