// PNG decoding with libpng's row API, straight into the output image's buffer.
#pragma once
#include <cstddef>
#include <cstdint>

#include "decode/decode_limits.hpp"
#include "decode/png_reader.hpp"
#include "image.hpp"

namespace shardpack {

// Decodes any valid PNG (every color type and bit depth, Adam7 or not) to 8 bits per
// channel in req.layout:
// - palette, 1/2/4-bit gray and tRNS are expanded; 16-bit samples keep their high byte
//   (png_set_strip_16: the same values PIL's "RGB;16B" unpacking and OpenCV's >> 8 give);
// - gray source -> rgb/rgba replicates; color source -> gray uses rgb_to_gray_pil;
// - alpha (real or from tRNS) is dropped for gray/rgb, kept for rgba, 0xFF when absent;
// - gamma, ICC and other color chunks are ignored: pixels are the stored values.
// max_rows: see decode_request (interlaced files always return every row).
// Throws decode_error "PNG: <libpng's reason>" on any corruption, including bad CRCs in any
// chunk, truncation anywhere up to and including IEND, and on oversized images.
image_u8 decode_png(const std::uint8_t* data, std::size_t size, const decode_request& req, decoded_info* info = nullptr);
// The same, into `out`, whose pixel buffer is reused (no allocation when it is large enough).
// `opened`: a session that probe_image opened over these bytes, which the libpng path takes up
// after the header (none, or one over other bytes: a session of its own).
void decode_png(const std::uint8_t* data, std::size_t size, const decode_request& req, image_u8& out,
               decoded_info* info = nullptr, png_reader* opened = nullptr);

// The libpng path alone, without the libdeflate fast path (decode_png_fast) that decode_png
// tries first; for tests and benchmarks that compare the two.
void decode_png_libpng(const std::uint8_t* data, std::size_t size, const decode_request& req, image_u8& out,
                       decoded_info* info = nullptr, png_reader* opened = nullptr);

// What a PNG's IHDR says, read through libpng (signature, IHDR and the chunks before IDAT)
// without decoding pixels. Throws decode_error on a bad header.
struct png_header {
    std::uint32_t width = 0, height = 0;
    std::uint8_t bit_depth = 0, color_type = 0;  // as in IHDR (color type 3: palette)
    bool interlaced = false;                     // Adam7
};
png_header read_png_header(const std::uint8_t* data, std::size_t size);
// The same, leaving the session open in `reader` for the decode (decode_png, decode_mask_values).
png_header read_png_header(const std::uint8_t* data, std::size_t size, png_reader& reader);

}  // namespace shardpack
