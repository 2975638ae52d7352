// What a caller asks a decoder for, what it learns back, and the size limits every decoder
// enforces so that a hostile header cannot make the packer allocate without bound.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "decode/image_probe.hpp"
#include "image.hpp"

namespace shardpack {

struct decode_request {
    // Channels wanted in the output. Alpha is dropped (never composited) for gray/rgb and
    // added as opaque 0xFF for rgba when the source has none.
    pixel_layout layout = pixel_layout::rgb;

    // 16-bit sources (PNG, TIFF): keep all 16 bits (image_u8::sample_bytes 2) instead of their
    // high byte. Sources of 8 bits or fewer decode to 8 bits either way.
    bool keep_16 = false;

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

    // When set and non-zero (a signal arrived), a long decode stops with decode_error
    // "interrupted": JPEG checks it per scan and per row, PNG per row and per chunk read.
    const std::atomic<int>* interrupt = nullptr;

    // JPEG: the most memory libjpeg may take for its own buffers (the coefficients of
    // progressive files); 0: jpeg's default cap (1 GiB).
    std::uint64_t max_decoder_memory = 0;
};

// Progressive JPEGs with more scans than this are refused: each scan is a pass over the whole
// image (883 scans of a large image took 111 s), and encoders write about 10.
inline constexpr int max_jpeg_scans = 256;

// Zlib data a PNG may inflate beyond the rows its header promises (a stream that "runs on for
// gigabytes" behind a small image): refused past this many compressed bytes read after the
// last row.
inline constexpr std::size_t max_png_trailing_idat_bytes = std::size_t(1) << 16;

// True when req.interrupt is set and a signal arrived.
inline bool decode_interrupted(const decode_request& req) {
    return req.interrupt != nullptr && req.interrupt->load(std::memory_order_relaxed) != 0;
}

// The source's original size, before any DCT scaling or early stop.
struct decoded_info {
    std::uint32_t full_width = 0, full_height = 0;
};

// Largest width or height a decoder accepts (PNG user limit; JPEG's own limit is 65500).
inline constexpr std::uint32_t max_decode_dimension = std::uint32_t(1) << 16;

// Largest decoded pixel buffer (width * height * channels) a decoder will allocate.
inline constexpr std::uint64_t max_decoded_bytes = std::uint64_t(1) << 31;

// An upper estimate of the memory decode_image takes for this PNG or JPEG (its probe:
// format, full size and, for PNG, IHDR's depth, color type and interlace), from its header
// alone: the output buffer for req (DCT scale, rows) and, for PNG, the inflated rows the fast
// path holds. libjpeg's own buffers are not included: req.max_decoder_memory caps them.
std::uint64_t decode_memory_estimate(const image_probe& probe, const decode_request& req);

// Throws decode_error naming `format` when width * height * channels > max_decoded_bytes.
void check_decoded_size(const char* format, std::uint64_t width, std::uint64_t height, std::uint32_t channels);

}  // namespace shardpack
