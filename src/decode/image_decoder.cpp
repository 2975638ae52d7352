#include "decode/image_decoder.hpp"

#include <string>

#include "decode/jpeg_decoder.hpp"
#include "decode/png_decoder.hpp"
#include "decode/sniff.hpp"
#include "decode/tiff_decoder.hpp"
#include "errors.hpp"

namespace shardpack {

namespace {

// The refusal for anything that is not PNG, JPEG or TIFF. Unrecognised data gets its first
// bytes in hex: an HTML error page or a text file saved as .jpg is then obvious.
[[noreturn]] void throw_unsupported(file_format format, const std::uint8_t* data, std::size_t size) {
    if (size == 0 || data == nullptr) throw decode_error("empty file (0 bytes)");
    if (format != file_format::unknown)
        throw decode_error(std::string("unsupported image format ") + format_name(format) +
                           " (only PNG, JPEG and TIFF are supported)");
    static constexpr char digits[] = "0123456789ABCDEF";
    std::string hex;
    for (std::size_t i = 0; i < size && i < 8; ++i) {
        if (i != 0) hex += ' ';
        hex += digits[data[i] >> 4];
        hex += digits[data[i] & 15];
    }
    throw decode_error("unrecognised image data (starts with " + hex + "; only PNG, JPEG and TIFF are supported)");
}

}  // namespace

void decode_image(const std::uint8_t* data, std::size_t size, file_format format, const decode_request& req, image_u8& out,
                  decoded_info* info, probe_session* opened) {
    out.sample_bytes = 1;  // a reused image may hold 16-bit samples from its last decode
    if (format == file_format::png) return decode_png(data, size, req, out, info, opened != nullptr ? &opened->png : nullptr);
    if (format == file_format::jpeg) return decode_jpeg(data, size, req, out, info, opened != nullptr ? &opened->jpeg : nullptr);
    if (format == file_format::tiff) return decode_tiff(data, size, req, out, info);
    throw_unsupported(format, data, size);
}

void decode_image(const std::uint8_t* data, std::size_t size, const decode_request& req, image_u8& out, decoded_info* info) {
    decode_image(data, size, sniff_format(data, size), req, out, info);
}

image_u8 decode_image(const std::uint8_t* data, std::size_t size, const decode_request& req, decoded_info* info) {
    image_u8 out;
    decode_image(data, size, req, out, info);
    return out;
}

image_probe probe_image(const std::uint8_t* data, std::size_t size, file_format format, probe_session* keep) {
    image_probe p;
    p.format = format;
    if (format == file_format::png) {
        const png_header h = keep != nullptr ? read_png_header(data, size, keep->png) : read_png_header(data, size);
        p.width = h.width;
        p.height = h.height;
        p.bit_depth = h.bit_depth;
        p.color_type = h.color_type;
        p.interlaced = h.interlaced;
    } else if (format == file_format::jpeg) {
        read_jpeg_size(data, size, p.width, p.height, keep != nullptr ? &keep->jpeg : nullptr);
    } else if (format == file_format::tiff) {
        const tiff_header h = read_tiff_header(data, size);
        p.width = h.width;
        p.height = h.height;
        p.bit_depth = static_cast<std::uint8_t>(h.bits);
        p.channels = h.samples;
    } else {
        throw_unsupported(format, data, size);
    }
    return p;
}

bool read_image_size(const std::uint8_t* data, std::size_t size, std::uint32_t& width, std::uint32_t& height) {
    const image_probe p = probe_image(data, size, sniff_format(data, size));
    width = p.width;
    height = p.height;
    return true;
}

}  // namespace shardpack
