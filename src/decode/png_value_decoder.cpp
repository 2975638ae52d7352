// The same longjmp discipline as png_decoder.cpp: every libpng call that can fail runs in
// value_guarded(), which holds no object with a destructor; C++ objects live in the caller.
#include "decode/png_value_decoder.hpp"

#include <png.h>

#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <new>
#include <string>

#include "decode/decode_limits.hpp"
#include "decode/sniff.hpp"
#include "errors.hpp"

namespace shardpack {

namespace {

struct value_session {
    png_structp png = nullptr;
    png_infop info = nullptr;
    const std::uint8_t* data = nullptr;
    std::size_t size = 0, pos = 0;
    char message[256] = {};
    png_uint_32 width = 0, height = 0;
    int bit_depth = 0, color_type = 0, interlace = 0, passes = 1;
    std::size_t row_bytes = 0;
    std::uint8_t* dst = nullptr;  // rows of row_bytes each
    std::uint32_t rows = 0;
    bool finish = false;
};

struct value_session_guard {
    value_session& s;
    ~value_session_guard() { png_destroy_read_struct(&s.png, &s.info, nullptr); }
};

[[noreturn]] void on_error(png_structp png, png_const_charp message) {
    auto* s = static_cast<value_session*>(png_get_error_ptr(png));
    std::snprintf(s->message, sizeof s->message, "%s", message != nullptr ? message : "unknown libpng error");
    png_longjmp(png, 1);
}

void on_warning(png_structp, png_const_charp) {}

void read_from_memory(png_structp png, png_bytep out, std::size_t length) {
    auto* s = static_cast<value_session*>(png_get_io_ptr(png));
    if (length > s->size - s->pos) png_error(png, "truncated file (unexpected end of data)");
    std::memcpy(out, s->data + s->pos, length);
    s->pos += length;
}

bool value_guarded(value_session& s, void (*body)(value_session&)) {
    if (setjmp(png_jmpbuf(s.png))) return false;
    body(s);
    return true;
}

void header_body(value_session& s) {
    png_read_info(s.png, s.info);
    png_get_IHDR(s.png, s.info, &s.width, &s.height, &s.bit_depth, &s.color_type, &s.interlace, nullptr, nullptr);
}

void transforms_body(value_session& s) {
    if (s.bit_depth < 8) png_set_packing(s.png);  // one value per byte, not scaled (unlike png_set_expand)
    if (s.color_type & PNG_COLOR_MASK_ALPHA) png_set_strip_alpha(s.png);
    s.passes = s.interlace != PNG_INTERLACE_NONE ? png_set_interlace_handling(s.png) : 1;
    png_read_update_info(s.png, s.info);
    s.row_bytes = png_get_rowbytes(s.png, s.info);
}

void rows_body(value_session& s) {
    for (int pass = 0; pass < s.passes; ++pass)
        for (std::uint32_t y = 0; y < s.rows; ++y) png_read_row(s.png, s.dst + std::size_t(y) * s.row_bytes, nullptr);
    if (s.finish) png_read_end(s.png, nullptr);
}

[[noreturn]] void throw_error(const value_session& s) {
    throw decode_error(std::string("PNG: ") + (s.message[0] != '\0' ? s.message : "unknown libpng error"));
}

}  // namespace

void decode_mask_values(const std::uint8_t* data, std::size_t size, std::uint32_t max_rows, value_plane& out) {
    const file_format format = sniff_format(data, size);
    if (format == file_format::jpeg)
        throw decode_error("index masks must be PNG: a JPEG's values are not exact (lossy); use --mask-values color "
                           "only for color masks");
    if (format != file_format::png)
        throw decode_error(std::string("index masks must be PNG (found ") + format_name(format) + ")");
    value_session s;
    value_session_guard guard{s};
    s.data = data;
    s.size = size;
    s.png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &s, on_error, on_warning);
    if (s.png == nullptr) throw std::bad_alloc();
    s.info = png_create_info_struct(s.png);
    if (s.info == nullptr) throw std::bad_alloc();
    png_set_read_fn(s.png, &s, read_from_memory);
    png_set_user_limits(s.png, max_decode_dimension, max_decode_dimension);
    png_set_chunk_malloc_max(s.png, png_alloc_size_t(16) << 20);
    png_set_crc_action(s.png, PNG_CRC_ERROR_QUIT, PNG_CRC_ERROR_QUIT);
    if (!value_guarded(s, header_body)) throw_error(s);
    if ((s.color_type & PNG_COLOR_MASK_COLOR) && s.color_type != PNG_COLOR_TYPE_PALETTE)
        throw decode_error("the mask is an RGB" + std::string(s.color_type & PNG_COLOR_MASK_ALPHA ? "A" : "") +
                           " PNG, so its values are colors, not class ids: --mask-values index reads grayscale "
                           "(8- or 16-bit) or palette PNGs; use --mask-values color with a name,r,g,b dictionary");
    if (!value_guarded(s, transforms_body)) throw_error(s);
    const unsigned bytes_per_value = s.bit_depth == 16 ? 2 : 1;
    if (s.row_bytes != std::size_t(s.width) * bytes_per_value) throw decode_error("PNG: unexpected row layout for an index mask");
    const bool interlaced = s.passes > 1;
    const std::uint32_t rows = (interlaced || max_rows == 0 || max_rows >= s.height) ? s.height : max_rows;
    check_decoded_size("PNG", s.width, rows, 2);
    std::vector<std::uint8_t> raw(std::size_t(rows) * s.row_bytes);
    s.dst = raw.data();
    s.rows = rows;
    s.finish = rows == s.height;
    if (!value_guarded(s, rows_body)) throw_error(s);
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
