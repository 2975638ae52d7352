// libjpeg reports errors by calling error_exit, which must not return; we longjmp. The
// discipline is the same as the PNG decoder's: every libjpeg call that can fail runs inside
// jpeg_guarded(), which only does setjmp + one call of a plain "body" function; no object
// with a destructor lives there or in any body. The output image, scratch row and the guard
// that destroys the decompressor live in decode_jpeg(), which only sees a bool come back.
#include "decode/jpeg_decoder.hpp"

// jpeglib.h needs FILE and size_t declared before it.
#include <cstdio>
#include <csetjmp>
#include <algorithm>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <jpeglib.h>
#include <jerror.h>

#include "decode/color_convert.hpp"
#include "decode/probe_counts.hpp"
#include "errors.hpp"

namespace shardpack {

namespace {

// Cap on libjpeg's big buffers (the whole-image coefficient arrays of progressive and
// multi-scan files): a tiny file with a huge header fails instead of taking gigabytes.
// 1 GiB holds the coefficients of a ~350-megapixel 4:2:0 progressive image.
constexpr long jpeg_max_memory = 1L << 30;

// How a decoded row reaches the output when libjpeg cannot produce the layout itself.
enum class row_conversion { none, rgb_to_gray, cmyk_to_gray, cmyk_to_rgb, cmyk_to_rgba };

}  // namespace

namespace jpeg_detail {

// Everything the libjpeg callbacks and the guarded bodies share. Plain data only.
struct jpeg_session {
    jpeg_decompress_struct cinfo{};  // zeroed: jpeg_destroy on it is a no-op until created
    jpeg_error_mgr jerr{};
    jpeg_progress_mgr progress{};
    const decode_request* request = nullptr;  // for the scan limit and the interrupt flag
    std::jmp_buf jump{};
    char message[JMSG_LENGTH_MAX + 64] = {};

    const std::uint8_t* data = nullptr;
    std::size_t size = 0;

    // Inputs of the rows body.
    std::uint8_t* dst = nullptr;
    std::size_t dst_stride = 0;
    std::uint32_t rows = 0;
    std::uint8_t* scratch = nullptr;  // when set, rows are decoded here and converted into dst
    row_conversion conversion = row_conversion::none;
    bool adobe_inverted = false;
};

}  // namespace jpeg_detail

namespace {

using jpeg_detail::jpeg_session;

jpeg_session& session_of(j_common_ptr cinfo) { return *static_cast<jpeg_session*>(cinfo->client_data); }

[[noreturn]] void fail(jpeg_session& s) { std::longjmp(s.jump, 1); }

void record_message(j_common_ptr cinfo) {
    jpeg_session& s = session_of(cinfo);
    if (cinfo->err->msg_code == JERR_BAD_PRECISION) {
        std::snprintf(s.message, sizeof s.message, "%d-bit JPEG is not supported (only 8-bit precision)",
                      cinfo->err->msg_parm.i[0]);
        return;
    }
    if (cinfo->err->msg_code == JERR_NO_BACKING_STORE) {  // what libjpeg says when max_memory_to_use is hit
        std::snprintf(s.message, sizeof s.message, "JPEG: image needs more than %ld MiB of decoder memory",
                      cinfo->mem->max_memory_to_use >> 20);
        return;
    }
    char text[JMSG_LENGTH_MAX];
    (*cinfo->err->format_message)(cinfo, text);
    std::snprintf(s.message, sizeof s.message, "JPEG: %s", text);
}

[[noreturn]] void on_jpeg_error(j_common_ptr cinfo) {
    record_message(cinfo);
    fail(session_of(cinfo));
}

// Warnings that mean the pixels are wrong or missing (libjpeg would fill gray and go on).
bool is_corrupt_data_warning(int code) {
    switch (code) {
        case JWRN_JPEG_EOF:
        case JWRN_HIT_MARKER:
        case JWRN_MUST_RESYNC:
        case JWRN_HUFF_BAD_CODE:
        case JWRN_ARITH_BAD_CODE:
        case JWRN_NOT_SEQUENTIAL:
        case JWRN_BOGUS_PROGRESSION:
            return true;
        default:
            // JWRN_EXTRANEOUS_DATA (junk after a complete scan), JWRN_JFIF_MAJOR,
            // JWRN_ADOBE_XFORM, JWRN_BOGUS_ICC: the pixels are intact.
            return false;
    }
}

// msg_level < 0 is a warning; >= 0 are trace messages, always ignored.
void on_jpeg_message(j_common_ptr cinfo, int msg_level) {
    if (msg_level >= 0) return;
    cinfo->err->num_warnings++;
    if (is_corrupt_data_warning(cinfo->err->msg_code)) on_jpeg_error(cinfo);
}

void on_jpeg_output(j_common_ptr) {}  // nothing is ever printed

// The number of SOS markers in the file, counted up to limit + 1, by walking the marker
// segments and skipping entropy-coded data (where 0xFF is followed by 0x00 or a restart
// marker). A plain byte scan, so a file with thousands of scans is refused before any decoding.
int count_jpeg_scans(const std::uint8_t* data, std::size_t size, int limit) {
    int scans = 0;
    std::size_t pos = 2;  // after SOI
    while (pos + 4 <= size && scans <= limit) {
        if (data[pos] != 0xFF) return scans;  // not a marker: libjpeg will say what is wrong
        const std::uint8_t marker = data[pos + 1];
        if (marker == 0xFF) { ++pos; continue; }  // fill byte
        if (marker == 0xD9) return scans;         // EOI
        const std::size_t length = (std::size_t(data[pos + 2]) << 8) | data[pos + 3];
        pos += 2 + length;
        if (marker != 0xDA) continue;
        ++scans;
        while (pos + 1 < size && !(data[pos] == 0xFF && data[pos + 1] != 0x00 && (data[pos + 1] < 0xD0 || data[pos + 1] > 0xD7))) {
            const void* next = std::memchr(data + pos + 1, 0xFF, size - pos - 1);
            if (next == nullptr) return scans;
            pos = std::size_t(static_cast<const std::uint8_t*>(next) - data);
        }
    }
    return scans;
}

// Called by libjpeg per iMCU row while it reads scans (jpeg_start_decompress reads every scan
// of a progressive file) and per jpeg_read_scanlines: bounds the scans and lets a signal stop
// a long decode.
void on_jpeg_progress(j_common_ptr cinfo) {
    jpeg_session& s = session_of(cinfo);
    const auto* d = reinterpret_cast<j_decompress_ptr>(cinfo);
    if (d->input_scan_number > max_jpeg_scans) {
        std::snprintf(s.message, sizeof s.message, "JPEG: more than %d scans (refused: each scan is a pass over the whole image)",
                      max_jpeg_scans);
        fail(s);
    }
    if (s.request != nullptr && decode_interrupted(*s.request)) {
        std::snprintf(s.message, sizeof s.message, "JPEG: interrupted");
        fail(s);
    }
}

// Runs body(s) under setjmp; false when libjpeg raised an error (s.message says why).
bool jpeg_guarded(jpeg_session& s, void (*body)(jpeg_session&)) {
    if (setjmp(s.jump)) return false;
    body(s);
    return true;
}

void open_body(jpeg_session& s) {
    jpeg_create_decompress(&s.cinfo);  // zeroes cinfo but for err and client_data
    s.cinfo.progress = &s.progress;
    s.cinfo.mem->max_memory_to_use = jpeg_max_memory;
    jpeg_mem_src(&s.cinfo, s.data, static_cast<unsigned long>(s.size));  // errors on empty input
    jpeg_read_header(&s.cinfo, TRUE);
}

void calc_dimensions_body(jpeg_session& s) { jpeg_calc_output_dimensions(&s.cinfo); }

void convert_row(const jpeg_session& s, std::uint8_t* row) {
    const std::size_t width = s.cinfo.output_width;
    std::uint8_t* src = s.scratch;
    switch (s.conversion) {
        case row_conversion::none:
            break;
        case row_conversion::rgb_to_gray:
            rgb_to_gray_pil(src, row, width);
            break;
        case row_conversion::cmyk_to_gray:
            cmyk_to_rgb(src, src, width, s.adobe_inverted);
            rgb_to_gray_pil(src, row, width);
            break;
        case row_conversion::cmyk_to_rgb:
            cmyk_to_rgb(src, row, width, s.adobe_inverted);
            break;
        case row_conversion::cmyk_to_rgba:
            cmyk_to_rgb(src, src, width, s.adobe_inverted);
            for (std::size_t x = 0; x < width; ++x) {
                row[4 * x] = src[3 * x];
                row[4 * x + 1] = src[3 * x + 1];
                row[4 * x + 2] = src[3 * x + 2];
                row[4 * x + 3] = 0xFF;
            }
            break;
    }
}

// For progressive and multi-scan files this reads the whole file, so corrupt or truncated
// data is reported before decode_jpeg allocates the output.
void start_body(jpeg_session& s) { jpeg_start_decompress(&s.cinfo); }

void read_rows_body(jpeg_session& s) {
    while (s.cinfo.output_scanline < s.rows) {
        if (s.request != nullptr && decode_interrupted(*s.request)) {
            std::snprintf(s.message, sizeof s.message, "JPEG: interrupted");
            fail(s);
        }
        const std::uint32_t y = s.cinfo.output_scanline;
        std::uint8_t* row = s.dst + std::size_t(y) * s.dst_stride;
        if (s.scratch == nullptr) {
            // Straight into the output, as many rows as libjpeg has ready (an iMCU row of a
            // subsampled file is 16): no spare-row copy in its upsampler, fewer calls.
            JSAMPROW targets[16];
            const std::uint32_t n = std::min<std::uint32_t>(16, s.rows - y);
            for (std::uint32_t k = 0; k < n; ++k) targets[k] = row + std::size_t(k) * s.dst_stride;
            if (jpeg_read_scanlines(&s.cinfo, targets, n) == 0) {
                std::snprintf(s.message, sizeof s.message, "JPEG: decoder returned no scanline");
                fail(s);
            }
            continue;
        }
        JSAMPROW target = s.scratch;
        if (jpeg_read_scanlines(&s.cinfo, &target, 1) != 1) {
            std::snprintf(s.message, sizeof s.message, "JPEG: decoder returned no scanline");
            fail(s);
        }
        convert_row(s, row);
    }
    // Finishing reads on to EOI, so a file cut short after its last scanline is an error
    // too. Stopping early on purpose just abandons the rest of the file.
    if (s.rows == s.cinfo.output_height)
        jpeg_finish_decompress(&s.cinfo);
    else
        jpeg_abort_decompress(&s.cinfo);
}

[[noreturn]] void throw_jpeg_error(const jpeg_session& s) {
    throw decode_error(s.message[0] != '\0' ? s.message : "JPEG: unknown libjpeg error");
}

// Sets up error handling and reads the header. Throws decode_error.
void open_jpeg(jpeg_session& s, const std::uint8_t* data, std::size_t size) {
    s.cinfo.err = jpeg_std_error(&s.jerr);
    s.jerr.error_exit = on_jpeg_error;
    s.jerr.emit_message = on_jpeg_message;
    s.jerr.output_message = on_jpeg_output;
    s.cinfo.client_data = &s;
    s.progress.progress_monitor = on_jpeg_progress;
    s.data = data;
    s.size = data != nullptr ? size : 0;
    probe_counting::count(probe_counting::jpeg_sessions);
    probe_counting::count(probe_counting::header_parses);
    if (!jpeg_guarded(s, open_body)) throw_jpeg_error(s);
    if (s.cinfo.data_precision != 8) {  // libjpeg-turbo's 8-bit build already refuses these
        std::snprintf(s.message, sizeof s.message, "%d-bit JPEG is not supported (only 8-bit precision)",
                      s.cinfo.data_precision);
        throw_jpeg_error(s);
    }
}

}  // namespace

unsigned jpeg_dct_scale_eighths(std::uint32_t width, std::uint32_t height, std::uint32_t min_width, std::uint32_t min_height) {
    if (min_width == 0 && min_height == 0) return 8;
    for (unsigned m = 1; m < 8; ++m) {
        // libjpeg-turbo's output size for scale m/8 is exactly this rounded-up division.
        const std::uint64_t w = (std::uint64_t(width) * m + 7) / 8, h = (std::uint64_t(height) * m + 7) / 8;
        if (w >= min_width && h >= min_height) return m;
    }
    return 8;
}

jpeg_reader::jpeg_reader() = default;
jpeg_reader::~jpeg_reader() { close(); }
jpeg_reader::jpeg_reader(jpeg_reader&&) noexcept = default;
jpeg_reader& jpeg_reader::operator=(jpeg_reader&& other) noexcept {
    if (this != &other) {
        close();
        session_ = std::move(other.session_);
        at_header_ = other.at_header_;
    }
    return *this;
}

void jpeg_reader::close() {
    // Safe on a zeroed or half-created struct: jpeg_destroy only frees what the memory manager holds.
    if (session_) jpeg_destroy_decompress(&session_->cinfo);
    session_.reset();
    at_header_ = false;
}

void jpeg_reader::open(const std::uint8_t* data, std::size_t size) {
    close();
    session_ = std::make_unique<jpeg_session>();
    try {
        open_jpeg(*session_, data, size);
    } catch (...) {
        close();
        throw;
    }
    at_header_ = true;
}

jpeg_session* jpeg_reader::take(const std::uint8_t* data, std::size_t size) {
    if (!session_ || !at_header_ || session_->data != data || session_->size != size) return nullptr;
    at_header_ = false;
    return session_.get();
}

jpeg_session& jpeg_reader::take_or_open(jpeg_reader* opened, const std::uint8_t* data, std::size_t size) {
    if (opened != nullptr)
        if (jpeg_session* s = opened->take(data, size)) return *s;
    open(data, size);
    return *take(data, size);
}

std::uint32_t jpeg_reader::width() const { return session_->cinfo.image_width; }
std::uint32_t jpeg_reader::height() const { return session_->cinfo.image_height; }

void decode_jpeg(const std::uint8_t* data, std::size_t size, const decode_request& req, image_u8& out,
                decoded_info* info, jpeg_reader* opened) {
    const std::uint32_t want = channel_count(req.layout);
    if (want != 1 && want != 3 && want != 4) throw std::invalid_argument("decode_jpeg: bad pixel layout");

    // The probe's session when it has one over these bytes (its header read), else our own.
    jpeg_reader own;
    jpeg_session& s = own.take_or_open(opened, data, size);
    s.request = &req;
    jpeg_decompress_struct& cinfo = s.cinfo;
    if (req.max_decoder_memory != 0 && req.max_decoder_memory < std::uint64_t(jpeg_max_memory))
        cinfo.mem->max_memory_to_use = long(req.max_decoder_memory);
    if (info != nullptr) *info = decoded_info{cinfo.image_width, cinfo.image_height};
    if (cinfo.progressive_mode && count_jpeg_scans(data, size, max_jpeg_scans) > max_jpeg_scans)
        throw decode_error("JPEG: more than " + std::to_string(max_jpeg_scans) +
                           " scans (refused: each scan is a pass over the whole image)");

    // Let libjpeg-turbo write the wanted layout directly where it can (gray->RGB(A) and
    // YCbCr->RGB(A) included; its RGBA alpha is 0xFF); convert CMYK and color->gray here.
    std::uint32_t decoded_channels = want;
    switch (cinfo.jpeg_color_space) {
        case JCS_GRAYSCALE:
            cinfo.out_color_space = want == 1 ? JCS_GRAYSCALE : want == 3 ? JCS_EXT_RGB : JCS_EXT_RGBA;
            break;
        case JCS_YCbCr:
        case JCS_RGB:
            cinfo.out_color_space = want == 4 ? JCS_EXT_RGBA : JCS_EXT_RGB;
            if (want == 1) s.conversion = row_conversion::rgb_to_gray, decoded_channels = 3;
            break;
        case JCS_CMYK:
        case JCS_YCCK:  // libjpeg converts YCCK to CMYK
            cinfo.out_color_space = JCS_CMYK;
            decoded_channels = 4;
            s.conversion = want == 1 ? row_conversion::cmyk_to_gray
                         : want == 3 ? row_conversion::cmyk_to_rgb
                                     : row_conversion::cmyk_to_rgba;
            s.adobe_inverted = cinfo.saw_Adobe_marker != 0;
            break;
        default:
            throw decode_error("JPEG: unsupported color space with " + std::to_string(cinfo.num_components) +
                               " components");
    }
    cinfo.dct_method = JDCT_ISLOW;
    cinfo.scale_num = jpeg_dct_scale_eighths(cinfo.image_width, cinfo.image_height, req.min_width, req.min_height);
    cinfo.scale_denom = 8;
    if (!jpeg_guarded(s, calc_dimensions_body)) throw_jpeg_error(s);
    if (cinfo.output_components != int(decoded_channels))
        throw decode_error("JPEG: unexpected output components " + std::to_string(cinfo.output_components));

    const std::uint32_t rows =
        (req.max_rows == 0 || req.max_rows >= cinfo.output_height) ? cinfo.output_height : req.max_rows;
    check_decoded_size("JPEG", cinfo.output_width, rows, want);
    if (!jpeg_guarded(s, start_body)) throw_jpeg_error(s);

    out.width = cinfo.output_width;
    out.height = rows;
    out.channels = want;
    out.pixels.resize(out.row_bytes() * rows);
    std::vector<std::uint8_t> scratch;
    if (s.conversion != row_conversion::none) scratch.resize(std::size_t(cinfo.output_width) * decoded_channels);

    s.dst = out.pixels.data();
    s.dst_stride = out.row_bytes();
    s.rows = rows;
    s.scratch = scratch.empty() ? nullptr : scratch.data();
    if (!jpeg_guarded(s, read_rows_body)) throw_jpeg_error(s);
}

image_u8 decode_jpeg(const std::uint8_t* data, std::size_t size, const decode_request& req, decoded_info* info) {
    image_u8 out;
    decode_jpeg(data, size, req, out, info);
    return out;
}

void read_jpeg_size(const std::uint8_t* data, std::size_t size, std::uint32_t& width, std::uint32_t& height, jpeg_reader* keep) {
    jpeg_reader own;
    jpeg_reader& reader = keep != nullptr ? *keep : own;
    reader.open(data, size);
    width = reader.width();
    height = reader.height();
}

}  // namespace shardpack
