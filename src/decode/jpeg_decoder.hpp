// JPEG decoding with libjpeg-turbo, straight into the output image's buffer.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>

#include "decode/decode_limits.hpp"
#include "image.hpp"

namespace shardpack {

namespace jpeg_detail {
struct jpeg_session;
}

// A JPEG's libjpeg session carried from the header probe to the decode, so that libjpeg opens
// each file once: read_jpeg_size (probe_image) opens it and reads the header, and decode_jpeg
// takes it up where the header ended (see png_reader.hpp for PNG). libjpeg is not included here.
class jpeg_reader {
public:
    jpeg_reader();
    ~jpeg_reader();
    jpeg_reader(jpeg_reader&&) noexcept;
    jpeg_reader& operator=(jpeg_reader&&) noexcept;

    // Opens a session over data[0, size) (which must outlive it) and reads the header
    // (jpeg_read_header). Throws decode_error as decode_jpeg does.
    void open(const std::uint8_t* data, std::size_t size);
    // The open session over these very bytes, still at the end of their header, for one decode
    // to continue; null otherwise. The session is then taken: a second call returns null.
    jpeg_detail::jpeg_session* take(const std::uint8_t* data, std::size_t size);
    // The session a decode of data[0, size) continues: `opened`'s where it has one over these
    // bytes (the probe's), else this reader's own, opened now.
    jpeg_detail::jpeg_session& take_or_open(jpeg_reader* opened, const std::uint8_t* data, std::size_t size);
    std::uint32_t width() const;  // the header's size (valid after open)
    std::uint32_t height() const;
    // Frees libjpeg's structures.
    void close();

private:
    std::unique_ptr<jpeg_detail::jpeg_session> session_;  // at a fixed address: libjpeg points into it
    bool at_header_ = false;
};

// Decodes an 8-bit JPEG (baseline, extended, progressive, arithmetic; gray, YCbCr, RGB, CMYK,
// YCCK) to req.layout with libjpeg-turbo's defaults (ISLOW IDCT, fancy upsampling), so the
// pixels match PIL and OpenCV builds that use libjpeg-turbo.
// - gray from a color JPEG: decoded to RGB, then rgb_to_gray_pil (= PIL's convert("L"));
// - rgba: alpha is 0xFF;
// - CMYK/YCCK: converted by cmyk_to_rgb, Adobe-inverted when the file has an Adobe marker;
// - no ICC color management; the EXIF orientation tag is not applied.
// req.min_width/min_height pick a DCT scale M/8 (see decode_request); req.max_rows stops after
// that many output rows (the rest of the file is not read). info gets the unscaled size.
// Throws decode_error "JPEG: <libjpeg's reason>" on errors and also on corrupt-data warnings
// (premature end of file, bad Huffman/arithmetic code, data segment cut short by a marker,
// lost sync, bad progression); 12-bit files get "12-bit JPEG is not supported (only 8-bit
// precision)". Extraneous bytes between a complete scan and the next marker are tolerated.
image_u8 decode_jpeg(const std::uint8_t* data, std::size_t size, const decode_request& req, decoded_info* info = nullptr);
// The same, into `out`, whose pixel buffer is reused (no allocation when it is large enough).
// `opened`: a session that read_jpeg_size opened over these bytes, taken up after the header.
void decode_jpeg(const std::uint8_t* data, std::size_t size, const decode_request& req, image_u8& out,
                decoded_info* info = nullptr, jpeg_reader* opened = nullptr);

// The DCT scale decode_jpeg uses for req.min_width/min_height: the smallest M in 1..8 with
// ceil(width*M/8) >= min_width and ceil(height*M/8) >= min_height (a 0 minimum constrains
// nothing; both 0 gives 8). The output is then ceil(width*M/8) x ceil(height*M/8).
unsigned jpeg_dct_scale_eighths(std::uint32_t width, std::uint32_t height, std::uint32_t min_width, std::uint32_t min_height);

// Reads the size from the header (jpeg_read_header) without decoding pixels. Throws
// decode_error on a bad header. keep: the session is left open there for decode_jpeg.
void read_jpeg_size(const std::uint8_t* data, std::size_t size, std::uint32_t& width, std::uint32_t& height,
                    jpeg_reader* keep = nullptr);

}  // namespace shardpack
