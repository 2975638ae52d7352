// Entry point for decoding a file's bytes of unknown format: sniffs the magic bytes and hands
// PNG, JPEG and TIFF to their decoders; every other format is refused with a message naming it.
#pragma once
#include <cstddef>
#include <cstdint>

#include "decode/decode_limits.hpp"
#include "decode/image_probe.hpp"
#include "decode/jpeg_decoder.hpp"
#include "decode/png_reader.hpp"
#include "image.hpp"

namespace shardpack {

// Decodes a PNG, JPEG or TIFF (see decode_png / decode_jpeg / decode_tiff for the exact pixel
// semantics). Throws decode_error: "unsupported image format GIF (only PNG, JPEG and TIFF are
// supported)" for GIF/BMP/WebP, "unrecognised image data ..." (with the first bytes in hex) for anything
// else, "empty file" for no bytes, and the decoders' messages for corrupt files.
image_u8 decode_image(const std::uint8_t* data, std::size_t size, const decode_request& req, decoded_info* info = nullptr);
// The same, into `out`, whose pixel buffer is reused: the packer's hot path allocates nothing.
void decode_image(const std::uint8_t* data, std::size_t size, const decode_request& req, image_u8& out,
                  decoded_info* info = nullptr);

// Reads the full (unscaled) size from the header only: PNG's IHDR, JPEG's SOF via
// jpeg_read_header. Returns true on success; throws decode_error, with the same messages as
// decode_image, for unsupported formats, unrecognised data and bad headers (it never returns
// false; the bool lets callers write `if (read_image_size(...))`).
bool read_image_size(const std::uint8_t* data, std::size_t size, std::uint32_t& width, std::uint32_t& height);

// The header of a file whose format is known (sniffed when it was read): PNG's IHDR through
// libpng, JPEG's SOF via jpeg_read_header. Throws decode_error with read_image_size's messages.
// keep: the library session (libpng or libjpeg) is left open there for the decode to take up
// (png_reader.hpp, jpeg_reader), so each file is opened by its library once.
struct probe_session {
    png_reader png;
    jpeg_reader jpeg;
    void close() {
        png.close();
        jpeg.close();
    }
};
image_probe probe_image(const std::uint8_t* data, std::size_t size, file_format format, probe_session* keep = nullptr);

// decode_image for a file whose format is known: no second sniff. opened: the probe's session.
void decode_image(const std::uint8_t* data, std::size_t size, file_format format, const decode_request& req, image_u8& out,
                  decoded_info* info = nullptr, probe_session* opened = nullptr);

}  // namespace shardpack
