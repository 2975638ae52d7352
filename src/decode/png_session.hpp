// The one libpng read session of the packer: the PNG decoder (decode_png_libpng), the header
// probe (read_png_header) and the index-mask decoder (decode_mask_values) all open PNGs here
// (through png_reader, which carries a file's session from the probe to its decode),
// so every one of them gets the same guards: the error handler that longjmps back, the memory
// reader with the interrupt check and the trailing-IDAT limit, libpng's size and chunk limits,
// CRC errors fatal everywhere, and the ancillary chunks that cannot change pixels skipped.
//
// libpng reports errors by longjmp. The discipline, for every libpng session of the packer
// (this read session and png_encoder's write session share the error handler and the guard
// below): every libpng call that can fail runs inside run_png_guarded(), whose only job is
// setjmp + one call of a plain "body" function; no object with a destructor lives in
// run_png_guarded() or in any body, so a longjmp skips nothing that needs cleaning up. All C++
// objects (the output image, scratch rows, the png_reader that owns the session and frees
// libpng's structures) live in the callers, which only ever see a bool come back.
#pragma once
#include <png.h>

#include <atomic>
#include <csetjmp>
#include <cstddef>
#include <cstdint>
#include <cstdio>

#include "decode/decode_limits.hpp"
#include "image.hpp"

namespace shardpack::png_detail {

// libpng's error handler of every session, read or write: png_create_*_struct(..., &s,
// png_error_handler<Session>, ...). Keeps libpng's message in s.message and longjmps back to
// the setjmp of the run_png_guarded() that made the failing call.
template <class Session>
[[noreturn]] void png_error_handler(png_structp png, png_const_charp message) {
    auto* s = static_cast<Session*>(png_get_error_ptr(png));
    std::snprintf(s->message, sizeof s->message, "%s", message != nullptr ? message : "unknown libpng error");
    png_longjmp(png, 1);
}

// setjmp, then body(s): false when libpng raised an error (s.message says why). Never inlined,
// so that the setjmp has a frame of its own, holding nothing with a destructor.
template <class Session>
[[gnu::noinline]] bool run_png_guarded(Session& s, void (*body)(Session&)) {
    if (setjmp(png_jmpbuf(s.png))) return false;
    body(s);
    return true;
}

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

    pixel_layout layout = pixel_layout::rgb;  // wanted output, read by the decoder's transforms body
    bool keep_16 = false;                     // a 16-bit file keeps its 16 bits (decode_request::keep_16)
    std::uint32_t sample_bytes = 1;           // per sample, after the transforms
    const std::atomic<int>* interrupt = nullptr;  // a signal arrived: stop at the next read

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

// Creates the read structures with our error handling, memory source and limits, over
// data[0, size); `interrupt` (may be null) stops a read when it turns non-zero.
void open_png(png_session& s, const std::uint8_t* data, std::size_t size, const std::atomic<int>* interrupt);

// run_png_guarded for the read session.
inline bool png_guarded(png_session& s, void (*body)(png_session&)) { return run_png_guarded(s, body); }

// Bodies for png_guarded. The header: signature, IHDR and the chunks before IDAT.
void read_header_body(png_session& s);
// The rows: s.rows rows of s.row_bytes into s.dst (s.dst_stride apart), every pass; then, when
// s.finish, on to IEND. Arms the trailing-IDAT limit before the last row.
void read_rows_body(png_session& s);

// After the header: decode_error when the file's remaining bytes could not hold the image the
// header claims even at twice deflate's largest ratio (truncated, or lying about its size), so
// a 100-byte file cannot make the caller allocate a 2 GiB image.
void refuse_implausible_size(const png_session& s);

// decode_error "PNG: <libpng's reason> (<header warning>)".
[[noreturn]] void throw_png_error(const png_session& s);

}  // namespace shardpack::png_detail
