// Index masks on the one libpng session (png_session.hpp), so they get the PNG decoder's
// guards: the interrupt check, the trailing-IDAT limit, the size plausibility check and the
// header warnings in errors. Every libpng call runs in png_guarded().
#include "decode/png_value_decoder.hpp"

#include <png.h>

#include <string>

#include "decode/decode_limits.hpp"
#include "decode/png_session.hpp"
#include "decode/sniff.hpp"
#include "errors.hpp"

namespace shardpack {

using namespace png_detail;

namespace {

// One value per byte (1/2/4-bit samples unpacked, not scaled, unlike png_set_expand), 16-bit
// samples kept whole, alpha dropped; a palette PNG gives its indices.
void value_transforms_body(png_session& s) {
    if (s.bit_depth < 8) png_set_packing(s.png);
    if (s.color_type & PNG_COLOR_MASK_ALPHA) png_set_strip_alpha(s.png);
    s.passes = s.interlace != PNG_INTERLACE_NONE ? png_set_interlace_handling(s.png) : 1;
    png_read_update_info(s.png, s.info);
    s.row_bytes = png_get_rowbytes(s.png, s.info);
}

}  // namespace

void decode_mask_values(const std::uint8_t* data, std::size_t size, std::uint32_t max_rows, value_plane& out) {
    decode_mask_values(data, size, sniff_format(data, size), max_rows, out, nullptr);
}

void decode_mask_values(const std::uint8_t* data, std::size_t size, file_format format, std::uint32_t max_rows,
                        value_plane& out, const std::atomic<int>* interrupt, png_reader* opened) {
    if (format == file_format::jpeg)
        throw decode_error("index masks must be PNG: a JPEG's values are not exact (lossy); use --mask-values color "
                           "only for color masks");
    if (format != file_format::png)
        throw decode_error(std::string("index masks must be PNG (found ") + format_name(format) + ")");
    png_reader own;
    png_session& s = own.take_or_open(opened, data, size);
    s.interrupt = interrupt;
    if ((s.color_type & PNG_COLOR_MASK_COLOR) && s.color_type != PNG_COLOR_TYPE_PALETTE)
        throw decode_error("the mask is an RGB" + std::string(s.color_type & PNG_COLOR_MASK_ALPHA ? "A" : "") +
                           " PNG, so its values are colors, not class ids: --mask-values index reads grayscale "
                           "(8- or 16-bit) or palette PNGs; use --mask-values color with a name,r,g,b dictionary");
    refuse_implausible_size(s);
    if (!png_guarded(s, value_transforms_body)) throw_png_error(s);
    const unsigned bytes_per_value = s.bit_depth == 16 ? 2 : 1;
    if (s.row_bytes != std::size_t(s.width) * bytes_per_value) throw decode_error("PNG: unexpected row layout for an index mask");
    const bool interlaced = s.passes > 1;
    const std::uint32_t rows = (interlaced || max_rows == 0 || max_rows >= s.height) ? s.height : max_rows;
    check_decoded_size("PNG", s.width, rows, 2);
    std::vector<std::uint8_t> raw(std::size_t(rows) * s.row_bytes);
    s.dst = raw.data();
    s.dst_stride = s.row_bytes;
    s.rows = rows;
    s.finish = rows == s.height;
    if (!png_guarded(s, read_rows_body)) throw_png_error(s);
    out.width = s.width;
    out.height = rows;
    out.values.resize(std::size_t(s.width) * rows);
    if (bytes_per_value == 2)
        for (std::size_t i = 0; i < out.values.size(); ++i)
            out.values[i] = static_cast<std::uint16_t>(raw[2 * i] << 8 | raw[2 * i + 1]);  // PNG is big-endian
    else
        for (std::size_t i = 0; i < out.values.size(); ++i) out.values[i] = raw[i];
}

}  // namespace shardpack
