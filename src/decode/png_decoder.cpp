// PNG decoding on the one libpng session (png_session.hpp: its guards and the longjmp
// discipline every body below follows).
#include "decode/png_decoder.hpp"
#include "decode/png_fast_decoder.hpp"

#include <png.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "decode/color_convert.hpp"
#include "decode/png_session.hpp"
#include "errors.hpp"
#include "shardpack/detail/endian.hpp"

namespace shardpack {

using namespace png_detail;

namespace {

// Sets the transforms that give s.layout's channels at 8 bits, or at 16 for a 16-bit file with
// s.keep_16 (samples in the host's byte order).
void set_transforms_body(png_session& s) {
    const bool source_gray = (s.color_type & PNG_COLOR_MASK_COLOR) == 0;
    const bool source_alpha =
        (s.color_type & PNG_COLOR_MASK_ALPHA) != 0 || png_get_valid(s.png, s.info, PNG_INFO_tRNS) != 0;
    const bool wide = s.bit_depth == 16 && s.keep_16;
    png_set_expand(s.png);                        // palette -> RGB, 1/2/4-bit gray -> 8 bits, tRNS -> alpha
    if (s.bit_depth == 16 && !wide) png_set_strip_16(s.png);  // high byte, as PIL and OpenCV do
    if (wide && detail::little_endian_host()) png_set_swap(s.png);  // PNG's big-endian samples to the host's order
    s.sample_bytes = wide ? 2 : 1;
    if (s.layout == pixel_layout::bands) {
        // Every sample as stored (palette and tRNS expanded, as for the other layouts).
    } else if (s.layout == pixel_layout::rgba) {
        if (source_gray) png_set_gray_to_rgb(s.png);
        if (!source_alpha) png_set_add_alpha(s.png, wide ? 0xFFFF : 0xFF, PNG_FILLER_AFTER);
    } else {
        if (source_alpha) png_set_strip_alpha(s.png);  // dropped, not composited
        if (source_gray && s.layout == pixel_layout::rgb) png_set_gray_to_rgb(s.png);
        // Color source with gray layout stays RGB here; decode_png converts with PIL's luma.
    }
    s.passes = s.interlace != PNG_INTERLACE_NONE ? png_set_interlace_handling(s.png) : 1;
    png_read_update_info(s.png, s.info);
    s.row_bytes = png_get_rowbytes(s.png, s.info);
    s.channels = png_get_channels(s.png, s.info);
}

}  // namespace

void decode_png(const std::uint8_t* data, std::size_t size, const decode_request& req, image_u8& out,
               decoded_info* info, png_reader* opened) {
    out.sample_bytes = 1;  // the fast path writes 8-bit images only; the libpng path sets its own
    if (req.layout != pixel_layout::bands && decode_png_fast(data, size, req, out, info)) return;
    decode_png_libpng(data, size, req, out, info, opened);
}

void decode_png_libpng(const std::uint8_t* data, std::size_t size, const decode_request& req, image_u8& out,
                       decoded_info* info, png_reader* opened) {
    std::uint32_t want = channel_count(req.layout);
    if (want != 1 && want != 3 && want != 4 && req.layout != pixel_layout::bands)
        throw std::invalid_argument("decode_png: bad pixel layout");

    // The probe's session when it has one over these bytes, else one of our own: either way
    // the header has been read once, here or by the probe.
    png_reader own;
    png_session& s = own.take_or_open(opened, data, size);
    s.interrupt = req.interrupt;
    s.layout = req.layout;
    s.keep_16 = req.keep_16;
    if (info != nullptr) *info = decoded_info{s.width, s.height};
    refuse_implausible_size(s);
    if (!png_guarded(s, set_transforms_body)) throw_png_error(s);
    if (req.layout == pixel_layout::bands) want = s.channels;  // as the file stores them

    // The transforms above must give `want` channels, or RGB when converting color to gray.
    const bool color_to_gray = want == 1 && s.channels == 3;
    if ((s.channels != want && !color_to_gray) || s.row_bytes != std::size_t(s.width) * s.channels * s.sample_bytes)
        throw decode_error("PNG: unexpected row layout after libpng transforms");

    // Adam7 cannot stop early: the first rows are complete only after the last pass.
    const bool interlaced = s.passes > 1;
    const std::uint32_t rows =
        (interlaced || req.max_rows == 0 || req.max_rows >= s.height) ? s.height : req.max_rows;
    // An interlaced color image wanted in gray is decoded whole as RGB, then converted.
    const std::uint32_t buffer_channels = interlaced ? s.channels : want;
    check_decoded_size("PNG", s.width, rows, buffer_channels * s.sample_bytes);

    out.width = s.width;
    out.height = rows;
    out.channels = want;
    out.sample_bytes = s.sample_bytes;
    out.pixels.resize(std::size_t(s.width) * rows * buffer_channels * s.sample_bytes);
    std::vector<std::uint8_t> scratch;
    if (color_to_gray && !interlaced) scratch.resize(s.row_bytes);

    s.dst = out.pixels.data();
    s.dst_stride = std::size_t(s.width) * buffer_channels * s.sample_bytes;
    s.rows = rows;
    s.scratch = scratch.empty() ? nullptr : scratch.data();
    s.finish = rows == s.height;
    if (!png_guarded(s, read_rows_body)) throw_png_error(s);

    if (color_to_gray && interlaced) {
        const std::size_t pixels = std::size_t(s.width) * rows;
        if (s.sample_bytes == 2)
            rgb16_to_gray_pil(out.samples16(), out.samples16(), pixels);
        else
            rgb_to_gray_pil(out.pixels.data(), out.pixels.data(), pixels);
        out.pixels.resize(pixels * s.sample_bytes);
    }
}

image_u8 decode_png(const std::uint8_t* data, std::size_t size, const decode_request& req, decoded_info* info) {
    image_u8 out;
    decode_png(data, size, req, out, info);
    return out;
}

png_header read_png_header(const std::uint8_t* data, std::size_t size, png_reader& reader) {
    reader.open(data, size);
    const png_session& s = reader.session();
    return {s.width, s.height, static_cast<std::uint8_t>(s.bit_depth), static_cast<std::uint8_t>(s.color_type),
            s.interlace != PNG_INTERLACE_NONE};
}

png_header read_png_header(const std::uint8_t* data, std::size_t size) {
    png_reader reader;
    return read_png_header(data, size, reader);
}

}  // namespace shardpack
