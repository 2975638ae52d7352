#include "decode/png_session.hpp"
#include "decode/png_reader.hpp"

#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <new>
#include <string>

#include "decode/color_convert.hpp"
#include "decode/probe_counts.hpp"
#include "errors.hpp"

namespace shardpack::png_detail {

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

// Warnings never make an image fail; they only add detail to a header error.
void on_png_warning(png_structp png, png_const_charp message) {
    auto* s = static_cast<png_session*>(png_get_error_ptr(png));
    if (s->keep_warnings && message != nullptr && s->warning[0] == '\0')
        std::snprintf(s->warning, sizeof s->warning, "%s", message);
}

void read_from_memory(png_structp png, png_bytep out, std::size_t length) {
    auto* s = static_cast<png_session*>(png_get_io_ptr(png));
    if (s->interrupt != nullptr && s->interrupt->load(std::memory_order_relaxed) != 0) png_error(png, "interrupted");
    if (s->rows_done && s->pos < s->idat_end && s->pos - s->rows_done_pos > s->trailing_limit)
        png_error(png, "the image data goes on past the last row (more zlib data than the header's size needs)");
    if (length > s->size - s->pos) png_error(png, "truncated file (unexpected end of data)");
    std::memcpy(out, s->data + s->pos, length);
    s->pos += length;
}

}  // namespace

void read_header_body(png_session& s) {
    probe_counting::count(probe_counting::header_parses);
    s.keep_warnings = true;
    png_read_info(s.png, s.info);
    s.keep_warnings = false;
    s.warning[0] = '\0';  // the header is fine: its warnings explain nothing later
    png_get_IHDR(s.png, s.info, &s.width, &s.height, &s.bit_depth, &s.color_type, &s.interlace, nullptr, nullptr);
    s.source_channels = png_get_channels(s.png, s.info);
}

void read_rows_body(png_session& s) {
    // Interlaced: every pass visits every row; libpng merges each pass into the row we pass.
    for (int pass = 0; pass < s.passes; ++pass) {
        for (std::uint32_t y = 0; y < s.rows; ++y) {
            if (s.interrupt != nullptr && s.interrupt->load(std::memory_order_relaxed) != 0) png_error(s.png, "interrupted");
            if (s.finish && pass == s.passes - 1 && y == s.rows - 1) {
                s.rows_done = true;
                s.idat_end = idat_run_end(s.data, s.size);
                s.rows_done_pos = s.pos;
                // The last row's own compressed bytes (at most about its raw size) plus the slack.
                s.trailing_limit = max_png_trailing_idat_bytes +
                                   2 * ((std::size_t(s.width) * s.source_channels * unsigned(s.bit_depth) + 7) / 8 + 1);
            }
            std::uint8_t* row = s.dst + y * s.dst_stride;
            if (s.scratch != nullptr) {
                png_read_row(s.png, s.scratch, nullptr);
                if (s.sample_bytes == 2)
                    rgb16_to_gray_pil(reinterpret_cast<const std::uint16_t*>(s.scratch), reinterpret_cast<std::uint16_t*>(row), s.width);
                else
                    rgb_to_gray_pil(s.scratch, row, s.width);
            } else {
                png_read_row(s.png, row, nullptr);
            }
        }
    }
    // Reading on to IEND checks the CRCs and the trailing chunks: a truncated file is an error.
    if (s.finish) png_read_end(s.png, nullptr);
}

void refuse_implausible_size(const png_session& s) {
    const std::uint64_t image_data_bytes = std::uint64_t(s.width) * s.height * s.source_channels * unsigned(s.bit_depth) / 8;
    if (image_data_bytes / png_max_inflate_ratio > s.size - s.pos)
        throw decode_error("PNG: file is far too small for a " + std::to_string(s.width) + "x" +
                           std::to_string(s.height) + " image (truncated or corrupt)");
}

[[noreturn]] void throw_png_error(const png_session& s) {
    std::string text = std::string("PNG: ") + (s.message[0] != '\0' ? s.message : "unknown libpng error");
    if (s.warning[0] != '\0') text += std::string(" (") + s.warning + ")";
    throw decode_error(text);
}

void open_png(png_session& s, const std::uint8_t* data, std::size_t size, const std::atomic<int>* interrupt) {
    s.data = data;
    s.interrupt = interrupt;
    s.size = data != nullptr ? size : 0;
    probe_counting::count(probe_counting::png_sessions);
    s.png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &s, png_error_handler<png_session>, on_png_warning);
    if (s.png == nullptr) throw std::bad_alloc();
    s.info = png_create_info_struct(s.png);
    if (s.info == nullptr) throw std::bad_alloc();
    png_set_read_fn(s.png, &s, read_from_memory);
    png_set_user_limits(s.png, max_decode_dimension, max_decode_dimension);
    png_set_chunk_malloc_max(s.png, png_chunk_malloc_max);
    png_set_crc_action(s.png, PNG_CRC_ERROR_QUIT, PNG_CRC_ERROR_QUIT);  // bad CRC anywhere is an error
    png_set_keep_unknown_chunks(s.png, PNG_HANDLE_CHUNK_NEVER, png_ignored_chunks, png_ignored_chunk_count);
}

}  // namespace shardpack::png_detail

namespace shardpack {

png_reader::png_reader() = default;
png_reader::~png_reader() { close(); }
png_reader::png_reader(png_reader&&) noexcept = default;
png_reader& png_reader::operator=(png_reader&& other) noexcept {
    if (this != &other) {
        close();
        session_ = std::move(other.session_);
        at_header_ = other.at_header_;
    }
    return *this;
}

void png_reader::close() {
    if (session_) png_destroy_read_struct(&session_->png, &session_->info, nullptr);
    session_.reset();
    at_header_ = false;
}

void png_reader::open(const std::uint8_t* data, std::size_t size) {
    close();
    session_ = std::make_unique<png_detail::png_session>();
    png_detail::png_session& s = *session_;
    try {
        png_detail::open_png(s, data, size, nullptr);
    } catch (...) {
        close();
        throw;
    }
    if (!png_detail::png_guarded(s, png_detail::read_header_body)) {
        const png_detail::png_session failed = s;  // the message, before the structures go
        close();
        png_detail::throw_png_error(failed);
    }
    at_header_ = true;
}

png_detail::png_session* png_reader::take(const std::uint8_t* data, std::size_t size) {
    if (!session_ || !at_header_ || session_->data != data || session_->size != size) return nullptr;
    at_header_ = false;
    return session_.get();
}

png_detail::png_session& png_reader::take_or_open(png_reader* opened, const std::uint8_t* data, std::size_t size) {
    if (opened != nullptr)
        if (png_detail::png_session* s = opened->take(data, size)) return *s;
    open(data, size);
    return *take(data, size);
}

}  // namespace shardpack
