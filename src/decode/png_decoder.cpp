// libpng reports errors by longjmp. The discipline here: every libpng call that can fail runs
// inside png_guarded(), whose only job is setjmp + one call of a plain "body" function; no
// object with a destructor lives in png_guarded() or in any body, so a longjmp skips nothing
// that needs cleaning up. All C++ objects (the output image, scratch rows, the guard that
// frees libpng's structures) live in decode_png(), which only ever sees a bool come back.
#include "decode/png_decoder.hpp"
#include "decode/png_fast_decoder.hpp"

#include <png.h>

#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include "decode/color_convert.hpp"
#include "errors.hpp"

namespace shardpack {

namespace {

// Largest single chunk libpng may allocate (decompressed iCCP/zTXt included), so a small
// file cannot claim gigabytes of metadata.
constexpr png_alloc_size_t png_chunk_malloc_max = png_alloc_size_t(16) << 20;

// Ancillary chunks that cannot change the pixels we produce (we apply no gamma, color
// management or background). libpng skips them unparsed, CRC still checked: faster, and a
// malformed profile or text chunk cannot reject an image whose pixels are fine.
constexpr png_byte png_ignored_chunks[] = {
    'b', 'K', 'G', 'D', '\0', 'c', 'H', 'R', 'M', '\0', 'e', 'X', 'I', 'f', '\0', 'g', 'A', 'M', 'A', '\0',
    'h', 'I', 'S', 'T', '\0', 'i', 'C', 'C', 'P', '\0', 'i', 'T', 'X', 't', '\0', 'o', 'F', 'F', 's', '\0',
    'p', 'C', 'A', 'L', '\0', 'p', 'H', 'Y', 's', '\0', 's', 'B', 'I', 'T', '\0', 's', 'C', 'A', 'L', '\0',
    's', 'P', 'L', 'T', '\0', 's', 'R', 'G', 'B', '\0', 't', 'E', 'X', 't', '\0', 't', 'I', 'M', 'E', '\0',
    'z', 'T', 'X', 't', '\0',
};
constexpr int png_ignored_chunk_count = int(sizeof png_ignored_chunks / 5);

// Deflate cannot expand data by more than 1032:1, so a file whose remaining bytes could not
// hold its image even at twice that ratio is truncated or lying about its size: refuse it
// before allocating the output (a 100-byte file may otherwise claim a 2 GiB image).
constexpr std::uint64_t png_max_inflate_ratio = 2048;

// Everything the libpng callbacks and the guarded bodies share. Plain data only.
struct png_session {
    png_structp png = nullptr;
    png_infop info = nullptr;
    const std::uint8_t* data = nullptr;
    std::size_t size = 0;
    std::size_t pos = 0;
    char message[256] = {};
    // libpng explains a bad IHDR in warnings and then fails with just "Invalid IHDR data", so
    // warnings seen while reading the header are kept to complete the error message.
    bool keep_warnings = false;
    char warning[160] = {};

    pixel_layout layout = pixel_layout::rgb;  // wanted output, read by the transforms body
    const decode_request* request = nullptr;  // for the interrupt flag

    // Set just before the last row is read (libpng inflates what follows the rows while reading
    // it): IDAT bytes read from then on (up to idat_end, the end of the IDAT chunks), beyond the
    // last row's own data, are zlib data the image does not need, inflated only to be dropped.
    bool rows_done = false;
    std::size_t rows_done_pos = 0, idat_end = 0, trailing_limit = 0;

    // Set by the header body.
    png_uint_32 width = 0, height = 0;
    int bit_depth = 0, color_type = 0, interlace = 0;
    std::uint32_t source_channels = 0;  // samples per pixel in the file (2 for gray+alpha...)
    int passes = 1;
    std::size_t row_bytes = 0;   // per row, after the transforms
    std::uint32_t channels = 0;  // per pixel, after the transforms

    // Inputs of the rows body.
    std::uint8_t* dst = nullptr;
    std::size_t dst_stride = 0;
    std::uint32_t rows = 0;
    std::uint8_t* scratch = nullptr;  // when set: read each row here, convert RGB -> gray into dst
    bool finish = false;              // read to IEND after the rows
};

// Frees libpng's structures however decode_png is left.
struct png_session_guard {
    png_session& s;
    ~png_session_guard() { png_destroy_read_struct(&s.png, &s.info, nullptr); }
};

[[noreturn]] void on_png_error(png_structp png, png_const_charp message) {
    auto* s = static_cast<png_session*>(png_get_error_ptr(png));
    std::snprintf(s->message, sizeof s->message, "%s", message != nullptr ? message : "unknown libpng error");
    png_longjmp(png, 1);
}

// Warnings never make an image fail; they only add detail to a header error.
void on_png_warning(png_structp png, png_const_charp message) {
    auto* s = static_cast<png_session*>(png_get_error_ptr(png));
    if (s->keep_warnings && message != nullptr && s->warning[0] == '\0')
        std::snprintf(s->warning, sizeof s->warning, "%s", message);
}

void read_from_memory(png_structp png, png_bytep out, std::size_t length) {
    auto* s = static_cast<png_session*>(png_get_io_ptr(png));
    if (s->request != nullptr && decode_interrupted(*s->request)) png_error(png, "interrupted");
    if (s->rows_done && s->pos < s->idat_end && s->pos - s->rows_done_pos > s->trailing_limit)
        png_error(png, "the image data goes on past the last row (more zlib data than the header's size needs)");
    if (length > s->size - s->pos) png_error(png, "truncated file (unexpected end of data)");
    std::memcpy(out, s->data + s->pos, length);
    s->pos += length;
}

// Runs body(s) under setjmp; false when libpng raised an error (s.message says why).
bool png_guarded(png_session& s, void (*body)(png_session&)) {
    if (setjmp(png_jmpbuf(s.png))) return false;
    body(s);
    return true;
}

void read_header_body(png_session& s) {
    s.keep_warnings = true;
    png_read_info(s.png, s.info);
    s.keep_warnings = false;
    s.warning[0] = '\0';  // the header is fine: its warnings explain nothing later
    png_get_IHDR(s.png, s.info, &s.width, &s.height, &s.bit_depth, &s.color_type, &s.interlace, nullptr, nullptr);
    s.source_channels = png_get_channels(s.png, s.info);
}

void set_transforms_body(png_session& s) {
    const bool source_gray = (s.color_type & PNG_COLOR_MASK_COLOR) == 0;
    const bool source_alpha =
        (s.color_type & PNG_COLOR_MASK_ALPHA) != 0 || png_get_valid(s.png, s.info, PNG_INFO_tRNS) != 0;
    png_set_expand(s.png);                        // palette -> RGB, 1/2/4-bit gray -> 8 bits, tRNS -> alpha
    if (s.bit_depth == 16) png_set_strip_16(s.png);  // high byte, as PIL and OpenCV do
    if (s.layout == pixel_layout::rgba) {
        if (source_gray) png_set_gray_to_rgb(s.png);
        if (!source_alpha) png_set_add_alpha(s.png, 0xFF, PNG_FILLER_AFTER);
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

void read_rows_body(png_session& s) {
    // Interlaced: every pass visits every row; libpng merges each pass into the row we pass.
    for (int pass = 0; pass < s.passes; ++pass) {
        for (std::uint32_t y = 0; y < s.rows; ++y) {
            if (s.request != nullptr && decode_interrupted(*s.request)) png_error(s.png, "interrupted");
            if (s.finish && pass == s.passes - 1 && y == s.rows - 1) {
                s.rows_done = true;
                s.rows_done_pos = s.pos;
                // The last row's own compressed bytes (at most about its raw size) plus the slack.
                s.trailing_limit = max_png_trailing_idat_bytes +
                                   2 * ((std::size_t(s.width) * s.source_channels * unsigned(s.bit_depth) + 7) / 8 + 1);
            }
            std::uint8_t* row = s.dst + y * s.dst_stride;
            if (s.scratch != nullptr) {
                png_read_row(s.png, s.scratch, nullptr);
                rgb_to_gray_pil(s.scratch, row, s.width);
            } else {
                png_read_row(s.png, row, nullptr);
            }
        }
    }
    // Reading on to IEND checks the CRCs and the trailing chunks: a truncated file is an error.
    if (s.finish) png_read_end(s.png, nullptr);
}

// The offset just past the run of IDAT chunks (0 when there is none): chunk lengths walked
// from the signature, without trusting any to fit.
std::size_t idat_run_end(const std::uint8_t* data, std::size_t size) {
    std::size_t pos = 8;
    bool in_idat = false;
    while (size >= 12 && pos <= size - 12) {
        const std::size_t length = (std::size_t(data[pos]) << 24) | (std::size_t(data[pos + 1]) << 16) |
                                   (std::size_t(data[pos + 2]) << 8) | data[pos + 3];
        const bool idat = std::memcmp(data + pos + 4, "IDAT", 4) == 0;
        if (in_idat && !idat) return pos;
        in_idat = idat;
        if (length > size - pos - 12) return in_idat ? size : 0;
        pos += length + 12;
    }
    return in_idat ? pos : 0;
}

[[noreturn]] void throw_png_error(const png_session& s) {
    std::string text = std::string("PNG: ") + (s.message[0] != '\0' ? s.message : "unknown libpng error");
    if (s.warning[0] != '\0') text += std::string(" (") + s.warning + ")";
    throw decode_error(text);
}

// Creates the read structures with our error handling, memory source and limits.
void open_png(png_session& s, const std::uint8_t* data, std::size_t size) {
    s.data = data;
    s.size = data != nullptr ? size : 0;
    s.png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &s, on_png_error, on_png_warning);
    if (s.png == nullptr) throw std::bad_alloc();
    s.info = png_create_info_struct(s.png);
    if (s.info == nullptr) throw std::bad_alloc();
    png_set_read_fn(s.png, &s, read_from_memory);
    png_set_user_limits(s.png, max_decode_dimension, max_decode_dimension);
    png_set_chunk_malloc_max(s.png, png_chunk_malloc_max);
    png_set_crc_action(s.png, PNG_CRC_ERROR_QUIT, PNG_CRC_ERROR_QUIT);  // bad CRC anywhere is an error
    png_set_keep_unknown_chunks(s.png, PNG_HANDLE_CHUNK_NEVER, png_ignored_chunks, png_ignored_chunk_count);
}

}  // namespace

void decode_png(const std::uint8_t* data, std::size_t size, const decode_request& req, image_u8& out,
               decoded_info* info) {
    if (decode_png_fast(data, size, req, out, info)) return;
    decode_png_libpng(data, size, req, out, info);
}

void decode_png_libpng(const std::uint8_t* data, std::size_t size, const decode_request& req, image_u8& out,
                       decoded_info* info) {
    const std::uint32_t want = channel_count(req.layout);
    if (want != 1 && want != 3 && want != 4) throw std::invalid_argument("decode_png: bad pixel layout");

    png_session s;
    png_session_guard guard{s};
    open_png(s, data, size);
    s.layout = req.layout;
    s.request = &req;
    s.idat_end = idat_run_end(s.data, s.size);
    if (!png_guarded(s, read_header_body)) throw_png_error(s);
    if (info != nullptr) *info = decoded_info{s.width, s.height};
    const std::uint64_t image_data_bytes = std::uint64_t(s.width) * s.height * s.source_channels * unsigned(s.bit_depth) / 8;
    if (image_data_bytes / png_max_inflate_ratio > s.size - s.pos)
        throw decode_error("PNG: file is far too small for a " + std::to_string(s.width) + "x" +
                           std::to_string(s.height) + " image (truncated or corrupt)");
    if (!png_guarded(s, set_transforms_body)) throw_png_error(s);

    // The transforms above must give `want` channels, or RGB when converting color to gray.
    const bool color_to_gray = want == 1 && s.channels == 3;
    if ((s.channels != want && !color_to_gray) || s.row_bytes != std::size_t(s.width) * s.channels)
        throw decode_error("PNG: unexpected row layout after libpng transforms");

    // Adam7 cannot stop early: the first rows are complete only after the last pass.
    const bool interlaced = s.passes > 1;
    const std::uint32_t rows =
        (interlaced || req.max_rows == 0 || req.max_rows >= s.height) ? s.height : req.max_rows;
    // An interlaced color image wanted in gray is decoded whole as RGB, then converted.
    const std::uint32_t buffer_channels = interlaced ? s.channels : want;
    check_decoded_size("PNG", s.width, rows, buffer_channels);

    out.width = s.width;
    out.height = rows;
    out.channels = want;
    out.pixels.resize(std::size_t(s.width) * rows * buffer_channels);
    std::vector<std::uint8_t> scratch;
    if (color_to_gray && !interlaced) scratch.resize(s.row_bytes);

    s.dst = out.pixels.data();
    s.dst_stride = std::size_t(s.width) * buffer_channels;
    s.rows = rows;
    s.scratch = scratch.empty() ? nullptr : scratch.data();
    s.finish = rows == s.height;
    if (!png_guarded(s, read_rows_body)) throw_png_error(s);

    if (color_to_gray && interlaced) {
        const std::size_t pixels = std::size_t(s.width) * rows;
        rgb_to_gray_pil(out.pixels.data(), out.pixels.data(), pixels);
        out.pixels.resize(pixels);
    }
}

image_u8 decode_png(const std::uint8_t* data, std::size_t size, const decode_request& req, decoded_info* info) {
    image_u8 out;
    decode_png(data, size, req, out, info);
    return out;
}

void read_png_size(const std::uint8_t* data, std::size_t size, std::uint32_t& width, std::uint32_t& height) {
    png_session s;
    png_session_guard guard{s};
    open_png(s, data, size);
    if (!png_guarded(s, read_header_body)) throw_png_error(s);
    width = s.width;
    height = s.height;
}

}  // namespace shardpack
