// What a caller asks a decoder for, what it learns back, and the size limits every decoder
// enforces so that a hostile header cannot make the packer allocate without bound.
#pragma once
#include <cstdint>

#include "image.hpp"

namespace shardpack {

struct decode_request {
    // Channels wanted in the output. Alpha is dropped (never composited) for gray/rgb and
    // added as opaque 0xFF for rgba when the source has none.
    pixel_layout layout = pixel_layout::rgb;

    // 0: decode all rows. Otherwise the caller needs only rows [0, max_rows) of the (possibly
    // DCT-scaled) output. A decoder that can stop early (JPEG, non-interlaced PNG) returns
    // exactly min(max_rows, full height) rows and never decodes the rest; one that cannot
    // (Adam7-interlaced PNG) decodes and returns every row. So the returned height is always
    // >= min(max_rows, full height); decoded_info::full_height is the true height.
    std::uint32_t max_rows = 0;

    // JPEG only: the decoder may use DCT-domain scaling (M/8, M in 1..8) to the smallest
    // scale whose output is still >= min_width x min_height. 0 on an axis = no constraint
    // on that axis; both 0 = no scaling. Never upscales.
    std::uint32_t min_width = 0, min_height = 0;
};

// The source's original size, before any DCT scaling or early stop.
struct decoded_info {
    std::uint32_t full_width = 0, full_height = 0;
};

// Largest width or height a decoder accepts (PNG user limit; JPEG's own limit is 65500).
inline constexpr std::uint32_t max_decode_dimension = std::uint32_t(1) << 16;

// Largest decoded pixel buffer (width * height * channels) a decoder will allocate.
inline constexpr std::uint64_t max_decoded_bytes = std::uint64_t(1) << 31;

// Throws decode_error naming `format` when width * height * channels > max_decoded_bytes.
void check_decoded_size(const char* format, std::uint64_t width, std::uint64_t height, std::uint32_t channels);

}  // namespace shardpack
