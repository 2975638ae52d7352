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
// bit-identical to decode_png_libpng's for every file libpng decodes. Without libdeflate at
// build time, always false.
//
// One known difference, by libdeflate's design: it decodes some deflate streams whose Huffman
// codes RFC 1951 forbids (an unused length symbol, an incomplete code), which zlib refuses
// ("invalid literal/length code"). Such a file is taken here only when the zlib stream's
// Adler-32 and every chunk's CRC match, so the pixels are the ones the file's own checksums
// vouch for. Found by fuzz_decode; pinned in test_decode.
bool decode_png_fast(const std::uint8_t* data, std::size_t size, const decode_request& req, image_u8& out,
                     decoded_info* info);

}  // namespace shardpack
